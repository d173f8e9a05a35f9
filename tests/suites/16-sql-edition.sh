#!/usr/bin/env bash
# The SQL edition (pg_dlock_sql, docs/sql-edition.md) on Debian's PostgreSQL 15,
# beside the C extension:
#   1. the scripts' copies of the C extension's views and the generated
#      installers are current (and a negative control: a view changed in the
#      C extension's scripts changes the SQL edition's); parity with the C
#      extension's functions (and a negative control: a new C function fails it);
#   2. the shared SQL API tests (tests/sql_edition/api.sh) against the C
#      extension (the shared test database) and against the SQL edition
#      installed by CREATE EXTENSION as a database owner without superuser;
#      the same signatures, return types, views (their definitions too, with a
#      negative control) and default privileges;
#   3. the two editions refuse each other in one database; a schema dlock
#      another role owns is refused;
#   4. the update from 1.4.1 to 1.4.2 (ALTER EXTENSION by the owner without
#      superuser): a pin held past its lease's end keeps the name from every
#      kind after it (the same checks fail before, a negative control); from
#      1.4: the nil UUID names no lease after it (22023 before); from
#      1.3 (and psql -f; also from 1.2 through every step): leases kept,
#      the same surface as a new installation, grants under
#      dlock.durability = fenced refused after it (granted before), the
#      shared API tests on the updated database;
#      psql -f install and its upgrade path (with a made-up next version), and
#      the pg_tle registration script run against stand-ins for pg_tle's API;
#   5. tokens only grow: across a crash, pg_dump/pg_restore into another
#      cluster (with and without pg_control_system()), and the promotion of a
#      standby that missed the last grants.
# Uses the shared test server for 1-4 and clusters of its own for 5.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh
. tests/sql_edition/lib.sh
. tests/sql_edition/pins.sh

scratch=$(mktemp -d "$DLOCK_SCRATCH/sql-edition.XXXXXX")
chmod 777 "$scratch"
owner=regress_sqled_owner
version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" sql_edition/pg_dlock_sql.control)
nil=00000000-0000-0000-0000-000000000000
install_sql_edition "$("$PG_BINDIR/pg_config" --sharedir)"

# --- 1. generated files and parity ---------------------------------------------
cp -r sql_edition "$scratch/built"
sql_edition/build.sh "$scratch/built" >/dev/null
check "sql_edition (the views copied from sql/, and dist/) is what sql_edition/build.sh makes now" \
	diff -r sql_edition "$scratch/built"
# negative control: a view changed in the C extension's scripts changes the SQL edition's copy
mkdir -p "$scratch/c-views"
cp sql/pg_dlock--*.sql "$scratch/c-views/"
sed -i 's/^\(\t WHERE h.owner_token IS NOT NULL AND h.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()\);$/\1 AND true;/' \
	"$scratch/c-views/pg_dlock--1.1--1.2.sql"
cp -r sql_edition "$scratch/built-c-views"
sql_edition/build.sh "$scratch/built-c-views" "$scratch/built-c-views/dist" "$scratch/c-views" >/dev/null
check "negative control: dlock.lock_holders changed in sql/ changes the SQL edition's script (the check above fails)" \
	bash -c "! diff -r -q sql_edition '$scratch/built-c-views' >/dev/null && grep -q 'clock_timestamp() AND true;' '$scratch/built-c-views/pg_dlock_sql--1.2.sql'"
parity=$(scripts/sql-edition-parity.sh 2>&1)
check "parity: every C extension function is in the SQL edition or listed as missing ($parity)" \
	scripts/sql-edition-parity.sh
mkdir -p "$scratch/c-sql"
cp sql/pg_dlock--*.sql "$scratch/c-sql/"
printf '\nCREATE FUNCTION dlock.brand_new_feature(x int) RETURNS int AS $$ SELECT x $$ LANGUAGE sql;\n' \
	>>"$(ls "$scratch"/c-sql/pg_dlock--*--*.sql | sort -V | tail -n 1)"
check "negative control: a function added to the C extension fails the parity check" \
	bash -c "! scripts/sql-edition-parity.sh '$scratch/c-sql' sql_edition >/dev/null"

# --- 2. the shared API tests on both editions -------------------------------------
echo "--- shared API tests: C extension (database $PGDATABASE)"
tests/sql_edition/api.sh "$PGDATABASE" postgres c >"$scratch/api-c.log" 2>&1
c_summary=$(tail -n 1 "$scratch/api-c.log")
grep FAILED "$scratch/api-c.log"
check "shared API tests pass on the C extension ($c_summary)" grep -q ' 0 failed$' "$scratch/api-c.log"

ext_db=dlock_sqled
owner_database $ext_db $owner
AS=$owner q $ext_db "CREATE EXTENSION pg_dlock_sql" >/dev/null
installed=$(q $ext_db "SELECT e.extversion || ' ' || pg_get_userbyid(e.extowner) || ' ' || n.nspname || ' ' || pg_get_userbyid(n.nspowner) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_dlock_sql'")
check "CREATE EXTENSION pg_dlock_sql by a database owner without superuser ($installed)" \
	test "$installed" = "$version $owner dlock $owner"
not_super=$(q $ext_db "SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE p.pronamespace = 'dlock'::regnamespace AND r.rolsuper")
check "no function of the SQL edition runs with a superuser's rights (all owned by $owner)" test "$not_super" = 0
echo "--- shared API tests: SQL edition (database $ext_db, owner $owner)"
tests/sql_edition/api.sh $ext_db $owner sql >"$scratch/api-sql.log" 2>&1
sql_summary=$(tail -n 1 "$scratch/api-sql.log")
grep FAILED "$scratch/api-sql.log"
check "shared API tests pass on the SQL edition ($sql_summary)" grep -q ' 0 failed$' "$scratch/api-sql.log"
# the one token rule: the shared vectors (the C extension's in 14-token-rule;
# 16-sql-edition-safety has the negative control, 1.4.2's rule)
. tests/lib/token_vectors.sh
vectors=$(token_vector_mismatches $ext_db 2>&1)
grep '^mismatch' <<<"$vectors"
check "the token rule's vectors hold in the SQL edition ($(tail -n 2 <<<"$vectors" | tr '\n' ' '))" \
	bash -c "grep -qx 'mismatches 0' <<<'$vectors' && grep -q '^vectors [1-9]' <<<'$vectors'"

