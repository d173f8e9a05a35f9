/*
 * environment.pml -- time, faults and operations: everything that happens
 * to the server rather than through a client's statement.
 *
 * Assumptions (each can be dropped with a switch; spin then finds a
 * counterexample, see tests/suites/15-model.sh):
 *   one promotion per timeline   a promoted standby takes a timeline no
 *                                server of the cluster had: the archive's
 *                                highest plus one (ASSUME_SHARED_TIMELINE
 *                                drops it: the standby counts from its own)
 *   bounded clock steps          the server clock steps forward at most
 *                                DRIFT, the clients' drift allowance,
 *                                during one lease (ASSUME_UNBOUNDED_STEP)
 *   a complete state moves       pg_upgrade and restore into a new cluster
 *                                start from a state that shows every token
 *                                the old cluster issued: a dump taken
 *                                before the last grant, or a state that an
 *                                asynchronous failover left without its
 *                                last grants, is not moved until each name
 *                                was granted again (ASSUME_ANY_STATE_MOVES)
 */

#ifdef ASSUME_UNBOUNDED_STEP
#define FSTEP (DRIFT + 1)
#else
#define FSTEP DRIFT
#endif

/*
 * complete = the state src records, for every name, a token at least as
 * high as every token ever issued for it (in its row, or in the floor once
 * reaped). Tokens only carry the old cluster's timelines; a new cluster
 * cannot know about grants its starting state does not show.
 */
inline state_has_every_grant(src, complete)
{
	complete = true;
#ifndef ASSUME_ANY_STATE_MOVES
	for (_j : 0 .. NN - 1) {
		if
		:: src.row[_j].exists && TOK(src.row[_j].gen, src.row[_j].cnt) < last_issued[_j] -> complete = false
		:: !src.row[_j].exists && TOK(src.floor.gen, src.floor.cnt) < last_issued[_j] -> complete = false
		:: else -> skip
		fi
	}
#endif
}

/* Row n has a commit the WAL has not flushed. Durable grants leave only
 * asynchronous releases (the owner differs); fenced ones any change. */
#ifdef FENCED
#define ROW_UNFLUSHED(n) \
	(pri.row[n].owner != dur.row[n].owner || pri.row[n].exists != dur.row[n].exists || \
	 pri.row[n].gen != dur.row[n].gen || pri.row[n].cnt != dur.row[n].cnt || \
	 pri.row[n].until != dur.row[n].until)
#else
#define ROW_UNFLUSHED(n) (pri.row[n].owner != dur.row[n].owner)
#endif

byte nfail, ncrash, nnew;
bool stepped;
bool complete;

/* Every open transaction ends: the server went away */
inline end_all_transactions()
{
	for (_i : 0 .. NC * NN - 1) {
		pinned[_i] = false;
#ifdef BUG_RENEW_BEFORE_PIN
		renew_decided[_i] = 0;
#endif
		skip
	}
	for (_j : 0 .. NN - 1) {
		pins[_j] = 0
	}
}

/* A new server life: its first grant checks the epoch again */
inline new_server_life()
{
#ifdef FENCED
	life_started = false
#else
	skip
#endif
}

/* The server now runs state pri on timeline tl of cluster sys */
inline promote(tl_new)
{
	new_server_life();
	pri.tl = tl_new;
	printf("  server now on timeline %d of cluster %d\n", pri.tl, pri.sys);
	if
	:: tl_new > maxtl -> maxtl = tl_new
	:: else -> skip
	fi;
	copy_db(dur, pri);
	end_all_transactions();
	mark_lost_leases()
}

/* pg_upgrade, or pg_restore into a new cluster: timeline 1, a new system identifier */
inline new_cluster()
{
	nnew++;
	nsys++;
	pri.sys = nsys;
	maxtl = 0;
	promote(1);
	copy_db(stby, pri)
}

