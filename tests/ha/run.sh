#!/usr/bin/env bash
# Failover under Patroni: builds the worker, checks the checker on synthetic
# histories, then runs the Patroni scenario (ha.py) and prints the results.
#
#   tests/ha/run.sh [--profile quick|full] [--only NAME,...] [--keep] [--results DIR]
#
# make ha = --profile full (results committed in tests/ha/results/); make test
# runs the quick profile through tests/suites/70-ha.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${HA_BUILD_DIR:-$root/build/ha}

mkdir -p "$build"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 ||
	{ cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2 >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 1; }

python3 "$here/test_ha_checker.py" -q 2>&1 | tail -n 3 || { echo "checker self-test failed" >&2; exit 1; }

exec python3 "$here/ha.py" --worker "$build/ha_worker" "$@"
