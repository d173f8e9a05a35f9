# Shared by the suites that check lock events (channel dlock_events).
#
# Events are sent by the event sender after the deciding transaction has
# committed, so a test listens in a session of its own:
#
#   listen_events OUT &          # a psql session that LISTENs until OUT.stop exists
#   listener=$!
#   wait_listening OUT
#   ... grants, releases ...
#   event_barrier OUT            # every event committed so far has arrived
#   events_of OUT EVENT LOCK     # what arrived, one payload a line
#   stop_listening OUT $listener
#
# OUT receives one line per notification, "<bound> <payload>", as they
# arrive; <bound> is a server timestamp taken after the notification reached
# the session (psql prints a notification after the result of the query
# during which it read it, and the session runs a query every 50 ms).

# listen_events OUT [LIMIT]: listen until OUT.stop exists, at most LIMIT
# seconds (default 300). Run it in the background; it is listening once
# OUT.ready exists.
listen_events() {
	local out=$1 limit=${2:-300}
	rm -f "$out.stop" "$out.ready"
	: >"$out"
	{
		echo "LISTEN dlock_events;"
		echo "\\o $out.ready"
		echo "SELECT 1;"
		echo "\\o"
		local end=$((SECONDS + limit))
		while [ ! -e "$out.stop" ] && [ $SECONDS -lt $end ]; do
			echo "SELECT 'bound', extract(epoch FROM clock_timestamp());"
			sleep 0.05
		done
		# one more query: notifications read since the last one are printed
		echo "SELECT 'bound', extract(epoch FROM clock_timestamp());"
	} | psql -X -q -At 2>&1 | python3 -u -c '
import re, sys
pending = []
for line in sys.stdin:
    m = re.match(r"Asynchronous notification \"dlock_events\" with payload \"(.*)\" received from server process with PID \d+\.$", line.rstrip("\n"))
    if m:
        pending.append(m.group(1))
    elif line.startswith("bound|"):
        bound = line.split("|", 1)[1].strip()
        for p in pending:
            print(bound, p, flush=True)
        pending = []
' >>"$out"
}

# wait_listening OUT: until the listen_events writing OUT has subscribed
wait_listening() {
	for _ in $(seq 1 200); do
		[ -e "$1.ready" ] && return 0
		sleep 0.05
	done
	return 1
}

# stop_listening OUT PID: end the listen_events writing OUT (process PID)
stop_listening() {
	touch "$1.stop"
	wait "$2"
}

# events_of FILE EVENT LOCK: the payloads of EVENT for LOCK in FILE, one a
# line; EVENT "*" for every event
events_of() {
	python3 - "$@" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    bound, payload = line.rstrip("\n").split(" ", 1)
    e = json.loads(payload)
    if sys.argv[2] in ("*", e["event"]) and e["lock_name"] == sys.argv[3]:
        print(bound, json.dumps(e))
PY
}

# wait_for_event FILE EVENT LOCK [N]: until N (default 1) such events are in
# FILE, at most 60 s; false if they did not come
wait_for_event() {
	local n=${4:-1}
	for _ in $(seq 1 600); do
		[ "$(events_of "$1" "$2" "$3" | wc -l)" -ge "$n" ] && return 0
		sleep 0.1
	done
	return 1
}

# event_barrier FILE: grant and release a lock of its own and wait for its
# release event. The sender of a database sends in commit order, so every
# event committed before has arrived then. False if it did not come.
event_barrier() {
	local lock="events:barrier:$RANDOM$RANDOM"
	psql -X -q -At -v ON_ERROR_STOP=1 \
		-c "SELECT dlock.release('$lock', owner_token) FROM dlock.try_acquire('$lock', '1 minute')" >/dev/null &&
		wait_for_event "$1" release "$lock"
}