surface() {
	q "$1" "SELECT string_agg(s, E'\n' ORDER BY s) FROM (
		SELECT 'function ' || p.oid::regprocedure::text || ' returns ' || pg_get_function_result(p.oid)
			   || ' args ' || pg_get_function_arguments(p.oid)
			   || ' public ' || has_function_privilege('public', p.oid, 'EXECUTE') AS s
		  FROM pg_proc p WHERE p.pronamespace = 'dlock'::regnamespace AND p.proname NOT LIKE '\\_%'
		UNION ALL
		SELECT 'view ' || c.relname || ' ' || string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
			   || ' public ' || has_table_privilege('public', c.oid, 'SELECT')
			   || ' as ' || regexp_replace(pg_get_viewdef(c.oid), '\s+', ' ', 'g')
		  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
		 WHERE c.relnamespace = 'dlock'::regnamespace AND c.relkind = 'v' GROUP BY c.oid, c.relname
		UNION ALL
		SELECT 'type lease ' || string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
		  FROM pg_attribute a WHERE a.attrelid = 'dlock.lease'::regclass) x"
}
# check_same_surface_as_new DB NAME [TEXT]: DB (an updated installation) has
# the surface of the new installation ($scratch/surface-sql-all)
check_same_surface_as_new() {
	local db=$1 name=$2 text=${3:-"... to the surface of a new $version installation"}
	surface "$db" >"$scratch/surface-$name"
	diff "$scratch/surface-sql-all" "$scratch/surface-$name" >"$scratch/surface-$name.diff"
	head -n 20 "$scratch/surface-$name.diff"
	check "$text" test ! -s "$scratch/surface-$name.diff"
}
# functions listed in sql_edition/missing-functions.txt are not expected
missing=$(sed -e 's/#.*//' sql_edition/missing-functions.txt | awk 'NF {print "^function dlock\\." $1 "\\("}' | paste -sd'|' -)
# functions listed in sql_edition/differing-functions.txt (arguments the SQL
# edition does not follow yet) are compared by name only, and must differ
differing=$(sed -e 's/#.*//' sql_edition/differing-functions.txt | awk 'NF {print "^function dlock\\." $1 "\\("}' | paste -sd'|' -)
differing=${differing:-^no function is listed$}
surface "$PGDATABASE" | grep -v -E "${missing:-^no function is listed$}" >"$scratch/surface-c-all"
surface $ext_db >"$scratch/surface-sql-all"
stale=""
for name in $(sed -e 's/#.*//' sql_edition/differing-functions.txt | awk 'NF {print $1}'); do
	c_lines=$(grep -E "^function dlock\.$name\(" "$scratch/surface-c-all")
	sql_lines=$(grep -E "^function dlock\.$name\(" "$scratch/surface-sql-all")
	if [ -z "$c_lines" ] || [ -z "$sql_lines" ] || [ "$c_lines" = "$sql_lines" ]; then stale="$stale $name"; fi
done
check "each function of sql_edition/differing-functions.txt is in both editions and still differs (others:${stale:- none})" test -z "$stale"
grep -v -E "$differing" "$scratch/surface-c-all" >"$scratch/surface-c"
grep -v -E "$differing" "$scratch/surface-sql-all" >"$scratch/surface-sql"
diff "$scratch/surface-c" "$scratch/surface-sql" >"$scratch/surface.diff"
head -n 20 "$scratch/surface.diff"
check "same functions (arguments, defaults, return types, PUBLIC execute), views (columns, PUBLIC select, definitions) and lease type as the C extension ($(wc -l <"$scratch/surface-c") items)" \
	test ! -s "$scratch/surface.diff" -a -s "$scratch/surface-c"
# negative control: a view whose definition differs (one more condition) fails the comparison
views_db=dlock_sqled_views
owner_database $views_db $owner
AS=$owner q $views_db "CREATE EXTENSION pg_dlock_sql" \
	"CREATE OR REPLACE VIEW dlock.lock_owners AS SELECT l.lock_name, l.owner_token, l.fencing_seq AS fencing_token, l.lease_until FROM dlock.distributed_lock l WHERE l.owner_token IS NOT NULL AND l.lease_until IS NOT NULL" >/dev/null
surface $views_db | grep -v -E "$differing" >"$scratch/surface-views"
views_diff=$(diff "$scratch/surface-c" "$scratch/surface-views" | grep -c '^[<>]')
views_owners=$(diff "$scratch/surface-c" "$scratch/surface-views" | grep -c '^[<>] view lock_owners ')
check "negative control: a view with the same columns and another definition fails that comparison ($views_diff lines differ, $views_owners of dlock.lock_owners)" \
	test "$views_diff $views_owners" = "2 2"

# --- 4a. the updates: from 1.4 to 1.4.1, and from 1.3 and 1.2 ----------------------
# 1.4.1: the nil UUID names no lease in renew, release and release_all
# (NULL, false, 0, as in the C extension); 1.4 refused it there (22023).
# ALTER EXTENSION by the database owner without superuser (a trusted
# extension's update script runs as a superuser too: it must hand what it
# creates to the owner)
nil_up_db=dlock_sqled_update_nil
owner_database $nil_up_db $owner
nil_tok=$(AS=$owner q $nil_up_db "CREATE EXTENSION pg_dlock_sql VERSION '1.4'" \
	"SELECT fencing_token FROM dlock.try_acquire('up:nil', '1 hour', '00000000-0000-0000-0000-0000000000a1')")
nil_before=$(AS=$owner sqlstate $nil_up_db "SELECT dlock.release('up:nil', '$nil')")
nil_state=$(AS=$owner sqlstate $nil_up_db "ALTER EXTENSION pg_dlock_sql UPDATE")
nil_after=$(AS=$owner q $nil_up_db "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock_sql'" \
	"SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE p.pronamespace = 'dlock'::regnamespace AND r.rolsuper" \
	"SELECT dlock.release('up:nil', '$nil')" "SELECT dlock.renew('up:nil', '$nil', '1 hour') IS NULL" \
	"SELECT dlock.release_all(ARRAY['up:nil'], '$nil')" \
	"SELECT fencing_token FROM dlock.lock_holders WHERE lock_name = 'up:nil'" | tr '\n' ' ')
read -r nil_version nil_super nil_release nil_renew nil_release_all nil_kept <<<"$nil_after"
check "ALTER EXTENSION pg_dlock_sql UPDATE from 1.4 by the owner without superuser ($nil_state; version $nil_version, superuser-owned functions: $nil_super)" \
	test "$nil_state $nil_version $nil_super" = "ok $version 0"
check "release with the nil UUID: 22023 in 1.4, false after the update, as renew (NULL) and release_all (0); the lease is kept ($nil_before; $nil_release $nil_renew $nil_release_all $nil_kept)" \
	test "$nil_before $nil_release $nil_renew $nil_release_all $nil_kept" = "22023 f t 0 $nil_tok"
check_same_surface_as_new $nil_up_db up-nil
tests/sql_edition/api.sh $nil_up_db $owner sql >"$scratch/api-up-nil.log" 2>&1
grep FAILED "$scratch/api-up-nil.log"
check "shared API tests pass on the database updated from 1.4 ($(tail -n 1 "$scratch/api-up-nil.log"))" grep -q ' 0 failed$' "$scratch/api-up-nil.log"

# 1.4.2: a pin held past the end of its lease keeps the name from every kind
# (tests/sql_edition/pins.sh). 1.4.1 let the other kind, or a third permit of
# a semaphore of 2, in at once: the same checks fail there (run apart, so
# that they count as this control and not as failures).
pin_up_db=dlock_sqled_update_pins
owner_database $pin_up_db $owner
AS=$owner q $pin_up_db "CREATE EXTENSION pg_dlock_sql VERSION '1.4.1'" >/dev/null
pins_before=$(passed=0 failed=0; pins_hold_across_kinds $pin_up_db $owner before; finish)
echo "$pins_before" | sed 's/^/    1.4.1: /'
check "negative control: on 1.4.1 every pin check fails but the last ($(tail -n 1 <<<"$pins_before"))" \
	test "$(grep -c '^FAILED' <<<"$pins_before") $(tail -n 1 <<<"$pins_before")" = "5 1 passed, 5 failed"
pin_up_state=$(AS=$owner sqlstate $pin_up_db "ALTER EXTENSION pg_dlock_sql UPDATE")
pin_up_version=$(q $pin_up_db "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock_sql'" \
	"SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE p.pronamespace = 'dlock'::regnamespace AND r.rolsuper" | tr '\n' ' ')
