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

field() { python3 -c 'import json,sys; e=json.loads(sys.argv[1]); v=e[sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"; }
# payload_of LINE: the payload of an events_of line (after the bound)
payload_of() { printf '%s\n' "${1#* }"; }

listen_events "$scratch/events" &
listener=$!
wait_listening "$scratch/events"

# --- payload of a grant
token=$(psql -X -At -v ON_ERROR_STOP=1 -c "SELECT fencing_token FROM dlock.try_acquire('events:payload', '1 minute', '$owner', 'worker \"a\"')")
wait_for_event "$scratch/events" acquire events:payload
event=$(payload_of "$(events_of "$scratch/events" acquire events:payload | head -n 1)")
check "a grant sends one event" test "$(events_of "$scratch/events" '*' events:payload | wc -l)" -eq 1
check "payload has exactly event, lock_name, fencing_token, holder, lease_until ($event)" \
	test "$(python3 -c 'import json,sys; print(",".join(sorted(json.loads(sys.argv[1]))))' "$event")" = \
	"event,fencing_token,holder,lease_until,lock_name"
check "payload: event acquire, lock name, token $token, holder" \
	test "$(field "$event" event)|$(field "$event" lock_name)|$(field "$event" fencing_token)|$(field "$event" holder)" = \
	"acquire|events:payload|$token|worker \"a\""
check "payload: lease_until is the lease's lease_until" \
	test "$(sql "SELECT lease_until = '$(field "$event" lease_until)'::timestamptz FROM dlock.locks WHERE lock_name = 'events:payload'")" = t
check "payload never carries the owner token" bash -c '! grep -qi "$1" "$2"' _ "$owner" "$scratch/events"

# --- a rolled-back grant sends nothing, nor does one under a rolled-back
# savepoint; the committed ones do, after their commit
committing=$(psql -X -q -At -v ON_ERROR_STOP=1 <<SQL
BEGIN;
SELECT fencing_token FROM dlock.try_acquire('events:rolled-back', '1 minute', holder => 'rolled back') \\g /dev/null
ROLLBACK;
BEGIN;
SELECT fencing_token FROM dlock.try_acquire('events:rolled-back', '1 minute', holder => 'committed') \\g /dev/null
SAVEPOINT s;
SELECT fencing_token FROM dlock.try_acquire('events:savepoint', '1 minute', holder => 'rolled back') \\g /dev/null
ROLLBACK TO SAVEPOINT s;
SAVEPOINT t;
SELECT fencing_token FROM dlock.try_acquire('events:savepoint', '1 minute', holder => 'released savepoint') \\g /dev/null
RELEASE SAVEPOINT t;
SELECT pg_sleep(1) \\g /dev/null
SELECT extract(epoch FROM clock_timestamp());
COMMIT;
SQL
)
event_barrier "$scratch/events"
check "a rolled-back grant sends nothing, its committed retry one event" \
	test "$(events_of "$scratch/events" '*' events:rolled-back | wc -l)" -eq 1
check "the event is the committed grant's" \
	test "$(events_of "$scratch/events" '*' events:rolled-back | grep -c '"holder": "committed"')" -eq 1
check "a grant under a rolled-back savepoint sends nothing, one under a released savepoint its event" \
	test "$(events_of "$scratch/events" '*' events:savepoint | sed 's/^[^ ]* //' | python3 -c 'import json,sys; print(",".join(json.loads(l)["holder"] for l in sys.stdin))')" = "released savepoint"
arrived=$(events_of "$scratch/events" acquire events:rolled-back | head -n 1)
check "the event arrives after the commit, not at the grant a second before it (commit at $committing, arrival seen at ${arrived%% *})" \
	python3 -c 'import sys; sys.exit(not float(sys.argv[1]) > float(sys.argv[2]))' "${arrived%% *}" "$committing"

# --- release, takeover and force release, in commit order with their tokens
psql -X -q -At -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT dlock.renew('events:payload', '$owner', '1 minute') IS NOT NULL;
SELECT fencing_token FROM dlock.try_acquire('events:payload', '1 minute', '$owner', 'worker "a"');
SELECT dlock.release('events:payload', '$owner');
SELECT fencing_token FROM dlock.try_acquire('events:payload', '100 milliseconds', holder => 'short');
SELECT pg_sleep(0.2);
SELECT fencing_token FROM dlock.try_acquire('events:payload', '1 minute', holder => 'taker');
SELECT dlock.force_release('events:payload', 'events test');
SELECT dlock.release('events:payload', '$owner');
SQL
event_barrier "$scratch/events"
seq=$(events_of "$scratch/events" '*' events:payload | sed 's/^[^ ]* //' | python3 -c '
import json, sys
print(" ".join("%s:%d" % (e["event"], e["fencing_token"] - '"$token"') for e in map(json.loads, sys.stdin) if e["event"] != "expire"))')
check "renew and a retried acquire send nothing; release, acquire, takeover, force release, each with its token (got: $seq)" \
	test "$seq" = "acquire:0 release:0 acquire:1 takeover:2 force_release:2"
check "a refused release sends nothing" \
	test "$(events_of "$scratch/events" release events:payload | wc -l)" -eq 1

# --- shared leases and semaphore permits: each grant and release is an event
# with that holder's token; a renewal sends nothing
reader=00000000-0000-0000-0000-0000000000e2
tokens=($(psql -X -q -At -v ON_ERROR_STOP=1 <<SQL
SELECT fencing_token FROM dlock.try_acquire_shared('events:shared', '1 minute', '$owner', 'reader a');
SELECT fencing_token FROM dlock.try_acquire_shared('events:shared', '1 minute', '$reader', 'reader b');
SELECT dlock.renew('events:shared', '$reader', '1 minute') IS NOT NULL \\g /dev/null
SELECT dlock.release('events:shared', '$owner') \\g /dev/null
SELECT dlock.release('events:shared', '$owner') \\g /dev/null
SELECT fencing_token FROM dlock.try_acquire_permit('events:permit', 2, '1 minute', '$owner', 'permit a');
SELECT dlock.release('events:permit', '$owner') \\g /dev/null
SQL
))
event_barrier "$scratch/events"
kind_events() {
	events_of "$scratch/events" '*' "$1" | sed 's/^[^ ]* //' | python3 -c '
import json, sys
print(" ".join("%s:%s:%d" % (e["event"], e["holder"], e["fencing_token"]) for e in map(json.loads, sys.stdin)))'
}
got=$(kind_events events:shared)
check "shared leases: two grants, a renewal (nothing), a release and a refused one (nothing), with their tokens (got: $got)" \
	test "$got" = "acquire:reader a:${tokens[0]:-} acquire:reader b:${tokens[1]:-} release:reader a:${tokens[0]:-}"
got=$(kind_events events:permit)
check "a semaphore permit: its grant and its release (got: $got)" \
	test "$got" = "acquire:permit a:${tokens[2]:-} release:permit a:${tokens[2]:-}"

# --- a long holder description is cut to 1024 bytes, on a character boundary
sql "SELECT fencing_token FROM dlock.try_acquire('events:long-holder', '1 minute', holder => repeat('€', 500))" >/dev/null
wait_for_event "$scratch/events" acquire events:long-holder
event=$(payload_of "$(events_of "$scratch/events" acquire events:long-holder | head -n 1)")
check "a holder of 1500 bytes (500 three-byte characters) is sent as its first 341 characters (1023 bytes)" \
	python3 -c 'import json,sys; h=json.loads(sys.argv[1])["holder"]; sys.exit(h != "\u20ac" * 341)' "$event"

# --- dlock.events off: nothing
psql -X -q -At -v ON_ERROR_STOP=1 -c "SET dlock.events = off" \
	-c "SELECT fencing_token FROM dlock.try_acquire('events:off', '1 minute')" >/dev/null
event_barrier "$scratch/events"
check "with dlock.events off a grant sends nothing" test "$(events_of "$scratch/events" '*' events:off | wc -l)" -eq 0

# --- a transaction with events cannot be prepared (they are sent at commit)
out=$(psql -X -q -At -v VERBOSITY=sqlstate <<SQL 2>&1
SELECT fencing_token FROM dlock.try_acquire('events:prepared', '1 minute', '$owner') \\g /dev/null
BEGIN;
SELECT dlock.release('events:prepared', '$owner');
PREPARE TRANSACTION 'dlock_events_release';
SQL
)
check "PREPARE TRANSACTION after a release with events on is refused with 0A000 (got: $(tr '\n' ' ' <<<"$out"))" \
	grep -q '^ERROR:  0A000' <<<"$out"
check "nothing was prepared and the lease is still held" \
	test "$(sql "SELECT (SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'dlock_events_release') || state FROM dlock.locks WHERE lock_name = 'events:prepared'")" = 0held
event_barrier "$scratch/events"
check "the refused release sent nothing" test "$(events_of "$scratch/events" release events:prepared | wc -l)" -eq 0
stop_listening "$scratch/events" $listener

# --- the expiry worker
launcher_pid() { sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_dlock expiry worker'"; }
pid=$(launcher_pid)
check "the expiry worker runs (pid $pid)" test -n "$pid"
check "the expiry worker holds no transaction or snapshot while it sleeps" \
	test "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_dlock expiry worker' AND xact_start IS NULL AND backend_xmin IS NULL")" = 1

listen_events "$scratch/expire" &
listener=$!
wait_listening "$scratch/expire"
token=$(sql "SELECT fencing_token FROM dlock.try_acquire('events:expire', '1 second', holder => 'gone')")
until_epoch=$(sql "SELECT extract(epoch FROM lease_until) FROM dlock.locks WHERE lock_name = 'events:expire'")
wait_for_event "$scratch/expire" expire events:expire
# later grants make the worker run again: the old expiry must not come back
sql "SELECT dlock.try_acquire('events:expire-other', '500 milliseconds')" >/dev/null
wait_for_event "$scratch/expire" expire events:expire-other 1
sql "SELECT dlock.try_acquire('events:expire-other', '500 milliseconds')" >/dev/null
wait_for_event "$scratch/expire" expire events:expire-other 2
event_barrier "$scratch/expire"
stop_listening "$scratch/expire" $listener
expired=$(events_of "$scratch/expire" expire events:expire)
check "a lease that expires with nobody waiting is reported once (got $(wc -l <<<"$expired"))" \
	test -n "$expired" -a "$(wc -l <<<"$expired")" -eq 1
check "the expire event carries the lease's token and holder" \
	test "$(field "${expired#* }" fencing_token)|$(field "${expired#* }" holder)" = "$token|gone"
# The worker sleeps until the lease_until it was told of, not its naptime of
# one hour: the bound leaves a loaded machine 10 s (typically it takes a few
# tens of milliseconds), still 360 times shorter than the naptime.
delay=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[1]) - float(sys.argv[2])))' "${expired%% *}" "$until_epoch")
check "the expire event arrives within 10 s after lease_until, not after the naptime of 1 h (took ${delay}s)" \
	python3 -c 'import sys; sys.exit(not 0 <= float(sys.argv[1]) <= 10)' "$delay"
