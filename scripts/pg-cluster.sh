#!/usr/bin/env bash
# Throwaway PostgreSQL clusters on loopback, for make demo, make test, make bench
# and the fault harness. The server runs as the "postgres" OS user when started
# by root; authentication is "trust" on 127.0.0.1 only.
#
#   pg-cluster.sh start   DIR PORT [-c name=value ...]  initdb if needed, then start
#   pg-cluster.sh stop    DIR                            fast shutdown
#   pg-cluster.sh crash   DIR                            immediate shutdown (no checkpoint)
#   pg-cluster.sh kill    DIR                            SIGKILL of the postmaster (no shutdown at all)
#   pg-cluster.sh restart DIR                            start again after stop or crash
#   pg-cluster.sh destroy DIR                            stop and remove DIR
#
# After start, connect with PGHOST=127.0.0.1 PGPORT=PORT PGUSER=postgres.
set -euo pipefail

PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}

as_server_user() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pgctl() {
	as_server_user "$PG_BINDIR/pg_ctl" "$@"
}

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,14p' "$0" >&2; exit 2; }
shift 2

case "$cmd" in
start)
	port=${1:?port required}
	shift
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		mkdir -p "$dir"
		[ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
		as_server_user "$PG_BINDIR/initdb" -D "$dir/data" -U postgres -A trust \
			--no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
		{
			echo "listen_addresses = '127.0.0.1'"
			echo "port = $port"
			echo "unix_socket_directories = '$dir'"
			echo "shared_preload_libraries = 'pg_dlock'"
			echo "max_connections = 200"
			echo "max_prepared_transactions = 10"
			echo "logging_collector = off"
			echo "log_min_messages = warning"
			while [ $# -gt 0 ]; do
				[ "$1" = "-c" ] && shift
				echo "$1"
				shift
			done
		} | as_server_user tee -a "$dir/data/postgresql.conf" >/dev/null
	fi
	pgctl -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	;;
restart)
	pgctl -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	;;
stop)
	[ -f "$dir/data/postmaster.pid" ] && pgctl -D "$dir/data" -m fast -w stop >/dev/null
	;;
crash)
	pgctl -D "$dir/data" -m immediate -w stop >/dev/null
	;;
kill)
	# The children exit when they notice the postmaster is gone. A killed
	# postmaster that nobody reaps stays a zombie, which the next start takes for
	# a live server: once they are all gone its lock files go, as an
	# administrator would remove them.
	pid=$(head -n 1 "$dir/data/postmaster.pid")
	children=$(ps -o pid= --ppid "$pid" || true)
	kill -KILL "$pid"
	running() {
		local p state
		for p in "$pid" $children; do
			state=$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
			[ -n "$state" ] && [ "$state" != Z ] && return 0
		done
		return 1
	}
	for _ in $(seq 1 300); do
		running || break
		sleep 0.1
	done
	running && { echo "pg-cluster.sh: the killed server's processes did not exit" >&2; exit 1; }
	rm -f "$dir/data/postmaster.pid" "$dir"/.s.PGSQL.*
	;;
destroy)
	[ -f "$dir/data/postmaster.pid" ] && pgctl -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
	;;
*)
	echo "pg-cluster.sh: unknown command \"$cmd\"" >&2
	exit 2
	;;
esac
