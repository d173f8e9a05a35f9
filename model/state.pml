/*
 * state.pml -- the database state of pg_dlock as the model sees it.
 *
 * One Db is one copy of the extension's tables: dlock.distributed_lock
 * (one Row per name), dlock.token_floor (Floor) and dlock.resource_fence
 * (one fence per name), plus the timeline and cluster of the server whose
 * WAL produced it. Three copies exist: what the primary has committed (pri),
 * what its WAL has flushed (dur) and what the standby has received (stby),
 * which is also the older state a restore may bring back.
 *
 * A fencing token is (generation, counter); TOK() orders them as the bigint
 * (generation << 40) | counter does (sql/pg_dlock--1.0.sql, token.c).
 *
 * FENCED (dlock.durability = fenced): grants may commit without the WAL
 * flush, so a crash can lose them. dlock.token_epoch (epoch, efenced) is
 * part of each copy (its newest row); the generation then counts history
 * positions, POS(tl, epoch), not timelines (token.c dlock_token_history):
 * EPW generations per timeline stand for DLOCK_EPOCHS, more than all the
 * epoch moves the model's bounds allow, as the extension stops marking
 * before the last epoch.
 */

#ifndef NC
#define NC 2			/* clients (owner tokens 1..NC) */
#endif
#ifndef NN
#define NN 1			/* lock names; name i fences resource i */
#endif
#ifndef MAXRT
#define MAXRT 6			/* real time runs 0..MAXRT */
#endif
#ifndef MAXFAIL
#define MAXFAIL 2		/* failovers */
#endif
#ifndef MAXCRASH
#define MAXCRASH 1		/* crash restarts */
#endif
#ifndef MAXNEWCLUSTER
#define MAXNEWCLUSTER 1	/* pg_upgrade or restore into a new cluster */
#endif
#ifndef MAXGRANT
#define MAXGRANT 4		/* new leases granted */
#endif
#ifdef RESTORES
#ifndef FENCED
#error "RESTORES needs FENCED: a restore loses server lives, whose epochs matter"
#endif
#ifndef MAXRESTORE
#define MAXRESTORE 1	/* restores of an older backup, each followed by dlock.after_restore */
#endif
#ifndef MAXDROP
#define MAXDROP 1		/* DROP EXTENSION + CREATE EXTENSION with the floor carried over */
#endif
#else
#define MAXRESTORE 0
#define MAXDROP 0
#endif
#define TTL 2			/* lease length on the server's clock */
#define DRIFT 1			/* the client's drift allowance (client/, deadline) */
#define STEP 1			/* largest forward step of the server clock */
#if defined(FENCED)
#define GMAX 16			/* generations 0..15: they count positions */
#else
#define GMAX 8			/* generations 0..7 */
#endif
#define CMAX 8			/* counters 0..7 */
#define TOK(g, c) ((g) * CMAX + (c))

typedef Row {
	byte owner;		/* owner_token; 0 = NULL (free) */
	byte gen;		/* fencing_seq >> 40 */
	byte cnt;		/* fencing_seq & (2^40 - 1) */
	byte gtl;		/* grant_timeline (FENCED: its position, POS) */
	byte gsys;		/* cluster of the last grant (see token.pml) */
	byte until;		/* lease_until, on the server clock */
	bool exists;	/* the row is there (not yet created, or reaped) */
};

/*
 * dlock.token_floor: a token state like a row's (token.c dlock_token_rule):
 * the token just below the best next token of the rows a reap deleted, and
 * the history position (gtl) and cluster (gsys) the reap left it at. The
 * floor of nothing is (0, 0, 0); a floor written by hand (the DROP
 * EXTENSION carry-over) has no position: gtl = gsys = 0, unknown history.
 */
typedef Floor {
	byte gen;
	byte cnt;
	byte gtl;
	byte gsys;
};

typedef Db {
	Row row[NN];
	Floor floor;
	byte fence[NN];		/* resource_fence.fencing_token, as TOK() */
	byte fseq[NN];		/* ghost: grant order of the lease that wrote it last */
	byte tl;			/* timeline of the server that wrote this state */
	byte sys;			/* cluster (system identifier) */
#ifdef BUG_SEQUENCE
	byte seq;			/* a global sequence instead of per-row counters */
#endif
#ifdef FENCED
	byte epoch;			/* dlock.token_epoch.epoch */
	bool efenced;		/* dlock.token_epoch.fenced: a life since the last move granted fenced */
#endif
};

Db pri;				/* committed on the primary (what every session sees) */
Db dur;				/* flushed to the primary's WAL: survives a crash */
Db stby;			/* received by the (asynchronous) standby */
#ifdef RESTORES
Db bak;				/* a backup: the flushed state at some earlier moment */
bool have_bak;
#endif

/* Clocks: real time rt; the server clock is rt + off, stepped by the environment */
byte rt;
byte off = STEP;		/* starts at STEP so a backward step stays >= 0 */
#define CLK (rt + off)

byte maxtl = 1;		/* highest timeline of the current cluster (the archive's) */
byte nsys = 1;		/* clusters created so far */

/* Open business transactions pinning a lease with holds() (FOR SHARE) */
byte pins[NN];

#ifdef FENCED
/*
 * The server life (shared memory, gone with every crash, failover or move):
 * whether its first grant has run, which moved the epoch if the previous
 * life was marked fenced. A life is marked when token_epoch.fenced is set
 * after its first grant reset it: only its own first fenced grant sets it.
 */
