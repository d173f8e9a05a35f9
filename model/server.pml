/*
 * server.pml -- pg_dlock's statements, each one atomic step of the model.
 *
 * A statement is atomic because PostgreSQL runs it on one row under that
 * row's lock; what it decides it decides on the row as it is when it gets
 * the row lock, on clock_timestamp() at that moment (sql_executor.c). Every
 * UPDATE of a row waits while a holds() pin (FOR SHARE) is on it: the
 * guards "pins[n] == 0" below. A refused attempt changes nothing and is not
 * modelled. Variables _i, _j, ng, nc belong to the calling proctype.
 *
 * c is the client (owner token c + 1), n the name.
 */

/* The transaction commits with synchronous_commit >= on: WAL flushed
 * (dlock_require_durable_commit, durability.c). Flushing is sequential, so
 * every earlier asynchronous commit is flushed with it. */
inline commit_durable()
{
#if defined(BUG_ASYNC_GRANT) || defined(WITHOUT_HISTORY)
	skip
#else
	copy_db(dur, pri)
#endif
}

/*
 * The commit of a grant's or a renewal's transaction (durability.c;
 * token_epoch.c grant_history, mark_fenced). Durable by default. With dlock.durability = fenced, which any session may choose
 * (FENCED: either, at every grant), a transaction whose only write is the
 * lease commits without the flush, so a crash may lose it; but the first
 * fenced grant of a server life marks the life in dlock.token_epoch and
 * commits durably, so that whatever the crash loses, the next life moves the
 * epoch. new_token: the transaction issued a token. A renewal or a retry
 * issues none and marks nothing: it commits without the flush, which covers
 * its durable commit too (the WAL writer may flush right after it).
 */
inline commit_grant(new_token)
{
#ifdef FENCED
	if
	:: new_token -> commit_durable()
	:: new_token && !LIFE_MARKED ->
		pri.efenced = true;
		printf("  fenced, the first of this life: marked, committed durably\n");
		commit_durable()
	:: !new_token || LIFE_MARKED ->
		printf("  fenced: committed without the flush\n")
	fi
#else
	commit_durable()
#endif
}

/* The first grant of a server life moves the epoch if the previous life was
 * marked fenced (token_epoch.c start_life; its commit is durable:
 * commit_grant). Before the first
 * grant nothing was issued in this life; after it a crash may lose fenced
 * grants, so the next life's tokens must be made above them. */
inline start_life_at_grant()
{
#ifdef FENCED
	if
	:: !life_started ->
		life_started = true;
#ifndef BUG_EPOCH_NEVER_MOVED
		if
		:: pri.efenced -> pri.epoch++; printf("  epoch moves to %d\n", pri.epoch)
		:: else -> skip
		fi;
#endif
		pri.efenced = false
	:: else -> skip
	fi
#endif
	skip
}

/* The client's record of the lease it was just granted or renewed */
inline tell_client(c, n)
{
#ifdef GHOST_DEADLINES
	bdead[B(c, n)] = rt + TTL - DRIFT;
	buntil[B(c, n)] = pri.row[n].until
#else
	skip
#endif
}

/*
 * dlock.try_acquire / dlock.acquire (lease.c attempt_grant):
 * PLAN_ACQUIRE_EXISTING -- UPDATE ... WHERE owner_token IS NULL OR
 * owner_token = $3 OR lease_until <= clock_timestamp(); same owner with a
 * live lease (IS_RETRY) keeps fencing_seq, otherwise NEXT_TOKEN and
 * grant_timeline = $5. PLAN_ACQUIRE_NEW -- INSERT with FIRST_TOKEN from
 * PLAN_FLOOR_READ when the row does not exist.
 */
#define ACQUIRE_ROW_ADMITS(c, n) \
	(pins[n] == 0 && \
	 (!pri.row[n].exists || pri.row[n].owner == 0 || \
	  pri.row[n].owner == c + 1 || pri.row[n].until <= CLK))
#ifdef HOLDERS
/* dlock_holders_allow_exclusive: no shared lease live, and the expired
 * ones' slots freed first (stmt_clear_expired, holders.pml) */
#define ACQUIRE_ADMITS(c, n) (ACQUIRE_ROW_ADMITS(c, n) && !ANY_SLOT(c, n, SLOT_OWNED))
#else
#define ACQUIRE_ADMITS(c, n) ACQUIRE_ROW_ADMITS(c, n)
#endif

