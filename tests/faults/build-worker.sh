#!/usr/bin/env bash
# Builds fault_worker, the one worker binary of the fault harness and the
# failover harness (tests/faults/CMakeLists.txt), into build/faults (or
# FAULTS_BUILD_DIR) and prints its path. Used by tests/faults/run.sh and
# tests/ha/run.sh.
#
#   tests/faults/build-worker.sh [--with-client]
#
# --with-client fails unless the client library was built in (the keep-alive
# and elector modes need it).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FAULTS_BUILD_DIR:-$root/build/faults}

mkdir -p "$build"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 ||
	{ cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2 >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 1; }
grep -h "fault_worker:" "$build/configure.log" >&2 || true
if [ "${1:-}" = "--with-client" ] && ! grep -q "fault_worker: using the client library" "$build/configure.log"; then
	echo "fault_worker was built without the client library: no keep-alive and elector modes" >&2
	exit 1
fi
echo "$build/fault_worker"
