#!/usr/bin/env bash
# The token torture test: seeded random sequences of fenced and durable
# grants of every kind (exclusive, shared, permits, acquire_all, downgrade),
# renewals, releases, reaps, crashes, cold backups restored with
# dlock.after_restore(), promotions of an asynchronous standby and DROP/CREATE
# EXTENSION with the carry-over of docs/fencing.md. Per name, no token may be
# returned twice, and every token after a crash, restore, promotion or drop
# must be above every token returned before it, lost ones included
# (tests/lib/token_torture.py). Then the same checks on a profile of crashes,
# backups and restores alone, and its two negative controls, which must
# return a token twice or below an earlier one: dlock.test_ignore_epoch, and
# the one-generation restore step of 1.4. Runs its own servers (free ports,
# private directories), not the shared one.
#
# TOKEN_TORTURE_PROFILE=short (make test, about 2 minutes) or long (make soak:
# 2500 steps); TOKEN_TORTURE_SEED=N repeats a run's sequence of steps;
# TOKEN_TORTURE_ARGS: more options for the driver.
set -uo pipefail

root=$DLOCK_ROOT
. "$root/tests/lib/check.sh"
. "$root/tests/lib/ports.sh"
dir=$DLOCK_SCRATCH/token-torture
read -r port standby_port <<<"$(free_ports 2 | tr '\n' ' ')"
profile=${TOKEN_TORTURE_PROFILE:-short}
seed=${TOKEN_TORTURE_SEED:-}

cleanup() {
	for d in "$dir"/a "$dir"/b "$dir"/backup; do
		"$root/scripts/pg-cluster.sh" destroy "$d" >/dev/null 2>&1
	done
	rm -rf "$dir"
}
[ -n "${KEEP:-}" ] || trap cleanup EXIT
mkdir -p "$dir" && chmod 755 "$dir"

# the driver's check lines count as this suite's
drive() {
	local out
	out=$(mktemp)
	# shellcheck disable=SC2086
	python3 "$root/tests/lib/token_torture.py" --dir "$dir" --port "$port" \
		--standby-port "$standby_port" "$@" ${TOKEN_TORTURE_ARGS:-} | tee "$out"
	passed=$((passed + $(grep -c '^ok ' "$out")))
	failed=$((failed + $(grep -c '^FAILED ' "$out")))
	grep -q '^token_torture: [0-9]* passed' "$out" || { echo "FAILED  token_torture.py $* ended early"; failed=$((failed + 1)); }
	rm -f "$out"
}

drive --profile "$profile" ${seed:+--seed "$seed"}
# the controls' profile holds with the documented steps, so what the
# controls find comes from their switch
drive --profile control --seed 7
drive --profile control --seed 7 --control epoch
drive --profile control --seed 7 --control restore-step

finish
