#!/usr/bin/env bash
# Failover under Patroni: builds the worker (tests/faults' fault_worker, whose
# keep-alive mode this harness runs), checks the checker on synthetic
# histories, then runs the Patroni scenario (ha.py) and prints the results.
#
#   tests/ha/run.sh [--profile quick|full] [--only NAME,...] [--keep] [--results DIR] [--network]
#
# make ha = --profile full (results committed in tests/ha/results/); make test
# runs the quick profile through tests/suites/70-ha.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
worker=$("$here/../faults/build-worker.sh" --with-client)

python3 "$here/test_ha_checker.py" -q 2>&1 | tail -n 3 || { echo "checker self-test failed" >&2; exit 1; }

exec python3 "$here/ha.py" --worker "$worker" "$@"