check "ALTER EXTENSION pg_dlock_sql UPDATE from 1.4.1 by the owner without superuser ($pin_up_state; version, superuser-owned functions: $pin_up_version)" \
	test "$pin_up_state $pin_up_version" = "ok $version 0 "
check_same_surface_as_new $pin_up_db up-pins
pins_hold_across_kinds $pin_up_db $owner after

# from 1.3, through the steps to 1.4 and to 1.4.1
up_db=dlock_sqled_update
owner_database $up_db $owner
AS=$owner q $up_db "CREATE EXTENSION pg_dlock_sql VERSION '1.3'" >/dev/null
up_ex=$(AS=$owner q $up_db "SELECT fencing_token FROM dlock.try_acquire('up:ex', '1 hour', '00000000-0000-0000-0000-0000000000a1', 'writer')")
up_sh=$(AS=$owner q $up_db "SELECT fencing_token FROM dlock.try_acquire_shared('up:sh', '1 hour', '00000000-0000-0000-0000-0000000000b2')")
# what 1.4 changes: 1.3 grants under dlock.durability = fenced, durably
up_fenced=$(AS=$owner sqlstate $up_db "SET dlock.durability = fenced" "SELECT dlock.try_acquire('up-fenced', '1 minute')")
check "1.3 grants under dlock.durability = fenced ($up_fenced)" test "$up_fenced" = ok
up_state=$(AS=$owner sqlstate $up_db "ALTER EXTENSION pg_dlock_sql UPDATE")
up_version=$(q $up_db "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock_sql'")
check "ALTER EXTENSION pg_dlock_sql UPDATE from 1.3 by the owner without superuser ($up_state, now $up_version)" \
	test "$up_state" = ok -a "$up_version" = "$version"
up_super=$(q $up_db "SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE p.pronamespace = 'dlock'::regnamespace AND r.rolsuper")
check "after the update no function of the SQL edition runs with a superuser's rights" test "$up_super" = 0
up_kept=$(AS=$owner q $up_db "SELECT string_agg(lock_name || ' ' || kind || ' ' || fencing_token, ', ' ORDER BY lock_name) FROM dlock.lock_holders WHERE lock_name LIKE 'up:%'")
check "the leases held across the update are kept ($up_kept)" test "$up_kept" = "up:ex exclusive $up_ex, up:sh shared $up_sh"
check_same_surface_as_new $up_db up "the updated database has the surface of a new $version installation"
up_refused=$(AS=$owner sqlstate $up_db "SET dlock.durability = fenced" "SELECT dlock.renew('up:ex', '00000000-0000-0000-0000-0000000000a1', '1 hour')")
check "under dlock.durability = fenced $version refuses to renew a lease 1.3 granted ($up_refused)" test "$up_refused" = 0A000
up_dg=$(AS=$owner q $up_db "SELECT fencing_token FROM dlock.downgrade('up:ex', '00000000-0000-0000-0000-0000000000a1')")
check "... and downgrades it without ($up_dg > $up_ex)" test "${up_dg:-0}" -gt "$up_ex"
tests/sql_edition/api.sh $up_db $owner sql >"$scratch/api-up.log" 2>&1
grep FAILED "$scratch/api-up.log"
check "shared API tests pass on the updated database ($(tail -n 1 "$scratch/api-up.log"))" grep -q ' 0 failed$' "$scratch/api-up.log"
# the longer way, from 1.2 through every step
up2_db=dlock_sqled_update2
owner_database $up2_db $owner
AS=$owner q $up2_db "CREATE EXTENSION pg_dlock_sql VERSION '1.2'" >/dev/null
up2_state=$(AS=$owner sqlstate $up2_db "ALTER EXTENSION pg_dlock_sql UPDATE")
up2=$(q $up2_db "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock_sql'" \
	"SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE p.pronamespace = 'dlock'::regnamespace AND r.rolsuper" | tr '\n' ' ')
check "ALTER EXTENSION pg_dlock_sql UPDATE from 1.2 through every step ($up2_state; version, superuser-owned functions: $up2)" \
	test "$up2_state $up2" = "ok $version 0 "
check_same_surface_as_new $up2_db up2

# from 1.5 to 1.6: the six acquire functions are replaced by the C extension's
# 1.6 signatures; a privilege given or taken on the old ones stays with the new.
# Then from 1.6 to 1.7 (below): the policies of shared leases and permits.
up6_db=dlock_sqled_update6
owner_database $up6_db $owner
q postgres "SET client_min_messages = warning" "DROP ROLE IF EXISTS regress_sqled_up6" "CREATE ROLE regress_sqled_up6" >/dev/null
AS=$owner q $up6_db "CREATE EXTENSION pg_dlock_sql VERSION '1.5'" \
	"REVOKE EXECUTE ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text) FROM PUBLIC" \
	"GRANT EXECUTE ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text) TO regress_sqled_up6" \
	"REVOKE EXECUTE ON FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text) FROM PUBLIC" >/dev/null
