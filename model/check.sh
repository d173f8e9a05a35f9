#!/usr/bin/env bash
# Checks the Promela model of pg_dlock (model/*.pml) with spin: every
# property with a complete search, every known-bug variant and every dropped
# assumption with the counterexample spin must find. Prints one "ok" or
# "FAILED" line per property and per control, then "N passed, N failed".
#
#   model/check.sh [--profile quick|full] [--show-trails]
#
# quick (make test, tests/suites/15-model.sh): 2 clients, 1 name, 2
# failovers, 1 crash, 1 move to a new cluster, small clocks (the token
# properties: no lease expires); shared leases
# with 2 clients (each a reader or a writer at any moment) and 2 slots,
# reap and a clock step either way (the reap of the holders' counter: its
# two bugs only); fenced grants with 2 crashes (no
# failover: no standby copy to keep); restores of an older backup with
# dlock.after_restore and DROP/CREATE EXTENSION with the floor carried over,
# among fenced grants (3), reaps and 2 crashes, separately a restore with 4
# grants and a crash, and DROP/CREATE with 4 grants and 2 crashes. The
# shared leases' search has reap of slots in it and 3 ticks (the one
# without reap is a part of it: only in the full profile, with 6 ticks).
# Both profiles: the handoff of every kind (model/handoff.pml), 4 clients
# as readers and writers, and separately 4 clients on 2 permits.
# full (make faults, about 20 minutes on a 2-core machine): 3 clients, and separately 2 names, for
# the lease properties; longer clocks for the token and fencing properties,
# fencing also across a move to a new cluster; shared leases with a longer
# clock, separately with 4 grants (no step back of the clock), with 3
# clients, with reap of slots, and with the holders' counter
# reaped under the floor (about 2 minutes more); the handoff with 6
# attempts (about a minute); fenced grants with 4 grants, and separately a crash and a
# failover; restores and DROP/CREATE with 4 grants and 2 crashes, a
# restore with 4 grants and 2 crashes, DROP/CREATE with time passing.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
profile=quick
show_trails=0
while [ $# -gt 0 ]; do
	case $1 in
	--profile) profile=$2; shift 2 ;;
	--show-trails) show_trails=1; shift ;;
	*) echo "usage: $0 [--profile quick|full] [--show-trails]" >&2; exit 2 ;;
	esac
done
command -v spin >/dev/null && command -v gcc >/dev/null || {
	echo "FAILED  spin and gcc are needed (scripts/install-deps.sh)"
	echo "0 passed, 1 failed"
	exit 1
}

# Four configurations of the one model. "tokens": every history event (crash,
# synchronous and asynchronous failover, pg_upgrade, restore), no fencing
# writes, no clock steps. "leases": one server, clock steps, pins and fenced
# writes. "fencing": failovers with fenced writes (no pins; quick: no move
# to a new cluster). "holders": shared leases in holder slots beside the
# exclusive lease (model/holders.pml), one server, pins, reap, a clock step
# forward or back. "fenced": grants and renewals that may commit without
# the WAL flush (dlock.durability = fenced), crashes that lose them, the
# epoch, fenced writes by holders whose grant was lost.
# "handoff" and "permits": the waiters' queue and the handoff of every kind
# (model/handoff.pml, its own model): 4 clients, readers and writers, or a
# semaphore of 2 permits; a few seconds, in both profiles, with every
# control of the handoff on them.
handoff="-DHANDOFF -DNC=4 -DMAXGRANT=4"
permits="-DHANDOFF -DSEM -DNC=4 -DSIZE=2 -DMAXGRANT=5"
restore_base="-DFENCED -DRESTORES -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DWITHOUT_FENCING -DMAXFAIL=0 -DMAXNEWCLUSTER=0"
case $profile in
quick)
	# one tick: no lease expires (TTL 2), so a grant follows a release; the
	# token rule reads the row and the history, not the clock (expiry with
	# the history events: full profile, 3 ticks)
	tokens="-DWITHOUT_FENCING -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DMAXRT=1 -DMAXGRANT=3"
	leases="-DWITHOUT_HISTORY -DMAXRT=4 -DMAXGRANT=3"
	fencing="-DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DMAXRT=2 -DMAXGRANT=3 -DMAXCRASH=0 -DMAXNEWCLUSTER=0"
	# three ticks: a lease expires, a step back or forward, and every
	# holders' bug variant is still caught (6 ticks: full profile)
	holders="-DHOLDERS -DWITHOUT_HISTORY -DWITHOUT_FENCING -DMAXRT=3 -DMAXGRANT=3"
	fenced="-DFENCED -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DMAXRT=2 -DMAXGRANT=3 -DMAXCRASH=2 -DMAXFAIL=0 -DMAXNEWCLUSTER=0"
	restores="$restore_base -DMAXRT=0 -DMAXGRANT=3 -DMAXCRASH=2 -DMAXRESTORE=1 -DMAXDROP=1"
	backup4="$restore_base -DMAXRT=0 -DMAXGRANT=4 -DMAXCRASH=1 -DMAXRESTORE=1 -DMAXDROP=0"
	drops="$restore_base -DMAXRT=0 -DMAXGRANT=4 -DMAXCRASH=2 -DMAXRESTORE=0 -DMAXDROP=1"
	faildrops="-DFENCED -DRESTORES -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DWITHOUT_FENCING -DMAXNEWCLUSTER=0 -DMAXFAIL=2 -DMAXCRASH=0 -DMAXRESTORE=0 -DMAXDROP=1 -DMAXGRANT=3 -DMAXRT=0"
	reaped_holders="$holders -DREAP_SLOTS"
	reaped_counters="$holders -DREAP_SLOTS -DREAP_COUNTERS"
	;;
