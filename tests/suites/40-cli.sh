#!/usr/bin/env bash
# The dlock command-line tool against the server tests/run-all.sh started.
# Runs client/tests/cli/*_test.sh; ends with "N passed, N failed".
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DLOCK_ROOT=$root
DLOCK=${DLOCK_CLIENT_BUILD:-$root/build/client}/cli/dlock
if [ ! -x "$DLOCK" ]; then
	echo "missing $DLOCK (run make client)"
	echo "0 passed, 1 failed"
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cli_passed=0
cli_failed=0
# shellcheck source=../../client/tests/cli/lib.sh
. "$root/client/tests/cli/lib.sh"
# DLOCK_CLI_SKIP: test files left out (45-pgbouncer.sh: the ones that need LISTEN)
for t in "$root"/client/tests/cli/*_test.sh; do
	if [[ " ${DLOCK_CLI_SKIP:-} " == *" $(basename "$t") "* ]]; then
		echo "--- $(basename "$t"): left out here (DLOCK_CLI_SKIP)"
		continue
	fi
	echo "--- $(basename "$t")"
	# shellcheck disable=SC1090
	. "$t"
done
echo "$cli_passed passed, $cli_failed failed"
[ "$cli_failed" -eq 0 ]
