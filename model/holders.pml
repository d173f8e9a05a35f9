/*
 * holders.pml -- shared leases (read-write lock): the statements of
 * holder_lease.c on the holder slots, each one atomic step, as in
 * server.pml. Compiled with HOLDERS (check.sh, configuration "holders").
 *
 * A reader's shared lease is a slot of the name (state.pml): owner,
 * token, lease_until. An exclusive grant (stmt_acquire) is admitted only
 * when no slot of the name is owned: a live slot refuses it, an expired one
 * is freed first by stmt_clear_expired, which waits for the slot's holds()
 * pin. dlock.holds() pins a reader's slot (FOR SHARE) to the end of its
 * business transaction; a renewal, a release and the writer's clearing of
 * an expired slot wait for the pin, and decide after the wait on the slot
 * as it is then, at a clock reading taken then.
 *
 * Abstracted: the name's kind lock (ShareLock for reader grants,
 * ExclusiveLock for writers that check the slots) and the exclusive_only
 * mark that lets an exclusive grant skip the check: each grant is one step,
 * deciding on the state as it is, which is what the kind lock and the row
 * locks give (kinds-reader-writer.spec and kinds-exclusive-only.spec test
 * those races). The writer's clearing and its grant are two steps here,
 * with nothing holding reader grants off between them: more interleavings
 * than the kind lock allows, never fewer. A same-owner retry of
 * try_acquire_shared renews through change_holder, the statement
 * stmt_shared_renew models.
 *
 * Reap and a step back of the server clock (check.sh, configuration
 * "holders"): this model found two bugs, since fixed in holder_lease.c.
 *   reap     a slot went on with its block when the name had no row
 *            (name_seq 0): after an exclusive grant, a release and
 *            dlock.reap, a reader got a token below that exclusive token
 *            (P9). Now the block goes on only while the slot's last token
 *            is at least the name's exclusive token and the reap floor;
 *            otherwise a new block is reserved above the counter, the
 *            row's token and the floor (write_holder_grant, reserve_block).
 *   backward step  a shared grant left an expired exclusive lease's owner
 *            set; a step back of the server clock made it live again
 *            beside the readers' live shared leases (P7). Now a shared
 *            attempt that finds the exclusive lease expired ends it under
 *            the row lock, after any holds() pin on it, before it decides
 *            on the slots (name_admits_holders, end_expired_lease):
 *            end_expired_exclusive here, in the grant's step, and
 *            stmt_shared_attempt_ends_expired for an attempt that grants
 *            no new slot (a same-owner retry, or no free slot).
 *
 * Not modelled: semaphore permits (the same grant path, with a bound on
 * live slots), force release of shared leases, writer preference and
 * waiting (a refused attempt changes nothing but the expired exclusive
 * lease it ends), lock delays and min_hold (here a name refuses readers
 * only while its exclusive lease is live), reap's idle time (any free or
 * expired row may go), expiry reports, timelines and clusters of the slots' blocks (the configuration
 * has no history: no crash, failover, restore or new cluster), and shared
 * leases on more than one name (the floor is shared by every name, so
 * another name's reap would raise it too).
 *
 * Known-bug variants, which spin must reject:
 *   BUG_HOLDER_RENEW_BEFORE_PIN  before the fix: the renewal read the
 *                  clock, waited for the pin, then renewed the slot if it
 *                  was live at that earlier reading (P8)
 *   BUG_HOLDERS_BEFORE_FIX  that renewal, and the writer's clearing as it
 *                  was: expired as of the writer's clock reading before the
 *                  wait, then granted without deciding again (P7)
 *   BUG_BLOCK_KEPT_AFTER_EXCLUSIVE  a slot keeps issuing its block after an
 *                  exclusive grant of the name (P9)
 *   BUG_EXCLUSIVE_BELOW_HOLDERS  an exclusive grant ignores the holders'
 *                  counter (P9, server.pml)
 *   BUG_CLEAR_PINNED  the writer frees an expired slot without waiting for
 *                  its pin (P10)
 *   BUG_HOLDER_BLOCK_BELOW_FLOOR  before the fix: a slot's block goes on
 *                  when its last token is at least the row's, the floor
 *                  ignored, so after a reap below the reaped token (P9)
 *   BUG_SHARED_KEEPS_EXPIRED_OWNER  before the fix: a shared grant leaves
 *                  an expired exclusive lease's owner set, which a step
 *                  back of the server clock makes live again (P7)
 */