/* the grant, once decided that the name admits it */
inline acquire_decided(c, n)
{
	if
	:: pri.row[n].exists && pri.row[n].owner == c + 1 && pri.row[n].until > CLK ->
		/* IS_RETRY: same token, lease extended */
		pri.row[n].until = CLK + TTL;
		printf("client %d: acquire %d retried: token %d.%d until %d (clock %d)\n", c, n, pri.row[n].gen, pri.row[n].cnt, pri.row[n].until, CLK);
#ifdef HOLDERS
		check_exclusive_vs_readers(n);
#endif
		commit_grant(false);
		tell_client(c, n)
	:: else ->
		if
		:: pri.row[n].exists -> token_for_row(n, ng, nc)
		:: else -> token_for_new_name(ng, nc)
		fi;
#if defined(HOLDERS) && !defined(BUG_EXCLUSIVE_BELOW_HOLDERS)
		/* an exclusive grant continues above the holders' counter; with
		 * BUG_COUNTER_ONLY_WITH_SLOTS, as 1.4 did, only when a slot row
		 * of the name is there */
		if
		:: hcounter[n] >= TOK(ng, nc) HOLDER_COUNTER_READ(n) -> ng = (hcounter[n] + 1) / CMAX; nc = (hcounter[n] + 1) % CMAX
		:: else -> skip
		fi;
#endif
		if
		:: ng < GMAX && nc < CMAX && grants < MAXGRANT ->
			printf("client %d: acquire %d: token %d.%d until %d (clock %d, timeline %d, cluster %d)\n", c, n, ng, nc, CLK + TTL, CLK, pri.tl, pri.sys);
			check_new_grant(c, n, TOK(ng, nc));
#ifdef HOLDERS
			check_exclusive_vs_readers(n);
			check_exclusive_token(n, TOK(ng, nc));
#endif
			start_life_at_grant();
			pri.row[n].exists = true;
			pri.row[n].owner = c + 1;
			pri.row[n].gen = ng;
			pri.row[n].cnt = nc;
			pri.row[n].gtl = GRANT_POS;
			pri.row[n].gsys = pri.sys;
			pri.row[n].until = CLK + TTL;
#ifdef BUG_RENEW_BEFORE_PIN
			row_updated(n);
#endif
#ifdef BUG_SEQUENCE
			pri.seq = nc;
#endif
			commit_grant(true);
			grants++;
			btok[B(c, n)] = TOK(ng, nc);
#ifdef PROP_P4
			bseq[B(c, n)] = grants;
#endif
#ifdef GHOST_DEADLINES
			blost[B(c, n)] = false;
#endif
			tell_client(c, n)
		:: else -> skip	/* beyond the model's bounds: not explored */
		fi
	fi;
	ng = 0; nc = 0
}

inline stmt_acquire(c, n)
{
	atomic {
		ACQUIRE_ADMITS(c, n) ->
		acquire_decided(c, n)
	}
}

/*
 * dlock.renew (lease.c dlock_renew): PLAN_RENEW -- UPDATE ... SET
 * lease_until = clock_timestamp() + ttl WHERE owner_token = $2 AND
 * lease_until > clock_timestamp(). Decided on the row when the statement
 * has it, after any wait behind a pin.
 */
inline stmt_renew(c, n)
{
	atomic {
		pins[n] == 0 && pri.row[n].exists && pri.row[n].owner == c + 1 &&
		pri.row[n].until > CLK ->
		check_renew_live(n);
		pri.row[n].until = CLK + TTL;
		printf("client %d: renew %d until %d (clock %d)\n", c, n, pri.row[n].until, CLK);
#ifdef BUG_RENEW_BEFORE_PIN
		row_updated(n);
#endif
		commit_grant(false);
#ifdef GHOST_DEADLINES
		blost[B(c, n)] = (TOK(pri.row[n].gen, pri.row[n].cnt) != btok[B(c, n)]);
#endif
		tell_client(c, n)
	}
}

#ifdef BUG_RENEW_BEFORE_PIN
/*
 * 1.0: the WHERE clause was judged when the statement started; a statement
 * that then waited for a pin (a FOR SHARE lock, which makes no new row
 * version) went ahead without judging it again. Only a row updated meanwhile
 * is judged again (EvalPlanQual). stmt_renew_decided is that first half, for
 * a renew that meets a pin; stmt_renew_apply the second.
 */
