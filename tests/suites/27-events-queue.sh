#!/usr/bin/env bash
# The lock event queue (extension/event_queue.c): a lock transaction hands its
# events to its database's event sender after commit and never waits for it;
# when the queue is full, events are dropped and counted, and the lock
# operation still succeeds; events of one lock name arrive in commit order.
# Runs its own server (free port, private directory) with the smallest queue.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh
. tests/lib/events.sh

scratch=$(mktemp -d "$DLOCK_SCRATCH/queue.XXXXXX")
chmod 755 "$scratch"
cluster_dir=$scratch/cluster
export PGPORT=$(free_ports) PGDATABASE=postgres
sender=
cleanup() {
	[ -n "$sender" ] && kill -CONT "$sender" 2>/dev/null
	touch "$scratch/events.stop"
	scripts/pg-cluster.sh destroy "$cluster_dir" >/dev/null 2>&1
	rm -rf "$scratch"
}
trap cleanup EXIT
scripts/pg-cluster.sh start "$cluster_dir" "$PGPORT" \
	-c "dlock.event_queue_size = 64kB" -c "dlock.events = on" >/dev/null ||
	{ cat "$cluster_dir/server.log"; echo "0 passed, 1 failed"; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
sql "CREATE EXTENSION pg_dlock"
sender_pid() { sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_dlock event sender'"; }
# received_suffixes PREFIX: what follows PREFIX in the lock names of the
# events received so far, in arrival order
received_suffixes() {
	python3 - "$scratch/events" "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line.split(" ", 1)[1])
    if e["lock_name"].startswith(sys.argv[2]):
        print(e["lock_name"][len(sys.argv[2]):])
PY
}

listen_events "$scratch/events" &
listener=$!
wait_listening "$scratch/events"

# --- the sender, not the lock transaction, sends: stop it and grant
# Start the sender with an event, then stop it (SIGSTOP) while it waits for
# more; it leaves after a second without events, so try again if it is gone.
for _ in $(seq 1 20); do
	event_barrier "$scratch/events"
	sender=$(sender_pid)
	[ -n "$sender" ] && kill -STOP "$sender" 2>/dev/null &&
		[ "$(ps -o stat= -p "$sender" | cut -c1)" = T ] && break
	sender=
done
check "the event sender runs (pid ${sender:-none}) and is stopped" test -n "$sender"

stopped=$(timeout 60 psql -X -q -At -v ON_ERROR_STOP=1 \
	-c "SELECT fencing_token FROM dlock.try_acquire('queue:stopped', '1 minute', '00000000-0000-0000-0000-00000000000a')" \
	-c "SELECT dlock.release('queue:stopped', '00000000-0000-0000-0000-00000000000a')" \
	-c "SELECT fencing_token FROM dlock.try_acquire('queue:stopped', '1 minute')" | wc -l)
check "with the sender stopped, a grant, a release and a grant with events commit" test "$stopped" -eq 3
sleep 1
check "their events do not arrive while the sender is stopped: lock transactions do not notify by themselves" \
	test "$(events_of "$scratch/events" '*' queue:stopped | wc -l)" -eq 0

# --- a full queue: grants succeed, events are dropped and counted
# 64 kB hold about 300 of these records; the sender is still stopped.
grants=600
seq 1 $grants | sed "s/.*/SELECT dlock.try_acquire('queue:full:&', '1 minute') IS NOT NULL;/" |
	timeout 120 psql -X -q -At >"$scratch/grants" 2>&1
check "with the queue full, every grant still succeeds ($(grep -c '^t$' "$scratch/grants") of $grants)" \
	test "$(grep -c '^t$' "$scratch/grants")" -eq $grants
dropped=$(sql "SELECT events_dropped FROM dlock.stats")
check "the events that did not fit are counted in dlock.stats.events_dropped ($dropped)" \
	test "${dropped:-0}" -gt 0 -a "${dropped:-0}" -lt $grants
check "the server log says that events were dropped" \
	grep -q "pg_dlock dropped [0-9]* lock events: the event queue is full" "$cluster_dir/server.log"

kill -CONT "$sender"
sender_resumed=$sender
sender=
event_barrier "$scratch/events"
received_suffixes queue:full: >"$scratch/full"
received=$(wc -l <"$scratch/full")
check "after the sender resumes, the 3 events queued while it was stopped arrive" \
	test "$(events_of "$scratch/events" '*' queue:stopped | wc -l)" -eq 3
check "and of the $grants grants, $received events arrive and $dropped were dropped" \
	test $((received + dropped)) -eq $grants
check "the grants whose events arrived are the first $received committed, in commit order" \
	test "$(tr '\n' ' ' <"$scratch/full")" = "$(seq 1 "$received" | tr '\n' ' ')"
exporter_query=$(sed -n '/^dlock_stats:/,/^  metrics:/p' docs/postgres_exporter.yaml | sed '1,2d;$d')
check "the postgres_exporter query of docs/postgres_exporter.yaml reads the event counters" \
	test "$(psql -X -q -At -F ' ' -c "SELECT events_dropped FROM ($exporter_query) q" 2>&1)" = "$dropped"
sent=$(sql "SELECT events_sent FROM dlock.stats")
check "dlock.stats.events_sent counts what the sender sent ($sent)" test "${sent:-0}" -ge $((received + 3))

# --- order per lock name: 4 clients take and release 2 names for 3 s
cat >"$scratch/order.sql" <<'SQL'
\set n random(1, 2)
SELECT dlock.try_acquire('queue:order:' || :n, '1 minute', ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid);
SELECT dlock.release('queue:order:' || :n, ('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid);
SQL
"$PG_BINDIR/pgbench" -n -c 4 -j 2 -T 3 -f "$scratch/order.sql" >"$scratch/pgbench.log" 2>&1
check "pgbench ran the lock traffic" grep -q "number of failed transactions: 0" "$scratch/pgbench.log"
event_barrier "$scratch/events"
order=$(python3 - "$scratch/events" <<'PY'
import json, sys
seen = {}
for line in open(sys.argv[1]):
    e = json.loads(line.split(" ", 1)[1])
    if e["lock_name"].startswith("queue:order:"):
        seen.setdefault(e["lock_name"], []).append((e["event"], e["fencing_token"]))
bad, pairs = 0, 0
for events in seen.values():
    last = 0
    for i, (event, token) in enumerate(events):
        if i % 2 == 0:
            bad += event != "acquire" or token <= last
            last = token
        else:
            bad += event != "release" or token != last
            pairs += 1
print(pairs, bad)
PY
)
check "per lock name, events arrive in commit order: acquire, release of that token, acquire of a higher one (${order% *} pairs, ${order#* } out of order)" \
	test "${order% *}" -gt 20 -a "${order#* }" -eq 0

# --- one transaction with more events than the queue holds: the events
# that fit arrive, in order, and only the rest are dropped (before, a
# transaction whose events did not fit in one record lost all of them)
dropped_before=$(sql "SELECT events_dropped FROM dlock.stats")
{
	echo "BEGIN;"
	seq 1 $grants | sed "s/.*/SELECT dlock.try_acquire('queue:big:&', '1 minute') IS NOT NULL;/"
	echo "COMMIT;"
} | psql -X -q -At -v ON_ERROR_STOP=1 >"$scratch/big" 2>&1
check "one transaction grants $grants leases" test "$(grep -c '^t$' "$scratch/big")" -eq $grants
event_barrier "$scratch/events"
received_suffixes queue:big: >"$scratch/big-received"
big_received=$(wc -l <"$scratch/big-received")
big_dropped=$(( $(sql "SELECT events_dropped FROM dlock.stats") - dropped_before ))
check "of its $grants events, $big_received arrive (some, not none) and $big_dropped are dropped" \
	test "$big_received" -gt 0 -a $((big_received + big_dropped)) -eq $grants
check "the events that arrive are the transaction's first $big_received, in order" \
	test "$(tr '\n' ' ' <"$scratch/big-received")" = "$(seq 1 "$big_received" | tr '\n' ' ')"

# --- the sender leaves when there is nothing to send
for _ in $(seq 1 100); do
	[ -z "$(sender_pid)" ] && break
	sleep 0.1
done
check "the event sender (pid $sender_resumed) leaves after a second without events" test -z "$(sender_pid)"

stop_listening "$scratch/events" $listener
finish
