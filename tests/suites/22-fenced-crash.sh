#!/usr/bin/env bash
# Fenced grants (dlock.durability = fenced) commit without waiting for the WAL
# flush, so a crash can lose grants whose tokens the clients were handed. No
# token may be issued twice all the same, and every token after a crash
# restart (immediate stop and SIGKILL of the postmaster, in turn) or the
# promotion of an asynchronous standby must be above every token returned
# before it. Each with a negative control that must issue a token twice:
# dlock.test_ignore_epoch, for the promotion with dlock.test_ignore_timeline.
# tests/lib/fenced_crash.py drives the clients and checks. Runs its own
# servers (free ports, private directories), not the shared one.
set -uo pipefail

root=$DLOCK_ROOT
cluster=$root/scripts/pg-cluster.sh
. "$DLOCK_ROOT/tests/lib/check.sh"
. "$DLOCK_ROOT/tests/lib/ports.sh"
crash_dir=$DLOCK_SCRATCH/fenced-crash
primary_dir=$DLOCK_SCRATCH/fenced-primary
standby_dir=$DLOCK_SCRATCH/fenced-standby
read -r port standby_port <<<"$(free_ports 2 | tr '\n' ' ')"
# rounds of the crash run: eight keep the suite near three minutes on two cores
ROUNDS=${FENCED_CRASH_ROUNDS:-8}

cleanup() {
	for d in "$crash_dir" "$standby_dir" "$primary_dir"; do
		"$cluster" destroy "$d" >/dev/null 2>&1
	done
}
[ -n "${KEEP:-}" ] || trap cleanup EXIT
cleanup

# the driver's check lines count as this suite's
drive() {
	local out
	out=$(mktemp)
	# FENCED_CRASH_ARGS: more options for the driver (--seed N to repeat a run)
	python3 "$root/tests/lib/fenced_crash.py" "$@" ${FENCED_CRASH_ARGS:-} | tee "$out"
	passed=$((passed + $(grep -c '^ok ' "$out")))
	failed=$((failed + $(grep -c '^FAILED ' "$out")))
	grep -q '^fenced_crash: ' "$out" || { echo "FAILED  fenced_crash.py $1 ended early"; failed=$((failed + 1)); }
	rm -f "$out"
}

# A long wal_writer_delay keeps asynchronously committed WAL in memory: a
# fenced grant with no durable commit after it is lost by the crash. syncfs:
# the restart after each crash syncs the file system once, not file by file.
new_server() {
	local dir=$1 port=$2
	shift 2
	"$cluster" destroy "$dir" >/dev/null 2>&1
	"$cluster" start "$dir" "$port" -c wal_writer_delay=10000 -c wal_level=replica -c max_wal_senders=4 \
		-c recovery_init_sync_method=syncfs "$@" ||
		{ cat "$dir/server.log" >&2; return 1; }
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE DATABASE fenced' &&
		psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d fenced -c 'CREATE EXTENSION pg_dlock'
}

# --- 1. crash restarts ------------------------------------------------------
if new_server "$crash_dir" "$port"; then
	drive crash --port "$port" --dir "$crash_dir" --rounds "$ROUNDS"
else
	check "the server for the crash rounds starts" false
fi

# negative control: the epoch never moves; a lost grant's token comes back
if new_server "$crash_dir" "$port" -c dlock.test_ignore_epoch=on; then
	drive crash --port "$port" --dir "$crash_dir" --rounds 5 --control
else
	check "the server for the negative control starts" false
fi
"$cluster" destroy "$crash_dir" >/dev/null 2>&1

# --- 2. promotion of an asynchronous standby ----------------------------------
# The standby streams only flushed WAL: the primary's last fenced grants, never
# flushed, are not on it when the primary is killed and the standby promoted.
promote_run() {
	local control=$1
	new_server "$primary_dir" "$port" || return 1
	"$cluster" destroy "$standby_dir" >/dev/null 2>&1
	mkdir -p "$standby_dir" && chown postgres: "$standby_dir"
	runuser -u postgres -- pg_basebackup -h 127.0.0.1 -p "$port" -U postgres \
		-D "$standby_dir/data" -R -X stream -c fast >/dev/null || return 1
	{
		echo "port = $standby_port"
		echo "unix_socket_directories = '$standby_dir'"
		if [ "$control" = control ]; then
			echo "dlock.test_ignore_timeline = on"
			echo "dlock.test_ignore_epoch = on"
		fi
	} >>"$standby_dir/data/postgresql.conf"
	"$cluster" restart "$standby_dir" || return 1
	for _ in $(seq 1 100); do
		[ "$(psql -X -At -h 127.0.0.1 -p "$port" -U postgres -d postgres \
			-c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ] && break
		sleep 0.1
	done
	drive promote --port "$port" --dir "$primary_dir" --standby-port "$standby_port" \
		--standby-dir "$standby_dir" $([ "$control" = control ] && echo --control)
	"$cluster" destroy "$standby_dir" >/dev/null 2>&1
	"$cluster" destroy "$primary_dir" >/dev/null 2>&1
}
promote_run positive || check "primary and asynchronous standby start" false
promote_run control || check "primary and asynchronous standby start (negative control)" false

finish
