# Shared by the suites that check lock events (channel dlock_events).
#
# listen_events SECONDS OUT: a psql session that LISTENs for SECONDS and
# writes every notification it receives to OUT as "<bound> <payload>", where
# <bound> is a server timestamp taken after the notification reached the
# session (psql prints a notification after the result of the query during
# which it read it; each query reads the clock after a 50 ms sleep).
# Run it in the background; it is listening once OUT.ready exists.
listen_events() {
	local seconds=$1 out=$2 raw
	raw=$(mktemp)
	{
		echo "LISTEN dlock_events;"
		echo "\\o $out.ready"
		echo "SELECT 1;"
		echo "\\o"
		for _ in $(seq 1 $((seconds * 20))); do
			echo "SELECT pg_sleep(0.05), extract(epoch FROM clock_timestamp());"
		done
	} | psql -X -q -At >"$raw" 2>&1
	python3 - "$raw" >"$out" <<'PY'
import re, sys
bound = None
pending = []
for line in open(sys.argv[1]):
    m = re.match(r'Asynchronous notification "dlock_events" with payload "(.*)" received from server process with PID \d+\.$', line.rstrip("\n"))
    if m:
        pending.append(m.group(1))
    elif line.startswith("|"):
        bound = line[1:].strip()
        for p in pending:
            print(bound, p)
        pending = []
for p in pending:
    print(bound or "0", p)
PY
	rm -f "$raw"
}

# wait_listening OUT: until the listen_events writing OUT has subscribed
wait_listening() {
	for _ in $(seq 1 100); do
		[ -e "$1.ready" ] && return 0
		sleep 0.05
	done
	return 1
}

# events_of FILE EVENT LOCK: the payloads of EVENT for LOCK in FILE, one a line
events_of() {
	python3 - "$@" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    bound, payload = line.split(" ", 1)
    e = json.loads(payload)
    if e["event"] == sys.argv[2] and e["lock_name"] == sys.argv[3]:
        print(bound, json.dumps(e))
PY
}
