#!/usr/bin/env bash
# Building and testing as a PGXS user would, without the project's tooling:
# the internal header is not installed, -Werror is only in the project's own
# builds, and `make installcheck` passes as an ordinary OS user (no root, no
# apt) against a server that does not preload pg_dlock. Runs its own server
# (free port, private directory) and a copy of the source tree.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh

pg_config=$PG_BINDIR/pg_config
scratch=$(mktemp -d "$DLOCK_SCRATCH/pgxs.XXXXXX")
chmod 755 "$scratch"
cluster_dir=$scratch/cluster
port=$(free_ports)
trap 'scripts/pg-cluster.sh destroy "$cluster_dir" >/dev/null 2>&1; rm -rf "$scratch"' EXIT

# --- what `make install` installs ------------------------------------------
make -s install PG_CONFIG="$pg_config" DESTDIR="$scratch/destdir" >/dev/null 2>&1
installed_headers=$(find "$scratch/destdir" -name '*.h' | wc -l)
installed_library=$(find "$scratch/destdir" -name 'pg_dlock.so' | wc -l)
check "make install installs the library (control for the next check)" test "$installed_library" -eq 1
check "make install installs no header of the extension" test "$installed_headers" -eq 0

# --- compiler flags --------------------------------------------------------
user_flags=$(make -n -B PG_CONFIG="$pg_config" extension/args.o 2>/dev/null)
project_flags=$(make -n -B PG_CONFIG="$pg_config" DLOCK_WERROR=1 extension/args.o 2>/dev/null)
check "a PGXS user's build has no -Werror" bash -c '! grep -qE -- "-Werror( |$)" <<<"$1"' _ "$user_flags"
check "the project's own build has -Werror (negative control)" grep -qE -- "-Werror( |$)" <<<"$project_flags"

# --- make installcheck as an ordinary user, pg_dlock not preloaded --------
scripts/pg-cluster.sh start "$cluster_dir" "$port" -c "shared_preload_libraries = ''" >/dev/null ||
	{ cat "$cluster_dir/server.log"; finish; exit 1; }
preloaded=$(psql -X -At -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'SHOW shared_preload_libraries')
check "the server does not preload pg_dlock" test -z "$preloaded"

tree=$scratch/tree
mkdir -p "$tree"
cp -r Makefile pg_dlock.control sql extension regress "$tree"/
rm -rf "$tree/results" "$tree/output_iso" "$tree"/extension/*.o
# The handoff in the release's commit needs the wait queue in shared memory,
# which only preloading gives: without it waiters poll and nothing is handed
# over, and which of a polling waiter and a newcomer wins is timing. The spec
# runs in 10-regress, on the preloading server.
rm -f "$tree/regress/specs/handoff.spec" "$tree/regress/expected/handoff.out" \
	"$tree/regress/specs/kinds-handoff.spec" "$tree/regress/expected/kinds-handoff.out"
chown -R postgres: "$tree"
runuser -u postgres -- env -i PATH=/usr/bin:/bin HOME="$tree" \
	PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres \
	make -C "$tree" installcheck PG_CONFIG="$pg_config" >"$scratch/installcheck.log" 2>&1
status=$?
grep -E '^(test| ) *[a-z0-9_-]+ +\.\.\.|tests passed|failed' "$scratch/installcheck.log" | grep -E 'FAILED|tests passed|failed'
[ $status -ne 0 ] && { tail -n 20 "$scratch/installcheck.log"; head -n 60 "$tree/regression.diffs" 2>/dev/null; }
check "make installcheck passes as an ordinary user on a server without preloading" test $status -eq 0

# --- lock events without preloading: no event queue, the transaction notifies by itself
events=$(psql -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d postgres 2>&1 <<'SQL'
CREATE EXTENSION pg_dlock;
LISTEN dlock_events;
SET dlock.events = on;
SELECT 1 FROM dlock.try_acquire('pgxs:events', '1 minute') \g /dev/null
SQL
)
check "without preloading, a grant's event is still sent, at its commit" \
	grep -q 'payload "{"event":"acquire","lock_name":"pgxs:events"' <<<"$events"
finish
