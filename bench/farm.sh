#!/usr/bin/env bash
# The lock farm's case of make bench (docs/farm.md, docs/scaling.md): acquire +
# release pairs of distinct names with pgbench, on a farm of 4 partitions on
# this machine (farm/setup.sh):
#   single   one partition alone, all clients on it (one primary's figure)
#   proxy    through the PL/Proxy proxy, each call on the owning partition
#   direct   each client connected straight to one partition (routing by the
#            client, as dlock.partition_of allows), clients spread evenly
# at 1 client (latency per call: the proxy's cost against a direct call) and at
# 8 clients (pairs per second).
#
#   bench/farm.sh [--farm DIR] [--duration S] [--out FILE] [--tsv FILE]
#
# --farm uses a farm already up (its DIR/farm.env); otherwise one is set up
# and removed. Prints a markdown section (also to --out); --tsv appends the
# figures to a run's TSV (case farm: pairs_per_s, pair_mean_ms), from which
# bench/render.py puts them in summary.md. Fails only when a run cannot be
# made or pgbench reports failed transactions.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
export PG_BINDIR
farm=
duration=5
out=
tsv=
while [ $# -gt 0 ]; do
	case "$1" in
	--farm) farm=$2; shift ;;
	--duration) duration=$2; shift ;;
	--out) out=$2; shift ;;
	--tsv) tsv=$2; shift ;;
	*) sed -n '2,18p' "$0" >&2; exit 2 ;;
	esac
	shift
done
work=$(mktemp -d /tmp/bench-farm.XXXXXX)
chmod 755 "$work" # the servers run as postgres
own=0
cleanup() {
	[ $own -eq 1 ] && "$root/farm/setup.sh" down "$farm" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
if [ -z "$farm" ]; then
	farm=$work/farm
	own=1
	"$root/farm/setup.sh" up "$farm" 4 >"$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; exit 1; }
fi
. "$farm/farm.env"
duration=${duration%.*} # pgbench takes whole seconds
[ "${duration:-0}" -ge 1 ] || duration=1

# one owner per client; names never repeat within a run (random over 10^9)
cat >"$work/pair.sql" <<-'EOF'
	\set n random(1, 1000000000)
	\set c :client_id + 1
	SELECT fencing_token FROM dlock.try_acquire('bench-farm-' || :n::text, '30 s', ('00000000-0000-0000-0000-' || lpad(to_hex(:c::integer), 12, '0'))::uuid);
	SELECT dlock.release('bench-farm-' || :n::text, ('00000000-0000-0000-0000-' || lpad(to_hex(:c::integer), 12, '0'))::uuid);
EOF

# pgbench CONNINFO CLIENTS TAG: prints "tps latency_ms"
run() {
	local conninfo=$1 clients=$2 tag=$3 log=$work/$3.log
	"$PG_BINDIR/pgbench" -n -M extended -f "$work/pair.sql" -c "$clients" -j "$clients" -T "$duration" \
		-d "$conninfo" >"$log" 2>&1 || { cat "$log" >&2; return 1; }
	grep -q '^number of failed transactions: 0 ' "$log" || ! grep -q '^number of failed transactions' "$log" ||
		{ cat "$log" >&2; return 1; }
	echo "$(awk '/^tps = / { printf "%.0f", $3 }' "$log") $(awk '/^latency average = / { print $4 }' "$log")"
}
part() { echo "host=127.0.0.1 port=${PART_PORTS[$1]} user=postgres dbname=dlock"; }

read -r single1_tps single1_ms < <(run "$(part 0)" 1 single1)
read -r proxy1_tps proxy1_ms < <(run "$PROXY" 1 proxy1)
read -r single8_tps single8_ms < <(run "$(part 0)" 8 single8)
read -r proxy8_tps proxy8_ms < <(run "$PROXY" 8 proxy8)
# direct routing at 8 clients: 2 clients on each of the 4 partitions at once
pids=()
for i in 0 1 2 3; do
	run "$(part "$i")" 2 "direct8-$i" >"$work/direct8-$i.out" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
direct8_tps=$(cat "$work"/direct8-*.out | awk '{ s += $1 } END { printf "%.0f", s }')
direct8_ms=$(cat "$work"/direct8-*.out | awk '{ s += $2 } END { printf "%.3f", s / NR }')

report() {
	echo "## The lock farm: 4 partitions on this machine (bench/farm.sh)"
	echo
	echo "Acquire + release pairs of distinct names (pgbench, extended protocol, $duration s a run);"
	echo "the proxy, the partitions and pgbench share the machine's cores."
	echo
	echo "| system | clients | pairs/s | ms per pair (mean) |"
	echo "|---|---:|---:|---:|"
	echo "| single partition | 1 | $single1_tps | $single1_ms |"
	echo "| through the proxy | 1 | $proxy1_tps | $proxy1_ms |"
	echo "| single partition | 8 | $single8_tps | $single8_ms |"
	echo "| through the proxy | 8 | $proxy8_tps | $proxy8_ms |"
	echo "| direct routing, 2 clients on each partition | 8 | $direct8_tps | $direct8_ms |"
	echo
	awk -v p="$proxy1_ms" -v s="$single1_ms" 'BEGIN { printf "The proxy adds %.3f ms to a pair at one client (%.3f ms per call), %.2fx a direct pair.\n", p - s, (p - s) / 2, p / s }'
}
report | tee "$work/report.md"
[ -z "$out" ] || cp "$work/report.md" "$out"
if [ -n "$tsv" ]; then
	for row in "single-partition 1 $single1_tps $single1_ms" "proxy 1 $proxy1_tps $proxy1_ms" \
		"single-partition 8 $single8_tps $single8_ms" "proxy 8 $proxy8_tps $proxy8_ms" \
		"direct-routing 8 $direct8_tps $direct8_ms"; do
		read -r system clients tps ms <<<"$row"
		printf 'farm\t%s\t%s\tpairs_per_s\t%s\nfarm\t%s\t%s\tpair_mean_ms\t%s\n' \
			"$system" "$clients" "$tps" "$system" "$clients" "$ms"
	done >>"$tsv"
fi
