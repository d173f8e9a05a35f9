#!/usr/bin/env bash
# The lock farm on PL/Proxy (docs/farm.md): partitions are ordinary databases
# with pg_dlock, the proxy a database whose schema dlock routes each call to the
# partition that owns the name.
#
#   setup.sh up DIR N            N (a power of two) partition clusters and a proxy
#                                cluster on this machine, under DIR, on free ports;
#                                writes DIR/farm.env (PROXY_PORT, PART_PORTS, ...)
#   setup.sh down DIR            stops them and removes DIR
#   setup.sh partition CONNINFO  makes an existing database a partition: pg_dlock
#                                and the proxy's role dlock_farm with its grants
#   setup.sh proxy CONNINFO PART_CONNSTR...
#                                makes an existing database the proxy of those
#                                partitions (p0, p1, ... in that order; any host and
#                                port, the count a power of two)
#   setup.sh partitions CONNINFO PART_CONNSTR...
#                                points an existing proxy at a new partition list
#   setup.sh connstr PART_CONNSTR
#                                prints the connection string the proxy would get
#                                (with the link options below; farm/reshard.sh)
#
# Partitions of `up` are database dlock, the proxy database farm, all on
# 127.0.0.1 as user postgres (scripts/pg-cluster.sh). PG_BINDIR picks the server.
#
# FARM_EDITION picks what a partition (`up`, `partition`) gets: c (default) the
# C extension pg_dlock, sql the SQL edition pg_dlock_sql (make install-sql-edition),
# mixed (`up` only) the C extension on even partitions, the SQL edition on odd ones.
#
# Every partition connection string written (proxy, partitions, up, connstr) gets the
# libpq options of FARM_LINK_OPTIONS that it does not set itself: they bound a
# proxy call whose partition the network cut off (docs/farm.md). Default
#   tcp_user_timeout=10000 keepalives=1 keepalives_idle=10 keepalives_interval=5 keepalives_count=3
# FARM_LINK_OPTIONS= (empty) adds none.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cluster=$root/scripts/pg-cluster.sh
PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
export PG_BINDIR
# small clusters: the farm runs several on one machine beside the tests
small=(-c shared_buffers=16MB -c max_connections=100 -c wal_writer_delay=20ms)

sql() {
	local conninfo=$1
	shift
	psql -X -q -v ON_ERROR_STOP=1 -d "$conninfo" "$@"
}

link_options=${FARM_LINK_OPTIONS-tcp_user_timeout=10000 keepalives=1 keepalives_idle=10 keepalives_interval=5 keepalives_count=3}

# A connection string with the options of link_options it does not set; a
# URI is left as it is (give it its options as query parameters).
with_link_options() {
	local s=$1 o
	[[ $s == postgres://* || $s == postgresql://* ]] && { echo "$s"; return; }
	for o in $link_options; do
		[[ " $s" =~ [[:space:]]${o%%=*}[[:space:]]*= ]] || s+=" $o"
	done
	echo "$s"
}

power_of_two() { [ "$1" -ge 1 ] && [ $(($1 & ($1 - 1))) -eq 0 ]; }

# The SERVER options p0..pN-1, quoted for SQL, each after the word $1.
server_options() {
	local verb=$1 i=0 out="" s
	shift
	for s in "$@"; do
		s=$(with_link_options "$s")
		out+="${out:+, }${verb:+$verb }p$i '${s//\'/\'\'}'"
		i=$((i + 1))
	done
	echo "$out"
}

# The extension partition $1 (0, 1, ...) gets by FARM_EDITION.
edition_of() {
	case ${FARM_EDITION:-c} in
	c) echo pg_dlock ;;
	sql) echo pg_dlock_sql ;;
	mixed) if [ $(($1 % 2)) = 1 ]; then echo pg_dlock_sql; else echo pg_dlock; fi ;;
	esac
}
case ${FARM_EDITION:-c} in
c | sql | mixed) ;;
*)
	echo "setup.sh: FARM_EDITION=$FARM_EDITION: give c, sql or mixed" >&2
	exit 2
	;;
esac

make_partition() { # CONNINFO EXTENSION
	sql "$1" -v ext="$2" <<-'EOF'
		CREATE EXTENSION IF NOT EXISTS :"ext";
		DO $$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dlock_farm') THEN
				CREATE ROLE dlock_farm LOGIN;
			END IF;
		END $$;
		-- the proxy's calls that need a grant; the proxy keeps them from PUBLIC
		GRANT EXECUTE ON FUNCTION dlock.holds(text, bigint), dlock.fence(text, bigint),
			dlock.force_release(text, text), dlock.resize_semaphore(text, integer) TO dlock_farm;
	EOF
}

