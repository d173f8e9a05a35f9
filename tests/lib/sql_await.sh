# A suite's one-line SQL against the test server, and a wait until a query
# says t. Sourced by suites that watch another session's state (a queue, a
# grant) from outside.

# the rows of "$1", unaligned, without headers; stops at the first error
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }

# until the query "$1" returns t, at most 10 s
await() {
	for _ in $(seq 1 1000); do
		[ "$(sql "$1")" = t ] && return 0
		sleep 0.01
	done
	return 1
}