#ifdef RESTORES
byte nrestore, ndrop;
byte drops_since_bak;	/* DROP EXTENSIONs since the backup: each one more timeline for after_restore */

/* BACKUP_WITH_ROWS: only a backup that holds a row of every name (for
 * the control of finding 2 with the old step at its best) */
#ifdef BACKUP_WITH_ROWS
#if NN > 1
#define BACKUP_ADMITS (dur.row[0].exists && dur.row[1].exists)
#else
#define BACKUP_ADMITS (dur.row[0].exists)
#endif
#else
#define BACKUP_ADMITS true
#endif

/* the backup's tokens stay within the model's generations once moved */
#define RESTORE_SHIFT ((maxtl - bak.tl + 1 + drops_since_bak) * EPW)
#define BAK_ROW_FITS(j) (!bak.row[j].exists || bak.row[j].gen + RESTORE_SHIFT < GMAX)
#if NN > 1
#define BAK_FITS (bak.floor.gen + RESTORE_SHIFT < GMAX && BAK_ROW_FITS(0) && BAK_ROW_FITS(1))
#else
#define BAK_FITS (bak.floor.gen + RESTORE_SHIFT < GMAX && BAK_ROW_FITS(0))
#endif

/*
 * dlock.after_restore(lost_timelines) (admin.c): every lease of the
 * restored state ends now, every token -- each row and the floor, an empty
 * floor being (0, 0, 0) -- moves up by lost_timelines whole timelines of
 * positions (EPW generations each). lost_timelines: the timelines the lost
 * servers ran on since the backup's, and one per DROP EXTENSION since the
 * backup (the new extension's epochs start again), as docs/fencing.md tells
 * the operator to count them.
 * BUG_RESTORE_ONE_GEN: the step docs/limits.md gave before 1.5 (finding
 * 2): every row one generation up, and a floor row of the highest token,
 * written by hand (no position).
 */
