# dlock run: mutual exclusion, serialization with --wait, lost lease kills the
# command, exit statuses, environment, signal forwarding, status while running.

# --- two --no-wait runs started together: exactly one runs COMMAND ----------
name=$(unique nowait)
: >"$work/nowait.out"
"$DLOCK" run --no-wait "$name" -- sh -c "echo ran >>'$work/nowait.out'; sleep 1" 2>"$work/nowait1.err" &
p1=$!
"$DLOCK" run --no-wait "$name" -- sh -c "echo ran >>'$work/nowait.out'; sleep 1" 2>"$work/nowait2.err" &
p2=$!
wait $p1; c1=$?
wait $p2; c2=$?
ran=$(wc -l <"$work/nowait.out")
check "run --no-wait x2: COMMAND ran exactly once (ran $ran times)" $(( ran == 1 ? 0 : 1 ))
codes=$(printf '%s\n' $c1 $c2 | sort -n | tr '\n' ' ')
check "run --no-wait x2: exit statuses are 0 and 75 (got $codes)" $([ "$codes" = "0 75 " ]; echo $?)
check "run: lease released after COMMAND exits" $([ "$(state_of "$name")" = free ]; echo $?)

# -E changes the busy status, as flock -E
name=$(unique conflict)
"$DLOCK" run "$name" -- sleep 2 &
holder=$!
wait_for is_held "$name"
"$DLOCK" run -E 3 "$name" -- true 2>/dev/null
expect_status "run -E 3: busy exits 3" 3 $?
kill -TERM $holder; wait $holder 2>/dev/null