check "each later expiry is reported too" \
	test "$(events_of "$scratch/expire" expire events:expire-other | wc -l)" -eq 2

# shared leases and permits expire on their own: each reported once, with
# its own token and holder, and counted in the hold histogram of its kind
holds_before=$(sql "SELECT string_agg(holds::text, ' ' ORDER BY kind) FROM dlock.hold_histogram() WHERE le IS NULL AND kind IN ('permit', 'shared')")
listen_events "$scratch/expire-kinds" &
listener=$!
wait_listening "$scratch/expire-kinds"
readers=$(sql "SELECT string_agg(fencing_token::text, ' ' ORDER BY fencing_token) FROM (
	SELECT fencing_token FROM dlock.try_acquire_shared('events:expire-shared', '1 second', holder => 'reader a')
	UNION ALL SELECT fencing_token FROM dlock.try_acquire_shared('events:expire-shared', '1 second', holder => 'reader b')) t")
permit=$(sql "SELECT fencing_token FROM dlock.try_acquire_permit('events:expire-permits', 3, '1 second', holder => 'permit a')")
wait_for_event "$scratch/expire-kinds" expire events:expire-shared 2
wait_for_event "$scratch/expire-kinds" expire events:expire-permits
# a later grant makes the worker run again: the old expiries must not come back
sql "SELECT dlock.try_acquire('events:expire-after-kinds', '500 milliseconds')" >/dev/null
wait_for_event "$scratch/expire-kinds" expire events:expire-after-kinds
event_barrier "$scratch/expire-kinds"
stop_listening "$scratch/expire-kinds" $listener
shared_expired=$(events_of "$scratch/expire-kinds" expire events:expire-shared | while read -r _ payload; do field "$payload" fencing_token; done | sort -n | paste -sd' ')
check "both expired shared leases are reported once, with their tokens ($shared_expired; granted $readers)" \
	test "$shared_expired" = "$readers"