inline stmt_renew_decided(c, n)
{
	atomic {
		renew_decided[B(c, n)] == 0 && pins[n] > 0 && pri.row[n].exists &&
		pri.row[n].owner == c + 1 && pri.row[n].until > CLK ->
		renew_decided[B(c, n)] = 1;
		printf("client %d: renew %d decided, waits behind the pin (clock %d, lease until %d)\n", c, n, CLK, pri.row[n].until);
		renew_changed[B(c, n)] = false;
		renew_sent[B(c, n)] = rt
	}
}
#endif

#ifdef BUG_RENEW_BEFORE_PIN
/* a new version of row n: statements that decided before it judge again */
inline row_updated(n)
{
	for (_i : 0 .. NC - 1) {
		renew_changed[B(_i, n)] = true
	}
}

/* the second half of a renew decided before the wait */
inline stmt_renew_apply(c, n)
{
	atomic {
		renew_decided[B(c, n)] != 0 && pins[n] == 0 ->
		renew_decided[B(c, n)] = 0;
		if
		:: !renew_changed[B(c, n)] ||
		   (pri.row[n].owner == c + 1 && pri.row[n].until > CLK) ->
			printf("client %d: renew %d applied (clock %d, lease until %d)\n", c, n, CLK, pri.row[n].until);
			check_renew_live(n);
			pri.row[n].until = CLK + TTL;
			row_updated(n);
			commit_durable();
#ifdef PROP_P3
			buntil[B(c, n)] = pri.row[n].until;
			/* the client's deadline counts from sending the renew */
			if
			:: renew_sent[B(c, n)] + TTL - DRIFT > rt -> bdead[B(c, n)] = renew_sent[B(c, n)] + TTL - DRIFT
			:: else -> bdead[B(c, n)] = 0
			fi;
#endif
			skip
		:: else -> skip
		fi
	}
}
#endif

/*
 * dlock.release (lease.c dlock_release): PLAN_RELEASE -- UPDATE ... SET
 * owner_token = NULL, lease_until = clock_timestamp() WHERE owner_token = $2
 * AND lease_until > clock_timestamp(). Commits asynchronously when it is
 * the transaction's only write (dlock_allow_async_release): only pri.
 * The client forgets its lease whatever the answer; it releases after its
 * business transaction ended.
 */
#ifdef BUG_RELEASE_ANY_OWNER
#define RELEASE_MATCHES(c, n) (pri.row[n].exists && pri.row[n].owner != 0 && pri.row[n].until > CLK)
#else
#define RELEASE_MATCHES(c, n) (pri.row[n].exists && pri.row[n].owner == c + 1 && pri.row[n].until > CLK)
#endif
inline stmt_release(c, n)
{
	atomic {
		btok[B(c, n)] != 0 && !pinned[B(c, n)] && (pins[n] == 0 || !RELEASE_MATCHES(c, n)) ->
		if
		:: RELEASE_MATCHES(c, n) ->
			printf("client %d: release %d (lease of client %d, asynchronous commit)\n", c, n, pri.row[n].owner - 1);
			pri.row[n].owner = 0;
			pri.row[n].until = 0;	/* lease_until = now: never live again, as owner is NULL */
#ifdef BUG_RENEW_BEFORE_PIN
			row_updated(n);
#endif
		:: else -> printf("client %d: release %d refused\n", c, n)
		fi;
		btok[B(c, n)] = 0; bdead[B(c, n)] = 0; buntil[B(c, n)] = 0;
		bseq[B(c, n)] = 0; blost[B(c, n)] = false
	}
}

/*
 * dlock.holds (fence.c holds_token): PLAN_HOLDS -- SELECT ... WHERE
 * fencing_seq = $2 AND owner_token IS NOT NULL AND lease_until >
 * clock_timestamp() FOR SHARE. A live token pins the row until the business
 * transaction ends; a failed check ends the transaction (nothing written).
 */
inline stmt_holds(c, n)
{
	atomic {
		btok[B(c, n)] != 0 && !pinned[B(c, n)] &&
		pri.row[n].exists && pri.row[n].owner != 0 &&
		TOK(pri.row[n].gen, pri.row[n].cnt) == btok[B(c, n)] &&
		pri.row[n].until > CLK ->
#ifndef BUG_HOLDS_NO_PIN
		pins[n]++;
#endif
#ifdef HOLDERS
		check_pin_writer(n);
#endif
		printf("client %d: holds(%d, %d.%d) true: lease pinned\n", c, n, pri.row[n].gen, pri.row[n].cnt);
		pinned[B(c, n)] = true
	}
}

