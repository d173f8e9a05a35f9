/*
 * properties.pml -- the ghost state and the properties spin checks.
 *
 * Loops use _i and _j, which every proctype declares.
 *
 * Ghost state is what the clients were told (their leases) and the history
 * of every token issued; it is not part of the database and survives crash,
 * failover and restore, as the clients' memories do.
 *
 * Each property is an assertion compiled in when its PROP_* switch is set
 * (or PROP_ALL), with the ghost state only it needs, so that a run checking
 * one property explores no more states than it must; tests/suites/15-model.sh
 * checks them one at a time. Each assertion is marked with its property's
 * number, which the suite matches in pan's report.
 *
 *   P1 a token is never issued to two different owners for one name
 *   P2 tokens of successive grants of a name only grow
 *   P3 at most one live exclusive lease per name: no grant while another
 *      owner's lease is live by that owner's deadline (the client's clock,
 *      with its drift allowance, on a server clock that steps at most STEP),
 *      and a lease that expired on the server's clock is never extended
 *   P4 a fenced write is never accepted after a write made under a later
 *      lease (so never a lower token after a higher one)
 *   P5 a holds()-guarded write commits only while its lease is live: no
 *      other owner took the lock and nobody ended the lease in between
 *   P6 after a crash and restart nothing granted durably is lost
 *
 * With fenced grants (FENCED) P1, P2 and P4 are the ones that matter: the
 * ghost record of issued tokens survives the crash, so a grant the crash
 * lost still counts. P1: its token is never issued again; P2: every token
 * after the crash is above it; P4: its holder, who still has the token,
 * cannot write after a later lease's writes. P6 does not hold by design.
 *
 * With holder slots (HOLDERS, holders.pml):
 *   P7 a shared lease and an exclusive lease of one name are never both
 *      live: not on the server's clock, not by the holders' deadlines; a
 *      reader and a writer never both pass holds() (hold a pin) at once
 *   P8 a shared lease that expired on the server's clock is never renewed
 *   P9 tokens of all kinds: a grant of any kind never issues a token issued
 *      before for the name; an exclusive token is above every earlier token
 *      of the name, a holder's token above every earlier exclusive token
 *      and above its slot's earlier tokens
 *   P10 a reader's holds()-guarded write never commits after an exclusive
 *      grant made since its holds() (a stale reader's fenced write never
 *      lands after a writer's grant)
 *
 * P11-P15, the waiters' queue and the handoff, are checked on their own
 * model, handoff.pml.
 */

#ifdef PROP_ALL
#define PROP_P1
#define PROP_P2
#define PROP_P3
#define PROP_P4
#define PROP_P5
#define PROP_P6
#ifdef HOLDERS
#define PROP_P7
#define PROP_P8
#define PROP_P9
#define PROP_P10
#endif
#endif

/* the clients' deadlines are kept for P3 and for P7 */
#if defined(PROP_P3) || defined(PROP_P7)
#define GHOST_DEADLINES
#endif

/* What client c was told about name n (index c * NN + n, c from 0) */
byte btok[NC * NN];		/* TOK of its lease; 0 = none */
byte bdead[NC * NN];	/* its deadline in real time: sent + TTL - DRIFT */
byte buntil[NC * NN];	/* lease_until the server returned */
byte bseq[NC * NN];		/* grant order of its lease */
bool blost[NC * NN];	/* the server's history no longer has this lease */
#define B(c, n) ((c) * NN + (n))

/* Every token issued: issued[n][TOK] = owner (P1); last issued (P2) */
#ifdef PROP_P1
byte issued[NN * GMAX * CMAX];
#endif
byte last_issued[NN];
byte grants;			/* grant order, 1.. */

/* P1, P2, P3 at a new grant of name n to client c with token t */
inline check_new_grant(c, n, t)
{
#ifdef PROP_P1
	assert(issued[n * GMAX * CMAX + t] == 0 || issued[n * GMAX * CMAX + t] == c + 1);	/* P1 */
	issued[n * GMAX * CMAX + t] = c + 1;
#endif
#ifdef PROP_P2
	assert(t > last_issued[n]);	/* P2 */
#endif
	last_issued[n] = t;
#ifdef PROP_P3
	for (_i : 0 .. NC - 1) {
		assert(_i == c || btok[B(_i, n)] == 0 || blost[B(_i, n)] || bdead[B(_i, n)] <= rt)	/* P3 */
	}
#endif
}

/* P3: a renew takes effect only on a lease live on the server's clock */
inline check_renew_live(n)
{
#ifdef PROP_P3
	assert(pri.row[n].until > CLK)	/* P3 expired lease renewed */
#endif
	skip
}

/* P4: the resource accepts a write under the lease of grant order s */
inline check_fence_accept(n, s)
{
#ifdef PROP_P4
	assert(s >= pri.fseq[n])	/* P4 */
#endif
	skip
}

/* P5: client c commits a holds()-guarded write with token t on name n */
inline check_guarded_commit(c, n, t)
{
#ifdef PROP_P5
	assert(pri.row[n].owner == c + 1 && TOK(pri.row[n].gen, pri.row[n].cnt) == t)	/* P5 */
#endif
	skip
}

/* P6: at a crash, every grant and renew committed is flushed (dur) */
inline check_crash_keeps_grants()
{
#ifdef PROP_P6
	for (_j : 0 .. NN - 1) {
		assert(dur.row[_j].exists == pri.row[_j].exists &&
			   dur.row[_j].gen == pri.row[_j].gen && dur.row[_j].cnt == pri.row[_j].cnt &&
			   (pri.row[_j].owner == 0 ||
				(dur.row[_j].owner == pri.row[_j].owner && dur.row[_j].until == pri.row[_j].until)))	/* P6 */
	}
#endif
	skip
}