inline after_restore()
{
#ifdef BUG_RESTORE_ONE_GEN
	for (_j : 0 .. NN - 1) {
		if
		:: pri.row[_j].exists ->
			pri.row[_j].gen++;
			if
			:: TOK(pri.row[_j].gen, pri.row[_j].cnt) > TOK(pri.floor.gen, pri.floor.cnt) ->
				pri.floor.gen = pri.row[_j].gen; pri.floor.cnt = pri.row[_j].cnt;
				pri.floor.gtl = 0; pri.floor.gsys = 0
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
	printf("  the one-generation restore step of 1.4\n")
#else
	rg = (maxtl - pri.tl + 1 + drops_since_bak) * EPW;	/* the shift, in generations */
	for (_j : 0 .. NN - 1) {
		if
		:: pri.row[_j].exists ->
			pri.row[_j].gen = pri.row[_j].gen + rg;
			if
			:: pri.row[_j].owner != 0 && pri.row[_j].until > CLK -> pri.row[_j].until = CLK
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
	pri.floor.gen = pri.floor.gen + rg;
	printf("  dlock.after_restore(%d): every token %d generations up\n", maxtl - pri.tl + 1 + drops_since_bak, rg);
	rg = 0
#endif
}
#endif

proctype environment()
{
	byte _i, _j;
	byte ng, nc, rg, rc;	/* stmt_reap's and after_restore's */

end:	do
	/* time passes */
	:: atomic {
		rt < MAXRT -> rt++;
		printf("time %d (server clock %d)\n", rt, CLK);
		for (_i : 0 .. NC * NN - 1) {	/* a passed deadline: its value no longer matters */
			if
			:: bdead[_i] <= rt -> bdead[_i] = 0
			:: else -> skip
			fi;
#ifdef HOLDERS
			if
			:: sdead[_i] <= rt -> sdead[_i] = 0
			:: else -> skip
			fi;
#endif
			skip
		}
	}
#ifndef WITHOUT_CLOCK_STEPS
	/* the server clock steps (NTP, an operator): forward shortens leases */
	:: atomic { !stepped -> stepped = true; off = off + FSTEP; printf("server clock steps forward to %d\n", CLK) }
#ifndef WITHOUT_BACKWARD_STEP
	:: atomic { !stepped -> stepped = true; off = off - STEP; printf("server clock steps back to %d\n", CLK) }
#endif
#endif

#ifndef WITHOUT_HISTORY
	/* the WAL writer flushes asynchronous commits (wal_writer_delay) */
	:: atomic { ROW_UNFLUSHED(0) -> copy_db(dur, pri); printf("WAL writer flushes\n") }
#if MAXFAIL > 0 || MAXNEWCLUSTER > 0
	/* the asynchronous standby receives the flushed WAL so far (only a
	 * failover or a restore reads its copy) */
	:: atomic { copy_db(stby, dur); printf("standby catches up\n") }
#endif

	/* crash and restart: unflushed (asynchronous) commits are lost */
	:: atomic {
		ncrash < MAXCRASH -> ncrash++;
		printf("crash and restart\n");
		check_crash_keeps_grants();
		copy_db(pri, dur);
		new_server_life();
		end_all_transactions();
		mark_lost_leases()	/* fenced grants and renewals the crash lost */
	}

	/* failover to a synchronous standby: it has every durable commit */
	:: atomic {
		nfail < MAXFAIL -> nfail++;
		printf("failover to a synchronous standby\n");
		copy_db(pri, dur);
#ifdef ASSUME_SHARED_TIMELINE
		promote(pri.tl + 1)
#else
		promote(maxtl + 1)
#endif
	}
	/* failover to the asynchronous standby: it may miss the last commits.
	 * The standby copy stays as it was: it stands for a second standby
	 * of the old primary, which a later failover may promote. */
	:: atomic {
		nfail < MAXFAIL -> nfail++;
		printf("failover to the asynchronous standby\n");
		copy_db(pri, stby);
#ifdef ASSUME_SHARED_TIMELINE
		promote(pri.tl + 1)
#else
		promote(maxtl + 1)
#endif
	}

	/* pg_upgrade (after a clean shutdown: everything committed is there) or
	 * pg_dump + pg_restore of the latest state into a new cluster */
	:: atomic { nnew < MAXNEWCLUSTER -> state_has_every_grant(pri, complete); complete -> printf("pg_upgrade (or dump and restore of the latest state) into a new cluster\n"); new_cluster() }
	/* pg_restore of an older dump into a new cluster. A dump is the
	 * committed state at some earlier moment, as the standby's copy is:
	 * the model restores that copy rather than keep a fifth one. */
	:: atomic {
		nnew < MAXNEWCLUSTER -> state_has_every_grant(stby, complete); complete ->
		printf("restore of an older dump (the state the standby has) into a new cluster\n");
		copy_db(pri, stby);
		new_cluster()
	}

#ifdef RESTORES
	/* a backup: a cold copy of the data directory, or a base backup with
	 * the WAL up to its end; either holds the flushed state of some moment
	 * (a cold copy's clean shutdown is a crash that lost nothing) */
	:: atomic { !have_bak && nrestore < MAXRESTORE && BACKUP_ADMITS -> copy_db(bak, dur); have_bak = true; drops_since_bak = 0; printf("backup taken\n") }
	/* the primary is lost; the backup is restored on its timeline (the
	 * same cluster: a copy keeps the system identifier) and
	 * dlock.after_restore() runs before clients come back */
	:: atomic {
		have_bak && nrestore < MAXRESTORE && BAK_FITS -> nrestore++;
		printf("the primary is lost: the backup is restored, then dlock.after_restore\n");
		copy_db(pri, bak);
		new_server_life();
		end_all_transactions();
		after_restore();
		copy_db(dur, pri);
		copy_db(stby, pri);
		mark_lost_leases()
	}
	/* DROP EXTENSION, CREATE EXTENSION, and the carry-over of
	 * docs/fencing.md. dlock.highest_token() starts the life's epoch as a
	 * grant would (a crash since the last fenced grants moves it) and gives
	 * the state whose next token at that position is the best of every row
	 * and the floor; dlock.carry_over() makes it the new extension's floor
	 * at that position and has the new dlock.token_epoch go on from the
	 * old one's epoch: as if every row had been reaped. The resource fences
	 * stay (the model keeps them for P4). BUG_CARRY_OVER_BY_HAND: the floor
	 * row written by hand before 1.5 (the highest token, no position) and
	 * the new extension's epochs starting again at 0, unknown to this life. */
	:: atomic {
		ndrop < MAXDROP -> ndrop++;
#ifdef BUG_CARRY_OVER_BY_HAND
		ng = pri.floor.gen; nc = pri.floor.cnt;
		for (_j : 0 .. NN - 1) {
			if
			:: pri.row[_j].exists && TOK(pri.row[_j].gen, pri.row[_j].cnt) > TOK(ng, nc) ->
				ng = pri.row[_j].gen; nc = pri.row[_j].cnt
			:: else -> skip
			fi
		}
		pri.floor.gtl = 0; pri.floor.gsys = 0;
		pri.epoch = 0;
		life_started = false;
#else
		start_life_at_grant();
		next_gen_at(pri.floor.gen, pri.floor.gtl, pri.floor.gsys, GRANT_POS, ng);
		nc = pri.floor.cnt + 1;
		for (_j : 0 .. NN - 1) {
			if
			:: pri.row[_j].exists ->
				next_gen_at(pri.row[_j].gen, pri.row[_j].gtl, pri.row[_j].gsys, GRANT_POS, rg);
				rc = pri.row[_j].cnt + 1;
				if
				:: TOK(rg, rc) > TOK(ng, nc) -> ng = rg; nc = rc
				:: else -> skip
				fi
			:: else -> skip
			fi
		}
		/* the state just below the best next token */
		if
		:: nc > 0 -> nc--
		:: else -> ng--; nc = CMAX - 1
		fi;
		pri.floor.gtl = GRANT_POS; pri.floor.gsys = pri.sys;
		rg = 0; rc = 0;
#endif
		pri.floor.gen = ng; pri.floor.cnt = nc;
		for (_j : 0 .. NN - 1) {
			pri.row[_j].exists = false;
			pri.row[_j].owner = 0;
			pri.row[_j].gen = 0;
			pri.row[_j].cnt = 0;
			pri.row[_j].gtl = 0;
			pri.row[_j].gsys = 0;
			pri.row[_j].until = 0
		}
		pri.efenced = false;
		if
		:: have_bak -> drops_since_bak++
		:: else -> skip
		fi;
		printf("DROP EXTENSION, CREATE EXTENSION, floor %d.%d carried over\n", ng, nc);
		ng = 0; nc = 0;
		end_all_transactions();
		copy_db(dur, pri);
		mark_lost_leases()
	}
#endif
#endif
#ifdef REAP_SLOTS
	:: stmt_reap_slots(0)
#endif
#ifdef REAP_COUNTERS
	:: stmt_reap_counter(0)
#endif
#ifdef HOLDERS
	/* a writer's exclusive acquire frees expired slots */
	:: stmt_clear_expired(0)
#if NN > 1
	:: stmt_clear_expired(1)
#endif
#endif
	/* operators */
#ifndef WITHOUT_REAP
	:: stmt_reap(0)
#endif
	:: stmt_force_release(0)
#if NN > 1 && !defined(WITHOUT_HISTORY)
	:: atomic { ROW_UNFLUSHED(1) -> copy_db(dur, pri) }
#endif
#if NN > 1
#ifndef WITHOUT_REAP
	:: stmt_reap(1)
#endif
	:: stmt_force_release(1)
#endif
	od
}
