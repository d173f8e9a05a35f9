#!/usr/bin/env bash
# Fault-injection harness: builds the worker, checks the checkers on synthetic
# histories, then runs every scenario (harness.py) and prints the results table.
#
#   tests/faults/run.sh [--profile quick|full|soak] [--only NAME,...] [--edition c|sql] [--pqxx] [--keep]
#                       [--set local|network|network-quick|all]
#
# --set network: the scenarios between hosts made of network namespaces
# (net_scenarios.py; root), results in results/latest-network.md; make test runs
# their quick subset through tests/suites/62-faults-network.sh.
# make faults = --profile full (and --set network), make soak = --profile soak; make test runs the
# quick profile through tests/suites/60-faults-quick.sh, and against the SQL
# edition through 61-faults-sql-edition.sh. Results: the table in
# tests/faults/results/latest.md (latest-sql-edition.md), per-run histories in
# tests/faults/results/run-*/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
worker=$("$here/build-worker.sh")

python3 "$here/test_checker.py" -q 2>&1 | tail -n 3 || { echo "checker self-test failed" >&2; exit 1; }
python3 "$here/test_kinds_check.py" -q 2>&1 | tail -n 3 || { echo "kinds checker self-test failed" >&2; exit 1; }

exec python3 "$here/harness.py" --worker "$worker" "$@"
