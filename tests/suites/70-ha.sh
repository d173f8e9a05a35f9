#!/usr/bin/env bash
# Failover under Patroni, quick profile: a throwaway three-node Patroni cluster
# with a one-member etcd per run, SIGKILL of the primary's postmaster and
# isolation of its Patroni, in synchronous and asynchronous mode, plus the
# negative control (tests/ha/, docs/testing.md). One test per
# run; the suite's own cluster is not used. Its results stay in the suite's
# scratch directory: tests/ha/results/ holds those of the last `make ha`.
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
results=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/ha.XXXXXX")
trap 'rm -rf "$results"' EXIT

# ha.py ends with "N passed, N failed"; tests/run-all.sh counts a crash before
# that line as one failure.
"$root/tests/ha/run.sh" --profile quick --results "$results" "$@"
