#!/usr/bin/env bash
# Contention you can see (docs/operations.md): dlock.waiters and the waiters
# column of dlock.locks under 50 waiting sessions of two kinds, some of them
# cancelled; the wait and hold histograms against waits and holds of known
# length, per kind, and their reset. The server has pg_dlock preloaded.
set -uo pipefail
. "$DLOCK_ROOT/tests/lib/check.sh"
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }

dir=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/contention.XXXXXX")
owner() { printf '00000000-0000-0000-0000-%012d' "$1"; }
holder=00000000-0000-0000-0000-0000000000c0
name=contention:hot

waiting_in_server() {
	sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%(''$name''%' AND pid <> pg_backend_pid()"
}
waiters() { sql "SELECT dlock.waiters('$name')"; }
# polls until "$@" prints $1... up to 10 s; prints what it saw last
await() {
	local want=$1 got=
	shift
	for _ in $(seq 1 500); do
		got=$("$@")
		[ "$got" = "$want" ] && break
		sleep 0.02
	done
	echo "$got"
}

# --- waiters ------------------------------------------------------------------
sql "SELECT dlock.try_acquire('$name', '5 minutes', '$holder')" >/dev/null
sql "SELECT dlock.try_acquire('contention:cold', '5 minutes', '$holder')" >/dev/null
check "no waiters before anyone waits" test "$(waiters)" = 0
pids=()
for i in $(seq 1 50); do
	# every fifth waits for a shared lease: waiters of every kind are counted
	call="dlock.acquire('$name', '5 minutes', '2 minutes', '$(owner "$i")')"
	[ $((i % 5)) -eq 0 ] && call="dlock.acquire_shared('$name', '5 minutes', '2 minutes', '$(owner "$i")')"
	psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/w$i" 2>&1 <<-EOF &
		SELECT fencing_token FROM $call;
		SELECT dlock.release('$name', '$(owner "$i")');
	EOF
	pids+=($!)
done
seen=$(await 50 waiting_in_server)
check "50 sessions seen waiting in the server" test "$seen" = 50
check "dlock.waiters counts the 50 waiters" test "$(waiters)" = 50
check "dlock.locks shows 50 waiters for the name" \
	test "$(sql "SELECT waiters FROM dlock.locks WHERE lock_name = '$name'")" = 50
check "a held name nobody waits for shows 0 waiters" \
	test "$(sql "SELECT waiters FROM dlock.locks WHERE lock_name = 'contention:cold'")" = 0
check "the name with most waiters sorts first" \
	test "$(sql "SELECT lock_name FROM dlock.locks ORDER BY waiters DESC NULLS LAST, lock_name LIMIT 1")" = "$name"

# five waiters are cancelled: they leave the queue and the count
sql "SELECT count(pg_cancel_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
      WHERE wait_event_type = 'Extension' AND query LIKE '%dlock.acquire(''$name''%'
      ORDER BY backend_start LIMIT 5) w" >/dev/null
check "cancelled waiters leave the count (45 left)" test "$(await 45 waiters)" = 45

# the holder releases; every waiter, once granted, releases at once
sql "SELECT dlock.release('$name', '$holder')" >/dev/null
for pid in "${pids[@]}"; do wait "$pid"; done
granted=$(cat "$dir"/w* | grep -cE '^[0-9]+$')
check "the 45 remaining waiters were all granted ($granted)" test "$granted" = 45
check "no waiters once the queue has drained" test "$(waiters)" = 0
sql "SELECT dlock.release('contention:cold', '$holder')" >/dev/null

# --- histograms -----------------------------------------------------------------
# cumulative count of a histogram ($1: wait or hold) for a kind at bucket le
bucket() {
	sql "SELECT ${1}s FROM dlock.${1}_histogram() WHERE kind = '$2' AND le IS NOT DISTINCT FROM $3"
}
sql "SELECT dlock.stats_reset()" >/dev/null
check "after dlock.stats_reset every bucket is 0" \
	test "$(sql "SELECT sum(waits) FROM dlock.wait_histogram()") $(sql "SELECT sum(holds) FROM dlock.hold_histogram()")" = "0 0"
check "16 buckets per kind, 1 ms to 1 minute and +Inf, cumulative" \
	test "$(sql "SELECT count(*) FILTER (WHERE le IS NULL), min(le), max(le), count(*)
	              FROM dlock.hold_histogram() WHERE kind = 'exclusive'")" = "1|00:00:00.001|00:01:00|16"

# holds of known length: exclusive 0.3 s (release) and 0.12 s (force release),
# shared 0.05 s, a permit 0.6 s
sql "SELECT dlock.try_acquire('contention:h1', '1 minute', '$(owner 101)')" >/dev/null
sql "SELECT pg_sleep(0.3)" >/dev/null
sql "SELECT dlock.release('contention:h1', '$(owner 101)')" >/dev/null
sql "SELECT dlock.try_acquire('contention:h2', '1 minute', '$(owner 102)')" >/dev/null
sql "SELECT pg_sleep(0.12)" >/dev/null
sql "SELECT dlock.force_release('contention:h2', 'contention test')" >/dev/null
sql "SELECT dlock.try_acquire_shared('contention:h3', '1 minute', '$(owner 103)')" >/dev/null
sql "SELECT pg_sleep(0.05)" >/dev/null
sql "SELECT dlock.release('contention:h3', '$(owner 103)')" >/dev/null
sql "SELECT dlock.try_acquire_permit('contention:h4', 2, '1 minute', '$(owner 104)')" >/dev/null
sql "SELECT pg_sleep(0.6)" >/dev/null
sql "SELECT dlock.release('contention:h4', '$(owner 104)')" >/dev/null
check "exclusive holds: none within 100 ms" test "$(bucket hold exclusive "'100 ms'")" = 0
check "exclusive holds: both within 2.5 s, two in all" \
	test "$(bucket hold exclusive "'2.5 s'")|$(bucket hold exclusive NULL)" = "2|2"
