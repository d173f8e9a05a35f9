#!/usr/bin/env bash
# Fencing tokens only grow across a crash restart, pg_dump/pg_restore and the
# promotion of an asynchronous standby that missed the last grants.
# Runs its own primary and standby (free ports, private directories), not the
# shared server.
set -uo pipefail

root=$DLOCK_ROOT
cluster=$root/scripts/pg-cluster.sh
. "$DLOCK_ROOT/tests/lib/check.sh"
. "$DLOCK_ROOT/tests/lib/ports.sh"
primary_dir=$DLOCK_SCRATCH/recovery-primary
standby_dir=$DLOCK_SCRATCH/recovery-standby
read -r primary_port standby_port <<<"$(free_ports 2 | tr '\n' ' ')"

on() {
	local port=$1
	shift
	psql -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d recovery -v ON_ERROR_STOP=1 "$@"
}

cleanup() {
	"$cluster" destroy "$standby_dir" >/dev/null 2>&1
	"$cluster" destroy "$primary_dir" >/dev/null 2>&1
}
[ -n "${KEEP:-}" ] || trap cleanup EXIT
cleanup

# A long wal_writer_delay keeps asynchronously committed WAL in memory, so a
# grant that did not wait for its flush would be lost by the crash below.
"$cluster" start "$primary_dir" "$primary_port" -c wal_level=replica -c max_wal_senders=4 \
	-c wal_writer_delay=10000 || exit 1
psql -X -q -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres -c 'CREATE DATABASE recovery'
on "$primary_port" -c 'CREATE EXTENSION pg_dlock'

# Grants count leases of 1 ms, one after another, with synchronous_commit off
# in the session (they must be durable all the same); prints the highest token.
grant_many() {
	on "$1" <<SQL
SET synchronous_commit = off;
SELECT max(t) FROM (
	SELECT (dlock.try_acquire('$2', '1 millisecond', gen_random_uuid())).fencing_token AS t,
	       pg_sleep(0.002)
	  FROM generate_series(1, $3)) grants;
SQL
}

next_token() {
	on "$1" -c "SELECT (dlock.try_acquire('$2', '1 millisecond')).fencing_token"
}

# --- 1. crash restart ----------------------------------------------------
before=$(grant_many "$primary_port" recovery:crash 20)
"$cluster" crash "$primary_dir"
"$cluster" restart "$primary_dir"
after=$(next_token "$primary_port" recovery:crash)
echo "crash restart: highest token before $before, next token after $after"
check "token after crash restart is above every token granted before it" test "$after" -gt "$before"

# --- 1b. grants whose synchronous_commit was lowered around them ---------
# A function with its own SET clause, and a SET LOCAL after the grant, must
# not make the grant's commit asynchronous.
on "$primary_port" <<'SQL' >/dev/null
CREATE FUNCTION quiet_acquire(lock_name text) RETURNS bigint LANGUAGE sql
	SET synchronous_commit = off
	AS $$ SELECT (dlock.try_acquire(lock_name, '1 millisecond', gen_random_uuid())).fencing_token $$;
SQL
for _ in 1 2 3; do
	on "$primary_port" -c "SELECT quiet_acquire('recovery:wrapped')" >/dev/null
	sleep 0.01
	on "$primary_port" -c "BEGIN" -c "SELECT dlock.try_acquire('recovery:wrapped', '1 millisecond', gen_random_uuid())" \
		-c "SET LOCAL synchronous_commit = off" -c "COMMIT" >/dev/null
	sleep 0.01
done
before_wrapped=$(on "$primary_port" -c "SELECT fencing_token FROM dlock.locks WHERE lock_name = 'recovery:wrapped'")
"$cluster" crash "$primary_dir"
"$cluster" restart "$primary_dir"
after_wrapped=$(next_token "$primary_port" recovery:wrapped)
echo "lowered synchronous_commit: last token before the crash $before_wrapped, next after $after_wrapped"
check "grants under a function SET or a later SET LOCAL synchronous_commit = off survive a crash" \
	test "$after_wrapped" -gt "$before_wrapped"

