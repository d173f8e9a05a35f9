# dlock acquire / renew / release / force-release / status, usage errors,
# connection errors, --help and --version.

# --- acquire / renew / release for shell scripts -------------------------------
name=$(unique script)
out=$("$DLOCK" acquire --ttl 1m "$name")
expect_status "acquire: exits 0" 0 $?
eval "$out"
check "acquire: prints DLOCK_OWNER_TOKEN and DLOCK_FENCING_TOKEN" \
	$([ -n "${DLOCK_OWNER_TOKEN:-}" ] && [ -n "${DLOCK_FENCING_TOKEN:-}" ]; echo $?)
check "acquire: the lease stays after the command exits" $([ "$(state_of "$name")" = held ]; echo $?)
"$DLOCK" acquire "$name" 2>/dev/null
expect_status "acquire: a held lock is busy (75)" 75 $?
start=$(now_ms)
"$DLOCK" acquire --wait 500ms "$name" 2>/dev/null
status=$?
elapsed=$(( $(now_ms) - start ))
expect_status "acquire --wait 500ms: wait runs out (75)" 75 $status
check "acquire --wait 500ms: waited for it (${elapsed} ms >= 500 ms)" $(( elapsed >= 500 ? 0 : 1 ))
"$DLOCK" renew "$name" --owner-token "$DLOCK_OWNER_TOKEN" --ttl 2m >/dev/null
expect_status "renew with the owner token: exits 0" 0 $?
left=$(q "SELECT extract(epoch FROM expires_in)::int FROM dlock.locks WHERE lock_name = '$name'")
check "renew: the lease now runs about 2 minutes ($left s)" $(( left > 100 ? 0 : 1 ))
out=$("$DLOCK" renew "$name" --owner-token "$DLOCK_OWNER_TOKEN" --json)
grep -q "\"owner_token\": \"$DLOCK_OWNER_TOKEN\", \"lease_until\": \"" <<<"$out"
check "renew --json: prints the lease" $?
"$DLOCK" renew "$name" --owner-token 00000000-0000-4000-8000-000000000000 2>/dev/null
expect_status "renew with another owner token: not held (1)" 1 $?
DLOCK_OWNER_TOKEN=$DLOCK_OWNER_TOKEN "$DLOCK" release "$name"
expect_status "release (owner token from the environment): exits 0" 0 $?
check "release: the lock is free" $([ "$(state_of "$name")" = free ]; echo $?)
"$DLOCK" release "$name" --owner-token "$DLOCK_OWNER_TOKEN" 2>/dev/null
expect_status "release again: not held (1)" 1 $?
out=$("$DLOCK" acquire --json "$name")
echo "$out" | grep -Eq '^\{"lock_name": "[^"]+", "fencing_token": [0-9]+, "owner_token": "[0-9a-f-]{36}", "lease_until": "[0-9T:.-]+Z"\}$'
check "acquire --json: prints the lease as JSON" $?
# names in JSON as the server writes them (escape_json: \b and \f too)
json_name=$'cli-json-\b\f\t"\\\x01-'"$$-$RANDOM"
out=$("$DLOCK" acquire --json "$json_name")
server=$(psql -X -A -t -q -v name="$json_name" <<<"SELECT to_json(:'name'::text);")
check "acquire --json: a name with control characters is quoted as the server quotes it ($server)" \
	$([[ $out == "{\"lock_name\": $server, "* ]]; echo $?)
unset DLOCK_OWNER_TOKEN DLOCK_FENCING_TOKEN DLOCK_LOCK_NAME DLOCK_LEASE_UNTIL

# --- force-release ----------------------------------------------------------------
name=$(unique force)
"$DLOCK" acquire "$name" >/dev/null
"$DLOCK" force-release "$name" --reason "cli test: stuck" >/dev/null
expect_status "force-release: exits 0" 0 $?
check "force-release: recorded in dlock.audit_log" \
	$([ "$(q "SELECT count(*) FROM dlock.audit_log WHERE lock_name = '$name' AND reason = 'cli test: stuck'")" -ge 1 ]; echo $?)
