#!/usr/bin/env bash
# dlock.acquire waiters in shared memory: a waiter killed by
# pg_terminate_backend (FATAL, no error unwinding) must not stay counted,
# or every later acquire of that lock would defer to a waiter that is gone.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }

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

finish
