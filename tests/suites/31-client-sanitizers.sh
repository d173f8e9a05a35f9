#!/usr/bin/env bash
# The C++ client's suites and the dlock command line again, built with
# AddressSanitizer + UndefinedBehaviorSanitizer (any report aborts the
# program: -fno-sanitize-recover), and the keep-alive and listener suites
# (the library's threads) with ThreadSanitizer. `make client-sanitize` builds them (make test does).
# Ends with "N passed, N failed".
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DLOCK_ROOT=$root
asan=$root/build/client-asan
tsan=$root/build/client-tsan
. "$root/tests/lib/subsuite.sh"

export DLOCK_SKIP_INSTALL=1
export ASAN_OPTIONS=abort_on_error=0:halt_on_error=1:detect_leaks=1
export LSAN_OPTIONS=suppressions=$root/client/tests/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_subsuite "client suites under ASan+UBSan" \
	env DLOCK_CLIENT_BUILD="$asan" DLOCK_CLIENT_SUITES="client transaction keep_alive outcome lock_kinds policies listener durability" \
	"$root/tests/suites/30-client.sh"
run_subsuite "dlock under ASan+UBSan" env DLOCK_CLIENT_BUILD="$asan" "$root/tests/suites/40-cli.sh"
# ThreadSanitizer needs a narrower address-space layout than this kernel's
# default randomisation gives; setarch -R turns it off for the test alone.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
run_subsuite "keep-alive and listener suites under TSan" \
	env DLOCK_CLIENT_BUILD="$tsan" DLOCK_CLIENT_SUITES="keep_alive listener" DLOCK_TEST_WRAPPER="setarch $(uname -m) -R" \
	"$root/tests/suites/30-client.sh"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