"$DLOCK" force-release "$name" --reason again 2>/dev/null
expect_status "force-release of a free lock: not held (1)" 1 $?
q "DO \$\$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_dlock_app') THEN CREATE ROLE regress_dlock_app LOGIN; END IF; END\$\$"
q "ALTER ROLE regress_dlock_app LOGIN"
q "GRANT USAGE ON SCHEMA dlock TO regress_dlock_app"
"$DLOCK" acquire "$name" >/dev/null
err=$("$DLOCK" --dsn "user=regress_dlock_app" force-release "$name" --reason nope 2>&1)
status=$?
expect_status "force-release without the grant: dlock failure (125)" 125 $status
grep -q "^dlock: permission denied" <<<"$err"
check "force-release without the grant: shows the server's message, not library text" $?

# --- usage errors (64) name the flag -----------------------------------------
"$DLOCK" run "$(unique u)" 2>"$work/u.err"
expect_status "usage: run without -- (64)" 64 $?
grep -q -- 'missing "--"' "$work/u.err"
check "usage: ... says the -- is missing" $?
"$DLOCK" run "$(unique u)" -- 2>"$work/u.err"
expect_status "usage: run without COMMAND (64)" 64 $?
"$DLOCK" run "" -- true 2>"$work/u.err"
expect_status "usage: empty name (64)" 64 $?
"$DLOCK" run "$(printf 'n%.0s' $(seq 1 201))" -- true 2>"$work/u.err"
expect_status "usage: name over 200 characters (64)" 64 $?
"$DLOCK" run "$(printf 'n%.0s' $(seq 1 200))" -- true
expect_status "usage: a name of 200 characters is fine" 0 $?
for bad in 10 5x 1.5s -3s 1d ""; do
	"$DLOCK" run --ttl "$bad" "$(unique u)" -- true 2>"$work/u.err"
	status=$?
	[ $status -eq 64 ] && grep -q -- "--ttl" "$work/u.err"
	check "usage: --ttl '$bad' is refused naming --ttl" $?
done
"$DLOCK" run --wait 1x "$(unique u)" -- true 2>"$work/u.err"
[ $? -eq 64 ] && grep -q -- "--wait" "$work/u.err"
check "usage: a bad --wait is refused naming --wait" $?
"$DLOCK" run --kill-after soon "$(unique u)" -- true 2>"$work/u.err"
[ $? -eq 64 ] && grep -q -- "--kill-after" "$work/u.err"
check "usage: a bad --kill-after is refused naming --kill-after" $?
"$DLOCK" run --wait 1s --no-wait "$(unique u)" -- true 2>/dev/null
expect_status "usage: --wait with --no-wait (64)" 64 $?
"$DLOCK" frobnicate 2>/dev/null
expect_status "usage: unknown command (64)" 64 $?
"$DLOCK" release "$(unique u)" --owner-token not-a-uuid 2>/dev/null
expect_status "usage: an owner token that is no UUID (64)" 64 $?
for good in 500ms 30s 5m 1h; do
	"$DLOCK" run --ttl "$good" "$(unique u)" -- true
	expect_status "usage: --ttl $good is accepted" 0 $?
done

# --- server errors ---------------------------------------------------------------
"$DLOCK" run --ttl 1000h "$(unique u)" -- true 2>"$work/u.err"
expect_status "server error: ttl above dlock.max_ttl is a dlock failure (125)" 125 $?
grep -q "^dlock: ttl exceeds dlock.max_ttl" "$work/u.err"
check "server error: shows the server's message" $?

# --- cannot connect (69) --------------------------------------------------------------
for cmd in "run $(unique c) -- true" "status" "acquire $(unique c)" "force-release x --reason y"; do
	# shellcheck disable=SC2086
	"$DLOCK" --dsn "host=127.0.0.1 port=1 connect_timeout=2" $cmd 2>/dev/null
	expect_status "cannot connect: $cmd (69)" 69 $?
