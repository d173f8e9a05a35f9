#!/usr/bin/env bash
# Bench cases 1 and 2 (README "Cases") for the SQL edition beside the C
# extension, with pgbench on a throwaway PostgreSQL 15 (pg_dlock preloaded):
#   case 1  uncontended try_acquire + release pairs, a name per client
#   case 2  contended: all clients on one name, acquire with a wait,
#           a 100 µs critical section, release
# Each database has one edition; the same pgbench scripts run on both.
# Usage: scripts/sql-edition-bench.sh [DURATION_S [CLIENTS...]]  (default: 5 s; 1 8)
# Prints a Markdown table. Measures only; never fails because of a figure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/lib/ports.sh"
duration=${1:-5}
shift || true
clients=("${@:-1 8}")
[ ${#clients[@]} -eq 1 ] && read -r -a clients <<<"${clients[0]}"
PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)}
export PG_BINDIR
dir=$(mktemp -d /tmp/sqled-bench.XXXXXX)
chmod 755 "$dir"
port=$(free_ports 1)
"$root/scripts/pg-cluster.sh" start "$dir/cluster" "$port" >/dev/null
trap '"$root/scripts/pg-cluster.sh" destroy "$dir/cluster"; rm -rf "$dir"' EXIT
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres
install -m 644 "$root"/sql_edition/pg_dlock_sql.control "$root"/sql_edition/pg_dlock_sql--*.sql "$("$PG_BINDIR/pg_config" --sharedir)/extension/"
psql -X -q -d postgres -c "CREATE DATABASE bench_c" -c "CREATE DATABASE bench_sql"
psql -X -q -d bench_c -c "CREATE EXTENSION pg_dlock"
psql -X -q -d bench_sql -c "CREATE EXTENSION pg_dlock_sql"

# (pgbench replaces :owner inside the quotes too)
cat >"$dir/case1.sql" <<'SQL'
\set n random(1, 1000000000)
SELECT owner_token AS owner FROM dlock.try_acquire('bench1:' || :n, '1 minute') \gset
SELECT dlock.release('bench1:' || :n, ':owner');
SQL
cat >"$dir/case2.sql" <<'SQL'
SELECT owner_token AS owner FROM dlock.acquire('bench2', '1 minute', '30 seconds') \gset
SELECT pg_sleep(0.0001);
SELECT dlock.release('bench2', ':owner');
SQL

run() { # DB SCRIPT CLIENTS -> transactions per second
	"$PG_BINDIR/pgbench" -n -M simple -T "$duration" -c "$3" -j "$3" -f "$2" "$1" 2>/dev/null |
		sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1
}
echo "| case | clients | C extension (per s) | SQL edition (per s) | SQL ÷ C |"
echo "|---|---|---|---|---|"
for c in 1 2; do
	for n in "${clients[@]}"; do
		[ "$c" = 2 ] && [ "$n" -lt 2 ] && continue
		tc=$(run bench_c "$dir/case$c.sql" "$n")
		ts=$(run bench_sql "$dir/case$c.sql" "$n")
		ratio=$(python3 -c "print(f'{$ts / $tc:.2f}' if $tc else '-')")
		echo "| $c | $n | ${tc:-?} | ${ts:-?} | $ratio |"
	done
done
echo
echo "Measured $(date -u +%Y-%m-%dT%H:%MZ), ${duration} s per run, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs."
