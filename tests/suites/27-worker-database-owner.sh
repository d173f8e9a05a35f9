#!/usr/bin/env bash
# The expiry worker connects to dlock.worker_database as the bootstrap
# superuser, under settings the database's owner chooses. The owner sets
# the database's search_path to a schema of its own with a look-alike
# timestamptz "<=" that would make it superuser, takes a one-second lease
# and waits for the worker to report the expiry: it must stay an ordinary
# role. The negative control shows the trap is armed: the same operator,
# reached by a superuser session under that search_path, does fire.
set -uo pipefail
export PGOPTIONS="-c client_min_messages=warning"
. "$DLOCK_ROOT/tests/lib/check.sh"
sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
db=dlock_owned_db
owner=regress_db_owner

cleanup() {
	sql -d postgres -c "ALTER SYSTEM RESET dlock.worker_database" >/dev/null
	sql -d postgres -c "ALTER SYSTEM RESET dlock.worker_naptime" >/dev/null
	sql -d postgres -c "SELECT pg_reload_conf()" >/dev/null
	sql -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
	sql -d postgres -c "DROP ROLE IF EXISTS $owner" >/dev/null
}
trap cleanup EXIT
cleanup

sql -d postgres -c "CREATE ROLE $owner LOGIN"
sql -d postgres -c "CREATE DATABASE $db OWNER $owner"
sql -d "$db" -c "CREATE EXTENSION pg_dlock"
# the owner's trap, made entirely with the owner's own rights
sql -d "$db" -U "$owner" <<SQL
CREATE SCHEMA evil;
CREATE FUNCTION evil.le(a timestamptz, b timestamptz) RETURNS boolean
LANGUAGE plpgsql AS \$\$
BEGIN
	BEGIN
		EXECUTE 'ALTER ROLE $owner SUPERUSER';
	EXCEPTION WHEN insufficient_privilege THEN
		NULL;
	END;
	RETURN a OPERATOR(pg_catalog.<=) b;
END \$\$;
CREATE OPERATOR evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.le);
ALTER DATABASE $db SET search_path = evil, pg_catalog;
SQL

sql -d postgres -c "ALTER SYSTEM SET dlock.worker_database = '$db'"
sql -d postgres -c "ALTER SYSTEM SET dlock.worker_naptime = '1s'"
sql -d postgres -c "SELECT pg_reload_conf()" >/dev/null

sql -d "$db" -U "$owner" -c "SELECT fencing_token FROM dlock.try_acquire('owner:trap', '1 second')" >/dev/null
reported=f
for _ in $(seq 1 100); do
	reported=$(sql -d "$db" -c "SELECT count(*) = 1 FROM dlock.expiry_reported WHERE lock_name = 'owner:trap'")
	[ "$reported" = t ] && break
	sleep 0.1
done
check "the worker ran in the owner's database and reported the expiry" test "$reported" = t
check "the database owner is still not a superuser" \
	test "$(sql -d postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = '$owner'")" = f

# negative control: under the database's search_path, a superuser's
# unqualified <= does reach the owner's operator
sql -d "$db" -c "SELECT now() <= now()" >/dev/null
check "control: the trap fires for a superuser session that follows the search_path" \
	test "$(sql -d postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = '$owner'")" = t
sql -d postgres -c "ALTER ROLE $owner NOSUPERUSER" >/dev/null

finish