#ifdef BUG_HOLDERS_BEFORE_FIX
#define BUG_HOLDER_RENEW_BEFORE_PIN
#define BUG_CLEAR_BEFORE_PIN
#endif

#ifdef BUG_HOLDER_RENEW_BEFORE_PIN
byte hr_slot[NC * NN];	/* slot + 1 of a renewal decided before the wait; 0 = none */
byte hr_clk[NC * NN];	/* the server clock it read then */
byte hr_sent[NC * NN];	/* real time it was sent */
#endif
#ifdef BUG_CLEAR_BEFORE_PIN
byte xclear[NN];		/* client + 1 of a writer waiting to clear, holding the kind lock */
byte xclk[NN];			/* the server clock it read before the wait */
#endif

/* The reader's record of the shared lease it was just granted or renewed */
inline tell_reader(c, n, sent)
{
#ifdef GHOST_DEADLINES
	if
	:: sent + TTL - DRIFT > rt -> sdead[B(c, n)] = sent + TTL - DRIFT
	:: else -> sdead[B(c, n)] = 0
	fi
#else
	skip
#endif
}

/* _s := any slot of the name (the caller checks it is the one it wants) */
inline any_slot()
{
	_s = 0;
	do
	:: _s < NS - 1 -> _s++
	:: break
	od
}

/*
 * name_admits_holders: the exclusive side lets a shared lease in -- no live
 * exclusive lease, and an expired one still pinned by holds() waited for
 * (the row's pin, pins[n]); no writer holding the kind lock.
 */
#ifdef BUG_CLEAR_BEFORE_PIN
#define NO_WRITER_CLEARING(n) (xclear[n] == 0)
#else
#define NO_WRITER_CLEARING(n) true
#endif
#define NAME_ADMITS_HOLDERS(n) \
	(pins[n] == 0 && NO_WRITER_CLEARING(n) && \
	 (!pri.row[n].exists || pri.row[n].owner == 0 || pri.row[n].until <= CLK))
#define SLOT_OWN_LIVE(c, n, s) (slot[SL(n, s)].owner == c + 1 && slot[SL(n, s)].until > CLK)
#define SLOT_TAKEABLE(c, n, s) ((slot[SL(n, s)].owner == 0 || slot[SL(n, s)].until <= CLK) && slot[SL(n, s)].pins == 0)

/*
 * name_admits_holders, under the row lock (which waits for a holds() pin on
 * the row: pins[n] == 0 in NAME_ADMITS_HOLDERS): an expired exclusive lease
 * whose owner is still set is ended (owner_token NULL, lease_until kept),
 * so that no step back of the server clock makes it live again beside the
 * readers. BUG_SHARED_KEEPS_EXPIRED_OWNER: as before the fix, left as it is.
 */
inline end_expired_exclusive(c, n)
{
#ifndef BUG_SHARED_KEEPS_EXPIRED_OWNER
	if
	:: pri.row[n].exists && pri.row[n].owner != 0 ->	/* expired: NAME_ADMITS_HOLDERS */
		printf("client %d: shared acquire of %d ends the expired exclusive lease of client %d (until %d, clock %d)\n", c, n, pri.row[n].owner - 1, pri.row[n].until, CLK);
		pri.row[n].owner = 0
	:: else -> skip
	fi
#else
	skip
#endif
}

#ifndef BUG_SHARED_KEEPS_EXPIRED_OWNER
/*
 * A shared attempt that grants no new slot (the same owner retrying, which
 * renews through change_holder, or one that finds no free slot) has run
 * name_admits_holders all the same: the expired exclusive lease is ended,
 * and stays ended when its transaction commits.
 */
inline stmt_shared_attempt_ends_expired(c, n)
{
	atomic {
		NAME_ADMITS_HOLDERS(n) && pri.row[n].exists && pri.row[n].owner != 0 ->
		end_expired_exclusive(c, n)
	}
}
#endif

