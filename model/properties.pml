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
 */

#ifdef PROP_ALL
#define PROP_P1
#define PROP_P2
#define PROP_P3
#define PROP_P4
#define PROP_P5
#define PROP_P6
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
#ifdef PROP_P3
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
