#!/usr/bin/env bash
# make bench: pg_dlock (durable and fenced grants, and its SQL edition) against
# advisory locks, a hand-written SQL lease and Redis, on a throwaway PostgreSQL
# and redis-server on loopback.
#
#   bench/run.sh [--quick] [--cases "uncontended contended ..."] [--duration S] [--rounds N]
#                [--keep] [-- extra dlock_bench options]
#
#   --quick      about 3 minutes: 1 s runs, one round, smaller scale and keep-alive
#   --cases      which cases to run, by name (default: all): uncontended,
#                contended, scale (latency against lock rows), churn (size and
#                HOT share after churn), keep-alive, business-write,
#                function-cost, events, lock-kinds, session-handoff (handoff
#                after the holder's client is SIGKILLed: bench/session_handoff.py),
#                instructions (server instructions per pair, counted by valgrind
#                in a single-user backend: bench/instructions.sh), farm
#                (4 partitions behind a PL/Proxy proxy and by direct routing:
#                bench/farm.sh)
#   --duration   seconds measured per run (default 2), --rounds alternations (2)
#   --keep       leave the server and redis running afterwards (for debugging)
#   --no-profile skip the profiles. By default, when perf (linux-perf) is
#                installed, uncontended and contended run once more for dlock-sql at
#                8 clients under `perf record -g` on the server, and the top
#                functions (share of server CPU, and µs per pair or per
#                critical section) go into latest.md and profile-*.txt.
#   --idle-as-is let idle CPUs halt as usual. By default the run holds
#                /dev/cpu_dma_latency at 0 (when it may), so idle CPUs poll
#                instead: on a virtual machine a halted CPU adds tens of
#                microseconds to every loopback round trip of a lone client,
#                more than some of the figures measured, and how often it
#                happens depends on what else the machine is doing.
#
# Writes bench/results/latest.tsv (raw figures) and latest.md (every figure in
# tables); bench/render.py then writes summary.md (key figures, the farm's
# figures, and the targets and floors of docs/performance.md with their
# verdicts) and the *.png plots. Prints
# the machine first. Benchmarks measure; this script fails only when it cannot
# run, never because a figure misses its target.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
results=$root/bench/results
build=${BENCH_BUILD_DIR:-$root/build/bench}
# Free ports and private directories unless given, so that two runs on one
# machine do not collide.
. "$root/tests/lib/ports.sh"
{ read -r free_pg_port; read -r free_redis_port; } < <(free_ports 2)
pg_dir=${BENCH_PG_DIR:-$(mktemp -d /tmp/bench-pg.XXXXXX)}
pg_port=${BENCH_PG_PORT:-$free_pg_port}
redis_port=${BENCH_REDIS_PORT:-$free_redis_port}
redis_dir=${BENCH_REDIS_DIR:-$(mktemp -d /tmp/bench-redis.XXXXXX)}
PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
export PG_BINDIR

cases="uncontended contended scale churn keep-alive business-write function-cost events lock-kinds session-handoff instructions farm"
duration=
rounds=
quick=0
keep=0
hold_idle=1
profile=1
extra=()
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--cases) cases=$2; shift ;;
	--duration) duration=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--keep) keep=1 ;;
	--idle-as-is) hold_idle=0 ;;
	--no-profile) profile=0 ;;
	--) shift; extra=("$@"); break ;;
	-h | --help) sed -n '2,31p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; sed -n '2,31p' "$0" >&2; exit 2 ;;
	esac
	shift
done

# Case sizes. With the defaults a run takes about 14 minutes on a 2-core
# machine; the churn stops at its cycle target or its time cap, whichever
# comes first, and the results say how many cycles it did.
warmup=0.3
rows=1000,100000,1000000
churn_cycles=1000000
churn_max=180
leases=10000
if [ $quick -eq 1 ]; then
	duration=${duration:-1}
	rounds=${rounds:-1}
	warmup=0.3
	rows=1000,100000
	churn_cycles=50000
	churn_max=15
	leases=2000
	handoffs=10
	ttl_handoffs=5
	instruction_pairs=500
fi
instruction_pairs=${instruction_pairs:-3000}
handoffs=${handoffs:-30}
ttl_handoffs=${ttl_handoffs:-10}
duration=${duration:-2}
rounds=${rounds:-2}