/*
 * dlock.try_acquire_shared (grant_holder): a free or expired slot nobody
 * has locked (FOR UPDATE SKIP LOCKED: a pinned one is skipped); its next
 * token if its block has one left and its last token is at least the
 * name's exclusive token and the reap floor (no exclusive grant came
 * since, none was reaped above it), else a new block (reserve_block) above
 * the holders' counter, the name's exclusive token and the reap floor.
 */
inline stmt_acquire_shared(c, n)
{
	atomic {
		NAME_ADMITS_HOLDERS(n) && !ANY_SLOT(c, n, SLOT_OWN_LIVE) &&
		ANY_SLOT(c, n, SLOT_TAKEABLE) && grants < MAXGRANT ->
		any_slot();
		if
		:: SLOT_TAKEABLE(c, n, _s) ->
			end_expired_exclusive(c, n);
			/* name_seq: the name's exclusive token, 0 without a row */
			if
			:: pri.row[n].exists -> _h = TOK(pri.row[n].gen, pri.row[n].cnt)
			:: else -> _h = 0
			fi;
#ifndef BUG_HOLDER_BLOCK_BELOW_FLOOR
			/* ... or the reap floor, when that is higher (the row was reaped) */
			if
			:: TOK(pri.floor.gen, pri.floor.cnt) > _h -> _h = TOK(pri.floor.gen, pri.floor.cnt)
			:: else -> skip
			fi;
#endif
			if
#ifdef BUG_BLOCK_KEPT_AFTER_EXCLUSIVE
			:: slot[SL(n, _s)].tok < slot[SL(n, _s)].bend ->
#else
			:: slot[SL(n, _s)].tok < slot[SL(n, _s)].bend && slot[SL(n, _s)].tok >= _h ->
#endif
				_h = slot[SL(n, _s)].tok + 1
			:: else ->
				/* reserve_block: above the floor, the row's token and the counter */
				token_for_new_name(ng, nc);
				_h = TOK(ng, nc);
				if
				:: pri.row[n].exists ->
					token_for_row(n, ng, nc);
					if
					:: TOK(ng, nc) > _h -> _h = TOK(ng, nc)
					:: else -> skip
					fi
				:: else -> skip
				fi;
				if
				:: hcounter[n] >= _h -> _h = hcounter[n] + 1
				:: else -> skip
				fi;
				ng = 0; nc = 0
			fi;
			if
			:: _h + BLOCK <= GMAX * CMAX ->
				printf("client %d: shared lease of %d in slot %d: token %d.%d until %d (clock %d)\n", c, n, _s, _h / CMAX, _h % CMAX, CLK + TTL, CLK);
				check_reader_vs_exclusive(n);
				check_holder_token(n, SL(n, _s), _h);
				if
				:: _h > slot[SL(n, _s)].bend ->	/* a new block */
					slot[SL(n, _s)].bend = _h + BLOCK - 1;
					hcounter[n] = slot[SL(n, _s)].bend
				:: else -> skip
				fi;
				slot[SL(n, _s)].owner = c + 1;
				slot[SL(n, _s)].tok = _h;
				slot[SL(n, _s)].until = CLK + TTL;
				grants++;
				stok[B(c, n)] = _h;
				tell_reader(c, n, rt)
			:: else -> skip	/* beyond the model's bounds: not explored */
			fi
		:: else -> skip	/* not that slot */
		fi;
		_s = 0; _h = 0
	}
}

/*
 * dlock.renew of a shared lease (change_holder): holder_own_lock_stmt locks
 * the owner's slot, waiting for its pin; then, at a clock reading taken
 * after the wait, renews it if it is still live (holder_change_stmt).
 */
#define SLOT_RENEWABLE(c, n, s) (SLOT_OWN_LIVE(c, n, s) && slot[SL(n, s)].pins == 0)
inline stmt_shared_renew(c, n)
{
	atomic {
		ANY_SLOT(c, n, SLOT_RENEWABLE) ->
		any_slot();
		if
		:: SLOT_RENEWABLE(c, n, _s) ->
			printf("client %d: renew of its shared lease of %d (slot %d) until %d (clock %d)\n", c, n, _s, CLK + TTL, CLK);
			check_slot_renew_live(SL(n, _s));
			check_reader_vs_exclusive(n);
			slot[SL(n, _s)].until = CLK + TTL;
			if
			:: slot[SL(n, _s)].tok == stok[B(c, n)] -> tell_reader(c, n, rt)
			:: else -> skip	/* an older slot of this owner: the client does not rely on it */
			fi
		:: else -> skip
		fi;
		_s = 0
	}
}

