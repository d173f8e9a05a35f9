#!/usr/bin/env bash
# Smoke test of the benchmark driver (bench/): every system it compares runs
# for about a second against the test server and a throwaway redis-server and
# must produce figures without errors (uncontended pairs, two clients on one
# name with no overlap in the critical section, renewals). The SQL edition runs
# in a database of its own on the same server. It measures nothing: speed is
# for `make bench`. A run against a Redis that is not there must fail, which
# shows the suite can.
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${BENCH_BUILD_DIR:-$root/build/bench}
. "$root/tests/lib/ports.sh"
# absent_port: nothing listens there (chosen free, never started)
read -r redis_port absent_port <<<"$(free_ports 2 | tr '\n' ' ')"
redis_port=${BENCH_SMOKE_REDIS_PORT:-$redis_port}
work=$(mktemp -d)
passed=0
failed=0
redis_pid=

ok() {
	echo "ok - $1"
	passed=$((passed + 1))
}
not_ok() {
	echo "not ok - $1"
	failed=$((failed + 1))
}
# The two editions cannot share a database.
sql_edition_db=dlock_bench_smoke_sql_edition
finish() {
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $sql_edition_db" >/dev/null 2>&1
	rm -rf "$work"
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}
trap finish EXIT

if cmake -S "$root/bench" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 &&
	cmake --build "$build" -j2 >"$work/build.log" 2>&1; then
	ok "the driver builds"
else
	cat "$work/cmake.log" "$work/build.log" 2>/dev/null | tail -n 30
	not_ok "the driver builds"
	exit 1
fi
driver=$build/dlock_bench

redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$work" --save '' --appendonly no \
	--logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 50); do
	redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
	sleep 0.1
done

if psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $sql_edition_db" -c "CREATE DATABASE $sql_edition_db" \
	>"$work/sql-edition-install.log" 2>&1 &&
	psql -X -q -v ON_ERROR_STOP=1 -d "$sql_edition_db" -f "$root/sql_edition/dist/pg_dlock_sql-install.sql" \
		>>"$work/sql-edition-install.log" 2>&1; then
	ok "the SQL edition installs in a database of its own"
else
	cat "$work/sql-edition-install.log"
	not_ok "the SQL edition installs in a database of its own"
fi

systems=(dlock-sql dlock-fenced dlock-sql-edition sql-lease advisory advisory-xact redis floor-select1 floor-update
	floor-update-async floor-update-pair floor-update-async-pair floor-update-async-returning-pair floor-handoff-durable
	floor-handoff-async)
# The C++ client library is part of the repository: the driver must have it.
[ -f "$root/client/include/dlock/client.hpp" ] && systems=(dlock-sql dlock-cpp "${systems[@]:1}")

"$driver" smoke --redis "127.0.0.1:$redis_port" --pg-sql-edition "dbname=$sql_edition_db" --duration 0.5 --warmup 0.1 \
	--systems "$(
		IFS=,
		echo "${systems[*]}"
	)" --out "$work/smoke.tsv" >"$work/smoke.log" 2>&1
status=$?
for sys in "${systems[@]}"; do
	rate=$(awk -F'\t' -v s="$sys" '$2 == s && $4 == "pairs_per_s" { print $5 }' "$work/smoke.tsv")
	if grep -qx "ok $sys" "$work/smoke.log" && awk -v r="${rate:-0}" 'BEGIN { exit !(r > 0) }'; then
		ok "$sys runs and measures (${rate} pairs/s)"
	else
		grep -E "^FAIL $sys:|dlock_bench:" "$work/smoke.log"
		not_ok "$sys runs and measures"
	fi
done
if [ "$status" -eq 0 ]; then
	ok "the driver exits 0 when every system worked"
else
	not_ok "the driver exits 0 when every system worked (exit $status)"
fi

# Negative control: a system that cannot work must fail the run.
"$driver" smoke --redis "127.0.0.1:$absent_port" --duration 0.2 --warmup 0.05 --systems redis \
	>"$work/absent.log" 2>&1
status=$?
if [ "$status" -ne 0 ] && grep -q '^FAIL redis:' "$work/absent.log"; then
	ok "a system that errors fails the run"
else
	cat "$work/absent.log"
	not_ok "a system that errors fails the run (exit $status)"
fi

# The session-handoff case (bench/session_handoff.py): one handoff per system after a SIGKILLed
# holder; each must complete and be reported. Measures nothing.
if python3 "$root/bench/session_handoff.py" --samples 1 --ttl-samples 1 --out "$work/handoff.md" \
	>"$work/handoff.log" 2>&1 &&
	[ "$(grep -cE '^\| (session-bound|ttl lease|advisory) \| 1 \| [0-9.]+ \|' "$work/handoff.md")" -eq 3 ]; then
	ok "session-handoff (handoff after SIGKILL) runs for session-bound, ttl lease and advisory"
else
	cat "$work/handoff.log" "$work/handoff.md" 2>/dev/null
	not_ok "session-handoff (handoff after SIGKILL) runs for session-bound, ttl lease and advisory"
fi

# The instructions case (bench/instructions.sh): valgrind counts a few pairs of
# each system; every one must be reported with a count. Measures nothing.
if "$root/bench/instructions.sh" --pairs 20 --out "$work/instructions.md" >"$work/instructions.log" 2>&1 &&
	[ "$(grep -cE '^\| (dlock-fenced|floor-update-async-pair|dlock-sql|floor-update-pair) \| [1-9][0-9]* \| [0-9.]+× \|$' \
		"$work/instructions.md")" -eq 4 ]; then
	ok "instructions (valgrind in a single-user backend) counts dlock-fenced, dlock-sql and their floors"
else
	cat "$work/instructions.log" "$work/instructions.md" 2>/dev/null
	not_ok "instructions (valgrind in a single-user backend) counts dlock-fenced, dlock-sql and their floors"
fi
# Negative control: a count of pairs it cannot divide by is refused, with no figures written.
if ! "$root/bench/instructions.sh" --pairs 0 --out "$work/none.md" >"$work/none.log" 2>&1 &&
	grep -q -- '--pairs must be a positive integer' "$work/none.log" && [ ! -s "$work/none.md" ]; then
	ok "instructions refuses --pairs 0"
else
	cat "$work/none.log"
	not_ok "instructions refuses --pairs 0"
fi
