# dlock run with lease policies (docs/lease-policies.md): --session-bound,
# --max-hold, --min-hold, --lock-delay.

# --- --session-bound: dlock killed with SIGKILL (no release) -> free at once --
name=$(unique session)
"$DLOCK" run --session-bound --ttl 60s "$name" -- sh -c "echo \$\$ >'$work/session.pid'; exec sleep 30" &
holder=$!
wait_for is_held "$name"
bound=$(q "SELECT session_bound FROM dlock.locks WHERE lock_name = '$name'")
check "run --session-bound: the lease is session-bound" $([ "$bound" = t ]; echo $?)
kill -KILL $holder
{ wait $holder; } 2>/dev/null
# the command (its own process group) is left running: end it
kill -TERM "$(cat "$work/session.pid")" 2>/dev/null
policy_state_is() { [ "$(q "SELECT policy_state FROM dlock.locks WHERE lock_name = '$1'")" = "$2" ]; }
wait_for policy_state_is "$name" "session ended"
check "run --session-bound: SIGKILL of dlock ends the lease at once (ttl was 60 s)" $?
"$DLOCK" run --no-wait "$name" -- true
expect_status "run --session-bound: the next run gets the lock at once" 0 $?

# control: the same without --session-bound stays held to its ttl
name=$(unique not-session)
"$DLOCK" run --ttl 60s "$name" -- sh -c "echo \$\$ >'$work/plain.pid'; exec sleep 30" &
holder=$!
wait_for is_held "$name"
kill -KILL $holder
{ wait $holder; } 2>/dev/null
kill -TERM "$(cat "$work/plain.pid")" 2>/dev/null
sleep 1
"$DLOCK" run --no-wait "$name" -- true 2>/dev/null
expect_status "control: without --session-bound the killed run's lease is still held (75)" 75 $?
q "SELECT dlock.force_release('$name', 'cli test cleanup')" >/dev/null

# --- --max-hold: renewals refused after it; the command is stopped, exit 124 --
name=$(unique max-hold)
"$DLOCK" run --ttl 1s --max-hold 1s --kill-after 1s "$name" -- sleep 30 2>"$work/max-hold.err"
expect_status "run --max-hold 1s: the lease ends, dlock exits 124" 124 $?
grep -q "max_hold" "$work/max-hold.err"
check "run --max-hold: says the lease reached its max_hold" $?

# --- --min-hold: a command that ends early keeps the lock from others ---------
name=$(unique min-hold)
"$DLOCK" run --min-hold 30s "$name" -- true
expect_status "run --min-hold: COMMAND's exit passes through" 0 $?
"$DLOCK" run --no-wait "$name" -- true 2>/dev/null
expect_status "run --min-hold 30s: another run right after is busy (75)" 75 $?
state=$(q "SELECT policy_state FROM dlock.locks WHERE lock_name = '$name'")
check "run --min-hold: dlock.locks says released, held until min_hold" $([ "$state" = "released, held until min_hold" ]; echo $?)

# --- --lock-delay reaches the server --------------------------------------------
name=$(unique lock-delay)
"$DLOCK" run --lock-delay 5s "$name" -- sh -c "psql -X -A -t -q -c \"SELECT lock_delay FROM dlock.locks WHERE lock_name = '$name'\" >'$work/delay.out'"
check "run --lock-delay 5s: the lease carries the delay" $([ "$(cat "$work/delay.out")" = "00:00:05" ]; echo $?)

# --- bad values are usage errors (64), refused before anything is acquired ----
"$DLOCK" run --max-hold 0s "$(unique bad)" -- true 2>/dev/null
expect_status "run --max-hold 0s: usage error" 64 $?
"$DLOCK" run --ttl 10s --max-hold 5s "$(unique bad)" -- true 2>"$work/bad.err"
status=$?
check "run --max-hold below --ttl: refused by the server (exit $status, not 0)" $([ $status -ne 0 ]; echo $?)
