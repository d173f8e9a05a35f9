#!/usr/bin/env bash
# Upgrades: a database created at extension version 1.0, with leases, fence
# state, a fenced business table and audit records, is updated with ALTER
# EXTENSION pg_dlock UPDATE. The state must survive, and the whole pg_regress
# suite must pass on the updated database. Negative control: the same
# pg_regress run on a database left at 1.0 fails.
# The scripts as they are install exactly what the scripts as released did
# at release 1.4 (commit 1ad3b81, before their operators were qualified for pgspot):
# CREATE EXTENSION VERSION '1.4' and VERSION '1.0' + ALTER EXTENSION UPDATE TO '1.4'
# with each leave the same catalog state (tests/lib/catalog_state.sql), and a
# planted change of one constraint, and a simple CASE made searched, are seen
# (negative controls). For that the server's extension directory holds the
# released scripts for a moment (put back on exit).
# Uses the shared test server (databases of its own).
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh

state_db=dlock_upgrade_state
regress_db=dlock_upgrade_regress
old_db=dlock_upgrade_old
scratch=$(mktemp -d "$DLOCK_SCRATCH/upgrade.XXXXXX")
chmod 777 "$scratch"
pg_regress="$("$PG_BINDIR/pg_config" --pkglibdir)/pgxs/src/test/regress/pg_regress"

in_db() {
	local db=$1
	shift
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"
}

for db in $state_db $regress_db $old_db; do
	psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
	in_db "$db" -c "CREATE EXTENSION pg_dlock VERSION '1.0'"
done

