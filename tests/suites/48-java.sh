#!/usr/bin/env bash
# The Java client (client/java, docs/clients/java.md): mvn package builds the
# Maven artifact and runs its JUnit 5 tests (the client, the Spring
# Integration LockRegistry, the ShedLock LockProvider with a @SchedulerLock
# job in two Spring contexts, the conformance scenarios) against the test
# server and a throwaway PgBouncer in transaction pooling; the conformance
# scenarios behind the PgBouncer, and all tests once against the SQL edition;
# and a negative control: the runner given a scenario with a wrong
# expectation fails. Needs Java 17 and Maven (scripts/install-deps.sh
# client); the dependencies, pinned in pom.xml, come from Maven Central into
# ~/.m2 on the first run (DLOCK_MAVEN_REPO names another local repository).
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh
. tests/lib/pgbouncer.sh
. tests/sql_edition/lib.sh

if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
	check "Maven and a Java 17 JDK are installed (scripts/install-deps.sh client)" false
	finish
	exit
fi

scratch=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/java.XXXXXX")
chmod 755 "$scratch"
bport=$(free_ports)
sqled_db=dlock_sqled_java
cleanup() {
	pgbouncer_stop "$scratch/bouncer"
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $sqled_db" >/dev/null 2>&1
	rm -rf "$scratch"
}
trap cleanup EXIT
check "a throwaway PgBouncer in transaction pooling starts" pgbouncer_start "$scratch/bouncer" "$bport" "$PGPORT" "$PGDATABASE"
export DLOCK_PGBOUNCER_PORT=$bport
# One JVM for Maven, one for the tests; no parallel builds on the shared machine.
export MAVEN_OPTS="${MAVEN_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1}"

# mvnrun LABEL ARGS...: mvn -B ARGS in client/java; shows the test counts, the
# failures and the conformance runner's skips, keeps the whole log in $scratch.
n=0
mvnrun() {
	local label=$1 log
	shift
	n=$((n + 1))
	log=$scratch/mvn-$n.log
	(cd client/java && mvn -B ${DLOCK_MAVEN_REPO:+-Dmaven.repo.local="$DLOCK_MAVEN_REPO"} "$@") >"$log" 2>&1
	local status=$?
	grep -E 'Tests run:|<<< (FAILURE|ERROR)|^conformance: |BUILD (SUCCESS|FAILURE)|ERROR\] (Failed|.*Exception)' "$log" | head -n 60
	return $status
}

direct_dsn="host=$PGHOST port=$PGPORT user=$PGUSER dbname=$PGDATABASE"
pooled_dsn="host=127.0.0.1 port=$bport user=$PGUSER dbname=$PGDATABASE"
pool2_dsn="host=127.0.0.1 port=$bport user=$PGUSER dbname=${PGDATABASE}_pool2"

check "mvn package: the artifact builds (-Werror) and all JUnit 5 tests pass on a direct connection" \
	mvnrun package package
version=$(python3 -c 'import json; print(json.load(open("META.json"))["version"])')
check "the artifact and DlockClient.VERSION carry the project's version ($version)" \
	bash -c "test -f client/java/target/pg-dlock-$version.jar && grep -q 'VERSION = \"$version\";' client/java/src/main/java/io/github/pgdlock/DlockClient.java"
pooled() {
	(
		export DLOCK_CONFORMANCE_DSN="$pooled_dsn" DLOCK_CONFORMANCE_ADMIN_DSN="$direct_dsn" \
			DLOCK_CONFORMANCE_POOLER=pgbouncer-transaction DLOCK_CONFORMANCE_POOL2_DSN="$pool2_dsn"
		mvnrun pooled -o surefire:test -Dtest=ConformanceTest
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
		mvnrun sql-edition -o surefire:test
	)
}
check "all tests and conformance scenarios against the SQL edition" sql_edition

# Negative control: a scenario with a wrong expectation (a refusal expected
# as a grant) among the scenarios makes the runner, and Maven, fail.
mkdir -p "$scratch/wrong/scenarios" "$scratch/wrong/negative"
cp client/conformance/setup.sql "$scratch/wrong/"
cp client/conformance/negative/n1-refusal-expects-grant.json "$scratch/wrong/scenarios/"
cp client/conformance/negative/n1-refusal-expects-grant.json "$scratch/wrong/negative/"
wrong() {
	(
		export DLOCK_CONFORMANCE_DIR=$scratch/wrong
		! mvnrun wrong -o surefire:test -Dtest=ConformanceTest >/dev/null
	)
}
check "negative control: the runner fails a scenario with a wrong expectation" wrong
finish
