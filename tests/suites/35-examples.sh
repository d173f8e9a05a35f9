#!/usr/bin/env bash
# Runs the C++ client examples against the test database, alone and
# concurrently, and checks what they promise. Ends with "N passed, N failed".
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${DLOCK_CLIENT_BUILD:-$root/build/client}/examples
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME CONDITION-STATUS
	if [ "$2" -eq 0 ]; then
		echo "ok   $1"
		passed=$((passed + 1))
	else
		echo "FAIL $1"
		failed=$((failed + 1))
	fi
}
q() { psql -X -A -t -q -c "$1"; }

for exe in inventory_reservation daily_settlement report_generation lease_histograms; do
	[ -x "$bin/$exe" ] || { echo "missing $bin/$exe (run make client)"; echo "0 passed, 1 failed"; exit 1; }
done

# --- inventory reservation -------------------------------------------------
sku="sku-$RANDOM$RANDOM"
"$bin/inventory_reservation" "$sku" 1 >"$tmp/inv0" 2>&1
check "inventory: unknown sku reports out of stock (exit 1)" $(( $? == 1 ? 0 : 1 ))
q "INSERT INTO example_inventory (sku, on_hand) VALUES ('$sku', 5)"
"$bin/inventory_reservation" "$sku" 2 >"$tmp/inv1" 2>&1
check "inventory: reservation succeeds and is confirmed" $?
pids=()
for i in 1 2 3 4; do
	"$bin/inventory_reservation" "$sku" 1 >"$tmp/inv-c$i" 2>&1 &
	pids+=($!)
done
codes_ok=0
for p in "${pids[@]}"; do
	wait "$p"
	c=$?
	[ "$c" -eq 0 ] || [ "$c" -eq 75 ] || codes_ok=1
done
check "inventory: concurrent runs either reserve or report busy" $codes_ok
left=$(q "SELECT on_hand FROM example_inventory WHERE sku = '$sku'")
reserved=$(q "SELECT coalesce(sum(quantity), 0) FROM example_reservations WHERE sku = '$sku' AND confirmed")
check "inventory: stock left ($left) + confirmed reservations ($reserved) = 5" $(( left + reserved == 5 ? 0 : 1 ))
held=$(q "SELECT count(*) FROM dlock.locks WHERE lock_name = 'inventory:$sku' AND state = 'held'")
check "inventory: no lease left behind" $(( held == 0 ? 0 : 1 ))

# --- daily settlement ------------------------------------------------------
day=$(q "SELECT (date '2000-01-01' + (random() * 20000)::int)::text")
q "DELETE FROM example_settlements WHERE day = '$day'" 2>/dev/null
"$bin/daily_settlement" "$day" >"$tmp/set1" 2>&1 &
p1=$!
"$bin/daily_settlement" "$day" >"$tmp/set2" 2>&1 &
p2=$!
wait $p1; c1=$?
wait $p2; c2=$?
ok=1
{ [ "$c1" -eq 0 ] || [ "$c1" -eq 75 ]; } && { [ "$c2" -eq 0 ] || [ "$c2" -eq 75 ]; } &&
	{ [ "$c1" -eq 0 ] || [ "$c2" -eq 0 ]; } && ok=0
check "settlement: two hosts at once: one settles, the other settles nothing or is busy ($c1, $c2)" $ok
accounts=$(q "SELECT count(*) FROM example_settlements WHERE day = '$day'")
check "settlement: every account settled once ($accounts of 200)" $(( accounts == 200 ? 0 : 1 ))
"$bin/daily_settlement" "$day" >"$tmp/set3" 2>&1
check "settlement: a rerun is harmless" $?
grep -q "settled 0 accounts" "$tmp/set3"
check "settlement: the rerun settles nothing" $?

# --- report generation -----------------------------------------------------
report="report-$RANDOM$RANDOM"
pids=()
for i in 1 2 3; do
	"$bin/report_generation" "$report" >"$tmp/rep$i" 2>&1 &
	pids+=($!)
done
codes_ok=0
for p in "${pids[@]}"; do wait "$p" || codes_ok=1; done
check "report: three concurrent callers all get the report" $codes_ok
built=$(cat "$tmp"/rep? | grep -c "built with fencing token")
check "report: built exactly once ($built)" $(( built == 1 ? 0 : 1 ))
"$bin/report_generation" "$report" >"$tmp/rep4" 2>&1 && grep -q "cached" "$tmp/rep4"
check "report: a later caller reuses it" $?

# --- lease histograms ------------------------------------------------------
hist="histograms-$RANDOM$RANDOM"
"$bin/lease_histograms" "$hist" 3 4 >"$tmp/hist" 2>&1
check "histograms: every lease granted and released (exit 0)" $?
grep -q "^grants 12, releases 12, renewals [0-9]*, losses 0$" "$tmp/hist"
check "histograms: the listener saw 12 grants and 12 releases" $?
# One histogram's buckets, one a line: "<=10 3" (bound, count), ">1000 0".
buckets() {
	awk -v want="$1" '/^[a-z]/ { in_it = ($1 == want); next }
		in_it { split($0, f, "\t"); n = split(f[1], w, " "); print w[1] w[2], w[n] }' "$tmp/hist"
}
sum() { awk "$1"' { s += $2 } END { print s + 0 }'; }
check "histograms: each histogram's buckets add up to 12 ($(buckets wait | sum 1), $(buckets hold | sum 1))" \
	$(( $(buckets wait | sum 1) == 12 && $(buckets hold | sum 1) == 12 ? 0 : 1 ))
short_holds=$(buckets hold | sum '$1 == "<=1" || $1 == "<=10"')
check "histograms: every hold is over 10 ms (the work sleeps 20 ms or more; $short_holds not)" \
	$(( short_holds == 0 ? 0 : 1 ))
# Three workers on one lock: some grants wait behind a hold of 20 ms or more.
slow_grants=$(buckets wait | sum '$1 != "<=1" && $1 != "<=10"')
check "histograms: some grants waited over 10 ms ($slow_grants)" $(( slow_grants > 0 ? 0 : 1 ))

if [ "$failed" -ne 0 ]; then
	for f in "$tmp"/*; do echo "--- $(basename "$f")"; cat "$f"; done
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
