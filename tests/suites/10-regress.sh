#!/usr/bin/env bash
# pg_regress and isolation suites (regress/) against the running test server.
# Each regress file and each isolation spec counts as one test.
set -uo pipefail
cd "$DLOCK_ROOT"

log=$(mktemp)
make -s installcheck >"$log" 2>&1
status=$?
grep -E '^(test| ) *[a-z0-9_-]+ +\.\.\.' "$log"
passed=$(grep -cE '\.\.\. ok' "$log")
failed=$(grep -cE '\.\.\. FAILED' "$log")
if [ "$status" -ne 0 ]; then
	[ -f regression.diffs ] && head -n 200 regression.diffs
	[ -f output_iso/regression.diffs ] && head -n 200 output_iso/regression.diffs
	[ "$failed" -eq 0 ] && { tail -n 20 "$log"; failed=1; }
fi
rm -f "$log"
# arguments_1.out is the output of PostgreSQL 13 and 14 only (no reserved
# prefix of settings before 15: 13-pg-versions); 15 must match arguments.out
if [ -f results/arguments.out ] && ! diff -w -q regress/expected/arguments.out results/arguments.out >/dev/null; then
	echo "FAILED  arguments matched arguments_1.out, the output of PostgreSQL 13 and 14 only"
	failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
