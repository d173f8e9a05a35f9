#!/usr/bin/env bash
# Lock events (dlock.events, channel dlock_events) and the expiry worker:
# payload, transactional delivery, expiry reported once and on time, the
# worker surviving a dropped database, a dropped extension and a crash restart.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
. "$DLOCK_ROOT/tests/lib/events.sh"
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
db=$PGDATABASE
scratch=$(mktemp -d)
owner=00000000-0000-0000-0000-0000000000e1

reset_settings() {
	sql "ALTER DATABASE $db RESET dlock.events" >/dev/null
	sql "ALTER SYSTEM RESET dlock.worker_database" >/dev/null
	sql "ALTER SYSTEM RESET dlock.worker_naptime" >/dev/null
	sql "SELECT pg_reload_conf()" >/dev/null
	rm -rf "$scratch"
}
trap reset_settings EXIT
sql "ALTER DATABASE $db SET dlock.events = on"
sql "ALTER SYSTEM SET dlock.worker_database = '$db'"
# a long naptime: the worker must wake at lease_until because grants tell it
sql "ALTER SYSTEM SET dlock.worker_naptime = '1h'"
sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5

# payloads ($1 = psql output) as JSON lines
payloads() {
	sed -n 's/^Asynchronous notification "dlock_events" with payload "\(.*\)" received from server process with PID [0-9]*\.$/\1/p' <<<"$1"
}
field() { python3 -c 'import json,sys; e=json.loads(sys.argv[1]); v=e[sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"; }

# --- payload of a grant, in the granting session
out=$(psql -X -At -v ON_ERROR_STOP=1 <<SQL
LISTEN dlock_events;
SELECT fencing_token FROM dlock.try_acquire('events:payload', '1 minute', '$owner', 'worker "a"');
SQL
)
token=$(sed -n 2p <<<"$out")
event=$(payloads "$out" | head -n 1)
check "a grant sends one event" test "$(payloads "$out" | wc -l)" -eq 1
check "payload has exactly event, lock_name, fencing_token, holder, lease_until ($event)" \
	test "$(python3 -c 'import json,sys; print(",".join(sorted(json.loads(sys.argv[1]))))' "$event")" = \
	"event,fencing_token,holder,lease_until,lock_name"
check "payload: event acquire, lock name, token $token, holder" \
	test "$(field "$event" event)|$(field "$event" lock_name)|$(field "$event" fencing_token)|$(field "$event" holder)" = \
	"acquire|events:payload|$token|worker \"a\""
check "payload: lease_until is the lease's lease_until" \
	test "$(sql "SELECT lease_until = '$(field "$event" lease_until)'::timestamptz FROM dlock.locks WHERE lock_name = 'events:payload'")" = t
check "payload never carries the owner token" bash -c '! grep -qi "$1" <<<"$2"' _ "$owner" "$out"

# --- a rolled-back grant sends nothing; the committed one after it does
out=$(psql -X -At -v ON_ERROR_STOP=1 <<SQL
LISTEN dlock_events;
BEGIN;
SELECT fencing_token FROM dlock.try_acquire('events:rolled-back', '1 minute', holder => 'rolled back');
ROLLBACK;
SELECT 'after rollback';
BEGIN;
SELECT fencing_token FROM dlock.try_acquire('events:rolled-back', '1 minute', holder => 'committed');
COMMIT;
SQL
)
check "a rolled-back grant sends nothing, its committed retry one event" \
	test "$(payloads "$out" | grep -c '"lock_name":"events:rolled-back"')" -eq 1
check "the event is the committed grant's" \
	test "$(payloads "$out" | grep '"lock_name":"events:rolled-back"' | grep -c '"holder":"committed"')" -eq 1
check "nothing arrived before the commit" \
	test "$(sed -n '/after rollback/,$p' <<<"$out" | grep -c '^Asynchronous')" -eq 1

# --- release, takeover and force release, in commit order with their tokens
out=$(psql -X -At -v ON_ERROR_STOP=1 <<SQL
LISTEN dlock_events;
SELECT dlock.renew('events:payload', '$owner', '1 minute') IS NOT NULL;
SELECT fencing_token FROM dlock.try_acquire('events:payload', '1 minute', '$owner', 'worker "a"');
SELECT dlock.release('events:payload', '$owner');
SELECT fencing_token FROM dlock.try_acquire('events:payload', '100 milliseconds', holder => 'short');
SELECT pg_sleep(0.2);
SELECT fencing_token FROM dlock.try_acquire('events:payload', '1 minute', holder => 'taker');
SELECT dlock.force_release('events:payload', 'events test');
SELECT dlock.release('events:payload', '$owner');
SQL
)
seq=$(payloads "$out" | grep '"lock_name":"events:payload"' | python3 -c '
import json, sys
print(" ".join("%s:%d" % (e["event"], e["fencing_token"] - '"$token"') for e in map(json.loads, sys.stdin) if e["event"] != "expire"))')
check "renew and a retried acquire send nothing; release, acquire, takeover, force release, each with its token (got: $seq)" \
	test "$seq" = "release:0 acquire:1 takeover:2 force_release:2"
check "a refused release sends nothing" \
	test "$(payloads "$out" | grep -c '"event":"release"')" -eq 1

# --- a long holder description is cut to 1024 bytes, on a character boundary
out=$(psql -X -At -v ON_ERROR_STOP=1 <<SQL
LISTEN dlock_events;
SELECT fencing_token FROM dlock.try_acquire('events:long-holder', '1 minute', holder => repeat('€', 500));
SQL
)
event=$(payloads "$out" | head -n 1)
check "a holder of 1500 bytes (500 three-byte characters) is sent as its first 341 characters (1023 bytes)" \
	python3 -c 'import json,sys; h=json.loads(sys.argv[1])["holder"]; sys.exit(h != "\u20ac" * 341)' "$event"

# --- dlock.events off: nothing
out=$(psql -X -At -v ON_ERROR_STOP=1 <<SQL
LISTEN dlock_events;
SET dlock.events = off;
SELECT fencing_token FROM dlock.try_acquire('events:off', '1 minute');
SQL
)
check "with dlock.events off a grant sends nothing" test "$(payloads "$out" | wc -l)" -eq 0

# --- the expiry worker
launcher_pid() { sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_dlock expiry worker'"; }
pid=$(launcher_pid)
check "the expiry worker runs (pid $pid)" test -n "$pid"
check "the expiry worker holds no transaction or snapshot while it sleeps" \
	test "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_dlock expiry worker' AND xact_start IS NULL AND backend_xmin IS NULL")" = 1

listen_events 6 "$scratch/expire" &
listener=$!
wait_listening "$scratch/expire"
token=$(sql "SELECT fencing_token FROM dlock.try_acquire('events:expire', '1 second', holder => 'gone')")
until_epoch=$(sql "SELECT extract(epoch FROM lease_until) FROM dlock.locks WHERE lock_name = 'events:expire'")
sleep 2
# later grants make the worker run again: the old expiry must not come back
sql "SELECT dlock.try_acquire('events:expire-other', '500 milliseconds')" >/dev/null
sleep 1
sql "SELECT dlock.try_acquire('events:expire-other', '500 milliseconds')" >/dev/null
wait $listener
expired=$(events_of "$scratch/expire" expire events:expire)
check "a lease that expires with nobody waiting is reported once (got $(wc -l <<<"$expired"))" \
	test -n "$expired" -a "$(wc -l <<<"$expired")" -eq 1
check "the expire event carries the lease's token and holder" \
	test "$(field "${expired#* }" fencing_token)|$(field "${expired#* }" holder)" = "$token|gone"
delay=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[1]) - float(sys.argv[2])))' "${expired%% *}" "$until_epoch")
check "the expire event arrives within 1.5 s after lease_until (naptime 1h; took ${delay}s)" \
	python3 -c 'import sys; sys.exit(not 0 <= float(sys.argv[1]) <= 1.5)' "$delay"
