#!/usr/bin/env bash
# The C++ client's tests and the dlock command line against the SQL edition
# (docs/sql-edition.md), once, on Debian's PostgreSQL 15: a database of the
# shared test server with pg_dlock_sql instead of pg_dlock. Tests of what
# the SQL edition does not offer (session-bound leases) or that find a
# waiter by the C extension's wait event are left out by name, and the dlock
# checks expected to fail are listed, each with its reason, in
# tests/sql_edition/client-skip.txt.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/sql_edition/lib.sh

db=dlock_sqled_client
install_sql_edition "$("$PG_BINDIR/pg_config" --sharedir)"
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
q $db "CREATE EXTENSION pg_dlock_sql" >/dev/null

skip=$(sed -e 's/#.*//' tests/sql_edition/client-skip.txt | awk '$1 == "gtest" {print $2}' | paste -sd: -)
cli_skip=$(sed -e 's/#.*//' tests/sql_edition/client-skip.txt | awk '$1 == "cli" {print $2}' | paste -sd' ' -)
log=$(mktemp)
PGDATABASE=$db DLOCK_SKIP_INSTALL=1 GTEST_FILTER="-${skip:-none}" tests/suites/30-client.sh >"$log" 2>&1
grep -E '^\[  FAILED  \]' "$log" | sort -u
summary=$(tail -n 1 "$log")
check "C++ client tests against the SQL edition ($summary)" grep -q ' 0 failed$' "$log"
PGDATABASE=$db DLOCK_CLI_SKIP="$cli_skip" tests/suites/40-cli.sh >"$log" 2>&1
summary=$(tail -n 1 "$log")
expected=$(sed -n 's/^clifail \([^#]*[^#[:space:]]\)[[:space:]]*\(#.*\)\{0,1\}$/\1/p' tests/sql_edition/client-skip.txt)
unexpected=$(grep -E '^FAIL ' "$log" | sed 's/^FAIL //' | while IFS= read -r line; do
	known=0
	while IFS= read -r prefix; do
		[ -n "$prefix" ] && [[ $line == "$prefix"* ]] && known=1
	done <<<"$expected"
	[ $known -eq 1 ] || echo "$line"
done)
[ -n "$unexpected" ] && echo "$unexpected" | sed 's/^/unexpected FAIL: /'
check "dlock command-line tests against the SQL edition ($summary; failures only those listed in client-skip.txt)" \
	test -z "$unexpected" -a -n "$summary"
rm -f "$log"
psql -X -q -d postgres -c "DROP DATABASE $db"
finish
