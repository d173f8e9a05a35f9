# A pin held past the end of its lease keeps the name from every kind until
# the pinning transaction ends, so a stale holder's fenced writes never
# overlap the next holder's (docs/reference.md, holds). Sourced by
# tests/sql_edition/api.sh (both editions) and by 16-sql-edition, which runs
# it on the SQL edition before and after the update that fixed it. Needs
# tests/lib/check.sh and tests/sql_edition/lib.sh sourced first.
#
#   pins_hold_across_kinds DB OWNER TAG
#
# Each case: FIRST takes a 2-second lease, a transaction pins it with holds()
# for 4 seconds, and 2.5 seconds in (the lease has ended, the pin has not)
# SECOND asks. The cases run side by side (about 5 seconds in all).

pins_hold_across_kinds() {
	local db=$1 owner=$2 tag=$3
	local A=00000000-0000-0000-0000-0000000000a1 B=00000000-0000-0000-0000-0000000000b2
	local C=00000000-0000-0000-0000-0000000000c3
	local pins
	pins=$(mktemp -d)
	_pin_sql() { AS=$owner q "$db" "$@"; }
	# FIRST, a pin past its end, then SECOND; leaves the outcomes in $pins
	_pinned_past_end() {
		local name=$1 first=$2 second=$3 tok
		tok=$(_pin_sql "SELECT fencing_token FROM $first")
		_pin_sql "BEGIN" "SELECT dlock.holds('$name', $tok)" "SELECT pg_sleep(4)" "SELECT clock_timestamp()" "COMMIT" \
			>"$pins/$name.pin" 2>&1 &
		sleep 2.5
		_pin_sql "SELECT CASE WHEN l.owner_token IS NOT NULL THEN 't' ELSE 'f' END, clock_timestamp() FROM $second l" \
			>"$pins/$name.second" 2>&1
		wait $!
	}
	# the pin taken (t), SECOND granted (t/f), and granted after the pin ended (t/f)
	_pin_outcome() {
		local name=$1 pinned pin_end granted at
		{ read -r pinned; read -r _; read -r pin_end; } <"$pins/$name.pin"
		IFS='|' read -r granted at <"$pins/$name.second"
		echo "$pinned $granted $(_pin_sql "SELECT '$at'::timestamptz > '$pin_end'::timestamptz")"
	}
	_pinned_past_end "$tag:pin-sh" "dlock.try_acquire_shared('$tag:pin-sh', '2 seconds', '$A')" \
		"dlock.try_acquire('$tag:pin-sh', '1 minute', '$B')" &
	_pinned_past_end "$tag:pin-ex" "dlock.try_acquire('$tag:pin-ex', '2 seconds', '$A')" \
		"dlock.try_acquire_shared('$tag:pin-ex', '1 minute', '$B')" &
	_pinned_past_end "$tag:pin-ex-pm" "dlock.try_acquire('$tag:pin-ex-pm', '2 seconds', '$A')" \
		"dlock.try_acquire_permit('$tag:pin-ex-pm', 3, '1 minute', '$B')" &
	_pinned_past_end "$tag:pin-pm" "dlock.try_acquire_permit('$tag:pin-pm', 3, '2 seconds', '$A')" \
		"dlock.acquire('$tag:pin-pm', '1 minute', '10 seconds', '$B')" &
	# a semaphore of 2: A's permit pinned past its end and B's live
	_pin_sql "SELECT dlock.try_acquire_permit('$tag:pin-sem', 2, '1 minute', '$B')" >/dev/null
	_pinned_past_end "$tag:pin-sem" "dlock.try_acquire_permit('$tag:pin-sem', 2, '2 seconds', '$A')" \
		"dlock.try_acquire_permit('$tag:pin-sem', 2, '1 minute', '$C')" &
	wait
	local sh ex ex_pm pm sem sem_after
	sh=$(_pin_outcome "$tag:pin-sh")
	ex=$(_pin_outcome "$tag:pin-ex")
	ex_pm=$(_pin_outcome "$tag:pin-ex-pm")
	pm=$(_pin_outcome "$tag:pin-pm")
	sem=$(_pin_outcome "$tag:pin-sem")
	check "an exclusive grant waits for the pin of a shared lease that ended (pinned, granted, after the pin: $sh)" \
		test "$sh" = "t t t"
	check "a shared grant waits for the pin of an exclusive lease that ended ($ex)" test "$ex" = "t t t"
	check "a permit waits for the pin of an exclusive lease that ended ($ex_pm)" test "$ex_pm" = "t t t"
	check "acquire (exclusive) waits for the pin of a permit that ended ($pm)" test "$pm" = "t t t"
	check "a semaphore of 2 refuses a third permit while a permit that ended is pinned (pinned, granted: ${sem% *})" \
		test "${sem% *}" = "t f"
	sem_after=$(_pin_sql "SELECT owner_token IS NOT NULL FROM dlock.try_acquire_permit('$tag:pin-sem', 2, '1 minute', '$C')")
	check "... and grants it once the pin has ended" test "$sem_after" = t
	_pin_sql "SELECT dlock.release_all(ARRAY['$tag:pin-sh', '$tag:pin-ex', '$tag:pin-ex-pm', '$tag:pin-pm'], '$B')" \
		"SELECT dlock.release('$tag:pin-sem', '$B')" "SELECT dlock.release('$tag:pin-sem', '$C')" >/dev/null 2>&1
	rm -rf "$pins"
}
