#!/usr/bin/env bash
# Lock kinds: tokens of shared leases and permits only grow across
# a crash restart and pg_dump/pg_restore, and their grants are durable even
# with synchronous_commit off in the session. Runs its own server (free port,
# private directory), not the shared one.
set -uo pipefail

root=$DLOCK_ROOT
cluster=$root/scripts/pg-cluster.sh
. "$DLOCK_ROOT/tests/lib/check.sh"
. "$DLOCK_ROOT/tests/lib/ports.sh"
dir=$DLOCK_SCRATCH/kinds-recovery
port=$(free_ports 1)

on() {
	psql -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d "${DB:-kinds}" -v ON_ERROR_STOP=1 "$@"
}

cleanup() { "$cluster" destroy "$dir" >/dev/null 2>&1; }
[ -n "${KEEP:-}" ] || trap cleanup EXIT
cleanup

# A long wal_writer_delay keeps asynchronously committed WAL in memory, so a
# grant that did not wait for its flush would be lost by the crash below.
"$cluster" start "$dir" "$port" -c wal_writer_delay=10000 || exit 1
psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE DATABASE kinds'
on -c 'CREATE EXTENSION pg_dlock'

# count grants of 1 ms leases of kind $1 ('permit' or 'shared') on name $2,
# one after another, synchronous_commit off in the session; the highest token
grant_many() {
	local call
	if [ "$1" = permit ]; then
		call="dlock.try_acquire_permit('$2', 1, '1 millisecond', gen_random_uuid())"
	else
		call="dlock.try_acquire_shared('$2', '1 millisecond', gen_random_uuid())"
	fi
	on <<SQL
SET synchronous_commit = off;
SELECT max(t) FROM (
	SELECT ($call).fencing_token AS t, pg_sleep(0.002)
	  FROM generate_series(1, $3)) grants;
SQL
}

# --- 1. crash restart ----------------------------------------------------
permit_before=$(grant_many permit kinds:sem 30)
shared_before=$(grant_many shared kinds:rw 30)
"$cluster" crash "$dir"
"$cluster" restart "$dir"
permit_after=$(on -c "SELECT (dlock.try_acquire_permit('kinds:sem', 1, '1 minute')).fencing_token")
shared_after=$(on -c "SELECT (dlock.try_acquire_shared('kinds:rw', '1 minute')).fencing_token")
writer_after=$(DB=kinds on -c "SELECT (dlock.try_acquire('kinds:sem', '1 minute')).fencing_token")
echo "crash restart: permit $permit_before -> $permit_after, shared $shared_before -> $shared_after"
check "a permit's token after a crash restart is above every permit token before it" \
	test "${permit_after:-0}" -gt "${permit_before:-0}"
check "a shared lease's token after a crash restart is above every one before it" \
	test "${shared_after:-0}" -gt "${shared_before:-0}"
check "a writer is refused while the permit granted after the restart is live" test -z "$writer_after"

# --- 2. pg_dump / pg_restore ----------------------------------------------
dump=$(mktemp)
pg_dump -h 127.0.0.1 -p "$port" -U postgres -Fc -d kinds -f "$dump"
psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE DATABASE restored'
pg_restore -h 127.0.0.1 -p "$port" -U postgres -d restored "$dump"
rm -f "$dump"
restored_holders=$(DB=restored on -c "SELECT count(*) FROM dlock.lock_holders WHERE lock_name = 'kinds:sem'")
check "a live permit survives pg_dump/pg_restore ($restored_holders live)" test "$restored_holders" = 1
DB=restored on -c "UPDATE dlock.lock_holder SET lease_until = now()" >/dev/null
restored=$(DB=restored on -c "SELECT (dlock.try_acquire_permit('kinds:sem', 1, '1 minute')).fencing_token FROM pg_sleep(0.01)")
writer=$(DB=restored on -c "SELECT (dlock.try_acquire('kinds:rw', '1 minute')).fencing_token")
echo "dump/restore: permit $permit_after -> $restored; writer on the shared name $writer (readers' last $shared_after)"
check "a permit's token after pg_dump/pg_restore is above the last one before the dump" \
	test "${restored:-0}" -gt "${permit_after:-0}"
check "a writer's token after pg_dump/pg_restore is above the readers' before it" \
	test "${writer:-0}" -gt "${shared_after:-0}"

finish
