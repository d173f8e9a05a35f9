#!/usr/bin/env bash
# Fault-injection harness, quick profile: one test per scenario and one per
# negative control (tests/faults/, docs/testing.md); then the run's standard-format
# histories (docs/fault-histories.md) through the independent checker, and its
# self-test. The harness starts its own servers on free ports (tests/lib/ports.py);
# the suite's cluster is not used. Arguments go to tests/faults/run.sh
# (61-faults-sql-edition passes --edition sql and its scenarios).
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
summary=$(mktemp)
selftest=$(mktemp)
trap 'rm -f "$summary" "$selftest"' EXIT

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
scenarios=$((passed + failed))

# The independent checker reads only the standard files: zero violations expected,
# except in the negative controls it must catch (no fencing, no timeline bits, no token epoch).
if python3 "$root/tests/faults/test_check_standard_history.py" >"$selftest" 2>&1; then
	echo "ok - standard history checker self-test"
	passed=$((passed + 1))
else
	echo "not ok - standard history checker self-test"
	sed 's/^/    /' "$selftest"
	failed=$((failed + 1))
fi
if [ -s "$summary" ]; then
	while IFS=$'\t' read -r verdict name detail; do
		if [ "$verdict" = "PASS" ]; then
			echo "ok - standard history $name"
			passed=$((passed + 1))
		else
			echo "not ok - standard history $name: $detail"
			failed=$((failed + 1))
		fi
	done < <(python3 -c '
import json, sys
sys.path.insert(0, sys.argv[2])
import check_standard_history
for r in json.load(open(sys.argv[1])):
    if r.get("standard_history_error"):
        print("FAIL", r["scenario"], "not converted: " + r["standard_history_error"], sep="\t")
    if not r.get("standard_history"):
        continue
    expect = bool(r.get("standard_expect_violations"))
    if r.get("negative_control") and not expect:
        continue  # a fault the mutex model does not cover (clock allowance, observers, ...)
    try:
        report = check_standard_history.check_paths([r["standard_history"]])
    except (OSError, ValueError) as e:
        print("FAIL", r["scenario"], e, sep="\t")
        continue
    found = sum(v["violations"] for v in report.values())
    examples = [e for v in report.values() for es in v["examples"].values() for e in es][:2]
    kind = "negative control, violations expected" if expect else "zero violations expected"
    print("PASS" if (found > 0) == expect else "FAIL", r["scenario"],
          "%d violations (%s) %s" % (found, kind, "; ".join(examples)), sep="\t")
' "$summary" "$root/tests/faults")
fi
if [ "$scenarios" -eq 0 ] || { [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; }; then
	echo "not ok - fault harness did not complete (exit $status)"
	failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