check "each later expiry is reported too" \
	test "$(events_of "$scratch/expire" expire events:expire-other | wc -l)" -eq 2

# a waiter in dlock.acquire gets an expired lease without anyone releasing it
sql "SELECT dlock.try_acquire('events:waited', '1 second', holder => 'stuck')" >/dev/null
until_epoch=$(sql "SELECT extract(epoch FROM lease_until) FROM dlock.locks WHERE lock_name = 'events:waited'")
got=$(sql "SELECT extract(epoch FROM clock_timestamp()) FROM dlock.acquire('events:waited', '1 minute', '10 seconds', holder => 'waiter') WHERE fencing_token IS NOT NULL")
delay=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[1]) - float(sys.argv[2])))' "${got:-0}" "$until_epoch")
check "a waiter gets the expired lease within 1 s after lease_until (took ${delay}s)" \
	python3 -c 'import sys; sys.exit(not 0 <= float(sys.argv[1]) <= 1.0)' "$delay"

# --- scheduled maintenance: dlock.reap and dlock.purge_audit_log
sql "SELECT dlock.try_acquire('events:idle', '10 milliseconds')" >/dev/null
sql "SELECT dlock.try_acquire('events:live', '1 minute')" >/dev/null
sql "SELECT dlock.force_release('events:force-audited', 'x') FROM dlock.try_acquire('events:force-audited', '1 minute')" >/dev/null
sleep 1.2
check "before maintenance runs, the idle row and the audit record are there" \
	test "$(sql "SELECT (SELECT count(*) FROM dlock.locks WHERE lock_name = 'events:idle') + (SELECT count(*) FROM dlock.audit_log WHERE lock_name = 'events:force-audited')")" = 2
