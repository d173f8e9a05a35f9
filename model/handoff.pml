/*
 * handoff.pml -- the waiters' queue of one name and the handoff of every
 * kind (extension/wait.c), checked on its own: check.sh compiles this file
 * instead of pg_dlock.pml for the configurations "handoff" (readers and
 * writers) and "permits" (SEM: a semaphore of SIZE permits).
 *
 * A blocking attempt is granted at once when the name admits its kind and
 * no earlier waiter of a conflicting kind is queued; otherwise it joins the
 * FIFO queue. A release hands, in its own commit, the freed lease to the
 * queue's head whatever it waits for, and goes on while the new head is
 * admitted: a reader and the readers queued right behind it together, as
 * many permits as were freed, a writer alone. The waiter learns of its
 * grant when it wakes (stmt_wake). A waiter that leaves (its wait timed
 * out, it was cancelled) after the handoff but before it woke has its
 * handed lease recorded as abandoned: nobody holds it, and the next attempt
 * or release that finds it treats it as free. A waiter may also try again
 * on its own (a poll: the latch, a timeout) and is granted on the same
 * rule as an arrival, counting only the waiters ahead of it.
 *
 * Each statement is one atomic step (the name's lock serializes them in
 * wait.c). Every grant takes a new token from the name's counter; where the
 * token comes from (slot blocks, the reap floor) is pg_dlock.pml's and
 * holders.pml's matter.
 *
 * Properties (PROP_P11 ... PROP_P15, as in properties.pml):
 *   P11 a writer's lease is never beside another lease: not at a grant on
 *       the server (handed or not), not among what the clients believe
 *   P12 never more permits than the size (the same two ways)
 *   P13 a token is never issued twice
 *   P14 FIFO: no waiter is granted while an earlier waiter of a
 *       conflicting kind (a writer, or a writer's competitor; permits
 *       compete with permits) waits ahead of it
 *   P15 no handed lease is lost: a release leaves no head the name admits
 *       waiting, and a waiter is refused only by a lease somebody holds
 *       (an abandoned one counts as free)
 *
 * Known-bug variants, which spin must reject:
 *   BUG_HANDOFF_OVERTAKE  the release first hands to every queued reader
 *                  the name admits, also those behind a queued writer (P14)
 *   BUG_HANDOFF_EXTRA_PERMIT  the release hands one permit more than it
 *                  freed (P12)
 *   BUG_ABANDONED_KEPT  an abandoned handed lease is never freed: attempts
 *                  and releases count it as held (P15)
 *   BUG_HANDOFF_HEAD_UNCHECKED  the release hands the head the lease it
 *                  freed without asking whether the name admits it: a
 *                  writer beside the readers still holding (P11)
 *   BUG_HANDOFF_RELEASER_TOKEN  the handed lease keeps the releaser's token
 *                  (P13)
 */

#ifndef NC
#define NC 3
#endif
#ifndef SIZE
#define SIZE 2
#endif
#ifndef MAXGRANT
#define MAXGRANT 4
#endif

#define R 1
#define W 2
#define P 3

#define FREE 0
#define HELD 1		/* granted, and the client knows it */
#define HANDED 2	/* granted by a release, the waiter not woken yet */
#define ABANDONED 3	/* handed to a waiter that left first: nobody holds it */

byte own[NC];			/* the server's record of client c's lease */
byte kind[NC];			/* the kind client c holds or waits for */
byte tok[NC];			/* the token of its lease */
bool inq[NC];			/* client c is queued */
byte q[NC];				/* the queue, client + 1; q[0] is the longest waiter */
byte qlen;
byte ctr;				/* the name's token counter */
byte attempts;			/* each attempt is granted at most once: ctr <= MAXGRANT */
bool issued[MAXGRANT + 1];	/* ghost: tokens issued (P13) */
bool believe[NC];		/* ghost: the client believes it holds its lease */

/* what counts as held when the name decides */
#ifdef BUG_ABANDONED_KEPT
#define COUNTS(i) (own[i] != FREE)
#else
#define COUNTS(i) (own[i] == HELD || own[i] == HANDED)
#endif
/* what is held in truth: an abandoned lease has no holder */
#define LIVE(i) (own[i] == HELD || own[i] == HANDED)
/* an earlier waiter of kind a holds back a grant of kind b */
#define BLOCKS(a, b) ((a) == W || (b) == W || ((a) == P && (b) == P))

