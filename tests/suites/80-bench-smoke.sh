#!/usr/bin/env bash
# Smoke test of the benchmark driver (bench/): every system it compares runs
# for about a second against the test server and a throwaway redis-server and
# must produce figures without errors (uncontended pairs, two clients on one
# name with no overlap in the critical section, renewals), and so must every
# system of the lock-kinds case. The SQL edition runs in a database of its own
# on the same server. It measures nothing: speed is for `make bench`. A run
# against a Redis that is not there must fail, which shows the suite can. The
# judge of a run, bench/render.py, is given planted figures that meet and miss
# the targets of docs/performance.md and must say so.
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
# The lock-kinds case leaves its names and tables behind: a database of its own.
kinds_db=dlock_bench_smoke_kinds
finish() {
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $sql_edition_db" -c "DROP DATABASE IF EXISTS $kinds_db" \
		>/dev/null 2>&1
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

# The lock-kinds case: every system of it must measure without errors,
# the permit taken and released in one transaction among them.
kinds_systems=(dlock-exclusive-8-names dlock-shared-1-name dlock-shared-8-names advisory-shared-1-key
	dlock-exclusive-4-names dlock-permit-4 dlock-permit-4-one-txn sql-semaphore-4 dlock-exclusive-1-name
	dlock-multi-4-names)
if psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $kinds_db" -c "CREATE DATABASE $kinds_db" >"$work/kinds.log" 2>&1 &&
	psql -X -q -d "$kinds_db" -c 'CREATE EXTENSION pg_dlock' >>"$work/kinds.log" 2>&1 &&
	"$driver" run lock-kinds --pg "dbname=$kinds_db" --redis "127.0.0.1:$redis_port" --duration 0.2 --warmup 0.05 \
		--rounds 1 --out "$work/kinds.tsv" >>"$work/kinds.log" 2>&1; then
	status=0
else
	status=1
fi
missing=
for sys in "${kinds_systems[@]}"; do
	awk -F'\t' -v s="$sys" '$1 == "lock-kinds" && $2 == s && $4 == "pairs_per_s" && $5 > 0 { found = 1 }
		END { exit !found }' "$work/kinds.tsv" 2>/dev/null || missing="$missing $sys"
done
if [ "$status" -eq 0 ] && [ -z "$missing" ] && ! grep -q 'note' "$work/kinds.tsv"; then
	ok "lock-kinds: every system measures without errors (${#kinds_systems[@]} systems)"
else
	cat "$work/kinds.log"
	grep 'note' "$work/kinds.tsv" 2>/dev/null
	not_ok "lock-kinds: every system measures without errors (exit $status, missing:${missing:- none})"
fi

# bench/render.py judges a run by the targets and floors of docs/performance.md.
# Planted figures, far from every goal: the same targets must be met by one run
# and missed by the other, a floor past its target's goal said to put the
# target out of reach, and the farm's figures must reach summary.md.
planted() { # TSV of lock-kinds, the fenced handoff and its floor, the farm; $1 = meet or miss
	local f=1
	[ "$1" = miss ] && f=10
	printf 'lock-kinds\t%s\t%s\tpairs_per_s\t%s\n' \
		dlock-exclusive-8-names 8 1000 dlock-shared-1-name 8 $((1000 / f)) \
		dlock-exclusive-4-names 8 1000 dlock-permit-4 8 $((1000 / f)) sql-semaphore-4 8 100 \
		dlock-permit-4-one-txn 8 $((1000 / f / f)) dlock-exclusive-1-name 1 1000 dlock-multi-4-names 1 $((1000 / f))
	printf 'contended\t%s\t8\tcs_per_s\t%s\n' advisory 1000 dlock-fenced $((2000 / f)) \
		floor-handoff-async $((2000 / f))
	printf 'farm\t%s\t%s\t%s\t%s\n' single-partition 1 pairs_per_s 2000 single-partition 1 pair_mean_ms 0.5 \
		proxy 1 pairs_per_s 1000 proxy 1 pair_mean_ms 1.0
}
kinds_rows=('lock-kinds: shared pairs/s' 'lock-kinds: semaphore of 4 permits, 8 clients, vs exclusive'
	'lock-kinds: semaphore of 4 permits, 8 clients, vs the hand-written' 'lock-kinds: a permit taken and released'
	'lock-kinds: multi-lock of 4 names' 'contended: critical sections/s at 8 clients, fenced grants')
for run in meet miss; do
	mkdir -p "$work/render-$run"
	planted $run >"$work/render-$run.tsv"
	python3 "$root/bench/render.py" --tsv "$work/render-$run.tsv" --out-dir "$work/render-$run" --no-plots \
		>"$work/render-$run.log" 2>&1
done
want() { # summary.md of a run, the row's start, and the verdict it must have
	grep -F "| $2" "$work/render-$1/summary.md" 2>/dev/null | head -n 1 | grep -qF "| $3"
}
bad=
for row in "${kinds_rows[@]}"; do
	want meet "$row" 'met |' || bad="$bad [met: $row]"
	want miss "$row" '**missed**' || bad="$bad [missed: $row]"
done
if [ -z "$bad" ]; then
	ok "render.py says met and **missed** for planted figures that meet and miss the lock-kinds and fenced-handoff targets"
else
	cat "$work"/render-*.log
	not_ok "render.py judges planted figures:$bad"
fi
fenced='contended: critical sections/s at 8 clients, fenced grants vs blocking `pg_advisory_lock`'
if want meet "$fenced" 'met | yes (2.00×) |' && want miss "$fenced" '**no**: out of reach here (0.20×) |'; then
	ok "render.py says whether a target's floor is within its goal (yes at 2.00×, out of reach at 0.20×)"
else
	grep -F "| $fenced" "$work"/render-*/summary.md
	not_ok "render.py says whether a target's floor is within its goal"
fi
if grep -qF '| through the proxy | 1 | 1000 | 1.000 |' "$work/render-meet/summary.md" &&
	grep -q 'The proxy adds 0.250 ms to a call at one client (2.00× a direct pair)' "$work/render-meet/summary.md"; then
	ok "summary.md has the farm's figures and the proxy's cost per call"
else
	cat "$work/render-meet/summary.md"
	not_ok "summary.md has the farm's figures and the proxy's cost per call"
fi
# Negative control: a floor that names no target (its goal would be nobody's) is refused.
sed 's/^| contended: critical sections\/s at 8 clients, fenced grants vs blocking `pg_advisory_lock` | `floor-handoff-async`/| contended: fenced, a name no target has | `floor-handoff-async`/' \
	"$root/docs/performance.md" >"$work/orphan-floor.md"
if ! python3 "$root/bench/render.py" --tsv "$work/render-meet.tsv" --doc "$work/orphan-floor.md" \
	--out-dir "$work/render-meet" --no-plots >"$work/orphan.log" 2>&1 &&
	grep -q "the floor 'contended: fenced, a name no target has' names no target" "$work/orphan.log"; then
	ok "render.py refuses a floor that names no target"
else
	cat "$work/orphan.log"
	not_ok "render.py refuses a floor that names no target"
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
