#!/usr/bin/env bash
# The C++ client's suites and the dlock command line again, built with
# AddressSanitizer + UndefinedBehaviorSanitizer (any report aborts the
# program: -fno-sanitize-recover), and the keep-alive suite with
# ThreadSanitizer. `make client-sanitize` builds them (make test does).
# Ends with "N passed, N failed".
set -uo pipefail

root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DLOCK_ROOT=$root
asan=$root/build/client-asan
tsan=$root/build/client-tsan
passed=0
failed=0

run_suite() { # LABEL COMMAND...
	local label=$1 log status summary p f
	shift
	echo "=== $label"
	log=$(mktemp)
	"$@" 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer" "$log" &&
		echo "(a sanitizer reported an error above)"
	rm -f "$log"
	p=${summary%% passed*}
	f=${summary#*, }
	f=${f%% failed*}
	[ -n "$summary" ] || { p=0; f=1; }
	[ "$status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	passed=$((passed + p))
	failed=$((failed + f))
}

export DLOCK_SKIP_INSTALL=1
export ASAN_OPTIONS=abort_on_error=0:halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite "client suites under ASan+UBSan" \
	env DLOCK_CLIENT_BUILD="$asan" DLOCK_CLIENT_SUITES="client transaction keep_alive outcome" \
	"$root/tests/suites/30-client.sh"
run_suite "dlock under ASan+UBSan" env DLOCK_CLIENT_BUILD="$asan" "$root/tests/suites/40-cli.sh"
# ThreadSanitizer needs a narrower address-space layout than this kernel's
# default randomisation gives; setarch -R turns it off for the test alone.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
run_suite "keep-alive suite under TSan" \
	env DLOCK_CLIENT_BUILD="$tsan" DLOCK_CLIENT_SUITES="keep_alive" DLOCK_TEST_WRAPPER="setarch $(uname -m) -R" \
	"$root/tests/suites/30-client.sh"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