/*
 * The fenced write of the business data: dlock.fence (fence_stmt, accept
 * when the resource's token <= this one) -- the same comparison as the
 * dlock.enforce_fencing trigger (refuse new < old). Refused: the
 * transaction rolls back.
 */
inline fenced_write(c, n)
{
	if
	:: btok[B(c, n)] >= pri.fence[n] ->
		printf("client %d: fenced write %d with token %d.%d accepted\n", c, n, btok[B(c, n)] / CMAX, btok[B(c, n)] % CMAX);
		check_fence_accept(n, bseq[B(c, n)]);
		pri.fence[n] = btok[B(c, n)];
#ifdef PROP_P4
		pri.fseq[n] = bseq[B(c, n)];
#endif
		commit_durable()
	:: else -> printf("client %d: fenced write %d with token %d.%d refused\n", c, n, btok[B(c, n)] / CMAX, btok[B(c, n)] % CMAX)	/* PD001 */
	fi
}

/* COMMIT of a business transaction that pinned the lease with holds() */
inline stmt_guarded_commit(c, n)
{
	atomic {
		pinned[B(c, n)] ->
		printf("client %d: commit of the holds()-guarded transaction\n", c);
		check_guarded_commit(c, n, btok[B(c, n)]);
		fenced_write(c, n);
		pinned[B(c, n)] = false;
#ifndef BUG_HOLDS_NO_PIN
		pins[n]--
#endif
	}
}

/* A write with the token alone, by a holder that may have paused past its lease */
inline stmt_unguarded_write(c, n)
{
	atomic {
		btok[B(c, n)] != 0 && !pinned[B(c, n)] ->
		fenced_write(c, n)
	}
}

/*
 * dlock.force_release (admin.c): force_release_stmt -- ends the live lease
 * whoever holds it; the counter stays. Its transaction commits with the
 * session's setting (durable).
 */
inline stmt_force_release(n)
{
	atomic {
		pins[n] == 0 && pri.row[n].exists && pri.row[n].owner != 0 &&
		pri.row[n].until > CLK ->
		printf("operator: force_release %d\n", n);
		pri.row[n].owner = 0;
		pri.row[n].until = 0;
#ifdef BUG_RENEW_BEFORE_PIN
		row_updated(n);
#endif
		commit_durable();
		mark_lost_leases()
	}
}

/*
 * dlock.reap (admin.c reap_rows): deletes rows free or expired (idle_for
 * 0), skipping locked (pinned) rows, and leaves the floor as a token state:
 * at the reap's position (HISTORY_NOW, dlock_history_now), the token just
 * below the best next token there of the deleted rows and the old floor,
 * so that the floor's next token at every later position of the cluster is
 * the best that any of them would have given (dlock_floor_token). The floor
 * lock that orders reap against PLAN_ACQUIRE_NEW is not modelled: both are
 * single steps here (regress/specs/reap-race.spec tests that race).
 * ng, nc, rg, rc belong to the calling proctype (environment).
 */
inline stmt_reap(n)
{
	atomic {
		pins[n] == 0 && pri.row[n].exists &&
		(pri.row[n].owner == 0 || pri.row[n].until <= CLK) ->
		next_gen_at(pri.floor.gen, pri.floor.gtl, pri.floor.gsys, HISTORY_NOW, ng);
		nc = pri.floor.cnt + 1;
		next_gen_at(pri.row[n].gen, pri.row[n].gtl, pri.row[n].gsys, HISTORY_NOW, rg);
		rc = pri.row[n].cnt + 1;
		if
		:: TOK(rg, rc) > TOK(ng, nc) -> ng = rg; nc = rc
		:: else -> skip
		fi;
		if
		:: ng < GMAX ->
			pri.floor.gen = ng;
			pri.floor.cnt = nc - 1;
			pri.floor.gtl = HISTORY_NOW;
			pri.floor.gsys = pri.sys;
			printf("operator: reap %d (token %d.%d): floor %d.%d at position %d\n", n, pri.row[n].gen, pri.row[n].cnt, ng, nc - 1, HISTORY_NOW);
			pri.row[n].exists = false;
			pri.row[n].owner = 0;
			pri.row[n].gen = 0;
			pri.row[n].cnt = 0;
			pri.row[n].gtl = 0;
			pri.row[n].gsys = 0;
			pri.row[n].until = 0;
#ifdef BUG_RENEW_BEFORE_PIN
			row_updated(n);
#endif
			commit_durable()
		:: else -> skip	/* beyond the model's bounds: not explored */
		fi;
		ng = 0; nc = 0; rg = 0; rc = 0
	}
}
