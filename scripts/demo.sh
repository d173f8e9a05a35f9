#!/usr/bin/env bash
# make demo: a throwaway cluster on a free port of 127.0.0.1 and a short
# scenario. Set DEMO_KEEP=1 to leave the cluster running afterwards (the last
# lines say where it is and how to remove it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/lib/ports.sh"
# A directory and a port of its own, so that a demo never meets another
# cluster (a second demo, a test run, a server of the machine's own).
dir=$(mktemp -d /tmp/pg_dlock-demo.XXXXXX)
export PGHOST=127.0.0.1 PGPORT=$(free_ports 1) PGUSER=postgres PGDATABASE=demo
lock=job:daily-settlement:2026-09-16

"$root/scripts/pg-cluster.sh" start "$dir" "$PGPORT"
[ -n "${DEMO_KEEP:-}" ] || trap '"$root/scripts/pg-cluster.sh" destroy "$dir"' EXIT
psql -X -q -d postgres -c 'CREATE DATABASE demo'
psql -X -q -c 'CREATE EXTENSION pg_dlock'

say() { printf '\n== %s\n' "$*"; }
sql() { psql -X -q -At -F ' ' -c "$1"; }

say "Two workers race for $lock (ttl 2 s)"
for worker in worker-1 worker-2; do
	sql "SELECT '$worker', coalesce(fencing_token::text, 'refused'), coalesce(owner_token::text, '-')
	       FROM dlock.try_acquire('$lock', '2 seconds', holder => '$worker')" >"$dir/$worker.out" &
done
wait
cat "$dir"/worker-*.out
results=$(cat "$dir"/worker-*.out)
[ "$(grep -c refused <<<"$results")" -eq 1 ] || { echo "expected exactly one winner" >&2; exit 1; }
read -r winner_name winner_token winner_owner <<<"$(grep -v refused <<<"$results")"
loser_name=$(grep refused <<<"$results" | cut -d' ' -f1)
echo "$winner_name holds the lock with fencing token $winner_token; $loser_name was refused."
psql -X -c "SELECT lock_name, state, holder, fencing_token, expires_in FROM dlock.locks"

say "$winner_name stalls; its lease expires on the server clock; $loser_name takes over"
sleep 2.2
read -r new_token new_owner <<<"$(sql "SELECT fencing_token, owner_token FROM dlock.try_acquire('$lock', '30 seconds', holder => '$loser_name')")"
echo "$loser_name took over with fencing token $new_token (> $winner_token)"
[ "$new_token" -gt "$winner_token" ]

say "$winner_name wakes up: its renew and release are refused"
echo "renew   -> $(sql "SELECT coalesce(dlock.renew('$lock', '$winner_owner', '30 seconds')::text, 'NULL (refused)')")"
echo "release -> $(sql "SELECT dlock.release('$lock', '$winner_owner')") (false: not its lease any more)"
echo "holds   -> $(sql "SELECT dlock.holds('$lock', $winner_token)") (its token is no longer the live lease)"
psql -X -c "SELECT lock_name, state, holder, fencing_token, takeovers, acquisitions FROM dlock.locks"
echo "$loser_name releases: $(sql "SELECT dlock.release('$lock', '$new_owner')")"

say "Fencing where the data lives: the three examples of docs/fencing.md"
psql -X -q -e -v ON_ERROR_STOP=0 -f "$root/regress/sql/examples.sql" 2>&1

say "Counters"
psql -X -c "SELECT acquisitions, busy, takeovers, renewals, renewals_refused, releases, releases_refused, fence_rejections, holds_rejections FROM dlock.stats"
say "Done"
if [ -n "${DEMO_KEEP:-}" ]; then
	echo "The cluster keeps running: PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGDATABASE=$PGDATABASE psql"
	echo "Remove it with: scripts/pg-cluster.sh destroy $dir"
fi
