#!/usr/bin/env bash
# A lease handed over by a release is never lost silently (docs/fencing.md,
# "Handoff to the longest waiter"). The release grants the lease to the head waiter just before
# its commit; the waiter returns it once that commit is durable. Here the
# waiter goes away in between: a server of its own stalls the release's
# commit in the wait for a synchronous standby that does not exist (after
# the grant was written and flushed locally, before the commit is
# complete), and the waiter is then cancelled or terminated, or its wait runs
# out (it waits for a stalled commit no longer than its own wait). When the commit completes, the lease
# stands in the row for an owner nobody has; the next try_acquire must get
# the lock at once, as if it had been released, and not wait for expiry.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
. "$DLOCK_ROOT/tests/lib/ports.sh"

scratch=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/handoff.XXXXXX")
chmod 755 "$scratch"
port=$(free_ports)
if ! "$DLOCK_ROOT/scripts/pg-cluster.sh" start "$scratch/pg" "$port" >/dev/null ||
	! PGPORT=$port PGDATABASE=postgres psql -X -q -c 'CREATE EXTENSION pg_dlock'; then
	check "a server of its own starts" false
	"$DLOCK_ROOT/scripts/pg-cluster.sh" destroy "$scratch/pg"
	finish
	exit
fi
export PGPORT=$port PGDATABASE=postgres
. "$DLOCK_ROOT/tests/lib/sql_await.sh"

holder=00000000-0000-0000-0000-0000000000a1
waiter=00000000-0000-0000-0000-0000000000a2
newcomer=00000000-0000-0000-0000-0000000000a3