sql "ALTER SYSTEM SET dlock.maintenance_interval = '1s'"
sql "ALTER SYSTEM SET dlock.reap_idle_for = '1s'"
sql "ALTER SYSTEM SET dlock.audit_retention = '1s'"
sql "SELECT pg_reload_conf()" >/dev/null
maintained=1
for _ in $(seq 1 40); do
	[ "$(sql "SELECT (SELECT count(*) FROM dlock.locks WHERE lock_name = 'events:idle') + (SELECT count(*) FROM dlock.audit_log WHERE lock_name = 'events:force-audited')")" = 0 ] && { maintained=0; break; }
	sleep 0.1
done
check "with dlock.maintenance_interval set the worker reaps idle rows and purges old audit records" test $maintained -eq 0
check "maintenance leaves live leases alone" \
	test "$(sql "SELECT state FROM dlock.locks WHERE lock_name = 'events:live'")" = held
sql "ALTER SYSTEM RESET dlock.maintenance_interval"
sql "ALTER SYSTEM RESET dlock.reap_idle_for"
sql "ALTER SYSTEM RESET dlock.audit_retention"
sql "SELECT pg_reload_conf()" >/dev/null

# --- the worker survives its database and the extension being dropped
psql -X -q -d postgres -c "CREATE DATABASE dlock_events_scratch" &&
	psql -X -q -d dlock_events_scratch -c "CREATE EXTENSION pg_dlock" \
		-c "ALTER DATABASE dlock_events_scratch SET dlock.events = on"
sql "ALTER SYSTEM SET dlock.worker_database = 'dlock_events_scratch'"
sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
psql -X -q -At -d dlock_events_scratch -c "SELECT dlock.try_acquire('events:scratch', '200 milliseconds')" >/dev/null
sleep 1.5
check "the worker follows dlock.worker_database to another database" \
	test "$(psql -X -At -d dlock_events_scratch -c "SELECT count(*) FROM dlock.expiry_reported")" = 1
psql -X -q -d dlock_events_scratch -c "DROP EXTENSION pg_dlock"
sleep 0.2
started=$(date +%s.%N)
psql -X -q -d postgres -c "DROP DATABASE dlock_events_scratch"
check "DROP DATABASE of the worker's database is not held up" \
	python3 -c 'import sys, time; sys.exit(not time.time() - float(sys.argv[1]) < 3)' "$started"
sql "ALTER SYSTEM SET dlock.worker_database = '$db'"
sql "SELECT pg_reload_conf()" >/dev/null
sleep 1
check "the worker outlived the dropped extension and database (pid $pid)" test "$(launcher_pid)" = "$pid"

# --- crash restart with the worker running
psql -X -q -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
victim_client=$!
victim=
for _ in $(seq 1 50); do
	victim=$(sql "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'")
	[ -n "$victim" ] && break
	sleep 0.1
done
kill -9 "$victim"
wait $victim_client 2>/dev/null
for _ in $(seq 1 100); do
	newpid=$(launcher_pid 2>/dev/null)
	[ -n "$newpid" ] && [ "$newpid" != "$pid" ] && break
	sleep 0.2
done
check "after a crash restart the worker runs again (pid $pid -> ${newpid:-none})" \
	test -n "$newpid" -a "$newpid" != "$pid"
listen_events 4 "$scratch/restart" &
listener=$!
wait_listening "$scratch/restart"
sql "SELECT dlock.try_acquire('events:after-crash', '1 second')" >/dev/null
wait $listener
check "after the crash restart expiries are reported" \
	test "$(events_of "$scratch/restart" expire events:after-crash | wc -l)" -eq 1
check "expiries reported before the crash are not reported again" \
	test "$(events_of "$scratch/restart" expire events:expire | wc -l)" -eq 0

finish