started=$(date -u +%s)
read -r -a cpu_ticks_start < <(grep '^cpu ' /proc/stat)
log() { printf '[bench %3ss] %s\n' $(($(date -u +%s) - started)) "$*"; }

# --- build the driver ------------------------------------------------------
log "building the driver in $build"
mkdir -p "$(dirname "$build")"
cmake -S "$root/bench" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 ||
	{ cat "$build.cmake.log" >&2; exit 1; }
grep -E '^-- dlock-cpp' "$build.cmake.log" || true
cmake --build "$build" -j2 >"$build.build.log" 2>&1 || { cat "$build.build.log" >&2; exit 1; }
driver=$build/dlock_bench

# --- servers ---------------------------------------------------------------
redis_pid=
cleanup() {
	exec 9>&- # ends the PM QoS request, if any
	if [ $keep -eq 0 ]; then
		[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
		"$root/scripts/pg-cluster.sh" destroy "$pg_dir" || true
		rm -rf "$redis_dir"
	else
		echo "kept: PostgreSQL on 127.0.0.1:$pg_port ($pg_dir), redis on 127.0.0.1:$redis_port (pid $redis_pid)"
	fi
}
trap cleanup EXIT

log "starting PostgreSQL in $pg_dir on port $pg_port (default settings)"
"$root/scripts/pg-cluster.sh" destroy "$pg_dir"
"$root/scripts/pg-cluster.sh" start "$pg_dir" "$pg_port" || { cat "$pg_dir/server.log" >&2; exit 1; }
export PGHOST=127.0.0.1 PGPORT=$pg_port PGUSER=postgres PGDATABASE=bench PGCONNECT_TIMEOUT=10
# One database per use, so the lock table of one case never holds another's rows.
for db in bench bench_scale bench_churn; do
	psql -X -q -d postgres -c "CREATE DATABASE $db"
	psql -X -q -d "$db" -c 'CREATE EXTENSION pg_dlock' ||
		log "CREATE EXTENSION pg_dlock failed in $db: the pg_dlock systems will be skipped"
done
# The SQL edition cannot share a database with the C extension. Its psql -f
# installer runs the same SQL as CREATE EXTENSION pg_dlock_sql without copying
# files into the server's share directory.
sql_edition_db=bench_sql_edition
psql -X -q -d postgres -c "CREATE DATABASE $sql_edition_db"
psql -X -q -v ON_ERROR_STOP=1 -d "$sql_edition_db" -f "$root/sql_edition/dist/pg_dlock_sql-install.sql" >/dev/null ||
	log "installing the SQL edition failed in $sql_edition_db: the system dlock-sql-edition will be skipped"

log "starting redis-server on 127.0.0.1:$redis_port"
if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
	echo "run.sh: something already answers on 127.0.0.1:$redis_port (a redis left by an earlier run?)" >&2
	exit 1
fi
rm -rf "$redis_dir"
mkdir -p "$redis_dir"
redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$redis_dir" --logfile "$redis_dir/redis.log" 9>&- &
redis_pid=$!
for _ in $(seq 50); do
	redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
	sleep 0.1
done
redis-cli -p "$redis_port" ping >/dev/null || { cat "$redis_dir/redis.log" >&2; exit 1; }

# --- idle CPUs ---------------------------------------------------------------
# A PM QoS request of 0 us lasts while this shell keeps the file open (fd 9).
idle_note="halting as usual (--idle-as-is)"
if [ $hold_idle -eq 1 ]; then
	if { exec 9>/dev/cpu_dma_latency && printf '\0\0\0\0' >&9; } 2>/dev/null; then
		idle_note="polling: /dev/cpu_dma_latency held at 0 during the run (cpuidle driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown))"
	else
		idle_note="halting as usual (could not hold /dev/cpu_dma_latency)"
	fi
fi

# --- the machine -----------------------------------------------------------
mkdir -p "$results"
machine=$results/machine.md.tmp
disk_dev=$(df --output=source "$pg_dir" | tail -n 1)
disk_name=$(lsblk -no PKNAME "$disk_dev" 2>/dev/null | head -n 1)
[ -n "$disk_name" ] || disk_name=$(basename "$disk_dev")
rota=$(lsblk -dno ROTA "/dev/$disk_name" 2>/dev/null | tr -d ' ' || true)
{
	echo "| | |"
	echo "|---|---|"
	echo "| date (UTC) | $(date -u '+%Y-%m-%d %H:%M') |"
	echo "| CPU | $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//') |"
	echo "| memory | $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) |"
	echo "| PostgreSQL | $(psql -X -At -c 'SELECT version()' | cut -d, -f1), default settings (shared_buffers $(psql -X -At -c 'SHOW shared_buffers'), synchronous_commit $(psql -X -At -c 'SHOW synchronous_commit'), wal_sync_method $(psql -X -At -c 'SHOW wal_sync_method')) |"
	echo "| Redis | $(redis-server --version | awk '{print $3}' | sed 's/v=//'), default settings |"
	echo "| disk | $disk_dev ($(df -h --output=fstype,size "$pg_dir" | tail -n 1 | awk '{print $1 ", " $2}')), /dev/$disk_name$([ "$rota" = 1 ] && echo ', reported rotational (a virtual disk)' || true) |"
	echo "| kernel | $(uname -sr) |"
	echo "| idle CPUs | $idle_note |"
	echo "| load average at start | $(cut -d' ' -f1-3 /proc/loadavg) |"
	echo "| run | bench/run.sh ${cases:+--cases \"$cases\"} --duration $duration --rounds $rounds$([ $quick -eq 1 ] && echo ' --quick' || true)$([ $hold_idle -eq 0 ] && echo ' --idle-as-is' || true) |"
} >"$machine"
echo
echo "Machine:"
sed -n '3,$p' "$machine" | sed 's/^| \(.*\) | \(.*\) |$/  \1: \2/'
echo

# --- the cases -------------------------------------------------------------
tsv=$results/latest.tsv.tmp
: >"$tsv"
common=(--redis "127.0.0.1:$redis_port" --pg-sql-edition "dbname=$sql_edition_db" --duration "$duration"
	--warmup "$warmup" --rounds "$rounds" --out "$tsv")
failures=0
for c in $cases; do
	log "case $c"
	db=bench
	case "$c" in
	scale) db=bench_scale ;;
	churn) db=bench_churn ;;
	esac
	if [ "$c" = session-handoff ]; then
		python3 "$root/bench/session_handoff.py" --samples "$handoffs" --ttl-samples "$ttl_handoffs" \
			--out "$results/session-handoff.md.tmp" ||
			{ failures=$((failures + 1)); log "session-handoff reported errors"; }
		continue
	fi
	if [ "$c" = farm ]; then
		"$root/bench/farm.sh" --duration "$duration" --out "$results/farm.md.tmp" --tsv "$tsv" ||
			{ failures=$((failures + 1)); log "farm reported errors"; }
		continue
	fi
	if [ "$c" = instructions ]; then
		"$root/bench/instructions.sh" --pairs "$instruction_pairs" --out "$results/instructions.md.tmp" ||
			{ failures=$((failures + 1)); log "instructions reported errors"; }
		continue
	fi
	args=()
	case "$c" in
	scale) args=(--rows "$rows") ;;
	churn) args=(--churn-cycles "$churn_cycles" --churn-max-seconds "$churn_max") ;;
	keep-alive) args=(--leases "$leases") ;;
	esac
	"$driver" run "$c" --pg "dbname=$db" "${common[@]}" "${args[@]}" "${extra[@]}" ||
		{ failures=$((failures + 1)); log "case $c reported errors (see the notes in the results)"; }