bool life_started;
#define LIFE_MARKED (life_started && pri.efenced)
/* the epoch the next grant's token is made with (the move not yet written) */
#ifdef BUG_EPOCH_NEVER_MOVED
#define EPOCH_AT_GRANT pri.epoch
#else
#define EPOCH_AT_GRANT (pri.epoch + (!life_started && pri.efenced -> 1 : 0))
#endif
/* more than all epoch moves: a timeline's positions (DLOCK_EPOCHS) */
#define EPW (MAXCRASH + MAXFAIL + MAXNEWCLUSTER + MAXRESTORE + MAXDROP + 1)
/* dlock_token_history: (timeline - 1) * DLOCK_EPOCHS + epoch + 1 */
#define POS(tl, ep) (((tl) - 1) * EPW + (ep) + 1)
/* dlock_history_now: where a reap leaves the floor, never above a later
 * grant's position (this life's epoch, else the newest recorded one) */
#define HISTORY_NOW POS(pri.tl, pri.epoch)
#define GRANT_POS POS(pri.tl, EPOCH_AT_GRANT)
#else
#define GRANT_POS pri.tl
#define HISTORY_NOW pri.tl
#endif

/* dst := src (Promela has no structure assignment); _j is the caller's */
inline copy_db(dst, src)
{
	for (_j : 0 .. NN - 1) {
		dst.row[_j].owner = src.row[_j].owner;
		dst.row[_j].gen = src.row[_j].gen;
		dst.row[_j].cnt = src.row[_j].cnt;
		dst.row[_j].gtl = src.row[_j].gtl;
		dst.row[_j].gsys = src.row[_j].gsys;
		dst.row[_j].until = src.row[_j].until;
		dst.row[_j].exists = src.row[_j].exists;
		dst.fence[_j] = src.fence[_j];
		dst.fseq[_j] = src.fseq[_j]
	}
	dst.floor.gen = src.floor.gen;
	dst.floor.cnt = src.floor.cnt;
	dst.floor.gtl = src.floor.gtl;
	dst.floor.gsys = src.floor.gsys;
#ifdef BUG_SEQUENCE
	dst.seq = src.seq;
#endif
#ifdef FENCED
	dst.epoch = src.epoch;
	dst.efenced = src.efenced;
#endif
	dst.tl = src.tl;
	dst.sys = src.sys
}

#ifdef HOLDERS
/*
 * Holder slots (holder_lease.c): dlock.lock_holder, NS slots per name, each
 * a shared lease with its own owner, token and lease_until, reused from
 * reader to reader; dlock.holder_counter (hcounter), the highest token
 * reserved for the name's slots. A slot issues the tokens of a block of
 * BLOCK reserved at a time (HOLDER_TOKEN_BLOCK, 256 in the extension).
 * Only the primary's committed copy: the holder configuration has no
 * history (crash, failover, restore), see check.sh.
 */
#ifndef WITHOUT_HISTORY
#error "HOLDERS needs WITHOUT_HISTORY: slots are not copied across history events"
#endif
#ifndef NS
#define NS 2			/* slots per name */
#endif
#define BLOCK 2			/* tokens a slot reserves at a time */

typedef Slot {
	byte owner;		/* owner_token; 0 = NULL (free) */
	byte tok;		/* fencing_seq, as TOK(); 0 = never granted */
	byte bend;		/* block_end: last token of the slot's block */
	byte until;		/* lease_until, on the server clock */
	byte pins;		/* open transactions pinning it with holds() (FOR SHARE) */
};

Slot slot[NN * NS];
byte hcounter[NN];
#define SL(n, s) ((n) * NS + (s))

/* ANY_SLOT(c, n, P): P(c, n, s) holds for some slot s of name n */
#if NS == 2
#define ANY_SLOT(c, n, P) (P(c, n, 0) || P(c, n, 1))
#elif NS == 3
#define ANY_SLOT(c, n, P) (P(c, n, 0) || P(c, n, 1) || P(c, n, 2))
#else
#error "NS is 2 or 3"
#endif
#define SLOT_OWNED(c, n, s) (slot[SL(n, s)].owner != 0)
#define SLOT_LIVE(c, n, s) (slot[SL(n, s)].owner != 0 && slot[SL(n, s)].until > CLK)
#define SLOT_PINNED(c, n, s) (slot[SL(n, s)].pins > 0)
#define SLOT_EXPIRED_UNPINNED(c, n, s) (slot[SL(n, s)].owner != 0 && slot[SL(n, s)].until <= CLK && slot[SL(n, s)].pins == 0)
/* REAP_SLOTS (holders.pml stmt_reap_slots): reap deletes idle slots and
 * keeps the counter, which the exclusive grant reads whenever it is there;
 * BUG_COUNTER_ONLY_WITH_SLOTS: only while a slot row of the name is there
 * (1.4), so a reaped reader's token was issued again to a writer */
#if defined(REAP_SLOTS) && defined(BUG_COUNTER_ONLY_WITH_SLOTS)
#define SLOT_ROW(c, n, s) (slot[SL(n, s)].tok != 0)
#define HOLDER_COUNTER_READ(n) && ANY_SLOT(0, n, SLOT_ROW)
#else
#define HOLDER_COUNTER_READ(n)
#endif
#endif
