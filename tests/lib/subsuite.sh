# Shared by suites that run other suites (31-client-sanitizers, 45-pgbouncer):
# run_subsuite LABEL COMMAND... runs COMMAND, shows its output, and adds the
# counts of its last "N passed, N failed" line to $passed and $failed. A
# command that exits non-zero without reporting a failure counts as one, and a
# sanitizer report in its output as one more.
passed=${passed:-0}
failed=${failed:-0}

run_subsuite() {
	local label=$1 log status summary p f
	shift
	echo "=== $label"
	log=$(mktemp)
	"$@" 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	# A report from a detached thread may not end the process: count it anyway.
	local reported=0
	grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer" "$log" && reported=1
	rm -f "$log"
	if [ -n "$summary" ]; then
		p=${summary%% passed*}
		f=${summary#*, }
		f=${f%% failed*}
	else
		p=0
		f=1
	fi
	[ "$status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	if [ "$reported" -eq 1 ]; then
		echo "FAIL a sanitizer reported an error above ($label)"
		f=$((f + 1))
	fi
	passed=$((passed + p))
	failed=$((failed + f))
}