# --- 1c. session-bound leases held through a crash -------------
# A holder session keeps a session-bound lease (ttl 1 hour) and stays
# connected; a plain lease of 1 hour is the control. After the server comes
# back, the session-bound lease is free at once (its session is gone) with
# a higher token, while the plain lease is still held to its ttl.
hold_session_bound() {
	on "$primary_port" -c "SELECT dlock.try_acquire('$1', '1 hour', session_bound => true)" \
		-c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
	for _ in $(seq 1 100); do
		[ "$(on "$primary_port" -c "SELECT count(*) FROM dlock.locks WHERE lock_name = '$1' AND state = 'held'")" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}
wait_for_server() {
	for _ in $(seq 1 300); do
		on "$primary_port" -c 'SELECT 1' >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
session_after_crash() {
	local name=$1 before
	before=$(on "$primary_port" -c "SELECT fencing_token FROM dlock.locks WHERE lock_name = '$name'")
	on "$primary_port" -c "SELECT fencing_token > $before FROM dlock.try_acquire('$name', '1 minute')"
}
hold_session_bound recovery:session-immediate
plain_token=$(on "$primary_port" -c "SELECT fencing_token FROM dlock.try_acquire('recovery:plain', '1 hour')")
refused_before=$(on "$primary_port" -c "SELECT dlock.try_acquire('recovery:session-immediate', '1 minute') IS NULL")
check "a session-bound lease is held while its session lives (control)" test "$refused_before" = t
before_session=$(on "$primary_port" -c "SELECT fencing_token FROM dlock.locks WHERE lock_name = 'recovery:session-immediate'")
"$cluster" crash "$primary_dir"
"$cluster" restart "$primary_dir"
wait
higher=$(session_after_crash recovery:session-immediate)
check "after a crash (immediate stop) a session-bound lease is free at once, with a higher token" test "$higher" = t
plain_refused=$(on "$primary_port" -c "SELECT dlock.try_acquire('recovery:plain', '1 minute') IS NULL")
check "a plain lease of 1 hour is still held after the same crash (control)" test "$plain_refused" = t
echo "crash: session-bound lease (token $before_session) taken over with a higher token: $higher; plain lease (token $plain_token) still held: $plain_refused"

# a backend killed with SIGKILL: the postmaster restarts every process and
# reinitialises shared memory (crash restart, no server stop)
hold_session_bound recovery:session-sigkill
holder_pid=$(on "$primary_port" -c "SELECT session_pid FROM dlock.locks WHERE lock_name = 'recovery:session-sigkill'")
kill -KILL "$holder_pid"
wait
wait_for_server
higher_sigkill=$(session_after_crash recovery:session-sigkill)
check "after a crash restart (holder's backend SIGKILLed) its session-bound lease is free at once, with a higher token" \
	test "$higher_sigkill" = t

# --- 2. pg_dump / pg_restore ----------------------------------------------
on "$primary_port" -c "SELECT dlock.fence('recovery:resource', $after)" >/dev/null
dump=$(mktemp)
pg_dump -h 127.0.0.1 -p "$primary_port" -U postgres -Fc -d recovery -f "$dump"
psql -X -q -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres -c 'CREATE DATABASE restored'
pg_restore -h 127.0.0.1 -p "$primary_port" -U postgres -d restored "$dump"
rm -f "$dump"
restored=$(psql -X -q -At -h 127.0.0.1 -p "$primary_port" -U postgres -d restored \
	-c "SELECT (dlock.try_acquire('recovery:crash', '1 minute')).fencing_token FROM pg_sleep(0.01)")
echo "dump/restore: last token $after, next token in the restored database $restored"
check "token after pg_dump/pg_restore is above the last token before the dump" test "$restored" -gt "$after"
fence_refused=$(psql -X -q -At -h 127.0.0.1 -p "$primary_port" -U postgres -d restored \
	-c "DO \$\$ BEGIN PERFORM dlock.fence('recovery:resource', $after - 1); RAISE EXCEPTION 'accepted'; EXCEPTION WHEN SQLSTATE 'PD001' THEN RAISE NOTICE 'refused'; END \$\$" 2>&1)
check "fence state survives pg_dump/pg_restore" grep -q refused <<<"$fence_refused"

# --- 3. asynchronous standby promoted after missing the last grants -------
promote_after_missed_grants() {
	local ignore_timeline=$1
	"$cluster" destroy "$standby_dir" >/dev/null 2>&1
	mkdir -p "$standby_dir" && chown postgres: "$standby_dir"
	runuser -u postgres -- pg_basebackup -h 127.0.0.1 -p "$primary_port" -U postgres \
		-D "$standby_dir/data" -R -X stream >/dev/null
	{
		echo "port = $standby_port"
		echo "unix_socket_directories = '$standby_dir'"
		echo "dlock.test_ignore_timeline = $ignore_timeline"
	} >>"$standby_dir/data/postgresql.conf"
	"$cluster" restart "$standby_dir"
	on "$primary_port" -c "SELECT (dlock.try_acquire('recovery:failover', '1 millisecond')).fencing_token" >/dev/null
	# wait until the standby has replayed everything so far, then stop replay
	local lsn
	lsn=$(on "$primary_port" -c 'SELECT pg_current_wal_lsn()')
	for _ in $(seq 1 100); do
		[ "$(on "$standby_port" -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && break
		sleep 0.1
	done
	standby_refused=$(on "$standby_port" -c "SELECT dlock.try_acquire('recovery:failover', '1 minute')" 2>&1)
	# every function that issues a token refuses before it reads the
	# timeline or the token epoch: 25006 and a message saying why
	local call out
	standby_unclear=
	for call in "dlock.try_acquire('recovery:standby', '1 minute')" \
		"dlock.acquire('recovery:standby', '1 minute', '1 second')" \
		"dlock.try_acquire_shared('recovery:standby', '1 minute')" \
		"dlock.acquire_shared('recovery:standby', '1 minute', '1 second')" \
		"dlock.try_acquire_permit('recovery:standby', 2, '1 minute')" \
		"dlock.acquire_permit('recovery:standby', 2, '1 minute', '1 second')" \
		"dlock.downgrade('recovery:failover', gen_random_uuid())" \
		"dlock.try_acquire_all(ARRAY['recovery:a', 'recovery:b'], '1 minute')" \
		"dlock.acquire_all(ARRAY['recovery:a', 'recovery:b'], '1 minute', '1 second')"; do
		out=$(on "$standby_port" -c '\set VERBOSITY verbose' -c "SELECT * FROM $call" 2>&1)
		grep -q "ERROR:  25006: cannot [a-z]* lock \".*\" during recovery" <<<"$out" ||
			standby_unclear+="$call: $out"$'\n'
	done
	# grants the standby never receives: it is down while they happen
	"$cluster" stop "$standby_dir"
	missed=$(grant_many "$primary_port" recovery:failover 5)
	"$cluster" crash "$primary_dir"
	"$cluster" restart "$standby_dir"
	runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$standby_dir/data" -w promote >/dev/null
	promoted=$(next_token "$standby_port" recovery:failover)
	"$cluster" stop "$standby_dir"
	"$cluster" restart "$primary_dir"
}

promote_after_missed_grants off
echo "async failover: highest token on the old primary $missed, first token on the promoted standby $promoted ($((promoted >> 40)) in the timeline bits)"
check "a standby refuses to grant leases (25006)" grep -q "during recovery" <<<"$standby_refused"
[ -n "$standby_unclear" ] && printf '%s' "$standby_unclear"
check "a standby refuses every token-issuing function, downgrade and lock sets too, with 25006 before touching the timeline" \
	test -z "$standby_unclear"
check "token after async failover is above every token of the old primary" test "$promoted" -gt "$missed"
check "token after failover carries the new timeline" test $((promoted >> 40)) -ge 2

# negative control: without the timeline bits the same failover repeats tokens
promote_after_missed_grants on
echo "negative control (dlock.test_ignore_timeline): old primary $missed, promoted standby $promoted"
check "negative control: without timeline bits the check above fails" test "$promoted" -le "$missed"

# --- 4. restore or pg_upgrade into a new cluster, then async failover ------
# A restored (or pg_upgraded) lock row keeps the grant_timeline and token
# generation of the cluster it came from, while the new cluster starts on
# timeline 1. The row below is what a dump taken on timeline 3 carries (the
# reporter's case, token 3298534883333 = 3 << 40 | 5). The standby is copied
# right after the restore and misses every grant after it; once promoted
# (timeline 2) its first token must be above the old primary's.
# The optional third argument is the restored row's timeline (default 3).
restored_after_failover() {
	local lock=$1 ignore_timeline=$2 row_timeline=${3:-3}
	"$cluster" destroy "$standby_dir" >/dev/null 2>&1
	on "$primary_port" -c "DELETE FROM dlock.distributed_lock WHERE lock_name = '$lock'" \
		-c "INSERT INTO dlock.distributed_lock (lock_name, fencing_seq, updated_at, acquisitions, grant_timeline)
		    VALUES ('$lock', ($row_timeline::bigint << 40) | 5, clock_timestamp(), 5, $row_timeline)"
	on "$primary_port" -c 'CHECKPOINT'
	mkdir -p "$standby_dir" && chown postgres: "$standby_dir"
	runuser -u postgres -- pg_basebackup -h 127.0.0.1 -p "$primary_port" -U postgres \
		-D "$standby_dir/data" -R -X stream >/dev/null
	{
		echo "port = $standby_port"
		echo "unix_socket_directories = '$standby_dir'"
		echo "dlock.test_ignore_timeline = $ignore_timeline"
	} >>"$standby_dir/data/postgresql.conf"
	# the standby never runs before the promotion: it has the restored row only
	restored_primary=$(next_token "$primary_port" "$lock")
	"$cluster" crash "$primary_dir"
	"$cluster" restart "$standby_dir"
	runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$standby_dir/data" -w promote >/dev/null
	restored_promoted=$(next_token "$standby_port" "$lock")
	"$cluster" stop "$standby_dir"
	"$cluster" restart "$primary_dir"
}

restored_after_failover recovery:restored off
echo "restore + async failover: old primary (timeline 1) granted $restored_primary, promoted standby (timeline 2) granted $restored_promoted"
check "after a restore into a new cluster, the promoted standby's token is above the old primary's" \
	test "$restored_promoted" -gt "$restored_primary"

# The row's timeline is the one the promoted standby reaches (2): the row
# cannot be told from the new cluster's own history by its timeline alone;
# grant_system (the cluster of its last grant) tells it apart. Before 1.1's
# grant_system the promoted standby issued 2 << 40 | 6 here, below the old
# primary's 3 << 40 | 6 (the case the protocol model's RULE_TIMELINE_ONLY
# control shows).
restored_after_failover recovery:restored-reached off 2
echo "restore (row on timeline 2) + async failover: old primary (timeline 1) granted $restored_primary, promoted standby (timeline 2) granted $restored_promoted"
check "after a restore of a row whose timeline the new cluster reaches, the promoted standby's token is above the old primary's" \
	test "$restored_promoted" -gt "$restored_primary"

# negative control: the same history with the timeline left out repeats the token
restored_after_failover recovery:restored-control on
echo "negative control (dlock.test_ignore_timeline on the standby): old primary $restored_primary, promoted standby $restored_promoted"
check "negative control: the check above catches a repeated token" test "$restored_promoted" -le "$restored_primary"

finish