up6_sh=$(AS=$owner q $up6_db "SELECT fencing_token FROM dlock.try_acquire_shared('up6:sh', '1 hour', '00000000-0000-0000-0000-0000000000c3')")
# audit = all: renewals of every kind ("renew"; "renew_refused" without token
# or holder), and the expiry of a shared lease or permit, written once by the
# grant that ends it (a slot reused, a writer's grant), as in the C extension.
# audit_round P: those calls on names P:x, P:s, P:p, P:w; prints their records.
audit_round() {
	local p=$1
	AS=$owner q $up6_db "UPDATE dlock.settings SET value = 'all' WHERE name = 'audit'" \
		"SELECT dlock.try_acquire('$p:x', '1 minute', '00000000-0000-0000-0000-0000000000f1', 'writer')" \
		"SELECT dlock.try_acquire_shared('$p:s', '100 ms', '00000000-0000-0000-0000-0000000000f1', 'reader')" \
		"SELECT dlock.try_acquire_permit('$p:p', 1, '100 ms', '00000000-0000-0000-0000-0000000000f1', 'permit')" \
		"SELECT dlock.try_acquire_shared('$p:w', '100 ms', '00000000-0000-0000-0000-0000000000f1', 'reader before a writer')" \
		"SELECT dlock.renew('$p:x', '00000000-0000-0000-0000-0000000000f1', '1 minute'), dlock.renew('$p:s', '00000000-0000-0000-0000-0000000000f1', '100 ms'),
			dlock.renew('$p:p', '00000000-0000-0000-0000-0000000000f1', '100 ms'), dlock.renew('$p:p', '00000000-0000-0000-0000-0000000000f2', '1 minute')" \
		"SELECT pg_sleep(0.3)" \
		"SELECT dlock.try_acquire_shared('$p:s', '1 minute'), dlock.try_acquire_permit('$p:p', 1, '1 minute'), dlock.try_acquire('$p:w', '1 minute')" >/dev/null
	AS=$owner q $up6_db "SELECT string_agg(event || ' ' || lock_name || ' ' || coalesce(holder, '-') || ' ' || (fencing_token IS NOT NULL), ', ' ORDER BY id) FROM dlock.audit_log WHERE lock_name IN ('$p:x', '$p:s', '$p:p', '$p:w') AND event IN ('renew', 'renew_refused', 'expire')"
}
up5_audit=$(audit_round up5)
check "negative control: 1.5 audits none of the renewals and expiries checked below (${up5_audit:-none})" test -z "$up5_audit"
up6_state=$(AS=$owner sqlstate $up6_db "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.6'")
up6_acl=$(q $up6_db "SELECT has_function_privilege('public', 'dlock.try_acquire_all(text[], interval, uuid, text, boolean, interval, interval, interval)', 'EXECUTE'),
		has_function_privilege('regress_sqled_up6', 'dlock.try_acquire_all(text[], interval, uuid, text, boolean, interval, interval, interval)', 'EXECUTE'),
		has_function_privilege('regress_sqled_up6', 'dlock.acquire_permit(text, integer, interval, interval, uuid, text, interval, interval, interval)', 'EXECUTE'),
		has_function_privilege('public', 'dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval)', 'EXECUTE'),
		(SELECT count(*) FROM pg_proc WHERE pronamespace = 'dlock'::regnamespace AND proname LIKE '\_old\_%')")
check "ALTER EXTENSION UPDATE from 1.5 to 1.6 ($up6_state) keeps each acquire function's privileges (PUBLIC, a role's grant on try_acquire_all, acquire_permit revoked, try_acquire_shared untouched; old ones left: $up6_acl)" \
	test "$up6_state $up6_acl" = "ok f|t|f|t|0"
up6_kept=$(AS=$owner q $up6_db "SELECT dlock.renew('up6:sh', '00000000-0000-0000-0000-0000000000c3', '1 hour') IS NOT NULL")
check "... and a shared lease held across it renews ($up6_kept, token $up6_sh)" test "$up6_kept" = t
# the 1.6 options: a multi-lock's are given to every name; a shared lease's
# or permit's are checked as try_acquire's, then refused (0A000) with nothing
# written in 1.6 (the negative control of 1.7's policies below)
up6_set=$(AS=$owner q $up6_db "SELECT count(*) FROM dlock.try_acquire_all(ARRAY['up6:a', 'up6:b'], '10 s', max_hold => '20 s', min_hold => '1 s', lock_delay => '3 s')" \
	"SELECT string_agg(lock_name || ' ' || (hold_limit - acquired_at) || ' ' || (min_hold_until - acquired_at) || ' ' || lock_delay, ', ' ORDER BY lock_name) FROM dlock.distributed_lock WHERE lock_name LIKE 'up6:_'" | tr '\n' ' ')
check "try_acquire_all's max_hold, min_hold and lock_delay are kept by the lease of every name ($up6_set)" \
	test "$up6_set" = "2 up6:a 00:00:20 00:00:01 00:00:03, up6:b 00:00:20 00:00:01 00:00:03 "
up6_all_bad=$(AS=$owner sqlstate $up6_db "SELECT * FROM dlock.acquire_all(ARRAY['up6:c', 'up6:d'], '10 s', '0', min_hold => '1 minute')")
up6_all_sb=$(AS=$owner sqlstate $up6_db "SELECT * FROM dlock.try_acquire_all(ARRAY['up6:c', 'up6:d'], '10 s', session_bound => true)")
up6_holder=""
for call in "dlock.try_acquire_shared('up6:h', '10 s', max_hold => '20 s')" "dlock.acquire_shared('up6:h', '10 s', '0', min_hold => '1 s')" \
	"dlock.try_acquire_permit('up6:h', 2, '10 s', lock_delay => '1 s')" "dlock.acquire_permit('up6:h', 2, '10 s', '0', max_hold => '10 s')" \
	"dlock.try_acquire_shared('up6:h', '10 s', max_hold => '0')" "dlock.try_acquire_permit('up6:h', 2, '10 s', min_hold => '11 s')"; do
	up6_holder+="$(AS=$owner sqlstate $up6_db "SELECT $call") "
done
up6_left=$(AS=$owner q $up6_db "SELECT (SELECT count(*) FROM dlock.lock_holder WHERE lock_name LIKE 'up6:_') + (SELECT count(*) FROM dlock.distributed_lock WHERE lock_name IN ('up6:c', 'up6:d', 'up6:h'))")
check "1.6: a multi-lock's option that does not fit refuses the set (22023, 55000 for session_bound: $up6_all_bad $up6_all_sb); a shared lease's or permit's policy is refused (0A000), its bad input as try_acquire's (22023): $up6_holder; nothing left ($up6_left)" \
	test "$up6_all_bad $up6_all_sb $up6_holder$up6_left" = "22023 55000 0A000 0A000 0A000 0A000 22023 22023 0"
up6_audit=$(audit_round up6)
check "renewals of every kind and the expiries of a shared lease and a permit are audited at audit = all ($up6_audit)" \
	test "$up6_audit" = "renew up6:x writer true, renew up6:s reader true, renew up6:p permit true, renew_refused up6:p - false, expire up6:s reader true, expire up6:p permit true, expire up6:w reader before a writer true"

# from 1.6 to 1.7: a shared lease's or permit's max_hold, min_hold and
# lock_delay are kept by its holder slot and judged by dlock._decide, as a
# name's row is; the dlock.settings rows max_hold and lock_delay are every
# kind's defaults (docs/lease-policies.md, "Every kind"). The checks of
# regress kind-policies that its SET dlock.* keep from running here.
up7_sh=$(AS=$owner q $up6_db "SELECT fencing_token FROM dlock.try_acquire_shared('up7:held', '1 hour', '00000000-0000-0000-0000-0000000000c7')")
up7_state=$(AS=$owner sqlstate $up6_db "ALTER EXTENSION pg_dlock_sql UPDATE")
up7_kept=$(AS=$owner q $up6_db "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock_sql'" \
	"SELECT dlock.renew('up7:held', '00000000-0000-0000-0000-0000000000c7', '1 hour') IS NOT NULL" | tr '\n' ' ')
check "ALTER EXTENSION UPDATE from 1.6 to $version ($up7_state; version, a shared lease held across it renews: $up7_kept, token $up7_sh)" \
	test "$up7_state $up7_kept" = "ok $version t "
# with PUBLIC's privileges given back, the surface of a new installation
AS=$owner q $up6_db "GRANT EXECUTE ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text, boolean, interval, interval, interval), dlock.acquire_permit(text, integer, interval, interval, uuid, text, interval, interval, interval) TO PUBLIC" >/dev/null
check_same_surface_as_new $up6_db up6
AS=$owner q $up6_db "DELETE FROM dlock.lock_holder WHERE lock_name LIKE 'up6:_'" >/dev/null
up7_holder=""
for call in "dlock.try_acquire_shared('up6:h', '10 s', max_hold => '20 s')" "dlock.acquire_shared('up6:h', '10 s', '0', min_hold => '1 s')" \
	"dlock.try_acquire_permit('up6:hp', 2, '10 s', lock_delay => '1 s')" "dlock.acquire_permit('up6:hp', 2, '10 s', '0', max_hold => '10 s')" \
	"dlock.try_acquire_shared('up6:h', '10 s', max_hold => '0')" "dlock.try_acquire_permit('up6:hp', 2, '10 s', min_hold => '11 s')"; do
	up7_holder+="$(AS=$owner sqlstate $up6_db "SELECT $call") "
done
up7_cols=$(AS=$owner q $up6_db "SELECT string_agg(lock_name || ' ' || coalesce((hold_limit - acquired_at)::text, '-') || ' ' || coalesce((min_hold_until - acquired_at)::text, '-') || ' ' || coalesce(lock_delay::text, '-'), ', ' ORDER BY lock_name, slot) FROM dlock.lock_holder WHERE lock_name LIKE 'up6:h%'")
check "$version grants the policies 1.6 refused, each kept by its slot, and refuses their bad input as before ($up7_holder; $up7_cols)" \
	test "$up7_holder$up7_cols" = "ok ok ok ok 22023 22023 up6:h 00:00:20 - -, up6:h - 00:00:01 -, up6:hp - - 00:00:01, up6:hp 00:00:10 - -"
# the settings rows bound every kind: a ttl above max_hold refused, each
# lease within it keeping it; lock_delay the default delay of every kind
up7_set=$(AS=$owner q $up6_db "UPDATE dlock.settings SET value = '10s' WHERE name = 'max_hold'" \
	"UPDATE dlock.settings SET value = '2s' WHERE name = 'lock_delay'" \
	"SELECT (dlock.try_acquire_shared('up7:set', '5 s')).fencing_token IS NOT NULL, (dlock.try_acquire_permit('up7:set-sem', 2, '5 s')).fencing_token IS NOT NULL" \
	"SELECT string_agg(lock_name || ' ' || (hold_limit - acquired_at) || ' ' || lock_delay, ', ' ORDER BY lock_name) FROM dlock.lock_holder WHERE lock_name LIKE 'up7:set%'" | tr '\n' ' ')
up7_set_bad=""
for call in "dlock.try_acquire_shared('up7:set-bad', '1 hour')" "dlock.acquire_permit('up7:set-bad-sem', 2, '1 hour', '0')" \
	"dlock.try_acquire_permit('up7:set-bad-sem', 2, '1 s', max_hold => '1 minute')"; do
	up7_set_bad+="$(AS=$owner sqlstate $up6_db "SELECT $call") "
done
AS=$owner q $up6_db "UPDATE dlock.settings SET value = NULL WHERE name IN ('max_hold', 'lock_delay')" >/dev/null
check "the dlock.settings rows max_hold and lock_delay are every kind's defaults ($up7_set) and max_hold its bound ($up7_set_bad)" \
	test "$up7_set$up7_set_bad" = "t|t up7:set 00:00:10 00:00:02, up7:set-sem 00:00:10 00:00:02 22023 22023 22023 "
# over time (one wait of 2.2 s): renewals capped at the hold limit, then
# refused; a release inside min_hold keeps a permit taken and writers out
# (readers come in); a lease lost with a lock delay, or forced away, keeps
# its slot and writers out for the delay; a release does not delay
a='00000000-0000-0000-0000-0000000000d1'
b='00000000-0000-0000-0000-0000000000d2'
up7_now=$(AS=$owner q $up6_db "SELECT dlock.try_acquire_shared('up7:hold', '1 s', '$a', max_hold => '2 s') IS NOT NULL, dlock.try_acquire_permit('up7:hold-sem', 2, '1 s', '$a', max_hold => '2 s') IS NOT NULL" \
	"SELECT dlock.renew('up7:hold', '$a', '1 hour') = (SELECT hold_limit FROM dlock.lock_holder WHERE lock_name = 'up7:hold'),
		dlock.renew('up7:hold-sem', '$a', '1 hour') = (SELECT hold_limit FROM dlock.lock_holder WHERE lock_name = 'up7:hold-sem'),
		(dlock.try_acquire_shared('up7:hold', '1 hour', '$a')).lease_until = (SELECT hold_limit FROM dlock.lock_holder WHERE lock_name = 'up7:hold')" \
	"SELECT dlock.try_acquire_shared('up7:min', '10 s', '$a', min_hold => '2 s') IS NOT NULL, dlock.try_acquire_permit('up7:min-sem', 1, '10 s', '$a', min_hold => '2 s') IS NOT NULL,
		dlock.try_acquire_shared('up7:delay', '300 ms', lock_delay => '2 s') IS NOT NULL, dlock.try_acquire_permit('up7:delay-sem', 1, '300 ms', lock_delay => '2 s') IS NOT NULL,
		dlock.try_acquire_permit('up7:forced-sem', 1, '1 minute', lock_delay => '2 s') IS NOT NULL,
		dlock.try_acquire_shared('up7:released', '1 minute', '$b', lock_delay => '1 minute') IS NOT NULL" \
	"SELECT dlock.release('up7:min', '$a'), dlock.release('up7:min-sem', '$a'), dlock.force_release('up7:forced-sem', 'the test'), dlock.release('up7:released', '$b')" \
	"SELECT dlock.try_acquire('up7:min', '10 s') IS NULL, dlock.try_acquire_permit('up7:min-sem', 1, '10 s') IS NULL,
		dlock.try_acquire_permit('up7:min-sem', 1, '10 s', '$a') IS NULL, dlock.try_acquire('up7:min-sem', '10 s') IS NULL,
		dlock.try_acquire_shared('up7:min', '10 s') IS NOT NULL, dlock.try_acquire('up7:released', '10 s') IS NOT NULL,
		dlock.try_acquire_permit('up7:forced-sem', 1, '10 s') IS NULL" \
	"SELECT pg_sleep(0.5)" \
	"SELECT dlock.try_acquire('up7:delay', '10 s') IS NULL, dlock.try_acquire_permit('up7:delay-sem', 1, '10 s') IS NULL,
		dlock.try_acquire_shared('up7:delay', '10 s') IS NOT NULL" | tr '\n' ' ')
check "renewals capped at the slot's hold limit; min_hold keeps a released permit taken and writers out, readers in; a lock delay keeps a lost or forced slot; a release does not delay ($up7_now)" \
	test "$up7_now" = "t|t t|t|t t|t|t|t|t|t t|t|t|t t|t|t|t|t|t|t  t|t|t "
up7_later=$(AS=$owner q $up6_db "SELECT pg_sleep(1.7)" \
	"SELECT dlock.renew('up7:hold', '$a', '1 s') IS NULL, dlock.renew('up7:hold-sem', '$a', '1 s') IS NULL,
		dlock.try_acquire_permit('up7:min-sem', 1, '10 s') IS NOT NULL, dlock.try_acquire_permit('up7:forced-sem', 1, '10 s') IS NOT NULL" | tr '\n' ' ')
check "... and after them: renewals past the hold limit refused, the kept permits granted again ($up7_later)" \
	test "$up7_later" = " t|t|t|t "
# a reap leaves a name whose slot a min_hold keeps (the control: the same without it goes)
up7_reap=$(AS=$owner q $up6_db "SELECT dlock.release(l.lock_name, l.owner_token) FROM dlock.try_acquire('up7:reap-min', '10 s') l" \
	"SELECT dlock.release(l.lock_name, l.owner_token) FROM dlock.try_acquire('up7:reap-plain', '10 s') l" \
	"SELECT dlock.release(l.lock_name, l.owner_token) FROM dlock.try_acquire_shared('up7:reap-min', '10 s', min_hold => '10 s') l" \
	"SELECT dlock.release(l.lock_name, l.owner_token) FROM dlock.try_acquire_shared('up7:reap-plain', '10 s') l" \
	"UPDATE dlock.distributed_lock SET updated_at = updated_at - interval '2 days' WHERE lock_name LIKE 'up7:reap-%'" \
	"SELECT dlock.reap('1 day') >= 1" \
	"SELECT string_agg(lock_name, ' ' ORDER BY lock_name) FROM dlock.distributed_lock WHERE lock_name LIKE 'up7:reap-%'" | tr '\n' ' ')
check "reap leaves a name whose slot its min_hold keeps, and takes the control ($up7_reap)" \
	test "$up7_reap" = "t t t t t up7:reap-min "
q postgres "DROP DATABASE $up6_db" "DROP ROLE regress_sqled_up6" >/dev/null

# psql -f: a 1.6, a 1.5, a 1.4.2, a 1.4.1, a 1.4, a 1.3 and a 1.2 installation (installers generated from
# their sources) updated by dist/pg_dlock_sql-upgrade.sql
up_plain=dlock_sqled_update_plain
for from in 1.6 1.5 1.4.2 1.4.1 1.4 1.3 1.2; do
	mkdir -p "$scratch/v$from"
	cp sql_edition/pg_dlock_sql.control sql_edition/pg_dlock_sql--1.2.sql "$scratch/v$from/"
	[ $from != 1.2 ] && cp sql_edition/pg_dlock_sql--1.2--1.3.sql "$scratch/v$from/"
	case $from in 1.4 | 1.4.1 | 1.4.2 | 1.5 | 1.6) cp sql_edition/pg_dlock_sql--1.3--1.4.sql "$scratch/v$from/" ;; esac
	case $from in 1.4.1 | 1.4.2 | 1.5 | 1.6) cp sql_edition/pg_dlock_sql--1.4--1.4.1.sql "$scratch/v$from/" ;; esac
	case $from in 1.4.2 | 1.5 | 1.6) cp sql_edition/pg_dlock_sql--1.4.1--1.4.2.sql "$scratch/v$from/" ;; esac
	case $from in 1.5 | 1.6) cp sql_edition/pg_dlock_sql--1.4.2--1.5.sql "$scratch/v$from/" ;; esac
	[ $from = 1.6 ] && cp sql_edition/pg_dlock_sql--1.5--1.6.sql "$scratch/v$from/"
	sed -i "s/^default_version = .*/default_version = '$from'/" "$scratch/v$from/pg_dlock_sql.control"
	sql_edition/build.sh "$scratch/v$from" "$scratch/v$from/dist" >/dev/null
	owner_database $up_plain $owner
	psql -X -q -U $owner -d $up_plain -v ON_ERROR_STOP=1 -f "$scratch/v$from/dist/pg_dlock_sql-install.sql" >"$scratch/plain-$from.log" 2>&1
	p_ex=$(AS=$owner q $up_plain "SELECT fencing_token FROM dlock.try_acquire('up:ex', '1 hour', '00000000-0000-0000-0000-0000000000a1')")
	p_before=$(AS=$owner sqlstate $up_plain "SET dlock.durability = fenced" "SELECT dlock.try_acquire('up-fenced', '1 minute')")
	p_nil_before=$(AS=$owner sqlstate $up_plain "SELECT dlock.release('up:ex', '$nil')")
	psql -X -q -U $owner -d $up_plain -v ON_ERROR_STOP=1 -f sql_edition/dist/pg_dlock_sql-upgrade.sql >"$scratch/plain-up-$from.log" 2>&1
	check "pg_dlock_sql-upgrade.sql updates a psql -f installation from $from ($(tr '\n' ' ' <"$scratch/plain-up-$from.log"))" \
		test "$(AS=$owner q $up_plain "SELECT version FROM dlock.plain_install")" = "$version"
	check_same_surface_as_new $up_plain up-plain
	p_after=$(AS=$owner sqlstate $up_plain "SET dlock.durability = fenced" "SELECT dlock.try_acquire('up-fenced-2', '1 minute')")
	if [ $from != 1.3 ] && [ $from != 1.2 ]; then
		check "... under dlock.durability = fenced $from refuses, and so does $version ($p_before, $p_after)" \
			test "$p_before $p_after" = "0A000 0A000"
	else
		check "... under dlock.durability = fenced $from grants, $version refuses ($p_before, $p_after)" \
			test "$p_before $p_after" = "ok 0A000"
	fi
	p_nil_after=$(AS=$owner q $up_plain "SELECT dlock.release('up:ex', '$nil')")
	nil_before_want=22023
	case $from in 1.4.1 | 1.4.2 | 1.5 | 1.6) nil_before_want=ok ;; esac
	check "... release with the nil UUID: $nil_before_want in $from, false in $version ($p_nil_before, $p_nil_after)" \
		test "$p_nil_before $p_nil_after" = "$nil_before_want f"
	p_dg=$(AS=$owner q $up_plain "SELECT fencing_token FROM dlock.downgrade('up:ex', '00000000-0000-0000-0000-0000000000a1')")
	check "... keeping the lease held across it, which $version downgrades ($p_dg > $p_ex)" test "${p_dg:-0}" -gt "${p_ex:-0}"
