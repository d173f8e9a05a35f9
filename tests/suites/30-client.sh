#!/usr/bin/env bash
# C++ client suites (GoogleTest, client/tests/*_test.cpp) against the server
# tests/run-all.sh started. Runs the test binaries `make client` builds and ends
# with the summary line "N passed, N failed".
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${DLOCK_CLIENT_BUILD:-$root/build/client}/tests
passed=0
failed=0

# DLOCK_CLIENT_SUITES: which ones (45-pgbouncer.sh runs another set).
for suite in ${DLOCK_CLIENT_SUITES:-hashtext client transaction keep_alive outcome election lock_kinds policies listener durability conformance}; do
	exe=$bin/${suite}_test
	if [ ! -x "$exe" ]; then
		echo "missing $exe (run make client)"
		failed=$((failed + 1))
		continue
	fi
	log=$(mktemp)
	# DLOCK_TEST_WRAPPER: e.g. setarch for ThreadSanitizer (31-client-sanitizers.sh).
	timeout 300 ${DLOCK_TEST_WRAPPER:-} "$exe" --gtest_color=no 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log" | tail -n 1)
	rm -f "$log"
	p=${p:-0}
	f=${f:-0}
	# A crash or timeout leaves no summary: count it as a failure.
	if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "${suite}_test exited with status $status"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
done

# control: the hash comparison catches a planted off-by-one in the client's
# hashtext (client/tests/hashtext_test.cpp), which would misroute farm names
if [ -z "${DLOCK_CLIENT_SUITES:-}" ]; then
	if [ -x "$bin/hashtext_planted_test" ] && ! "$bin/hashtext_planted_test" --gtest_color=no >/dev/null 2>&1; then
		echo "ok   control: a planted off-by-one in the client's hashtext is caught"
		passed=$((passed + 1))
	else
		echo "FAIL control: a planted off-by-one in the client's hashtext is caught"
		failed=$((failed + 1))
	fi
fi

if [ -n "${DLOCK_SKIP_INSTALL:-}" ]; then # the second passes (31, 45) test the suites only
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
fi

# Installation: headers, library, CMake package and pkg-config file work for a
# program outside the tree (examples/quickstart.cpp, the program of docs/client.md).
build=${DLOCK_CLIENT_BUILD:-$root/build/client}
prefix=$(mktemp -d)
check_install() { # NAME COMMAND...
	local name=$1
	shift
	if "$@" >"$prefix/log" 2>&1; then
		echo "ok   $name"
		passed=$((passed + 1))
	else
		cat "$prefix/log"
		echo "FAIL $name"
		failed=$((failed + 1))
	fi
}
if [ "$build" = "$root/build/client" ]; then
	check_install "install: make install-client CLIENT_PREFIX=..." \
		make -C "$root" --no-print-directory install-client CLIENT_PREFIX="$prefix/usr"
else
	check_install "install: cmake --install" cmake --install "$build" --prefix "$prefix/usr"
fi
# The installed dlock starts without LD_LIBRARY_PATH or ldconfig (a run path
# relative to the executable), and uses the libdlock installed with it.
check_install "install: the installed dlock starts" env -u LD_LIBRARY_PATH "$prefix/usr/bin/dlock" --version
check_install "install: the dlock(1) manual page is installed and formats" \
	sh -c "man -l '$prefix/usr/share/man/man1/dlock.1' 2>/dev/null | grep -q 'dlock run' ||
		groff -man -Tutf8 '$prefix/usr/share/man/man1/dlock.1' 2>/dev/null | grep -q 'dlock run' ||
		grep -q '^\.TH DLOCK 1' '$prefix/usr/share/man/man1/dlock.1'"
check_install "install: ... with the libdlock installed beside it" \
	sh -c "env -u LD_LIBRARY_PATH ldd '$prefix/usr/bin/dlock' | grep -q 'libdlock.so.1 => $prefix/usr/'"
check_install "install: find_package(dlock) builds the quickstart" \
	sh -c "cmake -S '$root/client/cmake/consumer' -B '$prefix/consumer' -DCMAKE_PREFIX_PATH='$prefix/usr' \
		-DQUICKSTART_SOURCE='$root/examples/quickstart.cpp' && cmake --build '$prefix/consumer'"
check_install "install: the quickstart runs" \
	env LD_LIBRARY_PATH="$prefix/usr/lib" "$prefix/consumer/quickstart"
check_install "install: pkg-config builds the quickstart" \
	sh -c "PKG_CONFIG_PATH='$prefix/usr/lib/pkgconfig' c++ '$root/examples/quickstart.cpp' \
		\$(PKG_CONFIG_PATH='$prefix/usr/lib/pkgconfig' pkg-config --cflags --libs dlock) -o '$prefix/qs-pc'"
rm -rf "$prefix"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
