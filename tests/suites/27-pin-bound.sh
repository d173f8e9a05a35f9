#!/usr/bin/env bash
# dlock.max_pin: a role that does not hold a lease cannot stall its holder or
# a takeover beyond the bound the administrator sets.
# The attack: a role allowed to call holds() (it writes fenced data) pins
# someone else's live lease -- tokens are public in dlock.locks -- switches
# idle_in_transaction_session_timeout off and sits idle in its transaction.
# Negative control: without the bound the same attack stalls the renew.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
ms_now() { date +%s%3N; }

sql "SET client_min_messages = warning; DROP ROLE IF EXISTS regress_mallory; CREATE ROLE regress_mallory LOGIN;
     GRANT EXECUTE ON FUNCTION dlock.holds(text, bigint) TO regress_mallory;
     ALTER ROLE regress_mallory SET dlock.max_pin = '1s'" >/dev/null
holder=00000000-0000-0000-0000-0000000000b1
out=$(mktemp)

# pin NAME as regress_mallory, idle in transaction for up to 20 s
pin() {
	{
		echo "SET idle_in_transaction_session_timeout = 0;"
		echo "BEGIN;"
		echo "SELECT dlock.holds('$1', (SELECT fencing_token FROM dlock.locks WHERE lock_name = '$1'));"
		sleep 20
	} 2>/dev/null | psql -X -q -At -U regress_mallory >"$out" 2>&1 &
	pinner=$!
	for _ in $(seq 1 100); do
		[ -n "$(sql "SELECT 1 FROM pg_stat_activity WHERE usename = 'regress_mallory' AND state = 'idle in transaction'")" ] && return 0
		sleep 0.05
	done
	return 1
}

# the holder's renew behind the pin ends within the bound (1 s) and a margin
sql "SELECT dlock.try_acquire('pin:renew', '1 minute', '$holder')" >/dev/null
check "the attacker pins the holder's lease" pin pin:renew
start=$(ms_now)
renewed=$(sql "SET statement_timeout = '10s'; SELECT dlock.renew('pin:renew', '$holder', '1 minute') IS NOT NULL")
elapsed=$(($(ms_now) - start))
check "the holder's renew went through after ${elapsed} ms (bound 1000 ms, at most 4000 allowed)" \
	test "$renewed" = t -a "$elapsed" -lt 4000
gone=$(sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'regress_mallory'")
check "the pinning session was terminated ($gone left)" test "$gone" -eq 0
check "the server log says why" grep -q "longer than dlock.max_pin" "$DLOCK_CLUSTER_DIR/server.log"
kill "$pinner" 2>/dev/null

# a takeover of a lease that expired while pinned waits no longer either
sql "SELECT dlock.try_acquire('pin:takeover', '500 milliseconds', '$holder')" >/dev/null
check "the attacker pins a short lease" pin pin:takeover
sleep 0.6
start=$(ms_now)
taken=$(sql "SET statement_timeout = '10s'; SELECT dlock.try_acquire('pin:takeover', '1 minute') IS NOT NULL")
elapsed=$(($(ms_now) - start))
check "the takeover went through after ${elapsed} ms (at most 4000 allowed)" \
	test "$taken" = t -a "$elapsed" -lt 4000
kill "$pinner" 2>/dev/null

# the attacker cannot switch the bound off
psql -X -q -At -U regress_mallory -c "SET dlock.max_pin = 0" >"$out" 2>&1
check "dlock.max_pin cannot be changed by the pinning role" grep -q "permission denied" "$out"

# nor keep a pin beyond the session in a prepared transaction
psql -X -q -At -U regress_mallory -v VERBOSITY=terse \
	-c "BEGIN" -c "SELECT dlock.holds('pin:renew', (SELECT fencing_token FROM dlock.locks WHERE lock_name = 'pin:renew'))" \
	-c "PREPARE TRANSACTION 'pin'" >"$out" 2>&1
check "a pinning transaction cannot be prepared while dlock.max_pin is set" \
	grep -q "cannot PREPARE a transaction that pinned a lease" "$out"

# negative control: without the bound the same attack stalls the renew
sql "ALTER ROLE regress_mallory RESET dlock.max_pin" >/dev/null
check "control: the attacker pins the lease again, unbounded" pin pin:renew
renewed=$(psql -X -q -At -c "SET statement_timeout = '2s'" \
	-c "SELECT dlock.renew('pin:renew', '$holder', '1 minute') IS NOT NULL" 2>&1)
check "control: without dlock.max_pin the renew is stalled (statement timeout)" \
	grep -q "statement timeout" <<<"$renewed"
sql "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = 'regress_mallory'" >/dev/null
kill "$pinner" 2>/dev/null

rm -f "$out"
sql "DROP OWNED BY regress_mallory; DROP ROLE regress_mallory" >/dev/null
finish