full)
	tokens="-DWITHOUT_FENCING -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DMAXRT=3 -DMAXGRANT=3"
	leases="-DWITHOUT_HISTORY -DNC=3 -DMAXRT=5 -DMAXGRANT=4"
	two_names="-DWITHOUT_HISTORY -DNN=2 -DMAXRT=4 -DMAXGRANT=3"
	fencing="-DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DMAXRT=3 -DMAXGRANT=3 -DMAXCRASH=0"
	holders="-DHOLDERS -DWITHOUT_HISTORY -DWITHOUT_FENCING -DMAXRT=6 -DMAXGRANT=3"
	four_holders="-DHOLDERS -DWITHOUT_HISTORY -DWITHOUT_FENCING -DWITHOUT_BACKWARD_STEP -DMAXRT=4 -DMAXGRANT=4"
	three_holders="-DHOLDERS -DWITHOUT_HISTORY -DWITHOUT_FENCING -DNC=3 -DMAXRT=3 -DMAXGRANT=3"
	fenced="-DFENCED -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DMAXRT=2 -DMAXGRANT=4 -DMAXCRASH=2 -DMAXFAIL=0 -DMAXNEWCLUSTER=0"
	fenced_failover="-DFENCED -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DMAXRT=1 -DMAXGRANT=3 -DMAXCRASH=1 -DMAXFAIL=1 -DMAXNEWCLUSTER=0"
	restores="$restore_base -DMAXRT=0 -DMAXGRANT=4 -DMAXCRASH=2 -DMAXRESTORE=1 -DMAXDROP=1"
	backup4="$restore_base -DMAXRT=0 -DMAXGRANT=4 -DMAXCRASH=2 -DMAXRESTORE=1 -DMAXDROP=0"
	drops="$restore_base -DMAXRT=1 -DMAXGRANT=4 -DMAXCRASH=2 -DMAXRESTORE=0 -DMAXDROP=1"
	faildrops="-DFENCED -DRESTORES -DWITHOUT_PINS -DWITHOUT_CLOCK_STEPS -DWITHOUT_FENCING -DMAXNEWCLUSTER=0 -DMAXFAIL=2 -DMAXCRASH=0 -DMAXRESTORE=0 -DMAXDROP=1 -DMAXGRANT=3 -DMAXRT=0"
	reaped_holders="$holders -DREAP_SLOTS"
	reaped_counters="$holders -DREAP_SLOTS -DREAP_COUNTERS"
	big_handoff="-DHANDOFF -DNC=4 -DMAXGRANT=6"
	big_permits="-DHANDOFF -DSEM -DNC=4 -DSIZE=2 -DMAXGRANT=6"
	;;
*) echo "unknown profile $profile" >&2; exit 2 ;;
esac