#ifdef BUG_HOLDER_RENEW_BEFORE_PIN
/*
 * Before the fix: change_holder read the clock, then ran holder_change_stmt
 * (UPDATE ... WHERE owner_token = $2 AND lease_until > $5, $5 that reading)
 * which waited for the pin and then renewed the slot to $5 + ttl: a slot
 * live at the reading but expired by the end of the wait was renewed. A
 * row changed meanwhile is judged again (EvalPlanQual), with the same $5.
 * stmt_shared_renew_decided is that first half, for a renewal that meets
 * a pin; stmt_shared_renew_apply the second.
 */
#define SLOT_OWN_LIVE_PINNED(c, n, s) (SLOT_OWN_LIVE(c, n, s) && slot[SL(n, s)].pins > 0)
inline stmt_shared_renew_decided(c, n)
{
	atomic {
		hr_slot[B(c, n)] == 0 && ANY_SLOT(c, n, SLOT_OWN_LIVE_PINNED) ->
		any_slot();
		if
		:: SLOT_OWN_LIVE_PINNED(c, n, _s) ->
			hr_slot[B(c, n)] = _s + 1;
			hr_clk[B(c, n)] = CLK;
			hr_sent[B(c, n)] = rt;
			printf("client %d: renew of its shared lease of %d read clock %d, waits for the pin (lease until %d)\n", c, n, CLK, slot[SL(n, _s)].until)
		:: else -> skip
		fi;
		_s = 0
	}
}

inline stmt_shared_renew_apply(c, n)
{
	atomic {
		hr_slot[B(c, n)] != 0 && slot[SL(n, hr_slot[B(c, n)] - 1)].pins == 0 ->
		_s = hr_slot[B(c, n)] - 1;
		if
		:: slot[SL(n, _s)].owner == c + 1 && slot[SL(n, _s)].until > hr_clk[B(c, n)] ->
			printf("client %d: renew of its shared lease of %d applied at clock %d: lease_until %d -> %d\n", c, n, CLK, slot[SL(n, _s)].until, hr_clk[B(c, n)] + TTL);
			check_slot_renew_live(SL(n, _s));
			check_reader_vs_exclusive(n);
			slot[SL(n, _s)].until = hr_clk[B(c, n)] + TTL;
			if
			:: slot[SL(n, _s)].tok == stok[B(c, n)] -> tell_reader(c, n, hr_sent[B(c, n)])
			:: else -> skip
			fi
		:: else -> skip
		fi;
		hr_slot[B(c, n)] = 0; hr_clk[B(c, n)] = 0; hr_sent[B(c, n)] = 0;
		_s = 0
	}
}
#endif

/*
 * dlock.release of a shared lease (change_holder with ttl 0): ends the
 * owner's live slots (owner NULL). The client forgets its lease whatever
 * the answer; it releases after its business transaction ended, so its own
 * pin is gone.
 */
inline stmt_shared_release(c, n)
{
	atomic {
		stok[B(c, n)] != 0 && spin_slot[B(c, n)] == 0 ->
		for (_i : 0 .. NS - 1) {
			if
			:: slot[SL(n, _i)].owner == c + 1 && slot[SL(n, _i)].until > CLK ->
				printf("client %d: release of its shared lease of %d (slot %d)\n", c, n, _i);
				slot[SL(n, _i)].owner = 0;
				slot[SL(n, _i)].until = CLK
			:: else -> skip
			fi
		}
		stok[B(c, n)] = 0; sdead[B(c, n)] = 0
	}
}

/*
 * dlock.holds for a shared lease (holder_pin_stmt): the slot with this
 * token, owned and live, locked FOR SHARE to the end of the business
 * transaction.
 */
