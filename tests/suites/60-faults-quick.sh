#!/usr/bin/env bash
# Fault-injection harness, quick profile: one test per scenario and one per
# negative control (tests/faults/, docs/testing.md). The harness
# starts its own servers on ports 55600-55699; the suite's cluster is not used.
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT

"$root/tests/faults/run.sh" --profile quick --summary-json "$summary" "$@"
status=$?

passed=0
failed=0
if [ -s "$summary" ]; then
	while IFS=$'\t' read -r verdict name detail; do
		if [ "$verdict" = "PASS" ]; then
			echo "ok - $name"
			passed=$((passed + 1))
		else
			echo "not ok - $name: $detail"
			failed=$((failed + 1))
		fi
	done < <(python3 -c '
import json, sys
for r in json.load(open(sys.argv[1])):
    kind = "negative control, violations expected" if r.get("negative_control") else "zero violations expected"
    detail = r.get("error") or "%s violations (%s)" % (r.get("violations"), kind)
    print("PASS" if r.get("passed") else "FAIL", r["scenario"], detail, sep="\t")
' "$summary")
fi
if [ $((passed + failed)) -eq 0 ] || { [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; }; then
	echo "not ok - fault harness did not complete (exit $status)"
	failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