done

# --- 3. one edition per database; the schema's owner ---------------------------------
both=$(sqlstate "$PGDATABASE" "CREATE EXTENSION pg_dlock_sql")
left=$(q "$PGDATABASE" "SELECT count(*) FROM pg_extension WHERE extname = 'pg_dlock_sql'")
check "CREATE EXTENSION pg_dlock_sql where pg_dlock is installed fails ($both) and leaves nothing" \
	test "$both" = 42710 -a "$left" = 0
c_into_sql=$(sqlstate $ext_db "CREATE EXTENSION pg_dlock")
c_left=$(q $ext_db "SELECT count(*) FROM pg_extension WHERE extname = 'pg_dlock'")
check "CREATE EXTENSION pg_dlock where pg_dlock_sql is installed fails ($c_into_sql) and leaves nothing" \
	test "$c_into_sql" != ok -a "$c_left" = 0
attack_db=dlock_sqled_attack
owner_database $attack_db $owner
psql -X -q -U postgres -d postgres -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS regress_sqled_attacker" -c "CREATE ROLE regress_sqled_attacker LOGIN" >/dev/null
q $attack_db "GRANT CREATE ON DATABASE $attack_db TO regress_sqled_attacker" >/dev/null
AS=regress_sqled_attacker q $attack_db "CREATE SCHEMA dlock" >/dev/null
attacked=$(AS=$owner sqlstate $attack_db "CREATE EXTENSION pg_dlock_sql")
check "CREATE EXTENSION into a schema dlock another role owns is refused ($attacked)" test "$attacked" = 42501
q $attack_db "DROP SCHEMA dlock" "CREATE SCHEMA dlock AUTHORIZATION $owner" "CREATE TABLE dlock.distributed_lock (x int)" >/dev/null
occupied=$(AS=$owner sqlstate $attack_db "CREATE EXTENSION pg_dlock_sql")
check "CREATE EXTENSION into a schema dlock that has objects is refused ($occupied)" test "$occupied" = 42P06
q $attack_db "SET client_min_messages = warning" "DROP SCHEMA dlock CASCADE" >/dev/null
empty_ok=$(AS=$owner sqlstate $attack_db "CREATE SCHEMA dlock" "CREATE EXTENSION pg_dlock_sql")
check "an empty schema dlock of the installing role is accepted" test "$empty_ok" = ok

