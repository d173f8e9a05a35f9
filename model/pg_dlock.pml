/*
 * pg_dlock.pml -- a model of pg_dlock's lease and token protocol, checked
 * by spin (docs/testing.md, tests/suites/15-model.sh).
 *
 *   state.pml        the tables, their four copies, the clocks
 *   token.pml        the generation rule (and its known-bad variants)
 *   server.pml       each statement of extension/*.c as one atomic step
 *   holders.pml      shared leases: holder slots, their grants, renewals,
 *                    holds() pins and the writer's clearing (HOLDERS)
 *   environment.pml  time, clock steps, crash, failover, dump/restore,
 *                    pg_upgrade, reap, force release; the assumptions;
 *                    (RESTORES) a backup restored after later server
 *                    lives with dlock.after_restore, and DROP/CREATE
 *                    EXTENSION with the floor carried over
 *   properties.pml   the properties P1-P10 and the clients' ghost state
 *   handoff.pml      a model of its own (check.sh compiles it with
 *                    HANDOFF): the waiters' queue of one name and the
 *                    release's handoff to it, for every kind (P11-P15)
 *
 * Bounds (spin -D...): NC clients, NN names, MAXRT ticks of real time,
 * MAXFAIL failovers, MAXCRASH crashes, MAXNEWCLUSTER upgrades/restores,
 * NS holder slots per name; with RESTORES, MAXRESTORE restores of the
 * backup and MAXDROP drops of the extension.
 * FENCED: grants that may commit without the WAL flush, and the epoch
 * (dlock.durability = fenced; state.pml, server.pml).
 * Known-bug variants, which spin must reject: RULE_GREATER,
 * RULE_TIMELINE_ONLY, BUG_SEQUENCE (token.pml), BUG_RELEASE_ANY_OWNER,
 * BUG_RENEW_BEFORE_PIN, BUG_HOLDS_NO_PIN, BUG_ASYNC_GRANT,
 * BUG_EXCLUSIVE_BELOW_HOLDERS (server.pml), BUG_HOLDER_RENEW_BEFORE_PIN,
 * BUG_HOLDERS_BEFORE_FIX, BUG_BLOCK_KEPT_AFTER_EXCLUSIVE, BUG_CLEAR_PINNED,
 * BUG_HOLDER_BLOCK_BELOW_FLOOR, BUG_SHARED_KEEPS_EXPIRED_OWNER
 * (holders.pml), BUG_EPOCH_NEVER_MOVED (state.pml, server.pml: the epoch
 * never moves, as with dlock.test_ignore_epoch), BUG_FLOOR_PLUS_ONE
 * (token.pml: 1.4's first token, floor + 1 above a high floor),
 * BUG_RESTORE_ONE_GEN (environment.pml: 1.4's restore step, one generation
 * up and the floor by hand; BACKUP_WITH_ROWS: only backups that hold every
 * name).
 */

#include "state.pml"
#include "properties.pml"
#include "token.pml"

bool pinned[NC * NN];		/* the client's business transaction holds a pin */
#ifdef BUG_RENEW_BEFORE_PIN
byte renew_decided[NC * NN];
bool renew_changed[NC * NN];	/* the row got a new version since the decision */
byte renew_sent[NC * NN];	/* real time the renew was sent */
#endif

#include "server.pml"
#ifdef HOLDERS
#include "holders.pml"
#endif
#include "environment.pml"

/*
 * One client using one name: it may call anything at any moment, so it also
 * plays the holder that pauses past its lease and resumes (a write with a
 * token it got long ago), the retry of an acquire whose answer was lost, and
 * the keep-alive renewing from another connection while the business
 * transaction is open.
 */
proctype client(byte c; byte n)
{
	byte _i, _j, ng, nc;
#ifdef HOLDERS
	byte _s, _h;
#endif

end:	do
	:: stmt_acquire(c, n)
	:: stmt_renew(c, n)
#ifdef BUG_RENEW_BEFORE_PIN
	:: stmt_renew_decided(c, n)
	:: stmt_renew_apply(c, n)
#endif
	:: stmt_release(c, n)
#ifndef WITHOUT_PINS
	:: stmt_holds(c, n)
	:: stmt_guarded_commit(c, n)
#endif
#ifndef WITHOUT_FENCING
	:: stmt_unguarded_write(c, n)
#endif
#ifdef HOLDERS
	/* the same client as a reader */
	:: stmt_acquire_shared(c, n)
#ifndef BUG_SHARED_KEEPS_EXPIRED_OWNER
	:: stmt_shared_attempt_ends_expired(c, n)
#endif
	:: stmt_shared_renew(c, n)
#ifdef BUG_HOLDER_RENEW_BEFORE_PIN
	:: stmt_shared_renew_decided(c, n)
	:: stmt_shared_renew_apply(c, n)
#endif
	:: stmt_shared_release(c, n)
	:: stmt_shared_holds(c, n)
	:: stmt_shared_guarded_commit(c, n)
#ifdef BUG_CLEAR_BEFORE_PIN
	:: stmt_clear_decided(c, n)
	:: stmt_clear_apply(c, n)
#endif
#endif
	od
}

init
{
	byte c, n;

	atomic {
		/* the floor of nothing: (0, 0, 0) */
		pri.tl = 1; pri.sys = 1;
		dur.tl = 1; dur.sys = 1;
		stby.tl = 1; stby.sys = 1;
		for (c : 0 .. NC - 1) {
			for (n : 0 .. NN - 1) {
				run client(c, n)
			}
		}
		run environment()
	}
}