permit_expired=$(events_of "$scratch/expire-kinds" expire events:expire-permits)
check "an expired permit is reported once, with its token and holder" \
	test "$(wc -l <<<"$permit_expired")|$(field "${permit_expired#* }" fencing_token)|$(field "${permit_expired#* }" holder)" = "1|$permit|permit a"
holds_after=$(sql "SELECT string_agg(holds::text, ' ' ORDER BY kind) FROM dlock.hold_histogram() WHERE le IS NULL AND kind IN ('permit', 'shared')")
set -- $holds_before $holds_after
check "the hold histogram counts them, per kind (permit, shared: $holds_before -> $holds_after)" \
	test "$3" -eq $(($1 + 1)) -a "$4" -eq $(($2 + 2))
check "the reported slots are recorded once each" \
	test "$(sql "SELECT count(*) FROM dlock.holder_expiry_reported WHERE lock_name LIKE 'events:expire-%'")" = 3

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
for _ in $(seq 1 100); do
	[ "$(psql -X -At -d dlock_events_scratch -c "SELECT count(*) FROM dlock.expiry_reported")" = 1 ] && break
	sleep 0.1
done
check "the worker follows dlock.worker_database to another database" \
	test "$(psql -X -At -d dlock_events_scratch -c "SELECT count(*) FROM dlock.expiry_reported")" = 1
check "an event sender runs for that database (it sent the expiry)" \
	test "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_dlock event sender' AND datname = 'dlock_events_scratch'")" = 1
psql -X -q -d dlock_events_scratch -c "DROP EXTENSION pg_dlock"
sleep 0.2
started=$(date +%s.%N)
psql -X -q -d postgres -c "DROP DATABASE dlock_events_scratch"
check "DROP DATABASE of the worker's database is not held up (its event sender leaves after a second without events)" \
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
listen_events "$scratch/restart" &
listener=$!
wait_listening "$scratch/restart"
sql "SELECT dlock.try_acquire('events:after-crash', '1 second')" >/dev/null
wait_for_event "$scratch/restart" expire events:after-crash
event_barrier "$scratch/restart"
stop_listening "$scratch/restart" $listener
check "after the crash restart expiries are reported" \
	test "$(events_of "$scratch/restart" expire events:after-crash | wc -l)" -eq 1
check "expiries reported before the crash are not reported again" \
	test "$(events_of "$scratch/restart" expire events:expire | wc -l)" -eq 0

finish
