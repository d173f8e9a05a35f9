#!/usr/bin/env bash
# Faults of a real network between hosts made of network namespaces on this
# machine (tests/faults/netns.py, tests/faults/net_scenarios.py, docs/testing.md):
# first the topology library's self-test (each fault does what it says on real
# sockets), then the fault harness's quick network subset -- a client host cut
# off from the primary while its keep-alive leases run out, an asymmetric link,
# a flapping link, and the negative control of the cut with fencing off -- with
# the same checks as 60-faults-quick: zero violations, the negative control
# caught, the standard histories through the independent checker. The other
# network scenarios (packet loss, the negative controls of the asymmetric and
# flapping links, which one quick run does not always catch) are in make faults.
# Needs root (ip netns, iptables).
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! { command -v iptables || command -v iptables-legacy; } >/dev/null; then
	echo "not ok - network namespaces need root, iproute2 and iptables (scripts/install-deps.sh faults)"
	echo "0 passed, 1 failed"
	exit 1
fi
# Namespaces of earlier runs that were killed before their cleanup (their process is gone).
python3 "$root/tests/faults/netns.py" sweep

python3 "$root/tests/faults/netns.py" selftest >"$out" 2>&1
passed=$(grep -c '^ok - ' "$out")
failed=$(grep -c '^not ok - ' "$out")
cat "$out"
if ! grep -q 'closed: no namespace left' "$out"; then
	echo "not ok - netns self-test did not complete"
	sed 's/^/    /' "$out" | tail -n 20
	failed=$((failed + 1))
fi

"$root/tests/suites/60-faults-quick.sh" --set network-quick "$@" >"$out" 2>&1
sed '$d' "$out"
last=$(tail -n 1 "$out")
if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
	passed=$((passed + BASH_REMATCH[1]))
	failed=$((failed + BASH_REMATCH[2]))
else
	echo "not ok - fault harness (network) did not report: $last"
	failed=$((failed + 1))
fi
left=$(python3 "$root/tests/faults/netns.py" sweep)
if [ -n "$left" ]; then
	echo "not ok - network namespaces left behind by the finished runs: $left"
	failed=$((failed + 1))
else
	echo "ok - no network namespace left behind"
	passed=$((passed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