# --- 4. psql -f, its upgrade path, pg_tle -------------------------------------------
plain_db=dlock_sqled_plain
owner_database $plain_db $owner
psql -X -q -U $owner -d $plain_db -v ON_ERROR_STOP=1 -f sql_edition/dist/pg_dlock_sql-install.sql >"$scratch/plain.log" 2>&1
check "psql -f pg_dlock_sql-install.sql by the database owner" test $? -eq 0
tests/sql_edition/api.sh $plain_db $owner sql >"$scratch/api-plain.log" 2>&1
grep FAILED "$scratch/api-plain.log"
check "shared API tests pass on the psql -f installation ($(tail -n 1 "$scratch/api-plain.log"))" grep -q ' 0 failed$' "$scratch/api-plain.log"
again=$(psql -X -q -U $owner -d $plain_db -v ON_ERROR_STOP=1 -f sql_edition/dist/pg_dlock_sql-install.sql 2>&1)
check "running the installer again is refused (the schema exists)" grep -q 'already contains objects' <<<"$again"
current=$(psql -X -q -U $owner -d $plain_db -v ON_ERROR_STOP=1 -f sql_edition/dist/pg_dlock_sql-upgrade.sql 2>&1)
check "the upgrade script on a current installation says so ($current)" grep -q "is at $version\$" <<<"$current"
# a made-up next version: the upgrade script applies its step once
mkdir -p "$scratch/next"
cp sql_edition/pg_dlock_sql.control sql_edition/pg_dlock_sql--*.sql "$scratch/next/"
next=$version.1
sed -i "s/^default_version = .*/default_version = '$next'/" "$scratch/next/pg_dlock_sql.control"
cat >"$scratch/next/pg_dlock_sql--$version--$next.sql" <<'SQL'
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE" to load this file. \quit
CREATE FUNCTION dlock.test_step_marker() RETURNS text LANGUAGE sql AS $$ SELECT 'step applied' $$;
SQL
sql_edition/build.sh "$scratch/next" "$scratch/next/dist" >/dev/null
lock_before=$(AS=$owner q $plain_db "SELECT fencing_token FROM dlock.try_acquire('plain:kept', '1 hour')")
psql -X -q -U $owner -d $plain_db -v ON_ERROR_STOP=1 -f "$scratch/next/dist/pg_dlock_sql-upgrade.sql" >"$scratch/upgrade.log" 2>&1
upgraded=$(AS=$owner q $plain_db "SELECT version FROM dlock.plain_install" "SELECT dlock.test_step_marker()" | tr '\n' ' ')
check "the upgrade script applies the step above the installed version ($upgraded)" test "$upgraded" = "$next step applied "
psql -X -q -U $owner -d $plain_db -v ON_ERROR_STOP=1 -f "$scratch/next/dist/pg_dlock_sql-upgrade.sql" >"$scratch/upgrade2.log" 2>&1
check "running it again changes nothing" grep -q "is at $next\$" "$scratch/upgrade2.log"
lock_after=$(AS=$owner q $plain_db "SELECT fencing_token FROM dlock.locks WHERE lock_name = 'plain:kept' AND state = 'held'")
check "a lease held across the upgrade is kept" test "$lock_after" = "$lock_before"