/*
 * After the server's history went back (asynchronous failover, restore of
 * an older dump, force release): leases it no longer has, or has with an
 * earlier lease_until than the client was told, are marked lost. P3 exempts
 * them -- only fencing protects a lease the server lost -- while P1, P2, P4
 * and P5 still hold for them.
 */
inline mark_lost_leases()
{
#ifdef GHOST_DEADLINES
	for (_i : 0 .. NC - 1) {
		for (_j : 0 .. NN - 1) {
			if
			:: btok[B(_i, _j)] != 0 &&
			   (!pri.row[_j].exists || pri.row[_j].owner != _i + 1 ||
				TOK(pri.row[_j].gen, pri.row[_j].cnt) != btok[B(_i, _j)] ||
				pri.row[_j].until < buntil[B(_i, _j)]) ->
				blost[B(_i, _j)] = true
			:: else -> skip
			fi
		}
	}
#endif
	skip
}

#ifdef HOLDERS
/* What client c was told about its shared lease of name n */
byte stok[NC * NN];		/* TOK of its shared lease; 0 = none */
byte sdead[NC * NN];	/* its deadline in real time: sent + TTL - DRIFT */
byte spin_slot[NC * NN];	/* slot + 1 its open transaction pinned with holds(); 0 = none */
byte spin_tok[NC * NN];	/* the token that holds() checked */
#ifdef PROP_P9
bool hissued[NN * GMAX * CMAX];	/* tokens of any kind issued for the name */
byte hi_x[NN];			/* highest exclusive token issued */
byte hi_any[NN];		/* highest token of any kind issued */
#endif
#ifdef PROP_P10
byte xgrants[NN];		/* exclusive grants of the name so far */
byte spin_x[NC * NN];	/* xgrants when the reader pinned its slot */
#endif

/* P7 when a lease of name n becomes live or stays live as an exclusive one */
inline check_exclusive_vs_readers(n)
{
#ifdef PROP_P7
	for (_i : 0 .. NS - 1) {
		assert(slot[SL(n, _i)].owner == 0 || slot[SL(n, _i)].until <= CLK)	/* P7 shared lease live at an exclusive grant */
	}
	for (_i : 0 .. NC - 1) {
		assert(sdead[B(_i, n)] <= rt)	/* P7 reader's deadline not passed at an exclusive grant */
	}
#endif
	skip
}

/* P7 when a shared lease of name n is granted or renewed */
inline check_reader_vs_exclusive(n)
{
#ifdef PROP_P7
	assert(!pri.row[n].exists || pri.row[n].owner == 0 || pri.row[n].until <= CLK);	/* P7 exclusive lease live at a shared grant */
	for (_i : 0 .. NC - 1) {
		assert(btok[B(_i, n)] == 0 || blost[B(_i, n)] || bdead[B(_i, n)] <= rt)	/* P7 writer's deadline not passed at a shared grant */
	}
#endif
	skip
}

/* P7 when holds() pins a lease of name n: no pin of the other kind is held */
inline check_pin_reader(n)
{
#ifdef PROP_P7
	assert(pins[n] == 0)	/* P7 reader and writer both pass holds() */
#endif
	skip
}

inline check_pin_writer(n)
{
#ifdef PROP_P7
	for (_i : 0 .. NS - 1) {
		assert(slot[SL(n, _i)].pins == 0)	/* P7 writer and reader both pass holds() */
	}
#endif
	skip
}

/* P8: a renewal takes effect only on a slot live on the server's clock */
inline check_slot_renew_live(k)
{
#ifdef PROP_P8
	assert(slot[k].until > CLK)	/* P8 expired shared lease renewed */
#endif
	skip
}

/* P9 at an exclusive grant of name n with token t */
inline check_exclusive_token(n, t)
{
#ifdef PROP_P9
	assert(!hissued[n * GMAX * CMAX + t]);	/* P9 token issued twice */
	assert(t > hi_any[n]);	/* P9 exclusive token not above every earlier token */
	hissued[n * GMAX * CMAX + t] = true;
	hi_x[n] = t;
	hi_any[n] = t;
#endif
#ifdef PROP_P10
	xgrants[n]++;
#endif
	skip
}

/* P9 at a grant of slot k of name n with token t */
inline check_holder_token(n, k, t)
{
#ifdef PROP_P9
	assert(!hissued[n * GMAX * CMAX + t]);	/* P9 token issued twice */
	assert(t > hi_x[n]);	/* P9 holder token not above every earlier exclusive token */
	assert(t > slot[k].tok);	/* P9 slot's tokens do not grow */
	hissued[n * GMAX * CMAX + t] = true;
	if
	:: t > hi_any[n] -> hi_any[n] = t
	:: else -> skip
	fi;
#endif
	skip
}

/* P7, P10 at the commit of reader c's holds()-guarded write on name n */
inline check_reader_commit(c, n, k)
{
#ifdef PROP_P7
	assert(slot[k].owner == c + 1 && slot[k].tok == spin_tok[B(c, n)]);	/* P7 pinned shared lease ended before the guarded commit */
#endif
#ifdef PROP_P10
	assert(xgrants[n] == spin_x[B(c, n)]);	/* P10 reader's guarded write after a writer's grant */
#endif
	skip
}
#endif
