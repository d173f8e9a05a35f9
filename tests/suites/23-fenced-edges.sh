#!/usr/bin/env bash
# The edges of dlock.durability = fenced that need a server life of their
# own (a restart) or a server without preloading:
#  1. PREPARE TRANSACTION after the first fenced grant of a server life is
#     allowed, as docs/fencing.md says (the grant records the token epoch);
#     after a durable grant it stays refused (0A000, the control);
#  2. a refused attempt of any kind, the first of a server life that must
#     move the token epoch, takes no transaction ID and commits nothing
#     durably; the first grant then moves the epoch (in the same transaction
#     too);
#  4. (after 3) the shared entries that remember each database's token
#     epoch are given back when a database is dropped: with two entries
#     (dlock.test_epoch_entries), three databases made and dropped in turn
#     each mark their fenced grants, none is told fenced is not available;
#  3. without preloading, a stored dlock.durability = fenced (ALTER ROLE ...
#     SET, made in a session that has not loaded the library) shows what
#     the grants do: SHOW says fenced before and after a grant, and every
#     transaction that grants under it is warned that it commits durably.
# Runs its own servers (free ports, private directories).
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh

cluster=scripts/pg-cluster.sh
scratch=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/fenced-edges.XXXXXX")
chmod 755 "$scratch"
dir=$scratch/preloaded
plain_dir=$scratch/plain
read -r port plain_port <<<"$(free_ports 2 | tr '\n' ' ')"
trap '"$cluster" destroy "$dir" >/dev/null 2>&1; "$cluster" destroy "$plain_dir" >/dev/null 2>&1; rm -rf "$scratch"' EXIT

on() {
	local p=$1
	shift
	psql -X -q -At -h 127.0.0.1 -p "$p" -U postgres -d edges "$@"
}

"$cluster" start "$dir" "$port" >/dev/null || { cat "$dir/server.log"; finish; exit 1; }
psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'CREATE DATABASE edges'
on "$port" -c 'CREATE EXTENSION pg_dlock'

# --- 1. PREPARE TRANSACTION and fenced grants ------------------------------
prepared=$(on "$port" 2>&1 <<'SQL'
SELECT epoch_fenced IS NOT TRUE FROM dlock.durability_stats();
BEGIN;
SET LOCAL dlock.durability = fenced;
SELECT (dlock.try_acquire('edges:2pc', '1 minute')).fencing_token IS NOT NULL;
PREPARE TRANSACTION 'edges_fenced';
COMMIT PREPARED 'edges_fenced';
SELECT count(*) FROM dlock.lock_holders WHERE lock_name = 'edges:2pc';
SQL
)
echo "$prepared" | sed 's/^/  /'
check "the first fenced grant of a server life can be prepared and committed (docs/fencing.md)" \
	test "$(tr '\n' ' ' <<<"$prepared")" = "t t 1 "
refused=$(on "$port" -v VERBOSITY=verbose 2>&1 <<'SQL'
BEGIN;
SELECT (dlock.try_acquire('edges:2pc-durable', '1 minute')).fencing_token IS NOT NULL;
PREPARE TRANSACTION 'edges_durable';
SQL
)
check "a durable grant still cannot be prepared (0A000, control)" grep -q "ERROR:  0A000" <<<"$refused"

# --- 2. a refused attempt as a life's first does not move the epoch ---------
holder=00000000-0000-0000-0000-0000000000e1
other=00000000-0000-0000-0000-0000000000e2
on "$port" >/dev/null <<SQL
SET dlock.durability = fenced;
SELECT dlock.try_acquire('edges:held', '1 hour', '$holder');
SELECT dlock.try_acquire_permit('edges:sem', 1, '1 hour', '$holder');
SQL
before=$(on "$port" -c "SELECT fencing_token >> 40 FROM dlock.locks WHERE lock_name = 'edges:held'")
"$cluster" stop "$dir" && "$cluster" restart "$dir" || { cat "$dir/server.log"; finish; exit 1; }
left=$(on "$port" 2>&1 <<SQL
BEGIN;
SELECT (dlock.try_acquire('edges:held', '1 minute', '$other')).fencing_token IS NULL;
SELECT (dlock.try_acquire_shared('edges:held', '1 minute', '$other')).fencing_token IS NULL;
SELECT (dlock.try_acquire_permit('edges:sem', 1, '1 minute', '$other')).fencing_token IS NULL;
SELECT (dlock.downgrade('edges:held', '$other')).fencing_token IS NULL;
SELECT count(*) = 0 FROM dlock.try_acquire_all(ARRAY['edges:held', 'edges:free'], '1 minute', '$other');
SELECT pg_current_xact_id_if_assigned() IS NULL;
COMMIT;
SELECT durable_commits = 0 AND token_epoch IS NULL FROM dlock.durability_stats();
SELECT count(*) FROM dlock.token_epoch;
SQL
)
echo "$left" | sed 's/^/  /'
check "refused attempts of every kind as a server life's first take no transaction ID and commit nothing durably" \
	test "$(tr '\n' ' ' <<<"$left")" = "t t t t t t t 2 "
