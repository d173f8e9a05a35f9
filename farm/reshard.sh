#!/usr/bin/env bash
# Splits every partition of a lock farm in two (N -> 2N) without issuing any
# token twice (docs/farm.md#resharding):
#
#   reshard.sh PROXY_CONNINFO NEW_CONNSTR...
#
# one new partition database per old partition, in order: the names of old
# partition i whose hash now says i + N move to NEW_CONNSTR[i]. Each new database
# must be an empty partition (setup.sh partition). Run as a superuser of the
# proxy and of every partition (FARM_SUPERUSER, default postgres, is added to
# the partitions' connection strings).
#
# 1. The partition list doubles with duplicate entries (p[i + N] = p[i]): the
#    same routing, PL/Proxy's documented first step.
# 2. For each i: the new database refuses the proxy's role (its callers get a
#    clear error and retry); p[i + N] points to it; the calls routed the old way
#    drain; the old partition ends the live leases of the moving names (their
#    holders see the loss at their next renew) and reads dlock.highest_token();
#    the new database carries that state over (dlock.carry_over) and takes the
#    moving resources' fence state, so every later token of a moved name is above
#    every token it had; then it lets the proxy's role in; the old partition
#    reaps the moved names' rows.
#
# FARM_RESHARD_UNSAFE, a list of skip-carry, skip-release and skip-fence, leaves
# out those steps: the negative controls of tests/suites/50-farm.sh, never for use.
set -euo pipefail

proxy=${1:?PROXY_CONNINFO required}
shift
su=${FARM_SUPERUSER:-postgres}
unsafe=" ${FARM_RESHARD_UNSAFE:-} "

sql() {
	local conninfo=$1
	shift
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$conninfo" "$@"
}
lit() { printf "'%s'" "${1//\'/\'\'}"; }

mapfile -t old < <(sql "$proxy" -c 'SELECT connstr FROM dlock_farm.partitions() ORDER BY partition')
n=${#old[@]}
[ $# -eq "$n" ] || { echo "reshard.sh: $n partitions need $n new ones, got $#" >&2; exit 2; }
setup=$(dirname "$0")/setup.sh
new=()
for s in "$@"; do new+=("$("$setup" connstr "$s")"); done
mask=$((2 * n - 1))

for i in $(seq 0 $((n - 1))); do
	issued=$(sql "${new[$i]} user=$su" -c 'SELECT count(*) FROM dlock.locks')
	[ "$issued" -eq 0 ] || { echo "reshard.sh: ${new[$i]} is not an empty partition" >&2; exit 2; }
done

"$setup" partitions "$proxy" "${old[@]}" "${old[@]}"

for i in $(seq 0 $((n - 1))); do
	from="${old[$i]} user=$su"
	to="${new[$i]} user=$su"
	target=$((i + n))
	todb=$(sql "$to" -c 'SELECT current_database()')
	sql "$to" -c "REVOKE CONNECT ON DATABASE \"$todb\" FROM PUBLIC" -c "REVOKE CONNECT ON DATABASE \"$todb\" FROM dlock_farm"
	since=$(sql "$proxy" -c "ALTER SERVER dlock_farm OPTIONS (SET p$target $(lit "${new[$i]}"))" -c 'SELECT clock_timestamp()')
	# calls that took the old list before the change: on the proxy, then on the old partition
	sql "$proxy" -c "DO \$\$ BEGIN
		WHILE EXISTS (SELECT FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active'
			AND datname = current_database() AND query_start < '$since') LOOP
			PERFORM pg_sleep(0.01);
		END LOOP; END \$\$"
	drained=$(sql "$proxy" -c 'SELECT clock_timestamp()')
	sql "$from" -c "DO \$\$ BEGIN
		WHILE EXISTS (SELECT FROM pg_stat_activity WHERE usename = 'dlock_farm' AND state = 'active'
			AND datname = current_database() AND query_start < '$drained') LOOP
			PERFORM pg_sleep(0.01);
		END LOOP; END \$\$"
	moving="(hashtext(lock_name) & $mask) = $target"
	if [[ $unsafe != *" skip-release "* ]]; then
		echo "reshard.sh: ending the moving leases of partition $target from $(sql "$from" -c 'SELECT extract(epoch FROM clock_timestamp())')"
		sql "$from" -c "SELECT count(dlock.force_release(lock_name, 'moved to partition $target'))
			FROM dlock.locks WHERE $moving AND holders > 0" >/dev/null
	fi
	fences=$(sql "$from" -c "SELECT coalesce(string_agg(format('SELECT dlock.fence(%L, %s);', resource, fencing_token), ' '), '')
		FROM dlock.resource_fence WHERE (hashtext(resource) & $mask) = $target")
	state=$(sql "$from" -F ' ' -c 'SELECT fencing_token, history FROM dlock.highest_token()')
	if [[ $unsafe != *" skip-carry "* ]]; then
		sql "$to" -c "SELECT dlock.carry_over(${state% *}, ${state#* })" >/dev/null
	fi
	[ -z "$fences" ] || [[ $unsafe == *" skip-fence "* ]] || sql "$to" -c "$fences" >/dev/null
	sql "$to" -c "GRANT CONNECT ON DATABASE \"$todb\" TO dlock_farm"
	# the moved names' rows, all free now, leave the old partition
	sql "$from" -c "SELECT dlock.reap('0', 1000000000)" >/dev/null
	echo "reshard.sh: partition $i split, its names of hash & $mask = $target on ${new[$i]}"
done
