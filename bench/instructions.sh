#!/usr/bin/env bash
# Server instructions per acquire + release pair, pg_dlock against the same
# commits without it, counted by valgrind (callgrind) in a single-user backend
# (postgres --single). Instruction counts move by a few from run to run, not
# with the machine's load as throughput at 8 clients on 2 cores does, so they
# show whether pg_dlock's own work in the server is that of the UPDATEs it is
# compared with. The
# single-user backend leaves out the wire protocol: the reply a grant sends
# back is measured by floor-update-async-returning-pair in the uncontended case.
#
#   bench/instructions.sh [--pairs N] [--out FILE]
#
# Each system runs N pairs of prepared statements, every statement its own
# transaction, on 64 names (the floors: on one row); the same script without
# the pairs is counted too and subtracted, so that startup, shutdown and the
# PREPAREs are not in the figure. Writes a markdown table to FILE (default:
# standard output). Needs valgrind and the installed pg_dlock.
set -euo pipefail

pairs=3000
out=
while [ $# -gt 0 ]; do
	case "$1" in
	--pairs) pairs=$2; shift ;;
	--out) out=$2; shift ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "instructions.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
case "$pairs" in
'' | *[!0-9]* | 0) echo "instructions.sh: --pairs must be a positive integer, not \"$pairs\"" >&2; exit 2 ;;
esac
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 2; }
PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/lib/ports.sh"
work=$(mktemp -d /tmp/bench-instructions.XXXXXX)
trap '"$root/scripts/pg-cluster.sh" destroy "$work"' EXIT
# The project's cluster (pg-cluster.sh), stopped: a single-user backend needs
# the data directory to itself.
"$root/scripts/pg-cluster.sh" start "$work" "$(free_ports 1)" -c synchronous_commit=off >/dev/null
"$root/scripts/pg-cluster.sh" stop "$work" >/dev/null
as_postgres() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}
# The backend's output goes to a log; an ERROR in it fails the run.
single_checked() {
	"$@" >"$work/run.log" 2>&1 || { cat "$work/run.log" >&2; exit 1; }
	if grep -q 'ERROR:' "$work/run.log"; then
		grep -m 3 'ERROR:' "$work/run.log" >&2
		exit 1
	fi
}

cat >"$work/setup.sql" <<'SQL'
CREATE EXTENSION pg_dlock;
CREATE TABLE floor (id int PRIMARY KEY, n bigint NOT NULL);
INSERT INTO floor SELECT g, 0 FROM generate_series(1, 1024) g;
SQL
single_checked as_postgres "$PG_BINDIR/postgres" --single -D "$work/data" postgres <"$work/setup.sql"

owner=00000000-0000-4000-8000-000000000001
# script SYSTEM N: the statements of N pairs of SYSTEM
script() {
	case "$1" in
	dlock-fenced | dlock-sql)
		[ "$1" = dlock-fenced ] && echo "SET dlock.durability = fenced;"
		echo "PREPARE acq(text) AS SELECT owner_token, fencing_token FROM dlock.try_acquire(\$1, '10 seconds', '$owner');"
		echo "PREPARE rel(text) AS SELECT dlock.release(\$1, '$owner');"
		for ((i = 0; i < $2; i++)); do
			echo "EXECUTE acq('n$((i % 64))');"
			echo "EXECUTE rel('n$((i % 64))');"
		done
		;;
	floor-update-async-pair | floor-update-pair)
		if [ "$1" = floor-update-pair ]; then
			echo "PREPARE acq(int) AS WITH durable AS (SELECT pg_catalog.set_config('synchronous_commit', 'on', true)) UPDATE floor SET n = n + 1 FROM durable WHERE id = \$1;"
		else
			echo "PREPARE acq(int) AS UPDATE floor SET n = n + 1 WHERE id = \$1;"
		fi
		echo "PREPARE rel(int) AS UPDATE floor SET n = n + 1 WHERE id = \$1;"
		for ((i = 0; i < $2; i++)); do
			echo "EXECUTE acq(1);"
			echo "EXECUTE rel(1);"
		done
		;;
	esac
}

# instructions SYSTEM N: instructions of the whole single-user run
instructions() {
	script "$1" "$2" >"$work/$1.sql"
	single_checked as_postgres valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$PG_BINDIR/postgres" --single -D "$work/data" postgres <"$work/$1.sql"
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/run.log" | tail -n 1
}

declare -A per_pair
for sys in dlock-fenced floor-update-async-pair dlock-sql floor-update-pair; do
	with=$(instructions "$sys" "$pairs")
	without=$(instructions "$sys" 0)
	per_pair[$sys]=$(((with - without) / pairs))
done

{
	echo "## instructions: server instructions per acquire + release pair"
	echo
	echo "Counted by callgrind in a single-user backend ($(
		"$PG_BINDIR/postgres" --version
	)), $pairs pairs of prepared statements, each statement its own transaction, the run without the pairs subtracted (bench/instructions.sh). No wire protocol: the reply is measured by \`floor-update-async-returning-pair\` in the uncontended case."
	echo
	echo "| system | instructions per pair | × its floor |"
	echo "|---|---:|---:|"
	for pair in "dlock-fenced floor-update-async-pair" "dlock-sql floor-update-pair"; do
		read -r sys floor <<<"$pair"
		echo "| $sys | ${per_pair[$sys]} | $(awk -v a="${per_pair[$sys]}" -v b="${per_pair[$floor]}" 'BEGIN { printf "%.3f×", a / b }') |"
		echo "| $floor | ${per_pair[$floor]} | 1.000× |"
	done
} >"${out:-/dev/stdout}"
