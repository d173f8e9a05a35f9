#!/usr/bin/env bash
# The Debian packages (debian/): dpkg-buildpackage -us -uc -b builds them from a
# copy of the tree, as Debian's own PostgreSQL extensions are built (pg_buildext),
# each package holds what it should, and once installed with dpkg they work: the
# demo (scripts/demo.sh) runs against the packaged extension, the packaged dlock
# reports the project's version and has its manual page, and the quickstart
# builds against libdlock-dev with pkg-config. Afterwards the packages are removed
# and `make install` puts back the extension built from the tree, as before the
# suite. Takes a few minutes (the C++ client is built once more).
#
# DLOCK_DEB_INSTALL=0 builds and inspects the packages without installing them
# (for a machine whose installed extension must not be replaced).
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh

scratch=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/debian.XXXXXX")
chmod 755 "$scratch"
installed=()
restore() {
	if [ ${#installed[@]} -gt 0 ]; then
		dpkg -r "${installed[@]}" >"$scratch/remove.log" 2>&1 || cat "$scratch/remove.log"
		# The tree's own build, installed by make test before the suites ran.
		make -s install PG_CONFIG="${PG_BINDIR:-/usr/lib/postgresql/15/bin}/pg_config" >/dev/null 2>&1 ||
			echo "could not reinstall the extension from the tree after removing the packages"
	fi
	rm -rf "$scratch"
}
trap restore EXIT

version=$(python3 -c 'import json; print(json.load(open("META.json"))["version"])')
pg_major=$("${PG_BINDIR:-/usr/lib/postgresql/15/bin}/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')

# --- build from a copy of the tree (what git would check out, not the build products)
mkdir "$scratch/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -co --exclude-standard -z | tar -cf - --null -T - | tar -C "$scratch/src" -xf -
else
	tar -cf - --exclude=./build --exclude='*.o' --exclude='*.so' --exclude='*.bc' . | tar -C "$scratch/src" -xf -
fi
(cd "$scratch/src" && dpkg-buildpackage -us -uc -b) >"$scratch/build.log" 2>&1
status=$?
[ $status -ne 0 ] && tail -n 40 "$scratch/build.log"
check "dpkg-buildpackage -us -uc -b builds the packages" test $status -eq 0

deb() { ls "$scratch"/"$1"_*.deb 2>/dev/null | head -n 1; }
contents() { dpkg-deb -c "$(deb "$1")" 2>/dev/null | awk '{ print $6 }'; }
for pkg in "postgresql-$pg_major-pg-dlock" libdlock1 libdlock-dev dlock; do
	check "package $pkg is built, version $version-1" test -n "$(ls "$scratch"/"${pkg}_$version-1_"*.deb 2>/dev/null)"
done

# --- what each package holds -----------------------------------------------------
ext=$(contents "postgresql-$pg_major-pg-dlock")
check "the extension package has pg_dlock.so for PostgreSQL $pg_major" \
	grep -qx "./usr/lib/postgresql/$pg_major/lib/pg_dlock.so" <<<"$ext"
check "the extension package has the control file and every SQL script" \
	bash -c 'for f in pg_dlock.control $(cd sql && ls); do grep -qx "./usr/share/postgresql/'"$pg_major"'/extension/$f" <<<"$1" || exit 1; done' _ "$ext"
check "the extension package installs no header" bash -c '! grep -q "\.h$" <<<"$1"' _ "$ext"
check "libdlock1 has the shared library" grep -qE '^\./usr/lib/[^/]+/libdlock\.so\.1' <<<"$(contents libdlock1)"
dev=$(contents libdlock-dev)
check "libdlock-dev has the headers, dlock.pc and the CMake package" \
	bash -c 'grep -q "/usr/include/dlock/dlock.hpp$" <<<"$1" && grep -q "/pkgconfig/dlock.pc$" <<<"$1" &&
		grep -q "/cmake/dlock/dlockConfig.cmake$" <<<"$1"' _ "$dev"
cli=$(contents dlock)
check "dlock has the command and its manual page" \
	bash -c 'grep -qx "./usr/bin/dlock" <<<"$1" && grep -q "/usr/share/man/man1/dlock.1" <<<"$1"' _ "$cli"

if [ "${DLOCK_DEB_INSTALL:-1}" = 0 ]; then
	echo "skipped: installing the packages (DLOCK_DEB_INSTALL=0)"
	finish
	exit
fi

# --- installed ---------------------------------------------------------------------
debs=()
for pkg in "postgresql-$pg_major-pg-dlock" libdlock1 libdlock-dev dlock; do debs+=("$(deb "$pkg")"); done
installed=("postgresql-$pg_major-pg-dlock" dlock libdlock-dev libdlock1)
dpkg -i "${debs[@]}" >"$scratch/install.log" 2>&1
status=$?
[ $status -ne 0 ] && cat "$scratch/install.log"
check "dpkg -i installs the four packages" test $status -eq 0
check "dpkg owns the installed pg_dlock.so" \
	bash -c 'dpkg -S "/usr/lib/postgresql/'"$pg_major"'/lib/pg_dlock.so" | grep -q "^postgresql-'"$pg_major"'-pg-dlock:"'

scripts/demo.sh >"$scratch/demo.log" 2>&1
status=$?
[ $status -ne 0 ] && tail -n 30 "$scratch/demo.log"
check "the demo runs against the packaged extension" test $status -eq 0
check "the packaged dlock reports version $version" grep -q "^dlock $version " <<<"$(/usr/bin/dlock --version 2>&1)"
check "man finds dlock(1)" bash -c 'man -w dlock 2>/dev/null | grep -q "/usr/share/man/man1/dlock.1"'
# Only the system's own pkg-config directories: not a dlock.pc that make
# install-client put under /usr/local.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
export PKG_CONFIG_LIBDIR=/usr/lib/$multiarch/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig
c++ -std=c++17 examples/quickstart.cpp $(pkg-config --cflags --libs dlock 2>/dev/null) -o "$scratch/quickstart" \
	>"$scratch/quickstart.log" 2>&1
status=$?
[ $status -ne 0 ] && cat "$scratch/quickstart.log"
check "the quickstart builds against libdlock-dev with pkg-config" test $status -eq 0
check "pkg-config reports version $version" test "$(pkg-config --modversion dlock 2>/dev/null)" = "$version"

finish
