#!/usr/bin/env bash
# No token twice above a high reap floor, and none after restoring an older
# backup: fenced first grants of new names (exclusive leases and semaphores)
# lost by crashes when the floor was carried over a DROP EXTENSION, and two
# server lives with fenced grants of every kind lost by restoring a backup
# taken before them, followed by dlock.after_restore(). Each with a negative
# control that must issue a token again: dlock.test_ignore_epoch for the
# floor, the older one-generation restore step for the restore; and the
# carry-over of DROP EXTENSION right after a crash that lost fenced grants
# (dlock.highest_token, dlock.carry_over), whose control carries the highest
# visible token without the epoch.
# tests/lib/token_restore.py drives and checks. Its own server (free port,
# private directory), not the shared one.
set -uo pipefail

root=$DLOCK_ROOT
cluster=$root/scripts/pg-cluster.sh
. "$root/tests/lib/check.sh"
. "$root/tests/lib/ports.sh"
dir=$DLOCK_SCRATCH/token-restore
port=$(free_ports)

cleanup() { "$cluster" destroy "$dir" >/dev/null 2>&1; }
[ -n "${KEEP:-}" ] || trap cleanup EXIT

# wal_writer_delay = 10s: a fenced grant with no flush after it is lost by the crash
new_server() {
	cleanup
	"$cluster" start "$dir" "$port" -c wal_writer_delay=10000 -c recovery_init_sync_method=syncfs "$@" ||
		{ cat "$dir/server.log" >&2; return 1; }
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE DATABASE tokens' &&
		psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d tokens -c 'CREATE EXTENSION pg_dlock'
}

# the driver's check lines count as this suite's
drive() {
	local out
	out=$(mktemp)
	python3 "$root/tests/lib/token_restore.py" "$@" | tee "$out"
	passed=$((passed + $(grep -c '^ok ' "$out")))
	failed=$((failed + $(grep -c '^FAILED ' "$out")))
	grep -q '^token_restore: ' "$out" || { echo "FAILED  token_restore.py $* ended early"; failed=$((failed + 1)); }
	rm -f "$out"
}

for run in "floor" "floor --control" "restore" "restore --control" "carry" "carry --control"; do
	extra=()
	[ "$run" = "floor --control" ] && extra=(-c dlock.test_ignore_epoch=on)
	if new_server "${extra[@]}"; then
		# shellcheck disable=SC2086
		drive $run --port "$port" --dir "$dir"
	else
		check "the server for $run starts" false
	fi
done

finish
