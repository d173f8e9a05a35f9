#!/usr/bin/env bash
# DROP EXTENSION pg_dlock while callers wait: it waits for a session queued in
# dlock.acquire (whose transaction holds the lock table), and calls that
# arrive meanwhile of every kind wait behind the DROP for the extension's
# tables. When it commits they must fail with a clear error, 55000 (the
# extension is not installed), not with an internal error on the dropped
# table's OID (XX000). Uses the shared test server (a database of its own).
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh

db=dlock_drop_while_waiting
scratch=$(mktemp -d "$DLOCK_SCRATCH/drop.XXXXXX")
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
psql -X -q -d $db -c "CREATE EXTENSION pg_dlock"
# each call prints its SQLSTATE when it fails
call() { printf '\\set VERBOSITY sqlstate\n%s\n' "$2" | psql -X -q -At -d $db >"$scratch/$1" 2>&1; }
waiting_for() { # sessions of $db waiting on $1 (Extension: the acquire's sleep; Lock: a heavyweight lock)
	psql -X -q -At -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND wait_event_type = '$1'"
}
await() { # $1 wanted count, then the command
	local want=$1
	shift
	for _ in $(seq 1 500); do [ "$("$@")" -ge "$want" ] && return 0; sleep 0.02; done
	return 1
}

call holder "SELECT dlock.try_acquire('drop:x', '1 minute', '00000000-0000-0000-0000-000000000001') IS NOT NULL;"
call queued "SELECT dlock.acquire('drop:x', '1 minute', '4 seconds');" &
queued=$!
await 1 waiting_for Extension
call drop "DROP EXTENSION pg_dlock;" &
drop=$!
await 1 waiting_for Lock
call exclusive "SELECT dlock.acquire('drop:x', '1 minute', '10 seconds');" &
call try "SELECT dlock.try_acquire('drop:y', '1 minute');" &
call shared "SELECT dlock.try_acquire_shared('drop:z', '1 minute');" &
call permit "SELECT dlock.try_acquire_permit('drop:p', 2, '1 minute');" &
wait

check "the DROP EXTENSION went through once the queued waiter gave up" \
	test "$(psql -X -q -At -d $db -c "SELECT count(*) FROM pg_extension WHERE extname = 'pg_dlock'")" = 0
for c in exclusive try shared permit; do
	check "the $c call that waited behind the DROP fails with 55000 ($(tr '\n' ' ' <"$scratch/$c"))" \
		grep -q '^ERROR:  55000' "$scratch/$c"
done
check "no call failed with an internal error (XX000)" bash -c "! grep -q XX000 '$scratch'/*"
check "negative control: the XX000 check sees one" bash -c "echo 'ERROR:  XX000' | grep -q XX000"

psql -X -q -d postgres -c "DROP DATABASE $db"
rm -rf "$scratch"
finish