moved=$(on "$port" 2>&1 <<SQL
BEGIN;
SELECT (dlock.try_acquire('edges:held', '1 minute', '$other')).fencing_token IS NULL;
SELECT (dlock.try_acquire('edges:new', '1 minute', '$other')).fencing_token >> 40;
COMMIT;
SELECT token_epoch FROM dlock.durability_stats();
SQL
)
echo "  generation before the restart $before; after a refusal and a grant in one transaction: $(tr '\n' ' ' <<<"$moved")"
check "a grant after the refusal, in the same transaction, moves the epoch: a higher generation" \
	test "$(sed -n 2p <<<"$moved")" -gt "$before"
check "the epoch moved is published when that transaction commits" test "$(sed -n 3p <<<"$moved")" = 1

# --- 3. a stored fenced setting without preloading ------------------------
"$cluster" start "$plain_dir" "$plain_port" -c "shared_preload_libraries = ''" >/dev/null ||
	{ cat "$plain_dir/server.log"; finish; exit 1; }
psql -X -q -h 127.0.0.1 -p "$plain_port" -U postgres -d postgres -c 'CREATE DATABASE edges'
on "$plain_port" -c 'CREATE EXTENSION pg_dlock' -c 'CREATE ROLE regress_fenced LOGIN'
# a new session, which has not loaded the library: PostgreSQL stores it unchecked
on "$plain_port" -c 'ALTER ROLE regress_fenced SET dlock.durability = fenced'
shown=$(psql -X -q -At -h 127.0.0.1 -p "$plain_port" -U regress_fenced -d edges 2>&1 <<'SQL'
SHOW dlock.durability;
SELECT (dlock.try_acquire('edges:plain', '1 minute')).fencing_token IS NOT NULL;
SHOW dlock.durability;
SELECT (dlock.try_acquire('edges:plain2', '1 minute')).fencing_token IS NOT NULL;
SQL
)
echo "$shown" | sed 's/^/  /'
check "without preloading, SHOW says fenced before and after a grant under the stored setting" \
	test "$(grep -v WARNING <<<"$shown" | grep -v DETAIL | grep -v HINT | tr '\n' ' ')" = "fenced t fenced t "
check "each transaction granting under it is warned that it commits durably" \
	test "$(grep -c 'WARNING:  dlock.durability = fenced is not available on this server' <<<"$shown")" -eq 2
set_refused=$(psql -X -q -At -h 127.0.0.1 -p "$plain_port" -U regress_fenced -d edges -v VERBOSITY=verbose \
	-c "SELECT 1 FROM dlock.locks LIMIT 0" -c 'SET dlock.durability = fenced' 2>&1)
check "without preloading, SET dlock.durability = fenced in a session is refused (55000)" \
	grep -q "ERROR:  55000" <<<"$set_refused"

# --- 4. epoch entries of dropped databases are given back -------------------
echo "dlock.test_epoch_entries = 2" >>"$dir/data/postgresql.conf"
"$cluster" stop "$dir" && "$cluster" restart "$dir" || { cat "$dir/server.log"; finish; exit 1; }
on "$port" -c "SELECT dlock.try_acquire('edges:entry', '1 minute')" >/dev/null
entries=
for i in 1 2 3; do
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE edges_$i"
	entries+=$(psql -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d "edges_$i" 2>&1 <<'SQL'
CREATE EXTENSION pg_dlock;
SET dlock.durability = fenced;
SELECT (dlock.try_acquire('edges:db', '1 minute')).fencing_token IS NOT NULL AS granted;
SELECT epoch_fenced FROM dlock.durability_stats();
SQL
)" "
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "DROP DATABASE edges_$i WITH (FORCE)"
done
entries=$(echo $entries)
echo "  with two entries, three databases in turn (granted, marked): $entries"
check "the epoch entries of dropped databases are given back: each new database marks its fenced grants" \
	test "$entries" = "t t t t t t"
finish
