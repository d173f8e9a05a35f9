# dlock watch and dlock elect: events of the named locks only, JSON without
# owner tokens; one leader at a time, takeover after the leader dies, the
# command stopped on loss of leadership, --restart.
db_quoted=$(q "SELECT quote_ident(current_database())")
q "ALTER DATABASE $db_quoted SET dlock.events = on" >/dev/null

is_free() { [ "$(state_of "$1")" = free ]; }
lines_at_least() { [ "$(wc -l <"$1")" -ge "$2" ]; }
watchers_at_least() { [ "$(listening_watchers)" -ge "$1" ]; }
listening_watchers() { q "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%current_setting(''dlock.events''%'"; }

# --- watch: one line per event of the named lock, nothing for others -------
name=$(unique watch)
other=$(unique other)
"$DLOCK" watch "$name" >"$work/watch.out" 2>"$work/watch.err" &
watcher=$!
"$DLOCK" watch --json --count 2 "$name" >"$work/watch.json" 2>&1 &
json_watcher=$!
wait_for watchers_at_least 2
token=$(q "SELECT fencing_token FROM dlock.try_acquire('$name', '1 minute', '00000000-0000-0000-0000-00000000abcd', 'cli watcher')")
q "SELECT dlock.try_acquire('$other', '1 minute')" >/dev/null
q "SELECT dlock.release('$name', '00000000-0000-0000-0000-00000000abcd')" >/dev/null
wait_for lines_at_least "$work/watch.out" 2
sleep 0.3
kill $watcher; wait $watcher 2>/dev/null
mapfile -t lines <"$work/watch.out"
check "watch: two lines, acquire then release (${lines[*]})" \
	$([ ${#lines[@]} -eq 2 ] && [[ ${lines[0]} == "acquire $name token=$token holder='cli watcher' lease_until="* ]] &&
		[[ ${lines[1]} == "release $name token=$token holder='cli watcher' lease_until="* ]]; echo $?)
check "watch: nothing about other locks" $(! grep -q "$other" "$work/watch.out"; echo $?)
timeout 5 tail --pid=$json_watcher -f /dev/null
kill $json_watcher 2>/dev/null # still running after 5 s: the check below fails, nothing hangs
wait $json_watcher
expect_status "watch --count 2: exits 0 after two events" 0 $?
check "watch --json: two JSON payloads of the lock, no owner token" \
	$(python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
events = [json.loads(l) for l in lines]
ok = [e["event"] for e in events] == ["acquire", "release"] and all(e["lock_name"] == sys.argv[2] for e in events)
sys.exit(0 if ok and "abcd" not in open(sys.argv[1]).read() else 1)' "$work/watch.json" "$name"; echo $?)

q "ALTER DATABASE $db_quoted RESET dlock.events" >/dev/null
"$DLOCK" watch --count 1 "$name" >/dev/null 2>"$work/watch-off.err" &
off_watcher=$!
wait_for test -s "$work/watch-off.err"
kill $off_watcher; wait $off_watcher 2>/dev/null
check "watch: warns when dlock.events is off" $(grep -q "dlock.events is off" "$work/watch-off.err"; echo $?)
q "ALTER DATABASE $db_quoted SET dlock.events = on" >/dev/null

"$DLOCK" watch "" >/dev/null 2>&1
expect_status "watch: an empty name is a usage error" 64 $?

# --- elect: one leader; the other takes over when the leader dies ----------
name=$(unique elect)
: >"$work/elect.out"
body='echo "$$ $DLOCK_FENCING_TOKEN" >>'"'$work/elect.out'"'; exec sleep 60'
"$DLOCK" elect --ttl 2s --holder a "$name" -- sh -c "$body" 2>"$work/elect-a.err" &
elect_a=$!
wait_for test -s "$work/elect.out"
"$DLOCK" elect --ttl 2s --holder b "$name" -- sh -c "$body" 2>"$work/elect-b.err" &
elect_b=$!
sleep 1
check "elect x2: one leader runs COMMAND ($(wc -l <"$work/elect.out") started)" \
	$([ "$(wc -l <"$work/elect.out")" -eq 1 ]; echo $?)
read -r first_pid first_token <"$work/elect.out"
# the leader's host dies: dlock and its command vanish without releasing
leader_pgid=$(ps -o pgid= -p "$first_pid" | tr -d ' ')
kill -KILL $elect_a
kill -KILL -- "-$leader_pgid"
wait $elect_a 2>/dev/null
start=$(now_ms)
wait_for lines_at_least "$work/elect.out" 2
took=$(( $(now_ms) - start ))
read -r second_pid second_token < <(sed -n 2p "$work/elect.out")
check "elect: the other candidate leads within ttl + 1.5 s after the leader died (${took} ms)" \
	$([ "$took" -le 3500 ]; echo $?)
check "elect: the new leader has a higher token ($first_token < ${second_token:-none})" \
	$([ "${second_token:-0}" -gt "$first_token" ]; echo $?)
check "elect: dlock.locks shows the new leader's holder" \
	$([ "$(q "SELECT holder FROM dlock.leader('$name')")" = b ]; echo $?)

# --- loss of leadership stops COMMAND; dlock campaigns again ----------------
"$DLOCK" force-release "$name" --reason "cli election test" >/dev/null
wait_for lines_at_least "$work/elect.out" 3
check "elect: after losing leadership COMMAND was terminated" \
	$(wait_for sh -c "! kill -0 $second_pid 2>/dev/null"; echo $?)
check "elect: and dlock campaigned again and leads with a new token" \
	$(read -r _ third_token < <(sed -n 3p "$work/elect.out"); [ "${third_token:-0}" -gt "$second_token" ]; echo $?)
check "elect: it said so on stderr" $(grep -q "leadership of $name lost; campaigning again" "$work/elect-b.err"; echo $?)
kill -TERM $elect_b
wait $elect_b
status=$?
check "elect: SIGTERM while leading stops dlock and COMMAND (exit $status)" $([ "$status" -eq 143 ]; echo $?)
check "elect: the lease is released on exit" $(wait_for is_free "$name"; echo $?)

# --- when COMMAND exits by itself: --restart lost (default) and always -----
name=$(unique restart)
"$DLOCK" elect "$name" -- sh -c 'exit 3'
expect_status "elect: COMMAND's exit status ends dlock by default" 3 $?
: >"$work/restart.out"
"$DLOCK" elect --restart always --restart-delay 100ms "$name" -- sh -c "echo run >>'$work/restart.out'" 2>/dev/null &
restarting=$!
wait_for lines_at_least "$work/restart.out" 3
runs=$(wc -l <"$work/restart.out")
check "elect --restart always: COMMAND runs again after it exits, after --restart-delay ($runs runs)" \
	$([ "$runs" -ge 3 ] && [ "$runs" -le 20 ]; echo $?)
kill -TERM $restarting
wait $restarting 2>/dev/null
check "elect --restart always: SIGTERM while campaigning ends dlock" $(! kill -0 $restarting 2>/dev/null; echo $?)

"$DLOCK" elect "$name" 2>/dev/null
expect_status "elect: missing -- COMMAND is a usage error" 64 $?
q "ALTER DATABASE $db_quoted RESET dlock.events" >/dev/null