/* ok := the name admits kind k, counting leases as the rule says (COUNTS) */
inline admits(k)
{
	ok = true; np = 0;
	for (i : 0 .. NC - 1) {
		if
		:: COUNTS(i) && (k == W || kind[i] == W) -> ok = false
		:: COUNTS(i) && kind[i] == P -> np++
		:: else -> skip
		fi
	}
	if
	:: k == P && np >= SIZE -> ok = false
	:: else -> skip
	fi
}

/* truth := the name admits kind k, counting only the leases somebody holds */
inline truly_admits(k)
{
	truth = true; np = 0;
	for (i : 0 .. NC - 1) {
		if
		:: LIVE(i) && (k == W || kind[i] == W) -> truth = false
		:: LIVE(i) && kind[i] == P -> np++
		:: else -> skip
		fi
	}
	if
	:: k == P && np >= SIZE -> truth = false
	:: else -> skip
	fi
}

/* ahead := no waiter among the first pos of the queue holds back kind k */
inline none_ahead(pos, k)
{
	ahead = true;
	for (j : 0 .. NC - 1) {
		if
		:: j < pos && BLOCKS(kind[q[j] - 1], k) -> ahead = false
		:: else -> skip
		fi
	}
}

/* an attempt or a release that finds abandoned leases treats them as free */
inline free_abandoned()
{
#ifndef BUG_ABANDONED_KEPT
	for (i : 0 .. NC - 1) {
		if
		:: own[i] == ABANDONED ->
			printf("abandoned lease of client %d (token %d) freed\n", i, tok[i]);
			own[i] = FREE
		:: else -> skip
		fi
	}
#else
	skip
#endif
}

inline dequeue(pos)
{
	inq[q[pos] - 1] = false;
	for (j : 0 .. NC - 2) {
		if
		:: j >= pos -> q[j] = q[j + 1]
		:: else -> skip
		fi
	}
	q[NC - 1] = 0;
	qlen--
}

/*
 * grant(h, how, pos, t): client h, at position pos of the queue (qlen for
 * an arrival), gets its lease with token t; P11-P14 are checked here
 */
