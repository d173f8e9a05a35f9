# Helpers sourced by client/tests/cli/*_test.sh (via tests/suites/40-cli.sh).
# DLOCK is the tool under test; check() counts results.

DLOCK=${DLOCK:-${DLOCK_ROOT:?}/build/client/cli/dlock}
cli_passed=${cli_passed:-0}
cli_failed=${cli_failed:-0}
work=${work:-$(mktemp -d)}

# check DESCRIPTION STATUS -- STATUS 0 is a pass.
check() {
	if [ "$2" -eq 0 ]; then
		echo "ok   $1"
		cli_passed=$((cli_passed + 1))
	else
		echo "FAIL $1"
		cli_failed=$((cli_failed + 1))
	fi
}

# expect_status DESCRIPTION EXPECTED ACTUAL
expect_status() {
	[ "$3" -eq "$2" ]
	local ok=$?
	[ $ok -eq 0 ] || echo "     expected exit $2, got $3"
	check "$1" $ok
}

unique() { echo "cli-$1-$$-$RANDOM$RANDOM"; }

q() { psql -X -A -t -q -c "$1"; }

state_of() {
	local s
	s=$(q "SELECT state FROM dlock.locks WHERE lock_name = '$1'")
	echo "${s:-free}"
}

# wait_for COMMAND... -- polls up to 10 s
wait_for() {
	local i
	for i in $(seq 1 200); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

is_held() { [ "$(state_of "$1")" = held ]; }

now_ms() { date +%s%3N; }