done

# --- the Python and TypeScript clients in case 1 ------------------------------
# Each beside its driver's own two statements (bench/clients/): pairs/s at 1
# and 8 clients and acquire p50. Their environments are the ones the test
# suites make (tests/suites/42-python.sh, 43-typescript.sh); made here when
# missing. A failure is noted and leaves the rest of the run alone.
clients_bench() {
	local cache=${DLOCK_CLIENTS_CACHE:-$root/build/clients} venv
	venv=$cache/python-venv
	if ! "$venv/bin/python" -c 'import pg_dlock' 2>/dev/null; then
		mkdir -p "$cache"
		python3 -m venv "$venv" &&
			"$venv/bin/pip" install -q --disable-pip-version-check -r "$root/client/python/requirements-dev.lock" &&
			"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$root/client/python" || return 1
	fi
	"$venv/bin/python" "$root/bench/clients/python_bench.py" --pg "dbname=bench" --duration "$duration" >>"$tsv" ||
		return 1
	if [ ! -f "$root/client/typescript/dist/index.js" ]; then
		(cd "$root/client/typescript" && npm ci --prefer-offline --loglevel=error && npx tsc -p tsconfig.json) ||
			return 1
	fi
	node "$root/bench/clients/typescript_bench.mjs" --pg "dbname=bench" --duration "$((${duration%.*} > 0 ? ${duration%.*} : 1))" >>"$tsv"
}
if [[ " $cases " == *" uncontended "* ]]; then
	log "case uncontended: the Python and TypeScript clients"
	clients_bench || { failures=$((failures + 1)); log "the Python or TypeScript client benchmark reported errors"; }