# --- state made under 1.0 ------------------------------------------------
owner=00000000-0000-0000-0000-0000000000d1
held_token=$(in_db $state_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:held', '1 hour', '$owner', 'upgrade-test')")
released_token=$(in_db $state_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:released', '1 hour')")
in_db $state_db <<SQL >/dev/null
SELECT dlock.fence('upgrade:resource', $held_token);
SELECT dlock.force_release('upgrade:released', 'upgrade test: an audit record made under 1.0');
CREATE TABLE ledger (id int PRIMARY KEY, amount int, token bigint);
CREATE TRIGGER ledger_fencing BEFORE INSERT OR UPDATE ON ledger
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token');
INSERT INTO ledger VALUES (1, 10, $held_token);
SQL
before_version=$(in_db $state_db -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'")

# --- the update ----------------------------------------------------------
in_db $state_db -c 'ALTER EXTENSION pg_dlock UPDATE'
after_version=$(in_db $state_db -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'")
echo "extension version $before_version -> $after_version"
current_version=$(sed -n "s/^default_version = '\\(.*\\)'/\\1/p" pg_dlock.control)
check "ALTER EXTENSION pg_dlock UPDATE moves 1.0 to the current version ($current_version)" \
	test "$before_version $after_version" = "1.0 $current_version"

renewed=$(in_db $state_db -c "SELECT dlock.renew('upgrade:held', '$owner', '1 hour') IS NOT NULL")
check "a lease granted under 1.0 is still held after the update (renew succeeds)" test "$renewed" = t
held=$(in_db $state_db -c "SELECT dlock.holds('upgrade:held', $held_token)")
check "its fencing token is still the live lease (holds)" test "$held" = t
fence_refused=$(in_db $state_db -c "SELECT dlock.fence('upgrade:resource', $held_token - 1)" 2>&1)
check "fence state made under 1.0 still refuses a lower token (PD001 after the update)" \
	grep -q "stale fencing token" <<<"$fence_refused"
next_token=$(in_db $state_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:released', '1 minute')")
check "the next token of a lock used under 1.0 is above its last one" test "$next_token" -gt "$released_token"
audit=$(in_db $state_db -c "SELECT count(*) FROM dlock.audit_log WHERE reason LIKE 'upgrade test:%'")
check "audit records made under 1.0 are kept" test "$audit" = 1
ledger_refused=$(in_db $state_db -c "UPDATE ledger SET token = $held_token - 1" 2>&1)
check "a fencing trigger created under 1.0 still refuses a lower token" \
	grep -q "stale fencing token" <<<"$ledger_refused"
purge=$(in_db $state_db -c "SELECT dlock.purge_resource_fence('1 year')")
check "functions added in 1.1 exist after the update (purge_resource_fence)" test "$purge" = 0

# --- a database at 1.1 (the previous release) ---------------------------
from_db=dlock_upgrade_from_1_1
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $from_db" -c "CREATE DATABASE $from_db"
in_db $from_db -c "CREATE EXTENSION pg_dlock VERSION '1.1'"
held_1_1=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:held-1.1', '1 hour', '$owner', 'upgrade-test')")
# Lease policies: the acquire functions are replaced in 1.2 (new named options);
# grants made under 1.1 must carry over
grantee=regress_upgrade_acquirer
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS $grantee" -c "CREATE ROLE $grantee"
in_db $from_db <<SQL
REVOKE EXECUTE ON FUNCTION dlock.try_acquire(text, interval, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock.try_acquire(text, interval, uuid, text) TO $grantee;
SQL
# the 1.2 library on the 1.1 schema: old signatures, no policy columns
before_update=$(in_db $from_db -c "SELECT fencing_token IS NOT NULL FROM dlock.try_acquire('upgrade:before-update', '1 minute')")
check "the new library serves a database still at 1.1 (try_acquire works)" test "$before_update" = t
# dlock.stats_counters() of 1.1 has fewer columns than the library now fills
stats_1_1=$(in_db $from_db -c "SELECT shared_memory AND acquisitions > 0 AND stats_reset IS NOT NULL FROM dlock.stats" 2>&1)
check "dlock.stats of a database still at 1.1 works with the new library ($stats_1_1)" test "$stats_1_1" = t
in_db $from_db -c 'ALTER EXTENSION pg_dlock UPDATE'
stats_1_2=$(in_db $from_db -c "SELECT events_sent >= 0 AND events_dropped >= 0 AND acquisitions > 0 AND stats_reset IS NOT NULL FROM dlock.stats" 2>&1)
check "after the update dlock.stats has events_sent and events_dropped ($stats_1_2)" test "$stats_1_2" = t
acl_kept=$(in_db $from_db -c "SELECT NOT has_function_privilege('public', 'dlock.try_acquire(text, interval, uuid, text, boolean, interval, interval, interval)', 'EXECUTE') AND has_function_privilege('$grantee', 'dlock.try_acquire(text, interval, uuid, text, boolean, interval, interval, interval)', 'EXECUTE')")
check "grants on try_acquire made under 1.1 carry over to the 1.2 function" test "$acl_kept" = t
acquire_public=$(in_db $from_db -c "SELECT has_function_privilege('public', 'dlock.acquire(text, interval, interval, uuid, text, boolean, interval, interval, interval)', 'EXECUTE')")
check "acquire keeps its default grant to PUBLIC" test "$acquire_public" = t
policy_on_old_row=$(in_db $from_db -c "SELECT dlock.release('upgrade:before-update', (SELECT owner_token FROM dlock.lock_owners WHERE lock_name = 'upgrade:before-update'))" \
	-c "SELECT (dlock.try_acquire('upgrade:before-update', '1 minute', min_hold => '1 minute')).fencing_token IS NOT NULL" | tail -n 1)
check "a row written under 1.1 takes a lease with a policy after the update" test "$policy_on_old_row" = t
version_1_1=$(in_db $from_db -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'")
check "ALTER EXTENSION pg_dlock UPDATE moves 1.1 to $current_version" test "$version_1_1" = "$current_version"
renewed_1_1=$(in_db $from_db -c "SELECT dlock.renew('upgrade:held-1.1', '$owner', '1 hour') IS NOT NULL")
check "a lease granted under 1.1 is still held after the update" test "$renewed_1_1" = t
# Exclusive grants skip the kinds' check: a 1.1 row is not marked exclusive_only, so its next exclusive
# grant checks for shared leases and permits (and marks it)
mark_1_1=$(in_db $from_db -c "SELECT exclusive_only FROM dlock.distributed_lock WHERE lock_name = 'upgrade:held-1.1'")
check "a row written under 1.1 is not marked exclusive_only after the update" test "$mark_1_1" = f
next_1_1=$(in_db $from_db -c "SELECT dlock.release('upgrade:held-1.1', '$owner')" -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:held-1.1', '1 minute')" | tail -n 1)
check "the next token of a lock used under 1.1 is above its last one" test "$next_1_1" -gt "$held_1_1"
mark_1_1=$(in_db $from_db -c "SELECT exclusive_only FROM dlock.distributed_lock WHERE lock_name = 'upgrade:held-1.1'")
check "an exclusive grant on a row written under 1.1 marks it exclusive_only" test "$mark_1_1" = t
shared_1_1=$(in_db $from_db -c "SELECT dlock.release('upgrade:held-1.1', owner_token) FROM dlock.lock_owners WHERE lock_name = 'upgrade:held-1.1'" \
	-c "SELECT fencing_token FROM dlock.try_acquire_shared('upgrade:held-1.1', '1 minute')" | tail -n 1)
check "a shared lease on that row is granted above its exclusive token" test "${shared_1_1:-0}" -gt "$next_1_1"
after_shared_1_1=$(in_db $from_db -c "SELECT exclusive_only FROM dlock.distributed_lock WHERE lock_name = 'upgrade:held-1.1'" \
	-c "SELECT (dlock.try_acquire('upgrade:held-1.1', '1 minute')).owner_token IS NULL")
check "the shared lease clears the mark and keeps the writer out" test "$(echo $after_shared_1_1)" = "f t"
psql -X -q -d postgres -c "DROP DATABASE $from_db" -c "DROP ROLE $grantee"

# --- a database at 1.2 (the previous release) ---------------------------
from_db=dlock_upgrade_from_1_2
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $from_db" -c "CREATE DATABASE $from_db"
in_db $from_db -c "CREATE EXTENSION pg_dlock VERSION '1.2'"
held_1_2=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:held-1.2', '1 hour', '$owner', 'upgrade-test')")
reader_1_2=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire_shared('upgrade:read-1.2', '1 hour', '$owner')")
in_db $from_db -c "REVOKE EXECUTE ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text) FROM PUBLIC"
# the new library on the 1.2 schema: force release returns more columns, the
# views have no waiters column
forced_1_2=$(in_db $from_db -c "SELECT dlock.try_acquire('upgrade:forced-1.2', '1 hour')" \
	-c "SELECT dlock.force_release('upgrade:forced-1.2', 'upgrade test')" | tail -n 1)
check "the new library serves a database still at 1.2 (force release works)" test "$forced_1_2" = t
locks_1_2=$(in_db $from_db -c "SELECT count(*) FROM dlock.locks WHERE state = 'held'")
check "dlock.locks of a database still at 1.2 works with the new library" test "$locks_1_2" = 2
in_db $from_db -c 'ALTER EXTENSION pg_dlock UPDATE'
version_1_2=$(in_db $from_db -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'")
check "ALTER EXTENSION pg_dlock UPDATE moves 1.2 to $current_version" test "$version_1_2" = "$current_version"
renewed_1_2=$(in_db $from_db -c "SELECT dlock.renew('upgrade:held-1.2', '$owner', '1 hour') IS NOT NULL AND dlock.renew('upgrade:read-1.2', '$owner', '1 hour') IS NOT NULL")
check "an exclusive and a shared lease granted under 1.2 are still held after the update" test "$renewed_1_2" = t
waiters_1_2=$(in_db $from_db -c "SELECT count(*) FILTER (WHERE waiters = 0) FROM dlock.locks WHERE lock_name LIKE 'upgrade:%-1.2'")
check "after the update dlock.locks has the waiters column" test "$waiters_1_2" = 3
downgraded_1_2=$(in_db $from_db -c "SELECT fencing_token > $held_1_2 FROM dlock.downgrade('upgrade:held-1.2', '$owner')")
check "a lease granted under 1.2 is downgraded after the update, to a higher token" test "$downgraded_1_2" = t
holds_1_2=$(in_db $from_db -c "SELECT dlock.holds('upgrade:held-1.2', $held_1_2)")
check "its exclusive token is no longer held" test "$holds_1_2" = f
acl_1_2=$(in_db $from_db -c "SELECT has_function_privilege('public', 'dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval)', 'EXECUTE')")
check "a grant revoked under 1.2 stays revoked" test "$acl_1_2" = f
histograms_1_2=$(in_db $from_db -c "SELECT count(*) FROM dlock.hold_histogram()")
check "the histograms exist after the update (48 rows)" test "$histograms_1_2" = 48
psql -X -q -d postgres -c "DROP DATABASE $from_db"

# --- a database at 1.3 ---------------------------
from_db=dlock_upgrade_from_1_3
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $from_db" -c "CREATE DATABASE $from_db"
in_db $from_db -c "CREATE EXTENSION pg_dlock VERSION '1.3'"
held_1_3=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:held-1.3', '1 hour', '$owner', 'upgrade-test')")
reader_1_3=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire_shared('upgrade:read-1.3', '1 hour', '$owner')")
# a row last granted on timeline 2 of this cluster, as after a promotion
in_db $from_db -c "SELECT dlock.try_acquire('upgrade:tl2-1.3', '1 hour', '$owner')" \
	-c "SELECT dlock.release('upgrade:tl2-1.3', '$owner')" \
	-c "UPDATE dlock.distributed_lock SET grant_timeline = 2 WHERE lock_name = 'upgrade:tl2-1.3'" >/dev/null
# the new library on the 1.3 schema has no token epoch: a fenced grant there
# commits durably (synchronous_commit raised to on, as for a durable grant)
fenced_1_3=$(in_db $from_db -c "SET synchronous_commit = off" -c "SET dlock.durability = fenced" -c "BEGIN" \
	-c "SELECT dlock.try_acquire('upgrade:fenced-1.3', '1 hour', '$owner') IS NOT NULL" \
	-c "SHOW synchronous_commit" -c "COMMIT" | paste -sd' ')
check "a fenced grant on a database still at 1.3 commits durably ($fenced_1_3)" test "$fenced_1_3" = "t on"
in_db $from_db -c 'ALTER EXTENSION pg_dlock UPDATE'
version_1_3=$(in_db $from_db -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'")
check "ALTER EXTENSION pg_dlock UPDATE moves 1.3 to $current_version" test "$version_1_3" = "$current_version"
renewed_1_3=$(in_db $from_db -c "SELECT dlock.renew('upgrade:held-1.3', '$owner', '1 hour') IS NOT NULL AND dlock.renew('upgrade:read-1.3', '$owner', '1 hour') IS NOT NULL")
check "an exclusive and a shared lease granted under 1.3 are still held after the update" test "$renewed_1_3" = t
epoch_1_3=$(in_db $from_db -c "SELECT count(*) FROM dlock.token_epoch" \
	-c "SELECT dlock.renew('upgrade:held-1.3', '$owner', '1 hour') IS NOT NULL" \
	-c "SELECT dlock.try_acquire('upgrade:epoch-1.3', '1 hour', '$owner') IS NOT NULL" \
	-c "SELECT token_epoch FROM dlock.durability_stats()" | paste -sd' ')
check "the update starts with no epoch recorded, and the first grant is in epoch 0 ($epoch_1_3)" \
	test "$epoch_1_3" = "0 t t 0"
position_1_3=$(in_db $from_db -c "SELECT string_agg(lock_name || '=' || grant_timeline, ' ' ORDER BY lock_name) FROM dlock.distributed_lock WHERE lock_name IN ('upgrade:held-1.3', 'upgrade:tl2-1.3')")
check "grant timelines become history positions: 1 stays 1, 2 becomes 16385 ($position_1_3)" \
	test "$position_1_3" = "upgrade:held-1.3=1 upgrade:tl2-1.3=16385"
released_1_3=$(in_db $from_db -c "SELECT dlock.release('upgrade:held-1.3', '$owner')" \
	-c "SELECT fencing_token FROM dlock.try_acquire('upgrade:held-1.3', '1 hour', '$owner')" | tail -n 1)
check "the next token of a lock used under 1.3 is the next one in its generation" \
	test "$released_1_3" -eq $((held_1_3 + 1))
fenced_after_1_3=$(in_db $from_db -c "SET dlock.durability = fenced" \
	-c "SELECT dlock.try_acquire('upgrade:fenced-after-1.3', '1 hour', '$owner') IS NOT NULL" \
	-c "SELECT s.unflushed_commits FROM dlock.durability_stats() s" \
	-c "SELECT dlock.try_acquire('upgrade:fenced-after-1.3b', '1 hour', '$owner') IS NOT NULL" \
	-c "SELECT s.unflushed_commits FROM dlock.durability_stats() s" | paste -sd' ')
set -- $fenced_after_1_3
check "after the update a fenced grant commits without the flush once the epoch is marked ($fenced_after_1_3)" \
	test "${4:-0}" -eq $((${2:-0} + 1))
psql -X -q -d postgres -c "DROP DATABASE $from_db"

# --- a database at 1.4 (the previous release) ---------------------------
from_db=dlock_upgrade_from_1_4
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $from_db" -c "CREATE DATABASE $from_db"
in_db $from_db -c "CREATE EXTENSION pg_dlock VERSION '1.4'"
held_1_4=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:held-1.4', '1 hour', '$owner')")
# a floor left by a reap under 1.4: the highest token deleted, no position
reaped_1_4=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:reaped-1.4', '1 hour', '$owner')" \
	-c "SELECT dlock.release('upgrade:reaped-1.4', '$owner')" -c "SELECT dlock.reap('0 seconds')" \
	-c "SELECT reaped_max FROM dlock.token_floor" | tail -n 1)
check "the new library reaps a database still at 1.4 as 1.4 did (floor $reaped_1_4)" \
	test "$reaped_1_4" -ge "$held_1_4"
in_db $from_db -c 'ALTER EXTENSION pg_dlock UPDATE'
version_1_4=$(in_db $from_db -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'")
check "ALTER EXTENSION pg_dlock UPDATE moves 1.4 to $current_version" test "$version_1_4" = "$current_version"
renewed_1_4=$(in_db $from_db -c "SELECT dlock.renew('upgrade:held-1.4', '$owner', '1 hour') IS NOT NULL")
check "a lease granted under 1.4 is still held after the update" test "$renewed_1_4" = t
floor_1_4=$(in_db $from_db -c "SELECT reaped_max || ' ' || coalesce(grant_timeline::text, 'unknown') FROM dlock.token_floor")
check "the floor left under 1.4 keeps its token and is of unknown history ($floor_1_4)" \
	test "$floor_1_4" = "$reaped_1_4 unknown"
# the rule: a floor of unknown history moves up by the whole position (1)
new_1_4=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:new-after-1.4', '1 hour', '$owner')")
check "a new name after the update starts above the 1.4 floor by a whole position" \
	test "$new_1_4" -eq $((reaped_1_4 + (1 << 40) + 1))
rule_1_4=$(in_db $from_db -c "SELECT dlock.next_fencing_token($reaped_1_4, NULL, NULL, 1, 1)")
check "it is the token dlock.next_fencing_token gives for that floor" test "$rule_1_4" = "$new_1_4"
after_reap_1_4=$(in_db $from_db -c "SELECT dlock.release('upgrade:new-after-1.4', '$owner')" -c "SELECT dlock.reap('0 seconds')" \
	-c "SELECT count(*) || ' ' || min(grant_timeline) || ' ' || bool_and(grant_system = (SELECT system_identifier FROM pg_control_system())) FROM dlock.token_floor" | tail -n 1)
check "a reap after the update leaves one floor row with its position and cluster ($after_reap_1_4)" \
	test "$after_reap_1_4" = "1 1 true"
again_1_4=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire('upgrade:new-after-1.4', '1 hour', '$owner')")
check "the reaped name comes back one above its last token" test "$again_1_4" -eq $((new_1_4 + 1))
restore_1_4=$(in_db $from_db -c "SELECT dlock.after_restore()" \
	-c "SELECT fencing_token FROM dlock.try_acquire('upgrade:new-after-1.4', '1 hour', '$owner')" | paste -sd' ')
set -- $restore_1_4
check "dlock.after_restore ends the lease and moves the name by a whole timeline ($restore_1_4)" \
	test "${2:-0}" -eq $((again_1_4 + (16384 << 40) + 1))
psql -X -q -d postgres -c "DROP DATABASE $from_db"

# --- a database at 1.5 (the previous release) ---------------------------
# 1.6 gives the holder slots their lease policies' columns and replaces the
# shared, permit and multi-lock acquire functions (new named options): live
# shared leases and permits stay held, grants carry over, and the new
# library works on the 1.5 schema (no policy columns) before the update.
from_db=dlock_upgrade_from_1_5
reader=00000000-0000-0000-0000-0000000000d5
grantee_1_5=regress_upgrade_permit_taker
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $from_db" -c "CREATE DATABASE $from_db" \
	-c "DROP ROLE IF EXISTS $grantee_1_5" -c "CREATE ROLE $grantee_1_5"
in_db $from_db -c "CREATE EXTENSION pg_dlock VERSION '1.5'"
in_db $from_db <<SQL >/dev/null
REVOKE EXECUTE ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text) TO $grantee_1_5;
SQL
shared_1_5=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire_shared('upgrade:read-1.5', '1 hour', '$reader')")
permit_1_5=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire_permit('upgrade:sem-1.5', 2, '1 hour', '$reader')")
# the new library on the 1.5 schema: a release and a new permit, no policy columns written
cycle_1_5=$(in_db $from_db -c "SELECT fencing_token FROM dlock.try_acquire_permit('upgrade:sem-1.5', 2, '1 hour', '$owner')" \
	-c "SELECT dlock.release('upgrade:sem-1.5', '$owner')" -c "SELECT dlock.reap('0 seconds') >= 0" | paste -sd' ')
set -- $cycle_1_5
check "the new library grants and releases permits on a database still at 1.5 ($cycle_1_5)" \
	test "${1:-0}" -gt "$permit_1_5" -a "${2:-}" = t
capped_1_5=$(in_db $from_db -c "SET dlock.max_hold = '10s'" -c "SELECT dlock.try_acquire_shared('upgrade:read-1.5', '1 hour')" 2>&1)
check "dlock.max_hold refuses a longer ttl of a shared lease there too" \
	grep -q "max_hold must not be less than the ttl" <<<"$capped_1_5"
in_db $from_db -c 'ALTER EXTENSION pg_dlock UPDATE'
version_1_5=$(in_db $from_db -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'")
check "ALTER EXTENSION pg_dlock UPDATE moves 1.5 to $current_version" test "$version_1_5" = "$current_version"
kept_1_5=$(in_db $from_db -c "SELECT (SELECT fencing_token FROM dlock.try_acquire_shared('upgrade:read-1.5', '1 hour', '$reader'))
	|| ' ' || (SELECT fencing_token FROM dlock.try_acquire_permit('upgrade:sem-1.5', 2, '1 hour', '$reader'))
	|| ' ' || (SELECT count(*) FROM dlock.lock_holder WHERE owner_token IS NOT NULL
				AND hold_limit IS NULL AND min_hold_until IS NULL AND lock_delay IS NULL AND not_before IS NULL)")
check "the shared lease and the permit granted under 1.5 are still held, with their tokens and no policy ($kept_1_5)" \
	test "$kept_1_5" = "$shared_1_5 $permit_1_5 2"
acl_1_5=$(in_db $from_db -c "SELECT NOT has_function_privilege('public', 'dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval)', 'EXECUTE') AND has_function_privilege('$grantee_1_5', 'dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval)', 'EXECUTE')")
check "grants on try_acquire_permit made under 1.5 carry over to the 1.6 function" test "$acl_1_5" = t
policy_1_5=$(in_db $from_db -c "SELECT (dlock.try_acquire_permit('upgrade:sem-1.5', 2, '1 hour', '$owner', min_hold => '1 hour')).fencing_token IS NOT NULL" \
	-c "SELECT dlock.release('upgrade:sem-1.5', '$owner')" \
	-c "SELECT dlock.try_acquire_permit('upgrade:sem-1.5', 2, '1 hour') IS NULL" | paste -sd' ')
check "after the update a permit's min_hold keeps it taken after its release ($policy_1_5)" \
	test "$policy_1_5" = "t t t"
psql -X -q -d postgres -c "DROP DATABASE $from_db" -c "DROP ROLE $grantee_1_5"

# --- the regress suite on an updated database ----------------------------
run_regress() {
	local db=$1 out=$2
	mkdir -p "$out"
	chmod 777 "$out"
	"$pg_regress" --inputdir=regress --outputdir="$out" --bindir="$PG_BINDIR" \
		--use-existing --dbname="$db" \
		$(ls regress/sql/*.sql | xargs -n1 basename | sed 's/\.sql$//') >"$out/log" 2>&1
}

in_db $regress_db -c 'ALTER EXTENSION pg_dlock UPDATE'
if run_regress $regress_db "$scratch/updated"; then
	regress_ok=yes
else
	regress_ok=no
	grep -E '\.\.\. FAILED' "$scratch/updated/log"
	head -n 100 "$scratch/updated/regression.diffs" 2>/dev/null
fi
grep -E '^(test| ) *[a-z0-9_-]+ +\.\.\.|tests passed' "$scratch/updated/log" | tail -n 1
check "pg_regress passes on a database updated from 1.0" test "$regress_ok" = yes

# negative control: the same run on a database still at 1.0 fails
if run_regress $old_db "$scratch/old"; then old_ok=yes; else old_ok=no; fi
check "negative control: pg_regress fails on a database left at 1.0" test "$old_ok" = no

for db in $state_db $regress_db $old_db; do
	psql -X -q -d postgres -c "DROP DATABASE $db"
done

# --- the scripts install what the released scripts installed --------------
# The released scripts: release 1.4's, before pg_dlock--1.0.sql to
# 1.3--1.4.sql had their operators qualified in place (as PostgreSQL's fix
# for CVE-2020-14350 did to contrib's scripts). An edit that changes what they
# install would give databases installed before and after it different
# objects; compared at 1.4, the last released version.
released_sql=1ad3b81
extdir="$("$PG_BINDIR/pg_config" --sharedir)/extension"
mkdir -p "$scratch/installed" "$scratch/scripts"
cp "$extdir"/pg_dlock--*.sql "$scratch/installed/"
trap 'rm -f "$extdir"/pg_dlock--*.sql; cp "$scratch/installed"/pg_dlock--*.sql "$extdir/"' EXIT
mkdir -p "$scratch/scripts/released" "$scratch/scripts/now" "$scratch/scripts/bad-check" "$scratch/scripts/bad-case"
for f in $(git ls-tree --name-only $released_sql sql/); do
	git show "$released_sql:$f" >"$scratch/scripts/released/$(basename "$f")"
done
cp sql/pg_dlock--*.sql "$scratch/scripts/now/"
# negative controls: a constraint that allows one more character, and the
# searched CASE a rewrite for pgspot could have made of a simple one
cp sql/pg_dlock--*.sql "$scratch/scripts/bad-check/"
sed -i 's/char_length(lock_name) OPERATOR(pg_catalog.<=) 200)/char_length(lock_name) OPERATOR(pg_catalog.<=) 201)/' \
	"$scratch/scripts/bad-check/pg_dlock--1.0.sql"
cp sql/pg_dlock--*.sql "$scratch/scripts/bad-case/"
sed -i "s/CASE h.kind WHEN 's' THEN 'shared' ELSE 'permit' END/CASE WHEN h.kind OPERATOR(pg_catalog.=) 's' THEN 'shared' ELSE 'permit' END/" \
	"$scratch/scripts/bad-case/pg_dlock--1.1--1.2.sql"
# catalog_state SCRIPTS: the catalog state of a fresh CREATE EXTENSION and of
# an update from 1.0, with the scripts in $scratch/scripts/SCRIPTS
catalog_state() {
	rm -f "$extdir"/pg_dlock--*.sql
	cp "$scratch/scripts/$1"/pg_dlock--*.sql "$extdir/"
	for path in fresh updated; do
		local db=dlock_upgrade_catalog
		psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
		if [ $path = fresh ]; then
			in_db $db -c "CREATE EXTENSION pg_dlock VERSION '1.4'"
		else
			in_db $db -c "CREATE EXTENSION pg_dlock VERSION '1.0'" -c "ALTER EXTENSION pg_dlock UPDATE TO '1.4'"
		fi
		in_db $db -f tests/lib/catalog_state.sql >"$scratch/$1-$path.txt" 2>&1
		psql -X -q -d postgres -c "DROP DATABASE $db"
	done
	rm -f "$extdir"/pg_dlock--*.sql
	cp "$scratch/installed"/pg_dlock--*.sql "$extdir/"
}
for s in released now bad-check bad-case; do catalog_state $s; done
for path in fresh updated; do
	lines=$(grep -c . "$scratch/released-$path.txt")
	diff "$scratch/released-$path.txt" "$scratch/now-$path.txt" | cut -c1-200 | head -n 20
	check "the scripts install the same objects as the released ones ($path: $lines lines of catalog state, of $(grep -c '^member ' "$scratch/released-$path.txt") members)" \
		bash -c "[ $lines -gt 500 ] && cmp -s '$scratch/released-$path.txt' '$scratch/now-$path.txt'"
	for bad in bad-check bad-case; do
		check "negative control: the catalog state tells the scripts with a planted change ($bad, $path) from the released ones ($(diff "$scratch/released-$path.txt" "$scratch/$bad-$path.txt" | grep -c '^>') lines differ)" \
			bash -c "! cmp -s '$scratch/released-$path.txt' '$scratch/$bad-$path.txt'"
	done
done
check "a fresh install and an update from 1.0 leave the same catalog state" \
	cmp -s "$scratch/now-fresh.txt" "$scratch/now-updated.txt"
trap - EXIT

rm -rf "$scratch"
finish
