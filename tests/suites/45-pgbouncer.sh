#!/usr/bin/env bash
# The C++ client suites, the examples and the dlock command line a second time,
# through a throwaway PgBouncer in transaction pooling (tests/lib/pgbouncer.sh)
# in front of the server tests/run-all.sh started; then pooled_test, which
# needs more clients than pooled connections. Ends with "N passed, N failed".
#
# Left out through the pooler: tests that kill or cancel the server process of
# one client connection, or watch it by pid (outcome_test, sync_rep_test). A
# transaction pooler ties no server process to a client connection, so there
# is no such process to aim at; they run against the server in 30-client.
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DLOCK_ROOT=$root
. "$root/tests/lib/ports.sh"
. "$root/tests/lib/pgbouncer.sh"
dir=$(mktemp -d /tmp/pg_dlock-bouncer.XXXXXX)
port=$(free_ports)
server_port=$PGPORT
trap 'pgbouncer_stop "$dir"; rm -rf "$dir"' EXIT
if ! pgbouncer_start "$dir" "$port" "$server_port" "$PGDATABASE"; then
	echo "could not start pgbouncer"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "pgbouncer (transaction pooling) on port $port in front of $server_port"

export DLOCK_ADMIN_DSN="host=$PGHOST port=$server_port dbname=$PGDATABASE user=$PGUSER"
export DLOCK_POOL2_DSN="host=$PGHOST port=$port dbname=${PGDATABASE}_pool2 user=$PGUSER"
export PGPORT=$port
export DLOCK_TEST_POOLER=pgbouncer-transaction
export DLOCK_CLIENT_SUITES="client transaction keep_alive pooled lock_kinds listener durability conformance"
export GTEST_FILTER='-outcome_test.*:sync_rep_test.*'
export DLOCK_SKIP_INSTALL=1
# dlock watch and dlock elect listen for lock events (LISTEN), which is session
# state a transaction pooler does not keep: they need a direct connection or
# session pooling (docs/events.md), so they run in
# 40-cli only, as the election client test runs in 30-client only.
# policies_test.sh: session-bound leases need the client's own server session,
# which transaction pooling does not give (docs/lease-policies.md)
export DLOCK_CLI_SKIP="election_test.sh policies_test.sh"

. "$root/tests/lib/subsuite.sh"
for suite in 30-client 35-examples 40-cli; do
	run_subsuite "$suite through pgbouncer" "$root/tests/suites/$suite.sh"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