fi

# --- the Go and Java clients in case 1 ----------------------------------------
# Each beside its driver's own two statements (client/go/bench_test.go,
# client/java/src/test/java/io/github/pgdlock/BenchTest.java), after a warm-up
# run of each: pairs/s at 1 and 8 clients and acquire p50, appended to the
# run's figures. The toolchains and caches are the test suites' (47-go,
# 48-java). A failure is noted and leaves the rest of the run alone.
go_java_bench() {
	local status=0
	[ -x /usr/local/go/bin/go ] && PATH=/usr/local/go/bin:$PATH
	(cd "$root/client/go" && DLOCK_BENCH=$duration DLOCK_BENCH_TSV=$tsv go test -count=1 -run '^TestBenchUncontended$' . >/dev/null) ||
		status=1
	(cd "$root/client/java" && DLOCK_BENCH=$duration DLOCK_BENCH_TSV=$tsv mvn -B -q test-compile surefire:test -Dtest=BenchTest >/dev/null) ||
		status=1
	return $status
}
if [[ " $cases " == *" uncontended "* ]]; then
	log "case uncontended: the Go and Java clients"
	go_java_bench || { failures=$((failures + 1)); log "the Go or Java client benchmark reported errors"; }
fi

# --- profiles ----------------------------------------------------------------
# perf follows the backends the postmaster forks after it attached (counters
# are inherited), so it sees exactly the server processes of this run.
profiles=()
if [ $profile -eq 1 ] && command -v perf >/dev/null; then
	pm_pid=$(head -n 1 "$pg_dir/data/postmaster.pid")
	for c in uncontended contended; do
		case " $cases " in *" $c "*) ;; *) continue ;; esac
		log "profile of case $c (dlock-sql, 8 clients)"
		data=$results/perf-$c.data.tmp
		perf record -q -g -p "$pm_pid" -o "$data" >/dev/null 2>&1 &
		perf_pid=$!
		sleep 2 # attached before the driver's backends are forked
		"$driver" run "$c" --pg "dbname=bench" --systems dlock-sql --clients 8 --rounds 1 \
			--duration "$duration" --warmup "$warmup" --out "$results/profile-$c.tsv.tmp" >/dev/null 2>&1 || true
		kill -INT "$perf_pid" 2>/dev/null || true
		wait "$perf_pid" || true
		per=$(awk -F'\t' '$4 == "server_cpu_us" {print $5}' "$results/profile-$c.tsv.tmp" 2>/dev/null | head -n 1 || true)
		{
			echo "perf record -g on the server processes during the $c case (dlock-sql, 8 clients);"
			echo "server CPU per $([ $c = uncontended ] && echo pair || echo 'critical section') in this run: ${per:-?} us"
			echo
			perf report -i "$data" --no-children --sort symbol --stdio -g none --percent-limit 0.8 2>/dev/null |
				grep -v '^#' | grep -v '^$'
			echo
			echo "inclusive (children) share of the entry points:"
			perf report -i "$data" --children --sort symbol --stdio -g none 2>/dev/null |
				awk '{ for (i = 1; i < NF; i++) if ($i == "[.]" || $i == "[k]") { s = $(i + 1); break } }
					s ~ /^(dlock_[a-z_]+|attempt_grant|change_own_lease|CommitTransactionCommand|XLogFlush|standard_ExecutorRun|standard_ExecutorStart|PortalStart|pq_getbyte|secure_write|ExecMakeTableFunctionResult|heap_update|heap_lock_tuple|index_getnext_slot|heap_fetch)$/ { print $1, s }' || true
		} >"$results/profile-$c.txt"
		rm -f "$data" "$results/profile-$c.tsv.tmp"
		profiles+=("$c:${per:-}")
	done
