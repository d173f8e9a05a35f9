#!/usr/bin/env bash
# Waiters in dlock.acquire are served in arrival order (docs/limits.md:
# fair waiting). 50 sessions start waiting on one name one after another,
# each seen waiting in the server before the next starts, so the arrival
# order is known. Then the holder releases and every waiter, once granted,
# releases at once. Fencing tokens grow with every grant, so sorting the
# waiters by token gives the grant order; every pair granted against its
# arrival order is an inversion. A release hands the lease straight to the
# next waiter, leaving nothing to take; every third waiter instead ends its
# lease with dlock.force_release, which hands nothing over and only wakes the
# next. Meanwhile another session keeps taking the lock with try_acquire
# (which never queues), so that woken waiters lose attempts after those:
# a waiter that loses must keep its place.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }

waiters=50
name=fifo:order
dir=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/fifo.XXXXXX")
holder=00000000-0000-0000-0000-0000000000f0
barger=00000000-0000-0000-0000-0000000000f1
owner() { printf '00000000-0000-0000-0000-%012d' "$1"; }

# Pairs (i < j) with tokens[i] > tokens[j]: arrival order i < j, granted the
# other way round. Reads one token per line, in arrival order.
inversions() {
	awk '{ t[NR] = $1 } END { n = 0; for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (t[i] > t[j]) n++; print n }'
}
# negative control of the checker: a reversed order has every pair inverted
check "the inversion count sees a reversed order (1225 pairs of 50)" \
	test "$(seq 50 -1 1 | inversions)" -eq 1225
check "the inversion count is 0 for the arrival order" test "$(seq 1 50 | inversions)" -eq 0

waiting_count() {
	sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%dlock.acquire(''$name''%' AND pid <> pg_backend_pid()"
}

sql "SELECT dlock.try_acquire('$name', '5 minutes', '$holder')" >/dev/null
pids=()
arrived=0
for i in $(seq 1 "$waiters"); do
	end="dlock.release('$name', '$(owner "$i")')"
	[ $((i % 3)) -eq 0 ] && end="dlock.force_release('$name', 'fifo test: no handoff')"
	psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/w$i" 2>&1 <<-EOF &
		SELECT fencing_token FROM dlock.acquire('$name', '5 minutes', '2 minutes', '$(owner "$i")');
		SELECT $end;
	EOF
	pids+=($!)
	for _ in $(seq 1 500); do
		[ "$(waiting_count)" -ge "$i" ] && { arrived=$i; break; }
		sleep 0.01
	done
	[ "$arrived" -eq "$i" ] || break
done
check "$waiters waiters seen waiting in the server, one after another" test "$arrived" -eq "$waiters"

# The barger: try_acquire, hold 2 ms, release, over and over, until the
# waiters are done.
{
	for _ in $(seq 1 400); do
		echo "SELECT dlock.try_acquire('$name', '5 minutes', '$barger') IS NOT NULL;"
		echo "SELECT pg_sleep(0.002);"
		echo "SELECT dlock.release('$name', '$barger');"
	done
} >"$dir/barger.sql"
psql -X -q -At -f "$dir/barger.sql" >"$dir/barger.out" 2>&1 &
barger_pid=$!

sql "SELECT dlock.release('$name', '$holder')" >/dev/null
# A latecomer asks while the lock passes down the queue: it must not overtake.
psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/late" 2>&1 <<-EOF &
	SELECT fencing_token FROM dlock.acquire('$name', '5 minutes', '2 minutes', '$(owner 99)');
	SELECT dlock.release('$name', '$(owner 99)');
EOF
pids+=($!)
for pid in "${pids[@]}"; do wait "$pid"; done
kill "$barger_pid" 2>/dev/null
wait "$barger_pid" 2>/dev/null

granted=0
for i in $(seq 1 "$waiters"); do
	token=$(head -n 1 "$dir/w$i")
	[[ $token =~ ^[0-9]+$ ]] && granted=$((granted + 1))
	echo "${token:-0}"
done >"$dir/tokens"
check "every waiter was granted the lock ($granted of $waiters)" test "$granted" -eq "$waiters"
barged=$(grep -c '^t$' "$dir/barger.out")
check "try_acquire took the lock after force releases ($barged times), so woken waiters lost attempts" test "$barged" -gt 0
late=$(head -n 1 "$dir/late")
last=$(sort -n "$dir/tokens" | tail -n 1)
check "a latecomer asking while the lock passes down the queue is granted after all $waiters" \
	test "${late:-0}" -gt "$last"
inverted=$(inversions <"$dir/tokens")
first=$(awk 'NR == 1 { t = $1 } $1 < t { t = $1; n = NR } END { print (n ? n : 1) }' "$dir/tokens")
check "grants follow arrival order: $inverted of $((waiters * (waiters - 1) / 2)) pairs inverted, first grant to waiter $first" \
	test "$inverted" -eq 0

rm -rf "$dir"
finish