# wait for background job $1 at most $2 seconds; false if it is still running
wait_bounded() {
	for _ in $(seq 1 $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || { wait "$1"; return 0; }
		sleep 0.1
	done
	return 1
}

stall_commits() {
	sql "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" && sql "SELECT pg_reload_conf()" >/dev/null
}
resume_commits() {
	sql "ALTER SYSTEM RESET synchronous_standby_names" && sql "SELECT pg_reload_conf()" >/dev/null
}

# scenario NAME pg_cancel_backend|pg_terminate_backend|timeout: the waiter is
# cancelled or terminated, or (timeout) its wait of 2 s runs out, while the
# release's commit is stalled
scenario() {
	local name=handoff:$1 stop=$2 wait='1 minute' waiter_pid release_pid
	[ "$stop" = timeout ] && wait='2 seconds'
	sql "SELECT dlock.try_acquire('$name', '5 minutes', '$holder', 'holder')" >/dev/null
	psql -X -q -At -c "SELECT fencing_token FROM dlock.acquire('$name', '5 minutes', '$wait', '$waiter', 'waiter')" \
		>"$scratch/$1.waiter" 2>&1 &
	waiter_pid=$!
	check "$1: the waiter is queued" \
		await "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%dlock.acquire(''$name''%'"

	stall_commits
	psql -X -q -At -c "SELECT dlock.release('$name', '$holder')" >"$scratch/$1.release" 2>&1 &
	release_pid=$!
	check "$1: the release's commit waits for the synchronous standby" \
		await "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%dlock.release(''$name''%'"
	# The release offered the waiter the lease before its commit record: the
	# waiter now waits for that commit, until it goes away.
	if [ "$stop" != timeout ]; then
		sql "SELECT $stop(pid) FROM pg_stat_activity WHERE query LIKE '%dlock.acquire(''$name''%' AND pid <> pg_backend_pid()" >/dev/null
	fi
	check "$1: the waiter's call ended while the release's commit was stalled" wait_bounded "$waiter_pid" 15
	check "$1: the waiter's call ended without a lease ($(head -n 1 "$scratch/$1.waiter"))" grep -qv '^[0-9]' "$scratch/$1.waiter"

	resume_commits
	wait "$waiter_pid" 2>/dev/null
	wait "$release_pid"
	check "$1: the release returned true" test "$(cat "$scratch/$1.release")" = t
	check "$1: the row shows the lease granted to the waiter by the release" \
		test "$(sql "SELECT state || ' ' || holder FROM dlock.locks WHERE lock_name = '$name'")" = "held waiter"
	got=$(sql "SELECT fencing_token & 1099511627775 FROM dlock.try_acquire('$name', '1 minute', '$newcomer', 'newcomer')")
	got="$got $(sql "SELECT takeovers FROM dlock.locks WHERE lock_name = '$name'")"
	check "$1: a newcomer gets the abandoned lease at once, as after a release, not a takeover (counter, takeovers: $got)" \
		test "$got" = "3 0"
}

scenario cancel pg_cancel_backend
scenario terminate pg_terminate_backend
scenario timeout timeout

# holder_scenario permit|shared: the same for a permit waiter (a semaphore of
# one permit, released) and a reader (waiting behind an exclusive lease,
# released): its wait of 2 s runs out while the release's commit is stalled;
# the slot the release granted it is abandoned, and a newcomer of its kind
# gets the name at once
holder_scenario() {
	local name=handoff:$1 waiter_pid release_pid take got
	if [ "$1" = permit ]; then
		sql "SELECT dlock.try_acquire_permit('$name', 1, '5 minutes', '$holder', 'holder')" >/dev/null
		take="dlock.acquire_permit('$name', 1, '5 minutes', '2 seconds', '$waiter', 'waiter')"
		got="dlock.try_acquire_permit('$name', 1, '1 minute', '$newcomer', 'newcomer')"
	else
		sql "SELECT dlock.try_acquire('$name', '5 minutes', '$holder', 'holder')" >/dev/null
		take="dlock.acquire_shared('$name', '5 minutes', '2 seconds', '$waiter', 'waiter')"
		got="dlock.try_acquire('$name', '1 minute', '$newcomer', 'newcomer')"
	fi
	psql -X -q -At -c "SELECT fencing_token FROM $take" >"$scratch/$1.waiter" 2>&1 &
	waiter_pid=$!
	check "$1: the waiter is queued" await "SELECT dlock.waiters('$name') = 1"
	stall_commits
	psql -X -q -At -c "SELECT dlock.release('$name', '$holder')" >"$scratch/$1.release" 2>&1 &
	release_pid=$!
	check "$1: the release's commit waits for the synchronous standby" \
		await "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%dlock.release(''$name''%'"
	check "$1: the waiter's wait ran out while the release's commit was stalled" wait_bounded "$waiter_pid" 15
	check "$1: the waiter's call ended without a lease ($(head -n 1 "$scratch/$1.waiter"))" grep -qv '^[0-9]' "$scratch/$1.waiter"
	resume_commits
	wait "$release_pid"
	check "$1: the slot shows the lease the release granted to the waiter" \
		test "$(sql "SELECT count(*) FROM dlock.lock_holders WHERE lock_name = '$name' AND holder = 'waiter'")" = 1
	check "$1: a newcomer gets the name at once (the abandoned $1 is free)" \
		test "$(sql "SELECT (SELECT fencing_token FROM $got) IS NOT NULL")" = t
}

holder_scenario permit
holder_scenario shared

# negative control: a lease handed to a waiter that returned it is not
# abandoned, and a newcomer is refused
name=handoff:kept
sql "SELECT dlock.try_acquire('$name', '5 minutes', '$holder', 'holder')" >/dev/null
psql -X -q -At -c "SELECT fencing_token & 1099511627775 FROM dlock.acquire('$name', '5 minutes', '1 minute', '$waiter', 'waiter')" \
	>"$scratch/kept.waiter" 2>&1 &
waiter_pid=$!
await "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%dlock.acquire(''$name''%'" >/dev/null
sql "SELECT dlock.release('$name', '$holder')" >/dev/null
wait "$waiter_pid"
check "control: the waiter returned the handed lease (counter $(cat "$scratch/kept.waiter"))" test "$(cat "$scratch/kept.waiter")" = 2
check "control: a newcomer is refused while the waiter holds it" \
	test "$(sql "SELECT dlock.try_acquire('$name', '1 minute', '$newcomer') IS NULL")" = t

"$DLOCK_ROOT/scripts/pg-cluster.sh" destroy "$scratch/pg"
rm -rf "$scratch"
finish