tle_db=dlock_sqled_tle
owner_database $tle_db $owner
# stand-ins with pg_tle's documented signatures, recording what they are given
q $tle_db "CREATE SCHEMA pgtle" \
	"CREATE TABLE pgtle.registered (name text, version text, description text, ext text, requires text[])" \
	"CREATE FUNCTION pgtle.install_extension(name text, version text, description text, ext text, requires text[] DEFAULT NULL) RETURNS boolean LANGUAGE sql AS \$\$ INSERT INTO pgtle.registered VALUES (name, version, description, ext, requires) RETURNING true \$\$" \
	"CREATE TABLE pgtle.update_paths (name text, fromvers text, tovers text, ext text)" \
	"CREATE FUNCTION pgtle.install_update_path(name text, fromvers text, tovers text, ext text) RETURNS boolean LANGUAGE sql AS \$\$ INSERT INTO pgtle.update_paths VALUES (name, fromvers, tovers, ext) RETURNING true \$\$" \
	"CREATE TABLE pgtle.default_version (name text, version text)" \
	"CREATE FUNCTION pgtle.set_default_version(name text, version text) RETURNS boolean LANGUAGE sql AS \$\$ INSERT INTO pgtle.default_version VALUES (name, version) RETURNING true \$\$" >/dev/null
psql -X -q -U postgres -d $tle_db -v ON_ERROR_STOP=1 -f sql_edition/dist/pg_dlock_sql-pg_tle.sql >"$scratch/tle.log" 2>&1
check "the pg_tle script calls pgtle.install_extension(name, version, description, ext, requires)" \
	test "$(q $tle_db "SELECT name || ' ' || version || ' ' || cardinality(requires) FROM pgtle.registered")" = "pg_dlock_sql 1.2 0"
tle_paths=$(q $tle_db "SELECT string_agg(name || ' ' || fromvers || '->' || tovers, ', ' ORDER BY fromvers) FROM pgtle.update_paths" \
	"SELECT name || ' ' || version FROM pgtle.default_version" | tr '\n' ' ')
check "... pgtle.install_update_path for the steps to 1.3, 1.4, 1.4.1, 1.4.2, 1.5, 1.6 and 1.7, and pgtle.set_default_version ($tle_paths)" \
	test "$tle_paths" = "pg_dlock_sql 1.2->1.3, pg_dlock_sql 1.3->1.4, pg_dlock_sql 1.4->1.4.1, pg_dlock_sql 1.4.1->1.4.2, pg_dlock_sql 1.4.2->1.5, pg_dlock_sql 1.5->1.6, pg_dlock_sql 1.6->1.7 pg_dlock_sql $version "
# What pg_tle would run at CREATE EXTENSION: the registered text as the
# script of an extension without schema in its control data, run as the
# calling role (pg_tle runs it so; a file-based extension runs as its caller
# only when untrusted, so the owner is a superuser for this one statement;
# the psql -f test above shows the same SQL needs no superuser).
share=$("$PG_BINDIR/pg_config" --sharedir)/extension
q $tle_db "SELECT ext FROM pgtle.registered" >"$share/pg_dlock_sqled_tle_test--1.2.sql"
for step in 1.2--1.3 1.3--1.4 1.4--1.4.1 1.4.1--1.4.2 1.4.2--1.5 1.5--1.6 1.6--1.7; do
	q $tle_db "SELECT ext FROM pgtle.update_paths WHERE fromvers = '${step%--*}' AND tovers = '${step#*--}'" >"$share/pg_dlock_sqled_tle_test--$step.sql"
done
printf "default_version = '%s'\nrelocatable = false\n" "$version" >"$share/pg_dlock_sqled_tle_test.control"
q $tle_db "DROP SCHEMA pgtle CASCADE" >/dev/null 2>&1
q postgres "ALTER ROLE $owner SUPERUSER" >/dev/null
tle_created=$(AS=$owner sqlstate $tle_db "CREATE EXTENSION pg_dlock_sqled_tle_test")
q postgres "ALTER ROLE $owner NOSUPERUSER" >/dev/null
check "the registered script installs as an extension run by the owner ($tle_created)" test "$tle_created" = ok
tests/sql_edition/api.sh $tle_db $owner sql >"$scratch/api-tle.log" 2>&1
grep FAILED "$scratch/api-tle.log"
check "shared API tests pass on that installation ($(tail -n 1 "$scratch/api-tle.log"))" grep -q ' 0 failed$' "$scratch/api-tle.log"
tle_drop=$(AS=$owner q $tle_db "DROP EXTENSION pg_dlock_sqled_tle_test" "SELECT count(*) FROM pg_namespace WHERE nspname = 'dlock'")
check "DROP EXTENSION removes its schema too" test "$tle_drop" = 0
rm -f "$share"/pg_dlock_sqled_tle_test*

