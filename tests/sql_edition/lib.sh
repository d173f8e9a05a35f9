# Shared by the SQL edition's suites (16-sql-edition, 16-sql-edition-regress,
# 17-sql-edition-matrix) and tests/sql_edition/api.sh. Needs tests/lib/check.sh sourced first.

# q DB SQL...: one psql call as PGUSER (or $AS), unaligned, stops at the
# first error; prints the last result.
q() {
	local db=$1
	shift
	local args=()
	for sql in "$@"; do args+=(-c "$sql"); done
	psql -X -q -At -v ON_ERROR_STOP=1 -U "${AS:-$PGUSER}" -d "$db" "${args[@]}"
}

# sqlstate DB SQL...: the SQLSTATE of the first error of the statements, or "ok".
sqlstate() {
	local db=$1
	shift
	local args=()
	for sql in "$@"; do args+=(-c "$sql"); done
	local out
	out=$(psql -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -U "${AS:-$PGUSER}" -d "$db" "${args[@]}" 2>&1)
	local state
	state=$(grep -o -m1 -E '^(psql:[^ ]* )?ERROR:  [0-9A-Z]{5}' <<<"$out" | grep -o -E '[0-9A-Z]{5}$')
	echo "${state:-ok}"
}

# expect_state NAME WANT DB SQL...: a check that the statements raise WANT.
expect_state() {
	local name=$1 want=$2
	shift 2
	local got
	got=$(sqlstate "$@")
	check "$name (SQLSTATE $want, got $got)" test "$got" = "$want"
}

as_postgres() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# start_server BINDIR DIR PORT [initdb options]: a throwaway cluster on
# loopback (trust), with no preloaded library.
start_server() {
	local bindir=$1 dir=$2 port=$3
	shift 3
	mkdir -p "$dir"
	chown postgres: "$dir" 2>/dev/null || true
	as_postgres "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C "$@" >"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log" >&2
		return 1
	}
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "max_connections = 50"
		echo "fsync = off"
		echo "wal_level = replica"
		echo "max_wal_senders = 4"
		echo "logging_collector = off"
	} | as_postgres tee -a "$dir/data/postgresql.conf" >/dev/null
	as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null || {
		cat "$dir/server.log" >&2
		return 1
	}
}

stop_server() {
	local bindir=$1 dir=$2 mode=${3:-fast}
	[ -f "$dir/data/postmaster.pid" ] && as_postgres "$bindir/pg_ctl" -D "$dir/data" -m "$mode" -w stop >/dev/null 2>&1
	return 0
}

# install_sql_edition SHAREDIR: copy the extension's control and scripts.
install_sql_edition() {
	local share=$1
	install -m 644 "$DLOCK_ROOT"/sql_edition/pg_dlock_sql.control "$DLOCK_ROOT"/sql_edition/pg_dlock_sql--*.sql "$share/extension/"
}

# owner_database DB OWNER: a database owned by a new role without superuser,
# as on a managed service.
owner_database() {
	local db=$1 owner=$2
	psql -X -q -U postgres -d postgres -v ON_ERROR_STOP=1 \
		-c "SET client_min_messages = warning" \
		-c "DROP DATABASE IF EXISTS $db" \
		-c "DO \$\$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$owner') THEN CREATE ROLE $owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB; END IF; END\$\$" \
		-c "CREATE DATABASE $db OWNER $owner"
}