check "shared hold: none within 25 ms, one within 1 s" \
	test "$(bucket hold shared "'25 ms'")|$(bucket hold shared "'1 s'")|$(bucket hold shared NULL)" = "0|1|1"
check "permit hold: none within 500 ms, one within 2.5 s" \
	test "$(bucket hold permit "'500 ms'")|$(bucket hold permit "'2.5 s'")|$(bucket hold permit NULL)" = "0|1|1"
check "buckets are cumulative: never less than the bucket before" \
	test "$(sql "SELECT count(*) FROM (SELECT holds < lag(holds) OVER (PARTITION BY kind ORDER BY le NULLS LAST) AS down
	              FROM dlock.hold_histogram()) h WHERE down")" = 0

# waits of known length: a writer waits while another holds the name for 0.8 s
# after the writer is seen waiting; a reader waits behind a writer the same way
wait_for() { # $1: kind of the waiter's call, $2: name
	local call="dlock.acquire('$2', '1 minute', '30 s', '$(owner 201)')"
	[ "$1" = shared ] && call="dlock.acquire_shared('$2', '1 minute', '30 s', '$(owner 201)')"
	sql "SELECT dlock.try_acquire('$2', '1 minute', '$(owner 200)')" >/dev/null
	psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/waiter-$1" 2>&1 <<-EOF &
		SELECT fencing_token FROM $call;
		SELECT dlock.release('$2', '$(owner 201)');
	EOF
	local pid=$!
	await 1 sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%(''$2''%'" >/dev/null
	sql "SELECT pg_sleep(0.8)" >/dev/null
	sql "SELECT dlock.release('$2', '$(owner 200)')" >/dev/null
	wait "$pid"
}
wait_for exclusive contention:w1
wait_for shared contention:w2
check "the writer was granted after its wait" grep -qE '^[0-9]+$' "$dir/waiter-exclusive"
check "exclusive wait: none within 500 ms, one within 10 s" \
	test "$(bucket wait exclusive "'500 ms'")|$(bucket wait exclusive "'10 s'")|$(bucket wait exclusive NULL)" = "0|1|1"
check "shared wait: none within 500 ms, one within 10 s" \
	test "$(bucket wait shared "'500 ms'")|$(bucket wait shared "'10 s'")|$(bucket wait shared NULL)" = "0|1|1"
check "no permit waited" test "$(bucket wait permit NULL)" = 0
# an acquire that is granted without waiting is not a wait
sql "SELECT dlock.acquire('contention:free', '1 minute', '5 s', '$(owner 300)')" >/dev/null
sql "SELECT dlock.release('contention:free', '$(owner 300)')" >/dev/null
check "an acquire granted at once adds no wait" test "$(bucket wait exclusive NULL)" = 1
# a wait that runs out is not a granted wait
sql "SELECT dlock.try_acquire('contention:timeout', '1 minute', '$(owner 400)')" >/dev/null
sql "SELECT dlock.acquire('contention:timeout', '1 minute', '200 ms', '$(owner 401)')" >/dev/null 2>&1
sql "SELECT dlock.release('contention:timeout', '$(owner 400)')" >/dev/null
check "a wait that ran out is not counted" test "$(bucket wait exclusive NULL)" = 1

sql "SELECT dlock.stats_reset()" >/dev/null
check "dlock.stats_reset empties the histograms" \
	test "$(sql "SELECT sum(waits) FROM dlock.wait_histogram()")|$(sql "SELECT sum(holds) FROM dlock.hold_histogram()")" = "0|0"

# --- downgrade of a session-bound lease (session_bound needs preloading) ---------
# one session: a session-bound lease ends with the session that took it
bound=$(psql -X -q -At 2>&1 <<-EOF
	\set VERBOSITY sqlstate
	SELECT dlock.try_acquire('contention:bound', '1 minute', '$(owner 500)', session_bound => true) IS NOT NULL;
	SELECT dlock.downgrade('contention:bound', '$(owner 500)');
	SELECT kind || ' ' || state FROM dlock.locks WHERE lock_name = 'contention:bound';
EOF
)
check "a session-bound lease is not downgraded: 0A000, and it stays exclusive ($(echo $bound))" \
	test "$(echo $bound)" = "t ERROR: 0A000 exclusive held"

sql "DELETE FROM dlock.distributed_lock WHERE lock_name LIKE 'contention:%';
     DELETE FROM dlock.lock_holder WHERE lock_name LIKE 'contention:%';
     DELETE FROM dlock.holder_counter WHERE lock_name LIKE 'contention:%';
     DELETE FROM dlock.audit_log WHERE lock_name LIKE 'contention:%'" >/dev/null
rm -rf "$dir"
finish