make_proxy() {
	local conninfo=$1
	shift
	power_of_two $# || { echo "setup.sh: $# partitions: the count must be a power of two" >&2; exit 2; }
	sql "$conninfo" -c 'CREATE EXTENSION IF NOT EXISTS plproxy' -f "$root/farm/proxy.sql"
	sql "$conninfo" <<-EOF
		CREATE SERVER dlock_farm FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', $(server_options "" "$@"));
		CREATE USER MAPPING FOR PUBLIC SERVER dlock_farm OPTIONS (user 'dlock_farm');
		GRANT USAGE ON FOREIGN SERVER dlock_farm TO PUBLIC;
	EOF
}

# Replaces the partition list in one statement: a proxy backend takes the new
# list at its next call (PL/Proxy watches the server's catalog row).
set_partitions() {
	local conninfo=$1
	shift
	power_of_two $# || { echo "setup.sh: $# partitions: the count must be a power of two" >&2; exit 2; }
	local old drop=""
	old=$(sql "$conninfo" -At -c "SELECT string_agg(split_part(o, '=', 1), ' ') FROM pg_foreign_server s, unnest(s.srvoptions) o WHERE s.srvname = 'dlock_farm' AND o ~ '^p[0-9]+='")
	for key in $old; do drop+="DROP $key, "; done
	sql "$conninfo" -c "ALTER SERVER dlock_farm OPTIONS (${drop}$(server_options ADD "$@"))"
}

connstr() { echo "host=127.0.0.1 port=$1 dbname=dlock connect_timeout=5"; }

cmd=${1:-}
case "$cmd" in
up)
	dir=${2:?DIR required}
	n=${3:?N required}
	power_of_two "$n" || { echo "setup.sh: $n partitions: the count must be a power of two" >&2; exit 2; }
	. "$root/tests/lib/ports.sh"
	mapfile -t ports < <(free_ports $((n + 1)))
	proxy_port=${ports[0]}
	part_ports=("${ports[@]:1}")
	mkdir -p "$dir"
	[ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
	pids=()
	for i in $(seq 0 $((n - 1))); do
		"$cluster" start "$dir/p$i" "${part_ports[$i]}" "${small[@]}" &
		pids+=($!)
	done
	"$cluster" start "$dir/proxy" "$proxy_port" "${small[@]}" &
	pids+=($!)
	for p in "${pids[@]}"; do wait "$p"; done
	conns=() editions=()
	for i in $(seq 0 $((n - 1))); do
		sql "host=127.0.0.1 port=${part_ports[$i]} user=postgres dbname=postgres" -c 'CREATE DATABASE dlock'
		make_partition "host=127.0.0.1 port=${part_ports[$i]} user=postgres dbname=dlock" "$(edition_of "$i")"
		editions+=("$(edition_of "$i")")
		conns+=("$(connstr "${part_ports[$i]}")")
	done
	sql "host=127.0.0.1 port=$proxy_port user=postgres dbname=postgres" -c 'CREATE DATABASE farm'
	make_proxy "host=127.0.0.1 port=$proxy_port user=postgres dbname=farm" "${conns[@]}"
	{
		echo "PROXY_PORT=$proxy_port"
		echo "PART_PORTS=(${part_ports[*]})"
		echo "PART_EDITIONS=(${editions[*]})"
		echo "PROXY='host=127.0.0.1 port=$proxy_port user=postgres dbname=farm'"
	} >"$dir/farm.env"
	cat "$dir/farm.env"
	;;
down)
	dir=${2:?DIR required}
	for d in "$dir"/p* "$dir"/proxy; do
		[ -d "$d" ] && "$cluster" destroy "$d" >/dev/null 2>&1 || true
	done
	rm -rf "$dir"
	;;
partition)
	[ "${FARM_EDITION:-c}" != mixed ] || { echo "setup.sh partition: FARM_EDITION=mixed is for up; give c or sql" >&2; exit 2; }
	make_partition "${2:?CONNINFO required}" "$(edition_of 0)"
	;;
proxy)
	conninfo=${2:?CONNINFO required}
	shift 2
	make_proxy "$conninfo" "$@"
	;;
partitions)
	conninfo=${2:?CONNINFO required}
	shift 2
	set_partitions "$conninfo" "$@"
	;;
connstr)
	with_link_options "${2:?PART_CONNSTR required}"
	;;
*)
	sed -n '2,33p' "$0" >&2
	exit 2
	;;
esac