#define SLOT_HOLDS(c, n, s) (slot[SL(n, s)].tok == stok[B(c, n)] && SLOT_LIVE(c, n, s))
inline stmt_shared_holds(c, n)
{
	atomic {
		stok[B(c, n)] != 0 && spin_slot[B(c, n)] == 0 && ANY_SLOT(c, n, SLOT_HOLDS) ->
		any_slot();
		if
		:: SLOT_HOLDS(c, n, _s) ->
			check_pin_reader(n);
			slot[SL(n, _s)].pins++;
			spin_slot[B(c, n)] = _s + 1;
			spin_tok[B(c, n)] = stok[B(c, n)];
#ifdef PROP_P10
			spin_x[B(c, n)] = xgrants[n];
#endif
			printf("client %d: holds(%d, %d.%d) true: shared lease pinned\n", c, n, stok[B(c, n)] / CMAX, stok[B(c, n)] % CMAX)
		:: else -> skip
		fi;
		_s = 0
	}
}

/* COMMIT of the reader's holds()-guarded write: the pin ends */
inline stmt_shared_guarded_commit(c, n)
{
	atomic {
		spin_slot[B(c, n)] != 0 ->
		printf("client %d: commit of the holds()-guarded transaction (shared lease of %d)\n", c, n);
		check_reader_commit(c, n, SL(n, spin_slot[B(c, n)] - 1));
		slot[SL(n, spin_slot[B(c, n)] - 1)].pins--;
		spin_slot[B(c, n)] = 0; spin_tok[B(c, n)] = 0
	}
}

/*
 * The writer's clearing of expired slots (dlock_holders_allow_exclusive,
 * holders_clear_expired_stmt): frees every owned slot expired on the clock
 * as it is once the slot's pin ended (clock_timestamp() in the WHERE
 * clause); the grant is then decided again (EXCLUSIVE_RETRY), which is
 * stmt_acquire. With a wait (holders_clear_expired_unpinned_stmt) pinned
 * slots are skipped and the attempt refused: the same step on the
 * unpinned ones. Any writer may run it; it needs no client's state.
 */
#ifdef BUG_CLEAR_PINNED
#define SLOT_CLEARABLE(c, n, s) (slot[SL(n, s)].owner != 0 && slot[SL(n, s)].until <= CLK)
#else
#define SLOT_CLEARABLE(c, n, s) SLOT_EXPIRED_UNPINNED(c, n, s)
#endif
/*
 * REAP_SLOTS: dlock.reap (admin.c reap_holder_slots_stmt) deletes the slot
 * rows free or expired, skipping locked (pinned) ones; the holders' counter
 * stays. A deleted slot is as one never granted (tok 0). The exclusive
 * grant reads the counter only when a slot row is there (server.pml,
 * HOLDER_COUNTER_READ), which is what the extension does (holder_lease.c:
 * "a counter row is only made with a slot, and slots are never deleted").
 * Not in the suite: P9 fails (the exclusive grant reissues a token of a
 * reaped slot).
 */
#ifdef REAP_SLOTS
inline stmt_reap_slots(n)
{
	atomic {
		(slot[SL(n, 0)].tok != 0 && (slot[SL(n, 0)].owner == 0 || slot[SL(n, 0)].until <= CLK) && slot[SL(n, 0)].pins == 0) ||
		(slot[SL(n, 1)].tok != 0 && (slot[SL(n, 1)].owner == 0 || slot[SL(n, 1)].until <= CLK) && slot[SL(n, 1)].pins == 0) ->
		for (_i : 0 .. NS - 1) {
			if
			:: slot[SL(n, _i)].tok != 0 && (slot[SL(n, _i)].owner == 0 || slot[SL(n, _i)].until <= CLK) && slot[SL(n, _i)].pins == 0 ->
				slot[SL(n, _i)].owner = 0; slot[SL(n, _i)].tok = 0; slot[SL(n, _i)].bend = 0; slot[SL(n, _i)].until = 0
			:: else -> skip
			fi
		}
		printf("operator: reap deletes the idle slots of %d (the counter stays)\n", n)
	}
}
#endif

