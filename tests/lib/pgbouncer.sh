# Shared by the test scripts: a throwaway PgBouncer in transaction pooling in
# front of the test server, on loopback, with its files in a private directory.
#
#   pgbouncer_start DIR LISTEN_PORT SERVER_PORT DATABASE
#       databases: DATABASE (pool of 20 server connections per user) and
#       DATABASE_pool2 (the same database, a pool of 2: more clients than
#       pooled connections)
#   pgbouncer_stop DIR
#
# Started as the "postgres" OS user when run by root (PgBouncer refuses root).
PGBOUNCER=${PGBOUNCER:-$(command -v pgbouncer || echo /usr/sbin/pgbouncer)}

pgbouncer_start() {
	local dir=$1 port=$2 server_port=$3 db=$4
	mkdir -p "$dir"
	printf '"postgres" ""\n"regress_dlock_app" ""\n' >"$dir/userlist.txt"
	cat >"$dir/pgbouncer.ini" <<INI
[databases]
$db = host=127.0.0.1 port=$server_port dbname=$db
${db}_pool2 = host=127.0.0.1 port=$server_port dbname=$db pool_size=2

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
	local run=()
	if [ "$(id -u)" -eq 0 ]; then
		chown -R postgres: "$dir"
		run=(runuser -u postgres --)
	fi
	"${run[@]}" "$PGBOUNCER" -d "$dir/pgbouncer.ini" || return 1
	local i
	for i in $(seq 1 100); do
		psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d "$db" -c 'SELECT 1' >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	cat "$dir/pgbouncer.log" >&2
	return 1
}

pgbouncer_stop() {
	local dir=$1 pid
	[ -f "$dir/pgbouncer.pid" ] || return 0
	pid=$(cat "$dir/pgbouncer.pid")
	kill "$pid" 2>/dev/null || return 0
	local i
	for i in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
}
