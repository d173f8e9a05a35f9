#!/usr/bin/env bash
# More dlock waiters than pooled connections: five `dlock run --ttl 5s --wait
# 20s` started at once through a throwaway PgBouncer in transaction pooling
# (tests/lib/pgbouncer.sh) with a pool of two server connections, each running
# a 0.3 s COMMAND. With the default --wait-mode (auto) dlock finds the pooler
# and waits in the client, so no waiter holds a pooled connection while it
# waits: all five exit 0 within the wait, each COMMAND runs once, and no two
# COMMANDs overlap. The negative control asks for --wait-mode server: the
# waiters then sit in dlock.acquire on both pooled connections, the holder's
# renewals and release queue behind them, and runs end in 124 (lease lost) or
# 125 (release not confirmed). The library's side of the same scenario is
# pooled_test (45-pgbouncer). Ends with "N passed, N failed".
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DLOCK_ROOT=$root
DLOCK=${DLOCK_CLIENT_BUILD:-$root/build/client}/cli/dlock
if [ ! -x "$DLOCK" ]; then
	echo "missing $DLOCK (run make client)"
	echo "0 passed, 1 failed"
	exit 1
fi
. "$root/tests/lib/ports.sh"
. "$root/tests/lib/pgbouncer.sh"
dir=$(mktemp -d /tmp/pg_dlock-bouncer.XXXXXX)
work=$(mktemp -d)
port=$(free_ports)
trap 'pgbouncer_stop "$dir"; rm -rf "$dir" "$work"' EXIT
if ! pgbouncer_start "$dir" "$port" "$PGPORT" "$PGDATABASE"; then
	echo "could not start pgbouncer"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "pgbouncer (transaction pooling, pool of 2) on port $port in front of $PGPORT"
pool2="host=127.0.0.1 port=$port dbname=${PGDATABASE}_pool2 user=$PGUSER"
cli_passed=0
cli_failed=0
# shellcheck source=../../client/tests/cli/lib.sh
. "$root/client/tests/cli/lib.sh" # check, expect_status, unique; psql reaches the server directly

# five_runs LABEL [DLOCK OPTION...] -- starts five runs of one lock at once
# through the pool of two; each COMMAND appends "START END" (µs) to
# $work/LABEL.out. Sets `codes` (sorted exit statuses) and `took` (ms).
five_runs() {
	local label=$1 name pids=() i t0
	shift
	name=$(unique "waiters-$label")
	: >"$work/$label.out"
	t0=$(now_ms)
	for i in 1 2 3 4 5; do
		"$DLOCK" --dsn "$pool2" "$@" run --ttl 5s --wait 20s "$name" -- \
			sh -c 's=$(date +%s%6N); sleep 0.3; e=$(date +%s%6N); echo "$s $e" >>"$1"' sh "$work/$label.out" \
			2>>"$work/$label.err" &
		pids+=($!)
	done
	codes=()
	for i in "${pids[@]}"; do
		wait "$i"
		codes+=($?)
	done
	took=$(($(now_ms) - t0))
	codes=$(printf '%s\n' "${codes[@]}" | sort -n | tr '\n' ' ')
}

# no_overlap FILE -- the "START END" lines, sorted by START, each end before
# the next one starts.
no_overlap() {
	sort -n "$1" | awk 'NR > 1 && $1 < end { bad = 1 } { end = $2 } END { exit bad }'
}

# --- the default (--wait-mode auto): waits in the client behind the pooler ---
five_runs auto
echo "     exit statuses: $codes; took ${took} ms"
check "five runs, default wait mode: all exit 0 (got $codes)" $([ "$codes" = "0 0 0 0 0 " ]; echo $?)
check "five runs, default wait mode: all done within the 20 s wait (${took} ms)" $([ "$took" -lt 20000 ]; echo $?)
check "five runs, default wait mode: each COMMAND ran once ($(wc -l <"$work/auto.out") lines)" \
	$([ "$(wc -l <"$work/auto.out")" -eq 5 ]; echo $?)
no_overlap "$work/auto.out"
check "five runs, default wait mode: no two COMMANDs overlap" $?
[ "$codes" = "0 0 0 0 0 " ] || sed 's/^/     /' "$work/auto.err"

# The same asked for by name (--wait-mode poll), as before.
five_runs poll --wait-mode poll
check "five runs, --wait-mode poll: all exit 0 (got $codes)" $([ "$codes" = "0 0 0 0 0 " ]; echo $?)
no_overlap "$work/poll.out"
check "five runs, --wait-mode poll: no two COMMANDs overlap" $?

# --- negative control: --wait-mode server starves the holder ------------------
# The first run gets the lock at once; its release (and renewals) queue in
# PgBouncer behind two waiters inside dlock.acquire, which end only when the
# 5 s lease expires -- so each holder in turn loses its lease or the
# confirmation of its release.
five_runs server --wait-mode server
echo "     exit statuses: $codes; took ${took} ms"
check "five runs, --wait-mode server (negative control): not all exit 0 (got $codes)" \
	$([ "$codes" != "0 0 0 0 0 " ]; echo $?)
check "five runs, --wait-mode server (negative control): some run ends in 124 or 125" \
	$([[ " $codes" == *" 124 "* || " $codes" == *" 125 "* ]]; echo $?)

echo "$cli_passed passed, $cli_failed failed"
[ "$cli_failed" -eq 0 ]
