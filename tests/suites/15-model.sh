#!/usr/bin/env bash
# The protocol model: spin checks every property of model/pg_dlock.pml with a
# complete search and rejects every known-bug variant and every dropped
# assumption with a counterexample (model/check.sh, docs/testing.md). Needs no server; the larger bounds run in make faults.
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
exec "$root/model/check.sh" --profile quick --show-trails
