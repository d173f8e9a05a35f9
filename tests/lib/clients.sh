# Shared by the suites of the clients in other languages (42-python,
# 43-typescript): where their toolchains are cached, the three servers each
# client's tests run against, and how a test runner's counts join a suite's.
# Needs tests/lib/check.sh sourced first.
#
#   clients_cache                    prints the cache directory (DLOCK_CLIENTS_CACHE, else build/clients)
#   clients_add_counts LABEL P F S   adds a runner's P passed and F failed to $passed/$failed, and prints them
#   clients_pgbouncer_start          a throwaway PgBouncer (tests/lib/pgbouncer.sh) in front of the test server;
#                                    sets $clients_bouncer_dir, $clients_bouncer_port
#   clients_pgbouncer_stop
#   clients_sql_edition_db DB        a database of the test server with pg_dlock_sql instead of pg_dlock
#   clients_env_direct | clients_env_pooled | clients_env_sql_edition DB
#                                    export DLOCK_CONFORMANCE_* and PG* for one of the three
. "$DLOCK_ROOT/tests/lib/ports.sh"
. "$DLOCK_ROOT/tests/lib/pgbouncer.sh"

clients_cache() {
	local dir=${DLOCK_CLIENTS_CACHE:-$DLOCK_ROOT/build/clients}
	mkdir -p "$dir"
	echo "$dir"
}

clients_add_counts() {
	local label=$1 p=${2:-0} f=${3:-0} s=${4:-0}
	echo "$label: $p passed, $f failed, $s skipped"
	passed=$((passed + p))
	failed=$((failed + f))
}

clients_server_port=$PGPORT
clients_server_db=$PGDATABASE

clients_pgbouncer_start() {
	clients_bouncer_dir=$(mktemp -d /tmp/pg_dlock-clients-bouncer.XXXXXX)
	clients_bouncer_port=$(free_ports)
	pgbouncer_start "$clients_bouncer_dir" "$clients_bouncer_port" "$clients_server_port" "$clients_server_db"
}

clients_pgbouncer_stop() {
	[ -n "${clients_bouncer_dir:-}" ] || return 0
	pgbouncer_stop "$clients_bouncer_dir"
	rm -rf "$clients_bouncer_dir"
}

clients_sql_edition_db() {
	local db=$1
	. "$DLOCK_ROOT/tests/sql_edition/lib.sh"
	install_sql_edition "$("$PG_BINDIR/pg_config" --sharedir)"
	psql -X -q -p "$clients_server_port" -d postgres -c "SET client_min_messages = warning" \
		-c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" &&
		psql -X -q -p "$clients_server_port" -d "$db" -c "CREATE EXTENSION pg_dlock_sql"
}

clients_env_direct() {
	export PGPORT=$clients_server_port PGDATABASE=$clients_server_db
	export DLOCK_CONFORMANCE_DSN="host=$PGHOST port=$PGPORT dbname=$PGDATABASE user=$PGUSER"
	export DLOCK_CONFORMANCE_ADMIN_DSN=$DLOCK_CONFORMANCE_DSN
	unset DLOCK_CONFORMANCE_POOLER DLOCK_CONFORMANCE_POOL2_DSN
}

clients_env_pooled() {
	export PGPORT=$clients_bouncer_port PGDATABASE=$clients_server_db
	export DLOCK_CONFORMANCE_DSN="host=$PGHOST port=$clients_bouncer_port dbname=$clients_server_db user=$PGUSER"
	export DLOCK_CONFORMANCE_ADMIN_DSN="host=$PGHOST port=$clients_server_port dbname=$clients_server_db user=$PGUSER"
	export DLOCK_CONFORMANCE_POOL2_DSN="host=$PGHOST port=$clients_bouncer_port dbname=${clients_server_db}_pool2 user=$PGUSER"
	export DLOCK_CONFORMANCE_POOLER=pgbouncer-transaction
}

clients_env_sql_edition() {
	export PGPORT=$clients_server_port PGDATABASE=$1
	export DLOCK_CONFORMANCE_DSN="host=$PGHOST port=$PGPORT dbname=$1 user=$PGUSER"
	export DLOCK_CONFORMANCE_ADMIN_DSN=$DLOCK_CONFORMANCE_DSN
	unset DLOCK_CONFORMANCE_POOLER DLOCK_CONFORMANCE_POOL2_DSN
}