inline grant(h, how, pos, t)
{
#if defined(PROP_P11) || defined(PROP_P12)
	np = 0;
	for (i : 0 .. NC - 1) {
		if
		:: i != h && LIVE(i) ->
#ifdef PROP_P11
			assert(kind[h] != W && kind[i] != W);	/* P11 a writer beside another lease */
#endif
			if
			:: kind[i] == P -> np++
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
#ifdef PROP_P12
	assert(kind[h] != P || np < SIZE);	/* P12 more permits than the size */
#endif
#endif
#ifdef PROP_P13
	assert(!issued[t]);	/* P13 token issued twice */
	issued[t] = true;
#endif
#ifdef PROP_P14
	none_ahead(pos, kind[h]);
	assert(ahead);	/* P14 granted before an earlier waiter of a conflicting kind */
#endif
	own[h] = how;
	tok[h] = t;
	printf("client %d granted kind %d token %d (how %d)\n", h, kind[h], t, how)
}

/* P11, P12 on what the clients believe, when client c learns of its grant */
inline check_beliefs(c)
{
#if defined(PROP_P11) || defined(PROP_P12)
	np = 0;
	for (i : 0 .. NC - 1) {
		if
		:: i != c && believe[i] ->
#ifdef PROP_P11
			assert(kind[c] != W && kind[i] != W);	/* P11 a writer beside another holder */
#endif
			if
			:: kind[i] == P -> np++
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
#ifdef PROP_P12
	assert(kind[c] != P || np < SIZE);	/* P12 more permit holders than the size */
#endif
#endif
	skip
}

/*
 * The release's handoff, in its commit: the head while the name admits it;
 * then P15: the head left waiting is one the name does not admit.
 */
inline hand_off()
{
	free_abandoned();
#ifdef BUG_HANDOFF_OVERTAKE
	/* every queued reader the lease admits, wherever it is in the queue */
	pos = 0;
	do
	:: pos < qlen ->
		h = q[pos] - 1;
		admits(kind[h]);
		if
		:: ok && kind[h] == R -> ctr++; grant(h, HANDED, pos, ctr); dequeue(pos)
		:: else -> pos++
		fi
	:: else -> break
	od;
	pos = 0;
#endif
#ifdef BUG_HANDOFF_EXTRA_PERMIT
	extra = 1;
#endif
	do
	:: qlen > 0 ->
		h = q[0] - 1;
		admits(kind[h]);
#ifdef BUG_HANDOFF_HEAD_UNCHECKED
		ok = (pos == 0);	/* the first head only: what the release freed */
		pos = 1;
#endif
#ifdef BUG_HANDOFF_EXTRA_PERMIT
		if
		:: !ok && kind[h] == P && extra > 0 -> ok = true; extra = 0
		:: else -> skip
		fi;
#endif
		if
		:: ok ->
			ctr++;
#ifdef BUG_HANDOFF_RELEASER_TOKEN
			grant(h, HANDED, 0, tok[c]);
#else
			grant(h, HANDED, 0, ctr);
#endif
			dequeue(0)
		:: else -> break
		fi
	:: else -> break
	od;
#ifdef BUG_HANDOFF_HEAD_UNCHECKED
	pos = 0;
#endif
#ifdef PROP_P15
	if
	:: qlen > 0 ->
		truly_admits(kind[q[0] - 1]);
		assert(!truth)	/* P15 the release left a lease it could hand */
	:: else -> skip
	fi;
#endif
	h = 0
}

proctype client(byte c)
{
	byte i, j, h, np, pos, k, extra;
	bool ok, truth, ahead;

end:	do
	/* a blocking attempt: granted at once, or queued */
	:: atomic {
		own[c] != HELD && own[c] != HANDED && !inq[c] && attempts < MAXGRANT ->
		attempts++;
#ifdef SEM
		k = P;
#else
		if
		:: k = R
		:: k = W
		fi;
#endif
		kind[c] = k;
		free_abandoned();
		admits(k);
		none_ahead(qlen, k);
		if
		:: ok && ahead ->
			ctr++;
			grant(c, HELD, qlen, ctr);
			check_beliefs(c);
			believe[c] = true
		:: else ->
			printf("client %d queued for kind %d\n", c, k);
			q[qlen] = c + 1; qlen++; inq[c] = true
		fi;
		k = 0
	   }
	/* a waiter tries again on its own */
	:: atomic {
		inq[c] ->
		pos = 0;
		do
		:: q[pos] != c + 1 -> pos++
		:: else -> break
		od;
		free_abandoned();
		admits(kind[c]);
		none_ahead(pos, kind[c]);
		if
		:: ok && ahead ->
			ctr++;
			grant(c, HELD, pos, ctr);
			dequeue(pos);
			check_beliefs(c);
			believe[c] = true
		:: else ->
#ifdef PROP_P15
			truly_admits(kind[c]);
			assert(!(truth && ahead))	/* P15 refused by a lease nobody holds */
#else
			skip
#endif
		fi;
		pos = 0
	   }
	/* the waiter wakes to its handed lease */
	:: atomic {
		own[c] == HANDED ->
		own[c] = HELD;
		check_beliefs(c);
		believe[c] = true;
		printf("client %d wakes holding token %d\n", c, tok[c])
	   }
	/* the waiter leaves: queued, or handed and not yet woken (abandoned) */
	:: atomic {
		inq[c] || own[c] == HANDED ->
		if
		:: inq[c] ->
			pos = 0;
			do
			:: q[pos] != c + 1 -> pos++
			:: else -> break
			od;
			dequeue(pos);
			pos = 0
		:: else ->
			printf("client %d left: its handed lease (token %d) is abandoned\n", c, tok[c]);
			own[c] = ABANDONED
		fi
	   }
	/* release: the lease is freed and handed on in the same commit */
	:: atomic {
		own[c] == HELD ->
		printf("client %d releases token %d\n", c, tok[c]);
		own[c] = FREE;
		believe[c] = false;
		hand_off()
	   }
	od
}

init
{
	byte c;
	atomic {
		for (c : 0 .. NC - 1) {
			run client(c)
		}
	}
}
