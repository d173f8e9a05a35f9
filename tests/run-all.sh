#!/usr/bin/env bash
# Runs every test suite against a throwaway cluster and prints one summary line.
#
# Each suite is an executable tests/suites/NN-name.sh. It runs with the PG*
# variables pointing at a fresh cluster whose database "dlock_test" has the
# extension, and must end its output with a line "N passed, N failed". A suite
# that exits non-zero without such a line counts as one failure.
# Usage: tests/run-all.sh [NAME ...]   the suite named NAME (16-sql-edition),
# or else every suite whose name contains NAME (sql-edition, regress).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
export DLOCK_ROOT=$root
. "$root/tests/lib/ports.sh"
# A private directory and a free port, so that two runs on one machine do not
# collide; DLOCK_CLUSTER_DIR and DLOCK_TEST_PORT choose them instead.
export DLOCK_SCRATCH=$(mktemp -d /tmp/pg_dlock-test.XXXXXX)
chmod 755 "$DLOCK_SCRATCH"
export DLOCK_CLUSTER_DIR=${DLOCK_CLUSTER_DIR:-$DLOCK_SCRATCH/cluster}
# The server binaries of PG_CONFIG when given (as make does), else the newest installed.
if [ -z "${PG_BINDIR:-}" ] && [ -n "${PG_CONFIG:-}" ]; then
	PG_BINDIR=$("$PG_CONFIG" --bindir)
fi
export PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)}
export PGHOST=127.0.0.1 PGPORT=${DLOCK_TEST_PORT:-$(free_ports)} PGUSER=postgres PGDATABASE=dlock_test
export PGCONNECT_TIMEOUT=10

"$root/scripts/pg-cluster.sh" destroy "$DLOCK_CLUSTER_DIR"
"$root/scripts/pg-cluster.sh" start "$DLOCK_CLUSTER_DIR" "$PGPORT" || {
	cat "$DLOCK_CLUSTER_DIR/server.log" >&2
	echo "0 passed, 1 failed"
	exit 1
}
trap '"$root/scripts/pg-cluster.sh" destroy "$DLOCK_CLUSTER_DIR"; rm -rf "$DLOCK_SCRATCH"' EXIT
psql -X -q -d postgres -c 'CREATE DATABASE dlock_test' &&
	psql -X -q -c 'CREATE EXTENSION pg_dlock'

total_passed=0
total_failed=0
failed_suites=()
for suite in "$root"/tests/suites/*.sh; do
	name=$(basename "$suite" .sh)
	if [ $# -gt 0 ]; then
		selected=0
		for pattern in "$@"; do
			if [ -f "$root/tests/suites/$pattern.sh" ]; then
				[[ $name == "$pattern" ]] && selected=1
			elif [[ $name == *"$pattern"* ]]; then
				selected=1
			fi
		done
		[ $selected -eq 1 ] || continue
	fi
	echo "=== suite $name"
	started=$SECONDS
	log=$(mktemp)
	"$suite" 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	rm -f "$log"
	# What each suite costs, for docs/testing.md and the make test budget.
	echo "=== suite $name took $((SECONDS - started)) s"
	if [ -n "$summary" ]; then
		passed=${summary%% passed*}
		failed=${summary#*, }
		failed=${failed%% failed*}
	else
		passed=0
		failed=1
	fi
	[ "$status" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
	total_passed=$((total_passed + passed))
	total_failed=$((total_failed + failed))
	[ "$failed" -ne 0 ] && failed_suites+=("$name")
done

[ ${#failed_suites[@]} -gt 0 ] && echo "failing suites: ${failed_suites[*]}"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
