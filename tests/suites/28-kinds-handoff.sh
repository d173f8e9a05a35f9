#!/usr/bin/env bash
# A release of any kind hands what it frees to the longest waiters in its
# own commit (docs/lock-kinds.md, "Handoff"): the waiters' slots are written
# by the releasing transaction (their xmin is its xid). Readers are handed
# together with the readers queued right behind them, up to the first waiter
# of another kind; FIFO order is kept with mixed kinds (a writer queued
# between readers stops the batch and the reader behind it waits for the
# writer, which the last reader's release hands the lock); permits are handed to as many waiters as permits were freed,
# never past the semaphore's size. Each waiter starts once the ones before
# it are queued in the server, so the queue order is known. Negative
# control: a release allowed to hand one permit past the size
# (dlock.test_handoff_past_size) is caught by the size check.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
. "$DLOCK_ROOT/tests/lib/sql_await.sh"

dir=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/kinds-handoff.XXXXXX")
owner() { printf '00000000-0000-0000-0000-%012d' "$1"; }
pids=()

# waiter FILE NAME N SQL: run SQL in the background, then wait until NAME's
# queue holds N waiters
waiter() {
	psql -X -q -At -v ON_ERROR_STOP=1 -c "$4" >"$dir/$1" 2>&1 &
	pids+=($!)
	await "SELECT dlock.waiters('$2') >= $3"
}
# release_in_xact SQL...: run the releases in one transaction (after the
# settings SQL in $1), print its xid
release_in_xact() {
	psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/release" 2>&1 <<-EOSQL
		BEGIN;
		$1
		SELECT 'xid=' || pg_current_xact_id();
		$2
		COMMIT;
	EOSQL
	sed -n 's/^xid=//p' "$dir/release"
}
# the owners (ordered) of NAME's live slots that transaction $2 wrote
handed() {
	sql "SELECT coalesce(string_agg(owner_token::text, ' ' ORDER BY owner_token), '-')
	       FROM dlock.lock_holder WHERE lock_name = '$1' AND owner_token IS NOT NULL
	        AND lease_until > now() AND xmin::text = '$2'"
}
live_slots() {
	sql "SELECT count(*) FROM dlock.lock_holder WHERE lock_name = '$1' AND owner_token IS NOT NULL AND lease_until > now()"
}
live_exclusive() {
	sql "SELECT count(*) FROM dlock.distributed_lock WHERE lock_name = '$1' AND owner_token IS NOT NULL AND lease_until > now()"
}

# Readers, a writer between them, and a reader behind the writer: the
# writer's release hands the first two readers their leases, the last
# reader's release hands the writer its lease, and the writer's release the
# reader behind it
name=khs:rw
sql "SELECT dlock.try_acquire('$name', '5 minutes', '$(owner 1)')" >/dev/null
waiter r1 "$name" 1 "SELECT fencing_token FROM dlock.acquire_shared('$name', '5 minutes', '30 seconds', '$(owner 11)')"
waiter r2 "$name" 2 "SELECT fencing_token FROM dlock.acquire_shared('$name', '5 minutes', '30 seconds', '$(owner 12)')"
waiter x "$name" 3 "SELECT fencing_token FROM dlock.acquire('$name', '5 minutes', '30 seconds', '$(owner 13)')"
waiter r3 "$name" 4 "SELECT fencing_token FROM dlock.acquire_shared('$name', '5 minutes', '30 seconds', '$(owner 14)')"
check "four waiters queued: reader, reader, writer, reader" test "$(sql "SELECT dlock.waiters('$name')")" = 4
xid=$(release_in_xact "" "SELECT dlock.release('$name', '$(owner 1)');")
await "SELECT dlock.waiters('$name') <= 2" >/dev/null
check "the writer's release handed both readers queued before the writer their leases, together, in its commit" \
	test "$(handed "$name" "$xid")" = "$(owner 11) $(owner 12)"
check "the writer and the reader behind it still wait (FIFO: the batch stops at the writer)" \
	test "$(sql "SELECT dlock.waiters('$name')")" = 2