# --- 5. tokens only grow: crash, restore elsewhere, promotion ---------------------------
read -r port2 port3 < <(free_ports 2 | tr '\n' ' ')
primary=$scratch/primary
start_server "$PG_BINDIR" "$primary" "$port2"
P2="-h 127.0.0.1 -p $port2"
PGPORT=$port2 owner_database tokens $owner
PGPORT=$port2 AS=$owner q tokens "CREATE EXTENSION pg_dlock_sql" >/dev/null
t() { PGPORT=$port2 AS=$owner q tokens "$@"; }
crash_before=$(t "SET synchronous_commit = off" "SELECT fencing_token FROM dlock.try_acquire('tok:crash', '1 hour')" | tail -n 1)
stop_server "$PG_BINDIR" "$primary" immediate
as_postgres "$PG_BINDIR/pg_ctl" -D "$primary/data" -l "$primary/server.log" -w start >/dev/null
crash_lease=$(t "SELECT fencing_token FROM dlock.locks WHERE lock_name = 'tok:crash' AND state = 'held'")
check "an acquire with synchronous_commit = off in the session survives a crash (durable)" test "$crash_lease" = "$crash_before"
crash_after=$(t "SELECT dlock.force_release('tok:crash', 'crash test')" "SELECT fencing_token FROM dlock.try_acquire('tok:crash', '1 hour')" | tail -n 1)
check "the next token after the crash is higher ($crash_after > $crash_before)" test "$crash_after" -gt "$crash_before"

# pg_dump / pg_restore into another cluster; the original goes on granting
t "SELECT dlock.try_acquire('tok:dump', '1 hour')" >/dev/null
pg_dump -Fc -h 127.0.0.1 -p $port2 -U postgres -d tokens -f "$scratch/tokens.dump"
orig_latest=$(t "SELECT dlock.force_release('tok:dump', 'after the dump')" "SELECT fencing_token FROM dlock.try_acquire('tok:dump', '1 hour')" | tail -n 1)
other=$scratch/other
read -r port4 < <(free_ports 1)
start_server "$PG_BINDIR" "$other" "$port4"
for variant in with without; do
	PGPORT=$port4 owner_database restored_$variant $owner
	if [ $variant = without ]; then
		PGPORT=$port4 q restored_$variant "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC" >/dev/null
	fi
	pg_restore -h 127.0.0.1 -p $port4 -U $owner --no-owner -d restored_$variant "$scratch/tokens.dump" >"$scratch/restore-$variant.log" 2>&1
	restored=$(PGPORT=$port4 AS=$owner q restored_$variant "SELECT dlock.force_release('tok:dump', 'restored')" \
		"SELECT fencing_token FROM dlock.try_acquire('tok:dump', '1 hour')" | tail -n 1)
	check "restored into another cluster ($variant pg_control_system()), the next token ($restored) is above the original's latest ($orig_latest)" \
		test "${restored:-0}" -gt "$orig_latest"
done
# the same history on one cluster without pg_control_system(): a restore into
# another database draws a new installation number, so it is another history
PGPORT=$port2 owner_database norev $owner
PGPORT=$port2 q norev "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC" >/dev/null
PGPORT=$port2 AS=$owner q norev "CREATE EXTENSION pg_dlock_sql" >/dev/null
PGPORT=$port2 AS=$owner q norev "SELECT dlock.try_acquire('tok:norev', '1 hour')" >/dev/null
pg_dump -Fc -h 127.0.0.1 -p $port2 -U postgres -d norev -f "$scratch/norev.dump"
norev_latest=$(PGPORT=$port2 AS=$owner q norev "SELECT dlock.force_release('tok:norev', 'x')" "SELECT fencing_token FROM dlock.try_acquire('tok:norev', '1 hour')" | tail -n 1)
PGPORT=$port2 owner_database norev_copy $owner
PGPORT=$port2 q norev_copy "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC" >/dev/null
pg_restore -h 127.0.0.1 -p $port2 -U $owner --no-owner -d norev_copy "$scratch/norev.dump" >"$scratch/restore-norev.log" 2>&1
norev_copy=$(PGPORT=$port2 AS=$owner q norev_copy "SELECT dlock.force_release('tok:norev', 'x')" "SELECT fencing_token FROM dlock.try_acquire('tok:norev', '1 hour')" | tail -n 1)
check "without pg_control_system(), a restore into another database of the same cluster also moves up ($norev_copy > $norev_latest)" \
	test "${norev_copy:-0}" -gt "$norev_latest"

# promotion of a standby that missed the last grants
standby=$scratch/standby
mkdir -p "$standby" && chown postgres: "$standby"
as_postgres "$PG_BINDIR/pg_basebackup" -h 127.0.0.1 -p $port2 -U postgres -D "$standby/data" -R -X stream -c fast >/dev/null 2>&1
as_postgres sed -i "s/^port = .*/port = $port3/; s|^unix_socket_directories = .*|unix_socket_directories = '$standby'|" "$standby/data/postgresql.conf"
as_postgres "$PG_BINDIR/pg_ctl" -D "$standby/data" -l "$standby/server.log" -w start >/dev/null
sleep 1
on_standby=$(PGPORT=$port3 AS=$owner sqlstate tokens "SELECT dlock.try_acquire('tok:promote', '1 hour')")
check "an acquire on a standby is refused ($on_standby)" test "$on_standby" = 25006
stop_server "$PG_BINDIR" "$standby" fast
t "SELECT dlock.try_acquire('tok:promote', '1 hour', '00000000-0000-0000-0000-0000000000a1')" >/dev/null
missed=$(t "SELECT dlock.release('tok:promote', '00000000-0000-0000-0000-0000000000a1')" "SELECT fencing_token FROM dlock.try_acquire('tok:promote', '1 hour')" | tail -n 1)
stop_server "$PG_BINDIR" "$primary" immediate
as_postgres "$PG_BINDIR/pg_ctl" -D "$standby/data" -l "$standby/server.log" -w start >/dev/null
as_postgres "$PG_BINDIR/pg_ctl" -D "$standby/data" -w promote >/dev/null
seen=$(PGPORT=$port3 AS=$owner q tokens "SELECT coalesce(max(fencing_token), 0) FROM dlock.locks WHERE lock_name = 'tok:promote'")
promoted=$(PGPORT=$port3 AS=$owner q tokens "SELECT dlock.force_release('tok:promote', 'x')" "SELECT fencing_token FROM dlock.try_acquire('tok:promote', '1 hour')" | tail -n 1)
check "the promoted standby had missed the last grants (it saw ${seen}, the primary granted $missed)" test "$seen" -lt "$missed"
check "its next token ($promoted) is above every token the old primary granted ($missed)" test "${promoted:-0}" -gt "$missed"
new_name=$(PGPORT=$port3 AS=$owner q tokens "SELECT fencing_token >> 40 FROM dlock.try_acquire('tok:new-after-promotion', '1 hour')")
check "a new name on the promoted server starts at its history position (generation $new_name: timeline 2 is position 16385)" test "$new_name" = 16385

stop_server "$PG_BINDIR" "$standby" immediate
stop_server "$PG_BINDIR" "$other" immediate
for db in $ext_db $views_db $nil_up_db $up_db $up2_db $up_plain $attack_db $plain_db $tle_db; do
	psql -X -q -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
done
q "$PGDATABASE" "DROP OWNED BY regress_sqled_app" >/dev/null 2>&1
psql -X -q -U postgres -d postgres -c "SET client_min_messages = warning" -c "DROP OWNED BY regress_sqled_app" \
	-c "DROP ROLE IF EXISTS regress_sqled_attacker, regress_sqled_app, $owner" 2>/dev/null
rm -rf "$scratch"
finish