/*
 * REAP_COUNTERS (with REAP_SLOTS): dlock.reap also deletes the holders'
 * counter of a name with no slot row left and no row of its own (reaped,
 * so the floor is already above its exclusive token), raising the reap
 * floor to the counter's token first, as reap_rows does for a row: the
 * name's next block, reserved above the floor, stays above every token its
 * reaped slots issued. The rule for an implementation (the extension keeps
 * the counter), with the two ways to break it:
 *   BUG_REAP_COUNTER_NO_FLOOR  the counter deleted, the floor left as it
 *                  was: the next reader takes a reaped slot's token (P9)
 *   BUG_REAP_COUNTER_WITH_ROW  the counter deleted while the name's row is
 *                  there: the row's next exclusive grant continues from the
 *                  row's token and reads no floor (P9)
 */
#ifdef REAP_COUNTERS
#define SLOT_HAS_ROW(c, n, s) (slot[SL(n, s)].tok != 0)
#ifdef BUG_REAP_COUNTER_WITH_ROW
#define COUNTER_ROW_GONE(n) true
#else
#define COUNTER_ROW_GONE(n) (!pri.row[n].exists)
#endif
inline stmt_reap_counter(n)
{
	atomic {
		hcounter[n] != 0 && !ANY_SLOT(0, n, SLOT_HAS_ROW) && COUNTER_ROW_GONE(n) ->
#ifndef BUG_REAP_COUNTER_NO_FLOOR
		if
		:: hcounter[n] > TOK(pri.floor.gen, pri.floor.cnt) ->
			pri.floor.gen = hcounter[n] / CMAX;
			pri.floor.cnt = hcounter[n] % CMAX;
			pri.floor.gtl = HISTORY_NOW;
			pri.floor.gsys = pri.sys
		:: else -> skip
		fi;
#endif
		printf("operator: reap deletes the holders' counter of %d (token %d)\n", n, hcounter[n]);
		hcounter[n] = 0
	}
}
#endif

inline stmt_clear_expired(n)
{
	atomic {
		ANY_SLOT(0, n, SLOT_CLEARABLE) ->
		for (_i : 0 .. NS - 1) {
			if
			:: SLOT_CLEARABLE(0, n, _i) ->
				printf("writer frees expired slot %d of %d (lease until %d, clock %d)\n", _i, n, slot[SL(n, _i)].until, CLK);
				slot[SL(n, _i)].owner = 0
			:: else -> skip
			fi
		}
	}
}

#ifdef BUG_CLEAR_BEFORE_PIN
/*
 * Before the fix: the writer's probe read the clock, found no live slot and
 * an expired one pinned, and (under the kind lock, held exclusively: no
 * reader grant meanwhile) ran holders_clear_expired_stmt with lease_until
 * <= that reading, which waited for the pins; then it went on to the grant
 * without looking at the slots again.
 */
#define SLOT_EXPIRED_PINNED(c, n, s) (slot[SL(n, s)].owner != 0 && slot[SL(n, s)].until <= CLK && slot[SL(n, s)].pins > 0)
#define SLOT_STALE_PINNED(c, n, s) (slot[SL(n, s)].owner != 0 && slot[SL(n, s)].until <= xclk[n] && slot[SL(n, s)].pins > 0)
inline stmt_clear_decided(c, n)
{
	atomic {
		xclear[n] == 0 && ACQUIRE_ROW_ADMITS(c, n) && !ANY_SLOT(c, n, SLOT_LIVE) &&
		ANY_SLOT(c, n, SLOT_EXPIRED_PINNED) ->
		xclear[n] = c + 1;
		xclk[n] = CLK;
		printf("client %d: exclusive acquire of %d finds expired slots pinned at clock %d, waits\n", c, n, CLK)
	}
}

inline stmt_clear_apply(c, n)
{
	atomic {
		xclear[n] == c + 1 && !ANY_SLOT(c, n, SLOT_STALE_PINNED) ->
		for (_i : 0 .. NS - 1) {
			if
			:: slot[SL(n, _i)].owner != 0 && slot[SL(n, _i)].until <= xclk[n] ->
				printf("writer frees slot %d of %d (lease until %d, clock read %d)\n", _i, n, slot[SL(n, _i)].until, xclk[n]);
				slot[SL(n, _i)].owner = 0
			:: else -> skip
			fi
		}
		xclear[n] = 0; xclk[n] = 0;
		if
		:: ACQUIRE_ROW_ADMITS(c, n) -> acquire_decided(c, n)
		:: else -> skip	/* refused on the name's row */
		fi
	}
}
#endif