done

# --- status: waiters, --sort waiters, --watch --------------------------------------------
# Waiters are counted from the wait queue in shared memory; without it (pg_dlock
# not preloaded, or the SQL edition) dlock.waiters is NULL and the column shows "-".
hot=$(unique hot)
cold=$(unique cold)
"$DLOCK" acquire "$hot" --ttl 1m >/dev/null
"$DLOCK" acquire "$cold" --ttl 1m >/dev/null
"$DLOCK" acquire "$hot" --ttl 1m --wait 20s >/dev/null 2>&1 &
waiter1=$!
"$DLOCK" acquire "$hot" --ttl 1m --wait 20s >/dev/null 2>&1 &
waiter2=$!
if [ "$(q "SELECT dlock.waiters('$hot') IS NOT NULL")" = t ]; then
	# both queue in the server, unless dlock detected a transaction pooler and
	# waits in the client (then nobody is queued: 0)
	two_waiting() { [ "$(q "SELECT dlock.waiters('$hot')")" = 2 ]; }
	wait_for two_waiting
	waiters_hot=$(q "SELECT dlock.waiters('$hot')")
	waiters_json=$waiters_hot waiters_cold=0
	[ -n "${DLOCK_TEST_POOLER:-}" ] || [ "$waiters_hot" = 2 ]
	check "status: two sessions wait for the lock in the server ($waiters_hot)" $?
else
	waiters_json=null waiters_hot=- waiters_cold=-
	sleep 0.5
fi
out=$("$DLOCK" status "$hot" --json)
grep -q "\"waiters\": $waiters_json," <<<"$out"
check "status --json: the sessions waiting for the lock ($waiters_json)" $?
out=$("$DLOCK" status --prefix cli- --sort waiters)
[ "$(awk 'NR == 1 { print $NF }' <<<"$out")" = WAITERS ] &&
	[ "$(awk -v h="$hot" '$1 == h { print $NF }' <<<"$out")" = "$waiters_hot" ] &&
	{ [ "$waiters_hot" = - ] || [ "$waiters_hot" = 0 ] || [ "$(awk 'NR == 2 { print $1 }' <<<"$out")" = "$hot" ]; }
check "status --sort waiters: a WAITERS column, the name most waited for first" $?
[ "$(awk -v c="$cold" '$1 == c { print $NF }' <<<"$out")" = "$waiters_cold" ]
check "status: a held name nobody waits for shows $waiters_cold waiters" $?
out=$(timeout 1.5 "$DLOCK" status --prefix "$hot" --watch 300ms)
[ "$(grep -c 'every 300ms: dlock status' <<<"$out")" -ge 2 ] && grep -q "^$hot " <<<"$out"
check "status --watch shows the table again and again until interrupted" $?
"$DLOCK" status --json --watch 1s >/dev/null 2>&1
expect_status "status: --json with --watch is a usage error (64)" 64 $?
kill "$waiter1" "$waiter2" 2>/dev/null
wait "$waiter1" "$waiter2" 2>/dev/null
q "SELECT dlock.force_release(n, 'cli test') FROM unnest(ARRAY['$hot', '$cold']) n" >/dev/null

# --- help and version ------------------------------------------------------------------
for cmd in "" run status acquire renew release force-release; do
	# shellcheck disable=SC2086
	out=$("$DLOCK" $cmd --help 2>&1)
	status=$?
	[ $status -eq 0 ] && grep -q "Example" <<<"$out"
	check "help: dlock $cmd --help exits 0 with examples" $?
done
grep -q "^  124 " <<<"$("$DLOCK" --help)"
check "help: documents the exit statuses" $?
grep -q "^dlock 1\." <<<"$("$DLOCK" --version)"
check "version: dlock --version" $?