work=$(mktemp -d /tmp/pg_dlock-model.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$here"/*.pml "$work"/
passed=0
failed=0

# pan: compile and run one verification of the model with spin flags "$@";
# leaves pan's report in $work/report. With shortest=1 set by the caller,
# pan looks for the shortest counterexample (-i; for small controls only).
# With optimize=1 (the complete searches) pan is built with -O2; a control
# stops at its counterexample, and its build without optimization takes a
# sixth of the time (most of a control's cost)
shortest=0
optimize=1
pan() {
	local cflags="-O0" pflags="" main=pg_dlock.pml
	[ "$optimize" -eq 1 ] && cflags="-O2"
	[ "$shortest" -eq 1 ] && cflags="$cflags -DREACH" && pflags="-i"
	case " $* " in *" -DHANDOFF "*) main=handoff.pml ;; esac
	# shellcheck disable=SC2086
	(cd "$work" && rm -f pan pan.* ./*.trail &&
		spin -a "$@" "$main" >spin.log 2>&1 &&
		gcc -DSAFETY -DCOLLAPSE $cflags -DMEMLIM=6000 -w -o pan pan.c >>spin.log 2>&1 &&
		./pan $pflags -m20000 >report 2>&1)
	local status=$?
	[ -s "$work/report" ] || cp "$work/spin.log" "$work/report"
	return $status
}

# a search that explored everything: no depth, memory or hash limit hit
complete_search() {
	grep -q "State-vector" "$work/report" &&
		! grep -qE "max search depth too small|out of memory|reached -DMEMLIM|search was truncated" "$work/report"
}

result() {
	if [ "$1" = ok ]; then
		echo "ok      $2"
		passed=$((passed + 1))
	else
		echo "FAILED  $2"
		failed=$((failed + 1))
	fi
}

# property NAMES CONFIG: one complete search checking the properties NAMES
# (P1 P2 ...) on the model as implemented; each counts as one test
property() {
	local names=$1 config=$2 flags=() p started verdict=ok
	shortest=0 optimize=1
	for p in $names; do flags+=("-DPROP_$p"); done
	started=$SECONDS
	# shellcheck disable=SC2086
	pan "${flags[@]}" $config
	if ! grep -q "errors: 0" "$work/report" || ! complete_search; then
		verdict=bad
		grep -E "assertion violated|errors:|max search depth|memory" "$work/report" | head -n 3
	fi
	local size
	size=$(grep -oE "[0-9]+ states, stored" "$work/report" | head -n 1)
	for p in $names; do
		result $verdict "$p holds (complete search, ${size:-no result}, $((SECONDS - started)) s, $config)"
	done
}

# control NAME PROPERTY SWITCH CONFIG [shortest]: the model with a known bug
# or without an assumption (SWITCH) must violate PROPERTY; the counterexample
# is shown (the shortest one when the fifth argument is "shortest")
control() {
	local name=$1 prop=$2 switch=$3 config=$4
	shortest=0 optimize=0
	[ "${5:-}" = shortest ] && shortest=1
	# shellcheck disable=SC2086
	pan "-DPROP_$prop" -D$switch $config
	if grep -q "assertion violated" "$work/report" && grep -qE "errors: [1-9]" "$work/report"; then
		result ok "$name: spin finds a counterexample to $prop ($switch)"
		if [ $show_trails -eq 1 ]; then
			# shellcheck disable=SC2086
			local main=pg_dlock.pml
			case " $config " in *" -DHANDOFF "*) main=handoff.pml ;; esac
			(cd "$work" && spin -t "-DPROP_$prop" -D$switch $config "$main" 2>&1 |
				awk '/^spin: text of failed assertion/ { exit } /^[ \t]*$/ { next }
					{ sub(/^ +/, ""); print "          " $0 }' | head -n 40)
		fi
	else
		result bad "$name: spin finds a counterexample to $prop ($switch)"
		grep -E "errors:|max search depth" "$work/report" | head -n 2
	fi
}

echo "--- properties of the model as implemented ($profile profile)"
property "P1 P2 P6" "$tokens"
property "P3 P5" "$leases"
[ "$profile" = full ] && property "P3 P5" "$two_names"
property "P4" "$fencing"
# the reaped configuration's search takes every step of this one (reap is
# one more step of the environment): in the quick profile that one only
[ "$profile" = full ] && property "P7 P8 P9 P10" "$holders"
[ "$profile" = full ] && property "P7 P8 P9 P10" "$four_holders"
[ "$profile" = full ] && property "P7 P8 P9 P10" "$three_holders"
property "P1 P2 P4" "$fenced"
[ "$profile" = full ] && property "P1 P2 P4" "$fenced_failover"
property "P1 P2" "$restores"
property "P1 P2" "$backup4"
property "P1 P2" "$drops"
property "P1 P2" "$faildrops"
property "P7 P8 P9 P10" "$reaped_holders"
# the counter's reap is a rule for an implementation (the extension keeps the
# counter): its complete search (about 2 minutes) only in the full profile
[ "$profile" = full ] && property "P7 P8 P9 P10" "$reaped_counters"
property "P11 P12 P13 P14 P15" "$handoff"
property "P11 P12 P13 P14 P15" "$permits"
[ "$profile" = full ] && property "P11 P12 P13 P14 P15" "$big_handoff"
[ "$profile" = full ] && property "P11 P12 P13 P14 P15" "$big_permits"

echo "--- negative controls: known bugs"
control "generation raised only when the timeline is greater (1.0, the review's case)" P1 RULE_GREATER "$tokens"
control "generation raised on a different timeline, without the cluster" P2 RULE_TIMELINE_ONLY "$tokens"
control "tokens from a global sequence" P1 BUG_SEQUENCE "$tokens"
control "grants and renews committed asynchronously (durability.c skipped)" P6 BUG_ASYNC_GRANT "$tokens"
control "release checked without the owner" P3 BUG_RELEASE_ANY_OWNER "$leases"
control "renew decided before waiting behind a pin (1.0)" P3 BUG_RENEW_BEFORE_PIN "$leases"
control "holds() without FOR SHARE" P5 BUG_HOLDS_NO_PIN "$leases"
control "tokens from a global sequence, fenced writes" P4 BUG_SEQUENCE "$fencing"
control "shared lease renewed on a clock reading taken before waiting for the pin" P8 BUG_HOLDER_RENEW_BEFORE_PIN "$holders" shortest
control "that renewal, and the writer's clearing of expired slots not decided again after its wait" P7 BUG_HOLDERS_BEFORE_FIX "$holders" shortest
control "a slot keeps its block of tokens after an exclusive grant" P9 BUG_BLOCK_KEPT_AFTER_EXCLUSIVE "$holders" shortest
control "an exclusive grant not above the holders' counter" P9 BUG_EXCLUSIVE_BELOW_HOLDERS "$holders" shortest
control "the writer frees an expired slot without waiting for its pin" P10 BUG_CLEAR_PINNED "$holders" shortest
control "a slot continues its block below the reap floor (a reaped name's shared grant)" P9 BUG_HOLDER_BLOCK_BELOW_FLOOR "$holders" shortest
control "a shared grant leaves an expired exclusive lease's owner set (then a clock step back)" P7 BUG_SHARED_KEEPS_EXPIRED_OWNER "$holders" shortest
control "fenced grants without the epoch (dlock.test_ignore_epoch): a crash that lost a grant, the same token again" P1 BUG_EPOCH_NEVER_MOVED "$fenced" shortest
control "fenced grants without the epoch: the lost grant's holder writes after the new owner of its token" P4 BUG_EPOCH_NEVER_MOVED "$fenced" shortest
control "a new name's first token floor + 1 above a high floor (1.4's dlock_first_token): a first grant lost by a crash above the floor after_restore leaves, issued again" P1 BUG_FLOOR_PLUS_ONE "$restores" shortest
control "the DROP EXTENSION carry-over written by hand without a position (1.4's docs): a failover to a standby that missed the drop, a token below the lost primary's" P2 BUG_CARRY_OVER_BY_HAND "$faildrops" shortest
control "reap deletes a reader's slot and the writer reads the holders' counter only while a slot is left (1.4): the reader's token again" P9 BUG_COUNTER_ONLY_WITH_SLOTS "$reaped_holders" shortest
control "reap deletes the holders' counter without raising the floor: a reaped slot's token again" P9 BUG_REAP_COUNTER_NO_FLOOR "$reaped_counters" shortest
control "reap deletes the holders' counter while the name's row is there: the writer below a reaped slot's token" P9 BUG_REAP_COUNTER_WITH_ROW "$reaped_counters" shortest
control "the one-generation restore step of 1.4: a name the backup does not hold starts again at its lost first token" P1 BUG_RESTORE_ONE_GEN "$restores" shortest
control "the one-generation restore step of 1.4, a backup holding every name: two fenced server lives lost by the restore, a token below theirs" P2 "BUG_RESTORE_ONE_GEN -DBACKUP_WITH_ROWS" "$backup4" shortest
control "the release hands to every queued reader the name admits, also those behind a queued writer" P14 BUG_HANDOFF_OVERTAKE "$handoff" shortest
control "the release hands the head the lease it freed without asking whether the name admits it" P11 BUG_HANDOFF_HEAD_UNCHECKED "$handoff" shortest
control "the release hands one permit more than it freed" P12 BUG_HANDOFF_EXTRA_PERMIT "$permits" shortest
control "a handed lease whose waiter left is never freed (readers and writers): the next waiter refused by a lease nobody holds" P15 BUG_ABANDONED_KEPT "$handoff" shortest
control "a handed permit whose waiter left is never freed: the next waiter refused by a permit nobody holds" P15 BUG_ABANDONED_KEPT "$permits" shortest
control "the handed lease keeps the releaser's token" P13 BUG_HANDOFF_RELEASER_TOKEN "$handoff" shortest

echo "--- assumptions dropped"
control "two standbys promoted to the same timeline" P1 ASSUME_SHARED_TIMELINE "$tokens"
control "a server clock step forward beyond the drift allowance" P3 ASSUME_UNBOUNDED_STEP "$leases"
control "a new cluster from a state missing the last grants" P1 ASSUME_ANY_STATE_MOVES "$tokens"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