fi

echo "| load average at end | $(cut -d' ' -f1-3 /proc/loadavg) |" >>"$machine"
# Steal: CPU time the hypervisor gave to others while this VM wanted it; at
# tens of percent every figure of the run is slower and noisier.
read -r -a cpu_ticks_end < <(grep '^cpu ' /proc/stat)
echo "| CPU steal during the run | $(awk -v a="${cpu_ticks_start[*]}" -v b="${cpu_ticks_end[*]}" 'BEGIN {
	n = split(a, s, " "); split(b, e, " "); total = 0
	for (i = 2; i <= n; i++) total += e[i] - s[i]
	printf "%.1f %% of all CPU time (/proc/stat)", (total > 0 ? 100 * (e[9] - s[9]) / total : 0) }') |" >>"$machine"
echo "| duration of the run | $(( $(date -u +%s) - started )) s |" >>"$machine"

# --- results and plots ------------------------------------------------------
log "writing $results/latest.md and plots"
"$driver" report --in "$tsv" --machine "$machine" --md "$results/latest.md.tmp"
for p in "${profiles[@]}"; do
	c=${p%%:*}
	per=${p#*:}
	{
		echo "## Profile of the $c case: where the server's time goes"
		echo
		echo "\`perf record -g\` on the server processes while the $c case ran once more for dlock-sql at 8 clients"
		echo "(full report: [profile-$c.txt](profile-$c.txt)). Self time of the top functions, as a share of"
		echo "server CPU and in µs per $([ "$c" = uncontended ] && echo pair || echo 'critical section') (server CPU per unit in that run: ${per:-?} µs)."
		echo
		echo "| function | share | µs per unit |"
		echo "|---|---:|---:|"
		sed -n '4,$p' "$results/profile-$c.txt" | awk -v per="$per" '
			/^inclusive/ { exit }
			$1 ~ /%$/ {
				share = $1; sub(/%/, "", share)
				sym = ""
				for (i = 2; i < NF; i++) if ($i == "[.]" || $i == "[k]") { sym = $(i + 1); break }
				us = (per == "") ? "?" : sprintf("%.1f", share * per / 100)
				if (n++ < 15) printf "| `%s` | %s%% | %s |\n", sym, share, us
			}'
		echo
		echo "Inclusive shares of the entry points:"
		echo
		echo "| function | share (with callees) |"
		echo "|---|---:|"
		sed -n '/^inclusive/,$p' "$results/profile-$c.txt" | awk '$1 ~ /%$/ { printf "| `%s` | %s |\n", $2, $1 }'
		echo
	} >>"$results/latest.md.tmp"
done
mv "$results/latest.md.tmp" "$results/latest.md"
mv "$tsv" "$results/latest.tsv"
if [ -f "$results/session-handoff.md.tmp" ]; then
	{ echo; cat "$results/session-handoff.md.tmp"; } >>"$results/latest.md"
	mv "$results/session-handoff.md.tmp" "$results/session-handoff.md"
fi
if [ -f "$results/farm.md.tmp" ]; then
	{ echo; cat "$results/farm.md.tmp"; } >>"$results/latest.md"
	mv "$results/farm.md.tmp" "$results/farm.md"
fi
if [ -f "$results/instructions.md.tmp" ]; then
	{ echo; cat "$results/instructions.md.tmp"; } >>"$results/latest.md"
	mv "$results/instructions.md.tmp" "$results/instructions.md"
fi
# The key figures, the targets of docs/performance.md with their verdicts, the
# floors (summary.md) and the plots.
rm -f "$results"/*.png
python3 "$root/bench/render.py" --tsv "$results/latest.tsv" --out-dir "$results" >/dev/null ||
	log "bench/render.py failed: summary.md or the plots are missing"
rm -f "$machine"
log "done in $(( $(date -u +%s) - started )) s: $results/latest.md"
echo
sed -n '/^| target | measured/,/^$/p' "$results/summary.md"
[ $failures -eq 0 ] || log "$failures case(s) reported errors"
exit 0
