#!/usr/bin/env bash
# dlock.acquire waiters in shared memory: a waiter killed by
# pg_terminate_backend (FATAL, no error unwinding) must not stay counted,
# or every later acquire of that lock would defer to a waiter that is gone.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
scratch=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/waiting.XXXXXX")
chmod 755 "$scratch" # the second server (below) runs as postgres

# wait_for_waiters NAME N: until N sessions wait in dlock.acquire for NAME
wait_for_waiters() {
	for _ in $(seq 1 500); do
		[ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%dlock.acquire(''$1''%' AND pid <> pg_backend_pid()")" -ge "$2" ] && return 0
		sleep 0.01
	done
	return 1
}

holder=00000000-0000-0000-0000-0000000000a1
sql "SELECT dlock.try_acquire('waiting:killed', '1 minute', '$holder')" >/dev/null
psql -X -q -At -c "SELECT dlock.acquire('waiting:killed', '1 minute', '30 seconds')" >/dev/null 2>&1 &
waiter_client=$!
pid=
for _ in $(seq 1 100); do
	pid=$(sql "SELECT pid FROM pg_stat_activity WHERE query LIKE '%dlock.acquire(''waiting:killed''%' AND wait_event = 'Extension' AND pid <> pg_backend_pid()")
	[ -n "$pid" ] && break
	sleep 0.05
done
check "a waiter is seen waiting in the server" test -n "$pid"
[ -n "$pid" ] && sql "SELECT pg_terminate_backend($pid, 5000)" >/dev/null
wait "$waiter_client" 2>/dev/null
sql "SELECT dlock.release('waiting:killed', '$holder')" >/dev/null
sql "SELECT dlock.stats_reset()" >/dev/null
sql "SELECT dlock.release('waiting:killed', (dlock.acquire('waiting:killed', '1 minute', '5 seconds')).owner_token)" >/dev/null
waits=$(sql "SELECT waits FROM dlock.stats")
check "after the waiter was terminated, an uncontended acquire does not wait (waits = $waits)" test "$waits" -eq 0

# the same, for a waiter that was cancelled (ERROR, unwound): the control case
sql "SELECT dlock.try_acquire('waiting:cancelled', '1 minute', '$holder')" >/dev/null
psql -X -q -At -c "SET statement_timeout = '300ms'" -c "SELECT dlock.acquire('waiting:cancelled', '1 minute', '30 seconds')" >/dev/null 2>&1
sql "SELECT dlock.release('waiting:cancelled', '$holder')" >/dev/null
sql "SELECT dlock.stats_reset()" >/dev/null
sql "SELECT dlock.release('waiting:cancelled', (dlock.acquire('waiting:cancelled', '1 minute', '5 seconds')).owner_token)" >/dev/null
waits=$(sql "SELECT waits FROM dlock.stats")
check "after a waiter was cancelled, an uncontended acquire does not wait (waits = $waits)" test "$waits" -eq 0

# A lost wake-up: the waiter woken by a release is granted the lock, but its
# transaction rolls back. The next waiter must be woken then, not find out on
# a timed re-check. Each round: a holder, waiter A (granted first, in a
# transaction it rolls back at once, or in a subtransaction it rolls back
# while the transaction goes on), waiter B behind it, asleep; B's grant must
# follow A's rollback promptly. The holder keeps the lock 1.2 s first, so
# that a timed re-check, were B left to it, would come up to 500 ms late.
lost_gaps=()
for round in 1 2 3 4 5; do
	name=waiting:lost:$round
	sql "SELECT dlock.try_acquire('$name', '1 minute', '$holder')" >/dev/null
	# rounds 2 and 4 roll back to a savepoint and commit 0.5 s later
	savepoint= undo=ROLLBACK after=
	[ $((round % 2)) -eq 0 ] &&
		savepoint='SAVEPOINT s;' undo='ROLLBACK TO SAVEPOINT s' after='SELECT pg_sleep(0.5); COMMIT;'
	psql -X -q -At -v ON_ERROR_STOP=1 >"$scratch/a" 2>&1 <<-EOF &
		BEGIN;
		$savepoint
		SELECT dlock.acquire('$name', '1 minute', '30 seconds') IS NOT NULL;
		\o $scratch/a.time
		SELECT extract(epoch FROM clock_timestamp());
		\o
		$undo;
		$after
	EOF
	a_client=$!
	wait_for_waiters "$name" 1
	psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT extract(epoch FROM clock_timestamp()) FROM dlock.acquire('$name', '1 minute', '30 seconds')" >"$scratch/b" 2>&1 &
	b_client=$!
	wait_for_waiters "$name" 2
	sleep 1.2
	sql "SELECT dlock.release('$name', '$holder')" >/dev/null
	wait "$a_client" "$b_client"
	a_rolled_back=$(tail -n 1 "$scratch/a.time")
	b_granted=$(tail -n 1 "$scratch/b")
	lost_gaps+=("$(awk -v a="$a_rolled_back" -v b="$b_granted" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b >= a) printf "%d", (b - a) * 1000; else print "none" }')")
done
check "a waiter is woken when the grant before it rolls back (ms after the rollback: ${lost_gaps[*]})" \
	awk -v gaps="${lost_gaps[*]}" 'BEGIN { n = split(gaps, g, " "); for (i = 1; i <= n; i++) if (g[i] !~ /^[0-9]+$/ || g[i] >= 150) exit 1; exit n != 5 }'

# The waiter behind one that was granted the lock learns when that lease
# expires from it, so a holder that never releases is taken over on time:
# A is granted a 300 ms lease and never releases; B, queued behind it, must
# take over at the expiry, not when it happens to wake up (up to 1 s later).
name=waiting:expiry
sql "SELECT dlock.try_acquire('$name', '1 minute', '$holder')" >/dev/null
psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT extract(epoch FROM lease_until) FROM dlock.acquire('$name', '300 milliseconds', '30 seconds')" >"$scratch/a" 2>&1 &
a_client=$!
wait_for_waiters "$name" 1
psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT extract(epoch FROM clock_timestamp()) FROM dlock.acquire('$name', '1 minute', '30 seconds')" >"$scratch/b" 2>&1 &
b_client=$!
wait_for_waiters "$name" 2
sql "SELECT dlock.release('$name', '$holder')" >/dev/null
wait "$a_client" "$b_client"
late_ms=$(awk -v a="$(tail -n 1 "$scratch/a")" -v b="$(tail -n 1 "$scratch/b")" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b >= a) printf "%d", (b - a) * 1000; else print "none" }')
check "the waiter behind a granted lease takes over at its expiry ($late_ms ms after it)" \
	awk -v g="$late_ms" 'BEGIN { exit !(g ~ /^[0-9]+$/ && g < 150) }'

# A waiter that gives up while queued behind another never attempts; its wait
# still counts in dlock.stats (waits, wait_timeouts, wait_seconds).
name=waiting:counted
sql "SELECT dlock.try_acquire('$name', '1 minute', '$holder')" >/dev/null
psql -X -q -At -c "SELECT dlock.release('$name', owner_token) FROM dlock.acquire('$name', '1 minute', '30 seconds')" >/dev/null 2>&1 &
first_client=$!
wait_for_waiters "$name" 1
sql "SELECT dlock.stats_reset()" >/dev/null
psql -X -q -At -c "SELECT dlock.acquire('$name', '1 minute', '300 milliseconds')" >/dev/null 2>&1
counted=$(sql "SELECT waits || ' ' || wait_timeouts || ' ' || (wait_seconds >= 0.3) FROM dlock.stats")
sql "SELECT dlock.release('$name', '$holder')" >/dev/null
wait "$first_client"
check "a wait that ran out in the queue is counted with its length (waits, timeouts, >= 0.3 s: $counted)" \
	test "$counted" = "1 1 true"

# Without shared_preload_libraries there is no queue: waiters poll. A second
# server without preloading: a wait runs out with 55P03, and a waiter gets the
# lock after a release.
. "$DLOCK_ROOT/tests/lib/ports.sh"
plain_port=$(free_ports)
if "$DLOCK_ROOT/scripts/pg-cluster.sh" start "$scratch/plain" "$plain_port" -c "shared_preload_libraries = ''" &&
	PGPORT=$plain_port PGDATABASE=postgres psql -X -q -c 'CREATE EXTENSION pg_dlock'; then
	plain() { PGPORT=$plain_port PGDATABASE=postgres psql -X -q -At -c "$1" 2>&1; }
	check "without preloading, no shared memory" test "$(plain "SELECT shared_memory FROM dlock.stats")" = f
	plain "SELECT dlock.try_acquire('waiting:plain', '1 minute', '$holder')" >/dev/null
	check "without preloading, a wait runs out with 55P03" \
		grep -q 'could not acquire lock "waiting:plain" within 300 ms' <<<"$(plain "SELECT dlock.acquire('waiting:plain', '1 minute', '300 milliseconds')")"
	(sleep 0.3 && plain "SELECT dlock.release('waiting:plain', '$holder')" >/dev/null) &
	got=$(plain "SELECT fencing_token > 0 FROM dlock.acquire('waiting:plain', '1 minute', '10 seconds')")
	wait
	check "without preloading, a waiter gets the lock after the release" test "$got" = t
	# fenced grants rely on the token epoch of the server life, kept in shared
	# memory: refused once the library is loaded, and a value set before it
	# was loaded is dropped with a warning when it loads
	plain_session() { PGPORT=$plain_port PGDATABASE=postgres psql -X -q -At -v VERBOSITY=verbose "$@" 2>&1; }
	refused=$(plain_session -c "LOAD 'pg_dlock'" -c "SET dlock.durability = fenced")
	check "without preloading, dlock.durability = fenced is refused ($refused)" \
		grep -q '55000.*dlock.durability = fenced needs pg_dlock in shared_preload_libraries' <<<"$refused"
	dropped=$(plain_session -c "SET dlock.durability = fenced" \
		-c "SELECT dlock.try_acquire('waiting:plain-fenced', '1 minute') IS NOT NULL" -c "SHOW dlock.durability")
	check "a fenced setting made before the library loaded is dropped with a warning ($(echo $dropped))" \
		grep -q 'WARNING.*dlock.durability = fenced needs pg_dlock in shared_preload_libraries' <<<"$dropped"
	check "and the grant is durable" test "$(tail -n 2 <<<"$dropped" | paste -sd' ')" = "t durable"
	check "without preloading, dlock.durability = durable is accepted" \
		test -z "$(plain_session -c "LOAD 'pg_dlock'" -c "SET dlock.durability = durable")"
else
	check "a server without preloading starts" false
fi
"$DLOCK_ROOT/scripts/pg-cluster.sh" destroy "$scratch/plain"

rm -rf "$scratch"
finish
