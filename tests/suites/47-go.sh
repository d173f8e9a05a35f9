#!/usr/bin/env bash
# The Go client (client/go, docs/clients/go.md): go vet, gofmt and the
# module's build; its tests under the race detector against the test server
# and a throwaway PgBouncer in transaction pooling (tests/lib/pgbouncer.sh);
# the conformance scenarios (client/conformance) on a direct connection,
# behind the PgBouncer, and once against the SQL edition; and a negative
# control: the runner given a scenario with a wrong expectation fails.
# Needs Go 1.25 or later (the polyglot machines have it in /usr/local/go);
# modules come from the Go module proxy into the module cache, pinned by
# go.mod and go.sum.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh
. tests/lib/pgbouncer.sh
. tests/sql_edition/lib.sh

[ -x /usr/local/go/bin/go ] && PATH=/usr/local/go/bin:$PATH
if ! command -v go >/dev/null; then
	check "go is installed (Go 1.25 or later)" false
	finish
	exit
fi
export GOFLAGS=-mod=readonly

scratch=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/go.XXXXXX")
chmod 755 "$scratch"
bport=$(free_ports)
sqled_db=dlock_sqled_go
cleanup() {
	pgbouncer_stop "$scratch/bouncer"
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $sqled_db" >/dev/null 2>&1
	rm -rf "$scratch"
}
trap cleanup EXIT
check "a throwaway PgBouncer in transaction pooling starts" pgbouncer_start "$scratch/bouncer" "$bport" "$PGPORT" "$PGDATABASE"
export DLOCK_PGBOUNCER_PORT=$bport

# gotest LABEL ARGS...: go test -race -v ARGS in client/go; shows each test's
# result line and the reason of every skip, keeps the whole log in $scratch.
n=0
gotest() {
	local label=$1 log
	shift
	n=$((n + 1))
	log=$scratch/go-test-$n.log
	(cd client/go && go test -race -count=1 -v "$@") >"$log" 2>&1
	local status=$?
	grep -E '^\s*--- (PASS|FAIL|SKIP)|_test.go:[0-9]+: (needs|skipped|failed as it must)|^(ok|FAIL)\s' "$log"
	[ $status -ne 0 ] && grep -E '_test.go:[0-9]+:' "$log" | grep -vE 'needs|skipped|failed as it must' | head -n 20
	return $status
}

direct_dsn="host=$PGHOST port=$PGPORT user=$PGUSER dbname=$PGDATABASE"
pooled_dsn="host=127.0.0.1 port=$bport user=$PGUSER dbname=$PGDATABASE"
pool2_dsn="host=127.0.0.1 port=$bport user=$PGUSER dbname=${PGDATABASE}_pool2"

check "go vet" bash -c 'cd client/go && go vet ./...'
check "gofmt leaves the sources as they are" bash -c 'cd client/go && test -z "$(gofmt -l .)"'
check "the module builds (go build)" bash -c 'cd client/go && go build ./...'
version=$(python3 -c 'import json; print(json.load(open("META.json"))["version"])')
check "dlock.Version is the project's version ($version)" grep -q "^const Version = \"$version\"$" client/go/dlock.go
check "client tests and conformance scenarios on a direct connection (go test -race)" \
	gotest direct ./...
pooled() {
	(
		export DLOCK_CONFORMANCE_DSN="$pooled_dsn" DLOCK_CONFORMANCE_ADMIN_DSN="$direct_dsn" \
			DLOCK_CONFORMANCE_POOLER=pgbouncer-transaction DLOCK_CONFORMANCE_POOL2_DSN="$pool2_dsn"
		gotest pooled -run Conformance ./...
	)
}
check "conformance scenarios behind PgBouncer in transaction pooling" pooled

# The SQL edition, once: a database of the test server with pg_dlock_sql
# (installed by 41-sql-edition-client when it ran first).
share=$("$PG_BINDIR/pg_config" --sharedir)
[ -f "$share/extension/pg_dlock_sql.control" ] || install_sql_edition "$share"
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $sqled_db" -c "CREATE DATABASE $sqled_db" &&
	psql -X -q -d $sqled_db -c "CREATE EXTENSION pg_dlock_sql"
sql_edition() {
	(
		unset DLOCK_PGBOUNCER_PORT
		export PGDATABASE=$sqled_db
		gotest sql-edition ./...
	)
}
check "client tests and conformance scenarios against the SQL edition" sql_edition

# Negative control: a scenario with a wrong expectation (a refusal expected
# as a grant) among the scenarios makes the runner, and go test, fail.
mkdir -p "$scratch/wrong/scenarios"
cp client/conformance/setup.sql "$scratch/wrong/"
cp client/conformance/negative/n1-refusal-expects-grant.json "$scratch/wrong/scenarios/"
wrong() {
	(
		export DLOCK_CONFORMANCE_DIR=$scratch/wrong
		! gotest wrong -run 'TestConformance$' ./... >/dev/null
	)
}
check "negative control: the runner fails a scenario with a wrong expectation" wrong
finish