check "no exclusive lease beside the readers" test "$(live_exclusive "$name")" = 0
sql "SELECT dlock.release('$name', '$(owner 11)')" >/dev/null
sleep 0.2
check "one reader left, one live: the writer still waits" test "$(sql "SELECT dlock.waiters('$name')")" = 2
xid=$(release_in_xact "" "SELECT dlock.release('$name', '$(owner 12)');")
await "SELECT dlock.waiters('$name') <= 1" >/dev/null
check "the last reader's release handed the writer its lease in its commit" \
	test "$(sql "SELECT owner_token FROM dlock.distributed_lock WHERE lock_name = '$name' AND lease_until > now() AND xmin::text = '$xid'")" = "$(owner 13)"
check "no reader beside the writer" test "$(live_slots "$name")" = 0
xid=$(release_in_xact "" "SELECT dlock.release('$name', '$(owner 13)');")
await "SELECT dlock.waiters('$name') = 0" >/dev/null
check "the writer's release handed the reader behind it its lease" test "$(handed "$name" "$xid")" = "$(owner 14)"

# Permits: two freed in one transaction go to the two longest permit waiters
name=khs:sem
for i in 1 2 3; do
	sql "SELECT dlock.try_acquire_permit('$name', 3, '5 minutes', '$(owner $i)')" >/dev/null
done
for i in 1 2 3 4; do
	waiter "p$i" "$name" "$i" "SELECT fencing_token FROM dlock.acquire_permit('$name', 3, '5 minutes', '30 seconds', '$(owner $((20 + i)))')"
done
xid=$(release_in_xact "" "SELECT dlock.release('$name', '$(owner 1)'); SELECT dlock.release('$name', '$(owner 2)');")
await "SELECT dlock.waiters('$name') <= 2" >/dev/null
check "two permits released in one transaction were handed to the two longest waiters in its commit" \
	test "$(handed "$name" "$xid")" = "$(owner 21) $(owner 22)"
check "the other two still wait" test "$(sql "SELECT dlock.waiters('$name')")" = 2
check "3 live permits, the semaphore's size" test "$(live_slots "$name")" = 3
xid=$(release_in_xact "" "SELECT dlock.release('$name', '$(owner 3)');")
await "SELECT dlock.waiters('$name') <= 1" >/dev/null
check "one permit released: handed to the next waiter only" test "$(handed "$name" "$xid")" = "$(owner 23)"
check "still 3 live permits" test "$(live_slots "$name")" = 3
sql "SELECT dlock.release('$name', '$(owner 21)')" >/dev/null
await "SELECT dlock.waiters('$name') = 0" >/dev/null
check "the last waiter got the next permit released" test "$(live_slots "$name")" = 3

for i in "${!pids[@]}"; do
	wait "${pids[$i]}"
done
for f in r1 r2 x r3 p1 p2 p3 p4; do
	check "waiter $f returned a lease ($(head -n 1 "$dir/$f"))" grep -qE '^[0-9]+$' "$dir/$f"
done

# Negative control: one permit released with dlock.test_handoff_past_size on
# hands two waiters a permit; the size check sees 2 live permits of 1
name=khs:control
pids=()
sql "SELECT dlock.try_acquire_permit('$name', 1, '5 minutes', '$(owner 1)')" >/dev/null
waiter c1 "$name" 1 "SELECT fencing_token FROM dlock.acquire_permit('$name', 1, '5 minutes', '5 seconds', '$(owner 31)')"
waiter c2 "$name" 2 "SELECT fencing_token FROM dlock.acquire_permit('$name', 1, '5 minutes', '5 seconds', '$(owner 32)')"
xid=$(release_in_xact "SET LOCAL dlock.test_handoff_past_size = on;" "SELECT dlock.release('$name', '$(owner 1)');")
await "SELECT dlock.waiters('$name') = 0" >/dev/null
check "control: a release handing a permit past the size is caught (live permits $(live_slots "$name") of 1)" \
	test "$(live_slots "$name")" -gt 1
for i in "${!pids[@]}"; do
	wait "${pids[$i]}"
done

sql "DELETE FROM dlock.distributed_lock WHERE lock_name LIKE 'khs:%';
     DELETE FROM dlock.lock_holder WHERE lock_name LIKE 'khs:%';
     DELETE FROM dlock.holder_counter WHERE lock_name LIKE 'khs:%'" >/dev/null
rm -rf "$dir"
finish
