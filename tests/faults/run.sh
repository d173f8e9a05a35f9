#!/usr/bin/env bash
# Fault-injection harness: builds the worker, checks the checker on synthetic
# histories, then runs every scenario (harness.py) and prints the results table.
#
#   tests/faults/run.sh [--profile quick|full|soak] [--only NAME,...] [--pqxx] [--keep]
#
# make faults = --profile full, make soak = --profile soak; make test runs the
# quick profile through tests/suites/60-faults-quick.sh. Results: the table in
# tests/faults/results/latest.md, per-run histories in tests/faults/results/run-*/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FAULTS_BUILD_DIR:-$root/build/faults}

mkdir -p "$build"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 ||
	{ cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2 >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 1; }
grep -h "fault_worker:" "$build/configure.log" || true

python3 "$here/test_checker.py" -q 2>&1 | tail -n 3 || { echo "checker self-test failed" >&2; exit 1; }

exec python3 "$here/harness.py" --worker "$build/fault_worker" "$@"
