# Shared by the shell test suites: check NAME COMMAND... runs COMMAND and
# records it as passed or failed; finish prints the summary line and exits
# non-zero when anything failed.
passed=0
failed=0

check() {
	local name=$1
	shift
	if "$@"; then
		echo "ok      $name"
		passed=$((passed + 1))
	else
		echo "FAILED  $name"
		failed=$((failed + 1))
	fi
}

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}