# --- --wait: two runs serialize, the second gets a higher token ------------
name=$(unique wait)
: >"$work/wait.out"
body='echo "start $DLOCK_FENCING_TOKEN" >>'"'$work/wait.out'"'; sleep 0.7; echo "end $DLOCK_FENCING_TOKEN" >>'"'$work/wait.out'"
"$DLOCK" run --wait 20s "$name" -- sh -c "$body" &
p1=$!
"$DLOCK" run --wait 20s "$name" -- sh -c "$body" &
p2=$!
wait $p1; c1=$?
wait $p2; c2=$?
check "run --wait x2: both ran (exit $c1, $c2)" $(( c1 == 0 && c2 == 0 ? 0 : 1 ))
mapfile -t lines <"$work/wait.out"
t1=${lines[0]#start }
serial=1
[ ${#lines[@]} -eq 4 ] && [ "${lines[0]}" = "start $t1" ] && [ "${lines[1]}" = "end $t1" ] &&
	[ "${lines[2]%% *}" = start ] && [ "${lines[3]}" = "end ${lines[2]#start }" ] && serial=0
check "run --wait x2: the runs did not overlap (${lines[*]})" $serial
t2=${lines[2]#start }
check "run --wait x2: the second got a higher fencing token ($t1 < $t2)" $([ "${t2:-0}" -gt "${t1:-0}" ] 2>/dev/null; echo $?)

# --- a lease forced away kills COMMAND within renewal interval + grace ------
# ttl 3s -> renewal every 1s; --kill-after 1s. COMMAND ignores SIGTERM, so it
# takes the SIGKILL.
name=$(unique lost)
# (The lock name in COMMAND's text tells this run's process from another run's.)
"$DLOCK" run --ttl 3s --kill-after 1s "$name" -- sh -c 'trap "" TERM; while :; do sleep 0.1; done # '"$name" \
	2>"$work/lost.err" &
runner=$!
wait_for is_held "$name"
start=$(now_ms)
"$DLOCK" force-release "$name" --reason "cli test" >/dev/null
expect_status "force-release of a running lease exits 0" 0 $?
wait $runner
status=$?
elapsed=$(( $(now_ms) - start ))
expect_status "run: lost lease exits 124" 124 $status
# renewal interval (1 s) + grace (1 s) + 1.5 s for scheduling on a busy machine
check "run: COMMAND was killed within renewal + grace (${elapsed} ms <= 3500 ms)" $(( elapsed <= 3500 ? 0 : 1 ))
grep -q "lost" "$work/lost.err"
check "run: says the lease was lost" $?
check "run: the killed command left nothing behind" \
	$(pgrep -f "done # $name" >/dev/null && echo 1 || echo 0)

# A command that exits on SIGTERM goes at once.
name=$(unique lost-term)
"$DLOCK" run --ttl 3s --kill-after 10s "$name" -- sleep 60 2>/dev/null &
runner=$!
wait_for is_held "$name"
start=$(now_ms)
"$DLOCK" force-release "$name" --reason "cli test" >/dev/null
wait $runner
status=$?
elapsed=$(( $(now_ms) - start ))
expect_status "run: lost lease, COMMAND ends on SIGTERM: exits 124" 124 $status
check "run: ... before the grace period (${elapsed} ms < 10000 ms)" $(( elapsed < 10000 ? 0 : 1 ))

# --- exit statuses pass through ----------------------------------------------
"$DLOCK" run "$(unique exit)" -- sh -c 'exit 7'
expect_status "run: COMMAND's exit 7 passes through" 7 $?
"$DLOCK" run "$(unique exit)" -- true
expect_status "run: COMMAND's exit 0 passes through" 0 $?
"$DLOCK" run "$(unique exit)" -- sh -c 'kill -TERM $$'
expect_status "run: COMMAND killed by SIGTERM gives 143" 143 $?
"$DLOCK" run "$(unique exit)" -- /nonexistent/command 2>/dev/null
expect_status "run: COMMAND not found gives 127" 127 $?
printf 'x' >"$work/not-executable"
chmod -x "$work/not-executable"
"$DLOCK" run "$(unique exit)" -- "$work/not-executable" 2>/dev/null
expect_status "run: COMMAND not executable gives 126" 126 $?

# --- environment --------------------------------------------------------------
name=$(unique env)
out=$("$DLOCK" run "$name" -- sh -c 'echo "$DLOCK_LOCK_NAME|$DLOCK_FENCING_TOKEN|$DLOCK_OWNER_TOKEN"')
IFS='|' read -r env_name env_token env_owner <<<"$out"
check "run: DLOCK_LOCK_NAME is the lock name" $([ "$env_name" = "$name" ]; echo $?)
check "run: DLOCK_FENCING_TOKEN is the lease's token" \
	$([ "$env_token" = "$(q "SELECT fencing_token FROM dlock.locks WHERE lock_name = '$name'")" ]; echo $?)
check "run: DLOCK_OWNER_TOKEN is a UUID" \
	$([[ $env_owner =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]]; echo $?)

# --- signals sent to dlock reach COMMAND -----------------------------------
name=$(unique signal)
rm -f "$work/signal.out"
"$DLOCK" run "$name" -- sh -c "trap 'echo got-term >\"$work/signal.out\"; exit 0' TERM; while :; do sleep 0.1; done" &
runner=$!
wait_for is_held "$name"
sleep 0.3
kill -TERM $runner
wait $runner
status=$?
check "run: SIGTERM to dlock is forwarded to COMMAND" $(grep -q got-term "$work/signal.out" 2>/dev/null; echo $?)
expect_status "run: ... and dlock exits with COMMAND's status" 0 $status
check "run: ... and the lease is released" $([ "$(state_of "$name")" = free ]; echo $?)

# --- status shows the holder while a run is active -------------------------
name=$(unique status)
"$DLOCK" run --holder "cli-test-holder" "$name" -- sleep 3 &
runner=$!
wait_for is_held "$name"
out=$("$DLOCK" status "$name")
grep -q "cli-test-holder" <<<"$out" && grep -q " held " <<<"$out"
check "status: shows the holder of an active run" $?
grep -q "^NAME  *STATE  *HOLDER  *TOKEN  *HELD FOR  *EXPIRES IN" <<<"${out%%$'\n'*}"
check "status: has a header of aligned columns" $?
out=$("$DLOCK" status --prefix "${name%-*}" --json)
grep -q "\"lock_name\": \"$name\", \"state\": \"held\", \"holder\": \"cli-test-holder\"" <<<"$out"
check "status --prefix --json: lists the active run" $?
out=$("$DLOCK" status)
grep -q "^$name " <<<"$out"
check "status: the default table lists the active run" $?
kill -TERM $runner
wait $runner 2>/dev/null

# --- SIGTERM while waiting for the lock ends dlock; the server drops the wait -
# (SIGTERM: background jobs of a script ignore SIGINT.)
name=$(unique interrupt)
eval "$("$DLOCK" acquire --ttl 1m "$name")"
"$DLOCK" run --wait 30s "$name" -- true 2>/dev/null &
runner=$!
waiting() { [ -n "$(q "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%dlock.acquire%' AND query NOT LIKE '%pg_stat_activity%'")" ]; }
wait_for waiting
kill -TERM $runner
wait $runner
expect_status "run --wait: SIGTERM while waiting ends dlock (143)" 143 $?
gone() { ! waiting; }
wait_for gone
check "run --wait: the server dropped the wait of the interrupted dlock" $?
"$DLOCK" release "$name" --owner-token "$DLOCK_OWNER_TOKEN"
sleep 0.3
check "run --wait: nobody took the lock for the interrupted dlock" $([ "$(state_of "$name")" = free ]; echo $?)
unset DLOCK_OWNER_TOKEN DLOCK_FENCING_TOKEN DLOCK_LOCK_NAME DLOCK_LEASE_UNTIL

# --- a lease granted after a wait longer than its ttl is not born lost
name=$(unique born-lost)
"$DLOCK" run "$name" -- sleep 3 &
holder=$!
wait_for is_held "$name"
out=$("$DLOCK" run --wait 20s --ttl 2s "$name" -- sh -c 'sleep 1; echo finished' 2>"$work/born-lost.err")
status=$?
wait $holder
expect_status "run --wait 20s --ttl 2s after a 3 s wait: COMMAND runs to its end" 0 $status
check "run --wait 20s --ttl 2s after a 3 s wait: COMMAND was not killed ($(cat "$work/born-lost.err"))" \
	$([ "$out" = finished ]; echo $?)

# --- five --no-wait runs at once: one runs, four are busy -----------------------
name=$(unique five)
: >"$work/five.out"
pids=()
for i in 1 2 3 4 5; do
	"$DLOCK" run --no-wait "$name" -- sh -c "echo ran >>'$work/five.out'; sleep 1.5" 2>/dev/null &
	pids+=($!)
done
codes=()
for p in "${pids[@]}"; do
	wait "$p"
	codes+=($?)
done
codes=$(printf '%s\n' "${codes[@]}" | sort -n | tr '\n' ' ')
check "run --no-wait x5: exit statuses are one 0 and four 75 (got $codes)" $([ "$codes" = "0 75 75 75 75 " ]; echo $?)
check "run --no-wait x5: COMMAND ran once" $([ "$(wc -l <"$work/five.out")" -eq 1 ]; echo $?)

# ...and one after another, each run gets the lock (no statement left behind).
ok=0
for i in 1 2 3 4 5 6; do "$DLOCK" run --no-wait "$name" -- true || ok=1; done
check "run --no-wait six times in a row: each exits 0" $ok

# --- the client-side wait (--wait-mode poll) ----------------------------------
name=$(unique poll)
"$DLOCK" run "$name" -- sleep 1 &
holder=$!
wait_for is_held "$name"
"$DLOCK" run --wait-mode poll --wait 10s "$name" -- true
expect_status "run --wait-mode poll --wait 10s: gets the lock once the holder is done" 0 $?
wait $holder
"$DLOCK" run --wait-mode bogus "$name" -- true 2>"$work/wait-mode-bogus.err"
expect_status "run --wait-mode bogus: usage error" 64 $?
grep -q -- '--wait-mode: invalid value "bogus" (use auto, server or poll)' "$work/wait-mode-bogus.err"
check "run --wait-mode bogus: the message names the three modes" $?

# The default --wait-mode (auto): a --wait waits in the server (first come,
# first served) on a direct connection, and in the client behind a transaction
# pooler (45-pgbouncer), where no server process waits in dlock.acquire. Also
# --pooling transaction on a direct connection makes auto poll, and
# --wait-mode server waits in the server whatever the pooling.
# waiting_in_server NAME: a server process waits in dlock.acquire for NAME
# (prepared on a direct connection: then its placeholders, not NAME, show).
waiting_in_server() {
	[ -n "$(q "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND wait_event_type = 'Extension'
		AND query LIKE '%dlock.acquire(%' AND (strpos(query, '$1') > 0 OR query LIKE '%dlock.acquire(\$1%')")" ]
}
auto_in_server=yes
[ -n "${DLOCK_TEST_POOLER:-}" ] && auto_in_server=no
for wait_case in ":$auto_in_server" "--wait-mode auto --pooling transaction:no" \
	"--wait-mode server --pooling transaction:yes"; do
	args=${wait_case%%:*}
	expected=${wait_case##*:}
	label=${args:-(no --wait-mode)}
	name=$(unique wait-mode)
	"$DLOCK" run "$name" -- sleep 10 &
	holder=$!
	wait_for is_held "$name"
	# shellcheck disable=SC2086 # args is a list of options
	"$DLOCK" $args run --wait 20s "$name" -- true &
	waiter=$!
	seen=no
	for i in $(seq 1 30); do # 1.5 s, more than the first poll interval
		if waiting_in_server "$name"; then
			seen=yes
			break
		fi
		sleep 0.05
	done
	check "run $label --wait: waits in the server: $expected (saw: $seen)" \
		$([ "$seen" = "$expected" ]; echo $?)
	kill -TERM "$holder"
	wait "$holder"
	wait "$waiter"
	expect_status "run $label --wait: gets the lock once the holder is gone" 0 $?
done
"$DLOCK" run --timeout 5 "$name" -- true 2>/dev/null
expect_status "run --timeout 5 (no unit): usage error" 64 $?

# --- --pooling: how dlock sends its calls (docs/client.md, "Connection modes") 
# COMMAND reads the last statement of dlock's own connection (found by its
# application_name): with none the prepared acquire, placeholders and all;
# with transaction the self-contained call that sets its own timeout first.
# Through a pooler (45-pgbouncer) the server sees the pooler's
# application_name, and none does not apply: the option's parsing only.
modes="none transaction"
[ -n "${DLOCK_TEST_POOLER:-}" ] && modes=
for mode in $modes; do
	name=$(unique "pooling-$mode")
	app="cli-pooling-$mode-$$"
	PGAPPNAME=$app "$DLOCK" --pooling "$mode" run "$name" -- psql -X -A -t -q -c \
		"SELECT query FROM pg_stat_activity WHERE application_name = '$app' AND pid <> pg_backend_pid() AND query LIKE '%dlock.try_acquire(%'" \
		>"$work/pooling-$mode.out" 2>&1
	expect_status "run --pooling $mode: runs COMMAND under the lease" 0 $?
	case $mode in
	none) pattern='^SELECT l\.lock_name, .*FROM dlock\.try_acquire\(\$1, ' ;;
	transaction) pattern="^SELECT pg_catalog\.set_config\('statement_timeout', .*dlock\.try_acquire\('$name', " ;;
	esac
	grep -Eq "$pattern" "$work/pooling-$mode.out"
	ok=$?
	check "run --pooling $mode: the acquire went as the mode says" $ok
	[ $ok -eq 0 ] || cat "$work/pooling-$mode.out"
done
"$DLOCK" --pooling bogus status 2>"$work/pooling-bogus.err"
expect_status "--pooling bogus: usage error" 64 $?
grep -q -- '--pooling: invalid value "bogus"' "$work/pooling-bogus.err"
check "--pooling bogus: the message names the option and the value" $?

# --- --durability: how the server commits dlock's calls (docs/client.md, "Durability")
# A trigger records dlock.durability as each transaction that grants or ends a
# lease of a cli-durability-* name saw it: with --durability fenced the grant
# and the release of `run --shared` are fenced, without it neither is, in both
# ways of sending (the session settings of a direct connection, the
# self-contained calls of a pooler). The C extension writes lease rows without
# the executor (no row triggers fire), so the trigger is on dlock.audit_log,
# written in the lease's own transaction at dlock.audit = all (set for the
# database meanwhile; behind a pooler, its idle server sessions are ended so
# that new ones read it). Against the SQL edition (41-sql-edition-client)
# fenced is refused: 125 with a message, and COMMAND does not run; its
# trigger is on dlock.lock_holder, which it writes with ordinary UPDATEs.
sql_edition=$(q "SELECT 1 FROM pg_extension WHERE extname = 'pg_dlock_sql'")
# the server itself, not a pooler's session
admin_q() { psql -X -A -t -q ${DLOCK_ADMIN_DSN:+-d "$DLOCK_ADMIN_DSN"} -c "$1"; }
idle_others="FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
	AND backend_type = 'client backend' AND state = 'idle'"
no_idle_others() { [ -z "$(admin_q "SELECT 1 $idle_others")" ]; }
fresh_pooled_sessions() {
	[ -n "${DLOCK_TEST_POOLER:-}" ] || return 0
	admin_q "SELECT pg_terminate_backend(pid) $idle_others" >/dev/null
	wait_for no_idle_others
	sleep 0.2 # the pooler reads each closed connection's end
}
if [ -n "$sql_edition" ]; then
	observed=dlock.lock_holder
else
	observed=dlock.audit_log
fi
q "SET client_min_messages = warning; CREATE TABLE IF NOT EXISTS public.cli_durability_seen (lock_name text NOT NULL, durability text NOT NULL)" >/dev/null
q "SET client_min_messages = warning; CREATE OR REPLACE FUNCTION public.cli_durability_seen() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog AS \$\$BEGIN
		IF starts_with(NEW.lock_name, 'cli-durability-') THEN
			INSERT INTO public.cli_durability_seen VALUES (NEW.lock_name, coalesce(current_setting('dlock.durability', true), ''));
		END IF;
		RETURN NULL;
	END\$\$; DROP TRIGGER IF EXISTS cli_durability_seen ON $observed;
	CREATE TRIGGER cli_durability_seen AFTER INSERT OR UPDATE ON $observed
		FOR EACH ROW EXECUTE FUNCTION public.cli_durability_seen()" >/dev/null
if [ -z "$sql_edition" ]; then
	admin_q "ALTER DATABASE \"$(q "SELECT current_database()")\" SET dlock.audit = 'all'" >/dev/null
	fresh_pooled_sessions
fi
seen_durability() { q "SELECT count(*) || ' ' || coalesce(string_agg(DISTINCT durability, ','), '') FROM public.cli_durability_seen WHERE lock_name = '$1'"; }
for args in "" "--pooling transaction"; do
	label=${args:-(default pooling)}
	name=$(unique durability)
	# shellcheck disable=SC2086 # args is a list of options
	"$DLOCK" $args run --shared --durability fenced "$name" -- touch "$work/durability-ran" 2>"$work/durability.err"
	status=$?
	if [ -n "$sql_edition" ]; then
		expect_status "run $label --durability fenced: refused by the SQL edition (125)" 125 $status
		grep -q "cannot grant fenced leases" "$work/durability.err"
		check "run $label --durability fenced: ... says the server cannot grant fenced leases" $?
		check "run $label --durability fenced: ... and COMMAND did not run" $([ ! -e "$work/durability-ran" ]; echo $?)
	else
		expect_status "run $label --shared --durability fenced: runs COMMAND under the lease" 0 $status
		seen=$(seen_durability "$name")
		check "run $label --durability fenced: the grant and the release ran fenced (seen: $seen)" \
			$([ "${seen#* }" = fenced ] && [ "${seen%% *}" -ge 2 ]; echo $?)
	fi
	rm -f "$work/durability-ran"
	name=$(unique durability)
	# shellcheck disable=SC2086
	"$DLOCK" $args run --shared "$name" -- true
	expect_status "run $label --shared (no --durability): runs COMMAND under the lease" 0 $?
	seen=$(seen_durability "$name")
	check "run $label (no --durability): nothing ran fenced (seen: $seen)" \
		$([ "${seen%% *}" -ge 2 ] && [[ ",${seen#* }," != *,fenced,* ]]; echo $?)
done
q "DROP TRIGGER cli_durability_seen ON $observed" >/dev/null
if [ -z "$sql_edition" ]; then
	admin_q "ALTER DATABASE \"$(q "SELECT current_database()")\" RESET dlock.audit" >/dev/null
	fresh_pooled_sessions
fi
# The other commands that take, renew and end leases take it too.
name=$(unique durability)
out=$("$DLOCK" --durability fenced acquire --ttl 30s "$name" 2>"$work/durability.err")
status=$?
if [ -n "$sql_edition" ]; then
	expect_status "acquire --durability fenced: refused by the SQL edition (125)" 125 $status
	check "acquire --durability fenced: ... nothing held" $([ "$(state_of "$name")" = free ]; echo $?)
else
	expect_status "acquire --durability fenced: granted" 0 $status
	owner=$(sed -n 's/^DLOCK_OWNER_TOKEN=//p' <<<"$out")
	"$DLOCK" renew --durability fenced "$name" --owner-token "$owner" >/dev/null
	expect_status "renew --durability fenced: renewed" 0 $?
	"$DLOCK" release "$name" --owner-token "$owner" --durability fenced
	expect_status "release --durability fenced: released" 0 $?
fi
"$DLOCK" run --durability bogus "$name" -- true 2>"$work/durability-bogus.err"
expect_status "run --durability bogus: usage error" 64 $?
grep -q -- '--durability: invalid value "bogus" (use durable or fenced)' "$work/durability-bogus.err"
check "run --durability bogus: the message names the option and the two values" $?

# --- a release that fails is visible -----------------------------------------
# COMMAND leaves behind a session that holds the lease row locked for 3 s, so
# the release runs into its 1 s statement timeout: dlock must not exit 0.
name=$(unique release-fails)
"$DLOCK" --timeout 1s run "$name" -- sh -c "psql -X -q -c \"SELECT 1 FROM dlock.distributed_lock WHERE lock_name = '$name' FOR UPDATE; SELECT pg_sleep(3)\" >/dev/null & sleep 0.5" \
	2>"$work/release-fails.err"
status=$?
expect_status "run: COMMAND succeeded but the release timed out: exits 125" 125 $status
grep -q "release of $name was not confirmed" "$work/release-fails.err"
check "run: ... and says the release was not confirmed" $?
check "run: ... the lease is indeed still held" $([ "$(state_of "$name")" = held ]; echo $?)
sleep 3

# --- lock kinds from the command line -----------------------------------------
name=$(unique kinds-shared)
out=$("$DLOCK" run --shared "$name" -- sh -c "\"$DLOCK\" run --shared \"$name\" -- true; echo reader=\$?; \"$DLOCK\" run \"$name\" -- true; echo writer=\$?" 2>/dev/null)
check "run --shared: a second reader runs alongside ($out)" $(grep -qx reader=0 <<<"$out"; echo $?)
check "run --shared: a writer is busy while a reader runs ($out)" $(grep -qx writer=75 <<<"$out"; echo $?)
check "run --shared: released after COMMAND exits" $([ "$(state_of "$name")" = free ]; echo $?)
name=$(unique kinds-permits)
out=$("$DLOCK" run --permits 2 "$name" -- sh -c "\"$DLOCK\" run --permits 2 \"$name\" -- sh -c '\"$DLOCK\" run --permits 2 \"$name\" -- true; echo third=\$?'; echo second=\$?" 2>/dev/null)
check "run --permits 2: the second permit runs ($out)" $(grep -qx second=0 <<<"$out"; echo $?)
check "run --permits 2: the third is busy ($out)" $(grep -qx third=75 <<<"$out"; echo $?)
a=$(unique kinds-item-a)
b=$(unique kinds-item-b)
out=$("$DLOCK" run "$b" "$a" -- sh -c 'echo "$DLOCK_LOCK_NAME;$DLOCK_FENCING_TOKEN"' 2>/dev/null)
sorted=$(printf '%s\n%s\n' "$a" "$b" | LC_ALL=C sort | paste -sd,)
check "run NAME NAME: both names, in name order, a token each ($out)" \
	$([[ $out == "$sorted;"* ]] && [[ ${out#*;} =~ ^[0-9]+,[0-9]+$ ]]; echo $?)
out=$("$DLOCK" run "$a" -- sh -c "\"$DLOCK\" run \"$b\" \"$a\" -- true; echo set=\$?; \"$DLOCK\" status --json \"$b\"" 2>/dev/null)
check "run NAME NAME: busy when one name is held ($out)" $(grep -qx set=75 <<<"$out"; echo $?)
check "run NAME NAME: ... and took neither" $([ "$(state_of "$b")" = free ]; echo $?)
"$DLOCK" run --shared "$a" "$b" -- true 2>/dev/null
expect_status "run --shared with several names: usage error" 64 $?
name=$(unique kinds-status)
out=$("$DLOCK" run --shared "$name" -- "$DLOCK" status "$name" 2>/dev/null)
check "status: shows the kind and the number of holders ($out)" $(grep -qE "^$name +held .* shared +1 +[0-]$" <<<"$out"; echo $?)
