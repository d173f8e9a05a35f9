/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  How dlock.acquire waits between attempts, and who goes next.
 *
 * Everything about waiting is here, so the strategy can change without
 * touching the lease logic. A waiter holds no row lock and no transaction ID
 * while it sleeps.
 *
 * When pg_dlock is preloaded, waiters queue in shared memory in arrival
 * order, one first-in first-out queue per lock name, much as the lock
 * manager queues PGPROCs on a lock (proc.c). Each lock name hashes to one of
 * WAIT_SLOTS queues; every entry records its name, so names that share a
 * slot keep separate orders. Only the first waiter for a name (its "head")
 * attempts to take the lock; the others sleep until they become the head.
 * Whether its attempt wins or loses, a waiter keeps its place until it
 * leaves with the lock, gives up, or errors out. A dlock.acquire with a
 * non-zero wait joins the queue before its first attempt, so a newcomer
 * never overtakes waiters already queued; dlock.try_acquire and a zero wait
 * never queue and take a free lock at once.
 *
 * Who wakes the head to attempt, and when:
 *	- a transaction that released or force-released a lease, once it has
 *	  committed (before that, the release is invisible);
 *	- a waiter that was granted the lock, if its transaction rolls back (the
 *	  lock is free again);
 *	- a head that leaves without the lock (wait ran out, cancel, error, exit)
 *	  wakes the waiter behind it at once, in case it was woken for nothing.
 * A wake-up sets the waiter's latch and bumps a counter in its entry; the
 * counter, not the latch, says the wake-up happened, because the attempt
 * itself may wait on (and reset) the latch. Wake-ups of a transaction's end
 * are sent once it has released its locks (dlock_wait_resource_release),
 * not at its commit callback, which runs before: the woken head's attempt
 * may need one of them -- the kind lock a permit or shared grant keeps to
 * its transaction's end, above all -- and a head that found it still taken
 * would back off and sleep instead of taking its turn.
 *
 * A head sleeps no longer than until the current lease expires, so an
 * expired lease is taken over promptly when its holder never releases it.
 * It learns the expiry from its own refused attempt, or, when it became the
 * head because the waiter before it was granted the lock, from that waiter,
 * which hands over its new lease's expiry (and sets the latch of the next
 * head if it planned to sleep past it). So a handoff costs one attempt, by
 * the waiter that gets the lock. No sleep of a head lasts more than
 * MAX_HEAD_SLEEP_MS, which bounds the cost of a wake-up that never comes (a
 * release in a prepared transaction committed by another session), and
 * every sleep ends when the caller's wait does.
 *
 * Handoff. A release of any kind that frees what somebody waits for does
 * not just wake the head: just before its transaction commits it grants the
 * lease to the head itself, in the same commit, as the lock manager grants a
 * lock to its first waiter before waking it (proc.c, ProcLockWakeup). Each
 * waiter publishes what a grant needs (DlockHandoff: kind, permits, owner
 * token, ttl, lease policies, holder) in its entry. For an exclusive head,
 * the releasing transaction marks it "offered" with its transaction ID under
 * the queue's mutex and writes the grant on the row it released
 * (dlock_wait_offer_head, lease.c). For a head waiting for a shared lease or
 * a permit (dlock_wait_hand_off_holders), holder_lease.c runs the waiter's
 * own decision and grant; once the grant is certain the waiter is claimed
 * (marked offered), then written, and its token and expiry published. The
 * waiters right behind it are granted the same way while they wait for the
 * same kind and can be granted: readers up to the first waiter of another
 * kind, permit waiters while permits are free. Whoever cannot be granted
 * ends the batch, so nobody is handed a lease before a waiter queued ahead
 * of it. The transaction then commits durably (a grant always does) and
 * wakes the head and every waiter it handed a lease. Each waits for that
 * transaction to end and, once it has committed, returns the lease as
 * published, writing nothing. Not handed, only woken: a session-bound
 * waiter (only its own session can bind the lease) and a multi-lock's waits
 * (dlock_wait_set_begin) (docs/limits.md).
 *
 * A lease handed over must never be lost silently, also when its waiter is
 * gone by the time the grant commits: a waiter that leaves with an offer
 * pending (its wait ran out, cancel, exit) or whose transaction rolls back
 * after it returned a handed lease records that lease as abandoned in its
 * queue -- the name, the handing transaction, the owner token. An attempt
 * that finds a live lease or slot whose row version is exactly that grant
 * treats it as free: the lease was never delivered to anyone (a writer ends
 * such a slot's lease before its grant).
 *
 * Without preloading there is no shared memory: waiters poll, with a short
 * jittered sleep, and no order is kept; a release hands nothing over.
 *
 * IDENTIFICATION
 *	  extension/wait.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "durability.h"
#include "lock_row.h"
#include "wait.h"

PG_FUNCTION_INFO_V1(dlock_waiters);

#define WAIT_SLOTS 1024

/* A lock name and a holder in bytes, at most */
#define MAX_NAME_BYTES (DLOCK_MAX_NAME_CHARS * MAX_MULTIBYTE_CHAR_LEN)
#define MAX_HOLDER_BYTES (DLOCK_MAX_HOLDER_CHARS * MAX_MULTIBYTE_CHAR_LEN)

/* Abandoned handed-over leases remembered per queue, the oldest replaced */
#define ABANDONED_PER_QUEUE 8

/* Longest sleep of a queue's head, and of a waiter behind it */
#define MAX_HEAD_SLEEP_MS 500
#define MAX_QUEUED_SLEEP_MS 1000

/* Longest sleep between attempts without shared memory */
#define MAX_POLL_SLEEP_MS 50

/* No waiter: end of a queue */
#define NO_WAITER (-1)

/*
 * A lease granted by a release to a waiter that never returned it: the row
 * version written by transaction xid for owner.
 */
typedef struct AbandonedLease
{
	TransactionId xid;			/* InvalidTransactionId: empty */
	Oid			dbid;
	uint64		hash;
	pg_uuid_t	owner;
} AbandonedLease;

/* One queue of waiters, in arrival order */
typedef struct WaitQueue
{
	slock_t		mutex;			/* protects the queue, its entries' links and
								 * offers, and abandoned[] */
	int			first;			/* index of the oldest waiter, or NO_WAITER */
	int			last;			/* index of the newest waiter, or NO_WAITER */
	int			next_abandoned; /* slot of abandoned[] to fill next */
	AbandonedLease abandoned[ABANDONED_PER_QUEUE];
} WaitQueue;

/*
 * A backend's entry, indexed by its pgprocno. The name is written by its
 * owner before it joins a queue and read by others only under the mutex.
 */
typedef struct Waiter
{
	int			queue;			/* slot while queued, else NO_WAITER */
	int			prev;
	int			next;
	bool		head;			/* first queued waiter for its name */
	TimestampTz busy_until;		/* expiry of the lease granted before us */
	TimestampTz sleep_until;	/* when the current sleep ends, 0 if awake */
	pg_atomic_uint32 wakeups;	/* counts wake-ups sent to this waiter */
	TransactionId offered_xid;	/* a release that granted us the lease in its
								 * commit, else InvalidTransactionId */
	int64		offered_token;	/* the lease it granted */
	TimestampTz offered_until;
	Oid			dbid;			/* names are per database */
	uint64		hash;
	int			name_len;
	/* what a release needs to grant the lease to this waiter */
	bool		may_hand_off;
	DlockHandoff to;
	char		name[MAX_NAME_BYTES];
} Waiter;

typedef struct DlockWaitShared
{
	int			nwaiters;		/* entries in waiters[] */
	WaitQueue	queues[WAIT_SLOTS];
	Waiter		waiters[FLEXIBLE_ARRAY_MEMBER];
} DlockWaitShared;

static DlockWaitShared *wait_shared = NULL;

/* This backend's entry while it is queued, else NULL */
static Waiter *me = NULL;

/* State of the current dlock.acquire call */
static uint32 seen_wakeups = 0;
static int	turns = 0;			/* calls of wait_turn */
static bool slept = false;

/* Inside a multi-lock's set of grants: its waits are never handed a lease */
static bool in_set = false;

/*
 * Wake-ups this transaction sends when it ends: for a release, at commit;
 * for a grant to a queued waiter, at rollback. nest_level is the
 * subtransaction that did it, so a rolled back subtransaction's share can be
 * settled at once.
 */
typedef struct PendingWakeup
{
	uint64		hash;
	int			nest_level;
	bool		at_commit;		/* a release: wake the head on commit */
	bool		at_abort;		/* a grant: wake the next waiter on rollback */
	text	   *handoff_name;	/* a release: hand the lease over at commit
								 * (in TopMemoryContext), else NULL */
	TransactionId handed_xid;	/* a grant handed over by this transaction's
								 * release: abandon it on rollback */
	pg_uuid_t	handed_owner;
} PendingWakeup;

static PendingWakeup *pending = NULL;
static int	npending = 0;
static int	pending_capacity = 0;

/*
 * Hashes whose heads the ending (sub)transaction wakes once its locks are
 * released.
 */
static uint64 *due = NULL;
static int	ndue = 0;
static int	due_capacity = 0;

/* Hash of a lock name; also picks its queue */
static uint64
name_hash(const char *name, int len)
{
	return dlock_name_hash(name, len);
}

static WaitQueue *
queue_of(uint64 hash)
{
	return &wait_shared->queues[hash % WAIT_SLOTS];
}

static bool
same_name(const Waiter *a, const Waiter *b)
{
	return a->hash == b->hash && a->dbid == b->dbid && a->name_len == b->name_len &&
		memcmp(a->name, b->name, a->name_len) == 0;
}

/* Whether w waits for lock_name of this database */
static bool
waits_for(const Waiter *w, uint64 hash, const char *name, int len)
{
	return w->hash == hash && w->dbid == MyDatabaseId && w->name_len == len &&
		memcmp(w->name, name, len) == 0;
}

/*
 * Take the mutex of lock_name's queue (*q) and return the index of its head,
 * or NO_WAITER; the caller releases the mutex.
 */
static int
lock_head(text *lock_name, WaitQueue **q)
{
	const char *name = VARDATA_ANY(lock_name);
	int			len = VARSIZE_ANY_EXHDR(lock_name);
	uint64		hash = name_hash(name, len);

	*q = queue_of(hash);
	SpinLockAcquire(&(*q)->mutex);
	for (int i = (*q)->first; i != NO_WAITER; i = wait_shared->waiters[i].next)
		if (wait_shared->waiters[i].head && waits_for(&wait_shared->waiters[i], hash, name, len))
			return i;
	return NO_WAITER;
}

/*
 * Remember that the lease transaction xid granted to owner was never
 * returned; caller holds q's mutex.
 */
static void
abandon_lease(WaitQueue *q, Oid dbid, uint64 hash, TransactionId xid, const pg_uuid_t *owner)
{
	AbandonedLease *a = &q->abandoned[q->next_abandoned];

	q->next_abandoned = (q->next_abandoned + 1) % ABANDONED_PER_QUEUE;
	a->xid = xid;
	a->dbid = dbid;
	a->hash = hash;
	a->owner = *owner;
}

/*
 * Count a wake-up for waiters[index]; caller holds its queue's mutex and
 * sets the latch (wake_latch) after releasing it.
 */
static void
count_wakeup(int index)
{
	pg_atomic_fetch_add_u32(&wait_shared->waiters[index].wakeups, 1);
}

static void
wake_latch(int index)
{
	SetLatch(&GetPGProcByNumber(index)->procLatch);
}

/*
 * Wake the head of every queued name with this hash (one name, unless two
 * names' 64-bit hashes collide), and every waiter a release handed a lease
 * (a batch of readers or permits).
 */
static void
wake_heads(uint64 hash)
{
	WaitQueue  *q = queue_of(hash);
	int			woken[64];
	int			nwoken = 0;

	SpinLockAcquire(&q->mutex);
	for (int i = q->first; i != NO_WAITER; i = wait_shared->waiters[i].next)
	{
		Waiter	   *w = &wait_shared->waiters[i];

		if ((w->head || TransactionIdIsValid(w->offered_xid)) && w->hash == hash)
		{
			count_wakeup(i);
			/* beyond 64, the rest see it on their timer */
			if (nwoken < (int) lengthof(woken))
				woken[nwoken++] = i;
		}
	}
	SpinLockRelease(&q->mutex);

	for (int i = 0; i < nwoken; i++)
		wake_latch(woken[i]);
}

/*
 * Wake the heads of hash once the ending transaction or subtransaction has
 * released its locks.
 */
static void
wake_heads_after_locks(uint64 hash)
{
	for (int i = 0; i < ndue; i++)
		if (due[i] == hash)
			return;
	if (ndue == due_capacity)
	{
		due_capacity = Max(8, due_capacity * 2);
		due = due == NULL ?
			MemoryContextAlloc(TopMemoryContext, due_capacity * sizeof(uint64)) :
			repalloc(due, due_capacity * sizeof(uint64));
	}
	due[ndue++] = hash;
}

/*
 * Resource-release callback: once a transaction or subtransaction has
 * released its locks, send the wake-ups its end made due.
 */
void
dlock_wait_resource_release(ResourceReleasePhase phase, bool isCommit,
							bool isTopLevel, void *arg)
{
	int			n = ndue;

	if (phase != RESOURCE_RELEASE_AFTER_LOCKS || n == 0)
		return;
	ndue = 0;
	for (int i = 0; i < n; i++)
		wake_heads(due[i]);
}

/*
 * Take this backend out of its queue; the next waiter for the name becomes
 * the head. Leaving without the lock (granted_until = 0) wakes it to
 * attempt. Leaving with a lease that expires at granted_until hands it that
 * expiry, and sets its latch only if it planned to sleep past it. An offer
 * still standing is abandoned, unless it is taken_offer, the one whose
 * lease the caller took.
 */
static void
leave_queue(TimestampTz granted_until, TransactionId taken_offer)
{
	WaitQueue  *q;
	int			successor = NO_WAITER;
	bool		set_latch = false;

	if (me == NULL)
		return;
	q = &wait_shared->queues[me->queue];

	SpinLockAcquire(&q->mutex);
	if (TransactionIdIsValid(me->offered_xid) &&
		!TransactionIdEquals(me->offered_xid, taken_offer))
	{
		/*
		 * A release is granting us the lease in its commit, or has: leaving
		 * now, we will never return it.
		 */
		abandon_lease(q, me->dbid, me->hash, me->offered_xid, &me->to.owner);
		granted_until = 0;
	}
	me->offered_xid = InvalidTransactionId;
	if (me->head)
	{
		for (int i = me->next; i != NO_WAITER; i = wait_shared->waiters[i].next)
		{
			Waiter	   *w = &wait_shared->waiters[i];

			if (!same_name(w, me))
				continue;
			successor = i;
			w->head = true;
			w->busy_until = granted_until;
			if (granted_until == 0)
			{
				count_wakeup(i);
				set_latch = true;
			}
			else
				set_latch = w->sleep_until == 0 || w->sleep_until > granted_until;
			break;
		}
	}
	if (me->prev == NO_WAITER)
		q->first = me->next;
	else
		wait_shared->waiters[me->prev].next = me->next;
	if (me->next == NO_WAITER)
		q->last = me->prev;
	else
		wait_shared->waiters[me->next].prev = me->prev;
	me->queue = NO_WAITER;
	me->head = false;
	SpinLockRelease(&q->mutex);

	me = NULL;
	if (set_latch)
		wake_latch(successor);
}

/*
 * A backend ended by FATAL (pg_terminate_backend, a lost client) does not
 * unwind to leave_wait: leave the queue on the way out.
 */
static void
wait_exit_callback(int code, Datum arg)
{
	leave_queue(0, InvalidTransactionId);
}

/*
 * Join the tail of lock_name's queue; a release may hand the lease "to"
 * describes to us, unless it is NULL.
 */
static void
join_queue(text *lock_name, const DlockHandoff *to)
{
	static bool exit_callback_registered = false;
	int			index = dlock_my_procno();
	const char *name = VARDATA_ANY(lock_name);
	int			len = VARSIZE_ANY_EXHDR(lock_name);
	Waiter	   *w;
	WaitQueue  *q;

	if (index < 0 || index >= wait_shared->nwaiters)
		return;					/* not a regular backend: poll */
	if (len > MAX_NAME_BYTES)
		elog(ERROR, "pg_dlock: lock name of %d bytes is too long to queue", len);
	if (!exit_callback_registered)
	{
		before_shmem_exit(wait_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}

	w = &wait_shared->waiters[index];
	w->dbid = MyDatabaseId;
	w->hash = name_hash(name, len);
	w->name_len = len;
	memcpy(w->name, name, len);
	w->may_hand_off = to != NULL;
	if (to != NULL)
		w->to = *to;
	w->offered_xid = InvalidTransactionId;
	seen_wakeups = pg_atomic_read_u32(&w->wakeups);
	q = queue_of(w->hash);

	SpinLockAcquire(&q->mutex);
	w->head = true;
	w->busy_until = 0;
	w->sleep_until = 0;
	for (int i = q->first; i != NO_WAITER; i = wait_shared->waiters[i].next)
		if (same_name(&wait_shared->waiters[i], w))
		{
			w->head = false;
			break;
		}
	w->queue = w->hash % WAIT_SLOTS;
	w->next = NO_WAITER;
	w->prev = q->last;
	if (q->last == NO_WAITER)
		q->first = index;
	else
		wait_shared->waiters[q->last].next = index;
	q->last = index;
	SpinLockRelease(&q->mutex);

	me = w;
}

/*
 * When a wait of wait_usecs that starts now ends (the far future for a
 * wait too long to add).
 */
TimestampTz
dlock_wait_deadline(int64 wait_usecs)
{
	TimestampTz now = GetCurrentTimestamp();

	return dlock_time_plus(now, wait_usecs);
}

/*
 * Refuse a wait (wait_usecs > 0) for lock_name in a transaction that keeps
 * its first snapshot: it would never see the lock released. Every kind's
 * acquire calls this before it queues.
 */
void
dlock_wait_require_waitable(text *lock_name, int64 wait_usecs)
{
	if (wait_usecs > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot wait for lock \"%s\" in a REPEATABLE READ or SERIALIZABLE transaction",
						text_to_cstring(lock_name)),
				 errdetail("Such a transaction keeps its first snapshot and would never see the lock released."),
				 errhint("Wait in a READ COMMITTED transaction, or use a zero wait and retry in a new transaction.")));
}

/*
 * Microseconds since started: how long an acquire has waited so far (the
 * wait statistics and what is left of its wait).
 */
static int64
usecs_since(instr_time started)
{
	instr_time	elapsed;

	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, started);
	return INSTR_TIME_GET_MICROSEC(elapsed);
}

/*
 * Writer preference (holder_lease.c): is another caller
 * queued for lock_name ahead of this backend? True when this backend is not
 * the head of the name's queue and someone else waits for the name.
 */
bool
dlock_wait_queued_ahead(text *lock_name)
{
	const char *name = VARDATA_ANY(lock_name);
	int			len = VARSIZE_ANY_EXHDR(lock_name);
	uint64		hash;
	WaitQueue  *q;
	bool		ahead = false;

	if (wait_shared == NULL || (me != NULL && me->head))
		return false;
	hash = name_hash(name, len);
	q = queue_of(hash);
	SpinLockAcquire(&q->mutex);
	for (int i = q->first; i != NO_WAITER && !ahead; i = wait_shared->waiters[i].next)
	{
		Waiter	   *w = &wait_shared->waiters[i];

		if (w != me && waits_for(w, hash, name, len))
			ahead = true;
	}
	SpinLockRelease(&q->mutex);
	return ahead;
}

/*
 * dlock.waiters(lock_name) returns integer
 *
 * How many sessions wait for lock_name in the queue of this database, of
 * every kind; NULL without shared memory (pg_dlock not preloaded), where
 * waiters poll and are queued nowhere. A snapshot: the queue changes as
 * soon as the mutex is released.
 */
Datum
dlock_waiters(PG_FUNCTION_ARGS)
{
	text	   *lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	const char *name = VARDATA_ANY(lock_name);
	int			len = VARSIZE_ANY_EXHDR(lock_name);
	uint64		hash;
	WaitQueue  *q;
	int32		count = 0;

	if (wait_shared == NULL)
		PG_RETURN_NULL();
	hash = name_hash(name, len);
	q = queue_of(hash);
	SpinLockAcquire(&q->mutex);
	for (int i = q->first; i != NO_WAITER; i = wait_shared->waiters[i].next)
		if (waits_for(&wait_shared->waiters[i], hash, name, len))
			count++;
	SpinLockRelease(&q->mutex);
	PG_RETURN_INT32(count);
}

/*
 * Start an acquire call that may wait up to wait_usecs. With shared memory
 * and a non-zero wait, this joins lock_name's queue, before the first
 * attempt, so that a release committed between that attempt and the first
 * sleep still wakes us; a release may then hand us the lease "to"
 * describes (current_offer) -- unless it is NULL, or the call is one name
 * of a multi-lock's set (dlock_wait_set_begin): such a caller is only
 * woken. Call it inside the PG_TRY whose PG_FINALLY calls leave_wait.
 */
static void
prepare_wait(text *lock_name, int64 wait_usecs, const DlockHandoff *to)
{
	leave_queue(0, InvalidTransactionId);	/* never left over, but be sure */
	turns = 0;
	slept = false;
	if (wait_shared != NULL && wait_usecs > 0)
		join_queue(lock_name, in_set ? NULL : to);
}

/*
 * Fill *to with what a release needs to grant an acquire call of kind its
 * lease (permits: a permit's semaphore size; holder may be NULL); the lease
 * policies start empty, for the caller to set.
 */
void
dlock_wait_handoff_of(DlockHandoff *to, DlockLeaseKind kind, int32 permits,
					  const pg_uuid_t *owner, int64 ttl_usecs, text *holder)
{
	memset(to, 0, offsetof(DlockHandoff, holder));
	to->kind = kind;
	to->permits = permits;
	to->owner = *owner;
	to->ttl_usecs = ttl_usecs;
	to->fenced = dlock_grants_fenced();
	to->holder_len = -1;
	if (holder != NULL)
	{
		to->holder_len = Min(VARSIZE_ANY_EXHDR(holder), MAX_HOLDER_BYTES);
		memcpy(to->holder, VARDATA_ANY(holder), to->holder_len);
	}
}

/*
 * A multi-lock (multi_lock.c) is about to take its set name by name: no
 * release hands it one of them. No commit can grant it the whole set --
 * each name is freed by its own release -- and a name handed in another
 * transaction's commit would not roll back with a set that then fails
 * (docs/limits.md). Until dlock_wait_set_end or the transaction's end.
 */
void
dlock_wait_set_begin(void)
{
	in_set = true;
}

void
dlock_wait_set_end(void)
{
	in_set = false;
}

/*
 * The transaction that handed us the lease in its commit, if a release did;
 * else InvalidTransactionId. The offer stands until dlock_wait_offer_settled,
 * or until we leave the queue: with its lease (finish_wait) or
 * without, which abandons it.
 */
static TransactionId
current_offer(void)
{
	WaitQueue  *q;
	TransactionId xid;

	if (me == NULL)
		return InvalidTransactionId;
	q = &wait_shared->queues[me->queue];
	SpinLockAcquire(&q->mutex);
	xid = me->offered_xid;
	SpinLockRelease(&q->mutex);
	return xid;
}

/*
 * The fencing token and expiry of the lease offered to us; call only while
 * current_offer reports the offer.
 */
void
dlock_wait_offered_lease(int64 *token, TimestampTz *until)
{
	WaitQueue  *q = &wait_shared->queues[me->queue];

	SpinLockAcquire(&q->mutex);
	*token = me->offered_token;
	*until = me->offered_until;
	SpinLockRelease(&q->mutex);
}

/*
 * The offer came to nothing: its transaction rolled back, or the lease is
 * not ours any more. (An offer whose lease the caller took ends with
 * finish_wait.)
 */
void
dlock_wait_offer_settled(void)
{
	WaitQueue  *q;

	if (me == NULL)
		return;
	q = &wait_shared->queues[me->queue];
	SpinLockAcquire(&q->mutex);
	me->offered_xid = InvalidTransactionId;
	SpinLockRelease(&q->mutex);
}

/*
 * Offer lock_name's lease, with fencing token "token" and starting at "now",
 * to the head of its queue, on behalf of the current transaction, which is
 * about to commit: on success the head will take the lease this transaction
 * writes for it, and *to says what to write. False when nobody waits, or the
 * head already has an offer.
 */
bool
dlock_wait_offer_head(text *lock_name, int64 token, TimestampTz now, DlockHandoff *to)
{
	WaitQueue  *q;
	int			head;
	bool		offered = false;

	if (wait_shared == NULL)
		return false;
	head = lock_head(lock_name, &q);
	if (head != NO_WAITER)
	{
		Waiter	   *w = &wait_shared->waiters[head];

		if (w->may_hand_off && w->to.kind == LEASE_EXCLUSIVE &&
			!TransactionIdIsValid(w->offered_xid))
		{
			w->offered_xid = GetTopTransactionId();
			w->offered_token = token;
			w->offered_until = dlock_time_plus(now, w->to.ttl_usecs);
			*to = w->to;
			offered = true;
		}
	}
	SpinLockRelease(&q->mutex);
	return offered;
}

/*
 * Whether the longest waiter for lock_name waits for a shared lease or a
 * permit that a release may hand it (dlock_wait_hand_off_holders).
 */
bool
dlock_wait_head_is_holder(text *lock_name)
{
	WaitQueue  *q;
	int			head;
	bool		holder = false;

	if (wait_shared == NULL)
		return false;
	head = lock_head(lock_name, &q);
	if (head != NO_WAITER)
		holder = wait_shared->waiters[head].may_hand_off &&
			wait_shared->waiters[head].to.kind != LEASE_EXCLUSIVE;
	SpinLockRelease(&q->mutex);
	return holder;
}

/* A waiter that a release is about to grant a holder lease (claim_waiter) */
typedef struct HolderClaim
{
	WaitQueue  *q;
	int			index;
	uint64		hash;
	const char *name;
	int			len;
	pg_uuid_t	owner;
	TransactionId xid;
} HolderClaim;

/*
 * The grant for waiter c->index is certain: mark it offered by this
 * transaction, if it still waits as it did when chosen and has no offer.
 * From now on it takes the lease, or abandons it (leave_queue).
 */
static bool
claim_waiter(void *arg)
{
	HolderClaim *c = arg;
	Waiter	   *w = &wait_shared->waiters[c->index];
	bool		claimed;

	SpinLockAcquire(&c->q->mutex);
	claimed = w->queue == (int) (c->hash % WAIT_SLOTS) &&
		waits_for(w, c->hash, c->name, c->len) && w->may_hand_off &&
		memcmp(&w->to.owner, &c->owner, sizeof(pg_uuid_t)) == 0 &&
		!TransactionIdIsValid(w->offered_xid);
	if (claimed)
	{
		w->offered_xid = c->xid;
		w->offered_token = 0;	/* published once written */
		w->offered_until = 0;
	}
	SpinLockRelease(&c->q->mutex);
	return claimed;
}

/*
 * Hand shared leases or permits of lock_name, freed by the current
 * transaction's release, to the longest waiters, in this transaction: called
 * just before it commits (dlock_hand_off). The head must wait for a shared
 * lease or a permit; then the waiters right behind it that wait for the same
 * kind are granted too, in queue order, as long as grant (holder_lease.c)
 * can grant them: every reader up to the first waiter of another kind, as
 * many permit waiters as permits are free. The first waiter that cannot be
 * granted ends the batch, so no waiter is handed a lease before one queued
 * ahead of it. Returns how many were handed a lease; they are woken at the
 * commit with the head.
 */
int
dlock_wait_hand_off_holders(text *lock_name, DlockHolderHandOff grant)
{
	const char *name = VARDATA_ANY(lock_name);
	int			len = VARSIZE_ANY_EXHDR(lock_name);
	uint64		hash;
	WaitQueue  *q;
	TransactionId xid;
	DlockLeaseKind batch = NUM_LEASE_KINDS;
	int			handed = 0;

	if (wait_shared == NULL)
		return 0;
	hash = name_hash(name, len);
	q = queue_of(hash);
	xid = GetTopTransactionId();
	for (;;)
	{
		HolderClaim c;
		DlockHandoff to;
		bool		found = false;
		int64		token;
		TimestampTz until;

		SpinLockAcquire(&q->mutex);
		for (int i = q->first; i != NO_WAITER; i = wait_shared->waiters[i].next)
		{
			Waiter	   *w = &wait_shared->waiters[i];

			if (!waits_for(w, hash, name, len) || TransactionIdEquals(w->offered_xid, xid))
				continue;
			/* the longest waiter not handed a lease yet, if it fits the batch */
			if (w->may_hand_off && w->to.kind != LEASE_EXCLUSIVE &&
				!TransactionIdIsValid(w->offered_xid) &&
				(batch == NUM_LEASE_KINDS ? w->head : w->to.kind == batch))
			{
				c.index = i;
				to = w->to;
				found = true;
			}
			break;
		}
		SpinLockRelease(&q->mutex);
		if (!found)
			break;

		c.q = q;
		c.hash = hash;
		c.name = name;
		c.len = len;
		c.owner = to.owner;
		c.xid = xid;
		if (!grant(lock_name, &to, claim_waiter, &c, &token, &until))
			break;

		/* what the waiter returns once this transaction has committed */
		SpinLockAcquire(&q->mutex);
		if (TransactionIdEquals(wait_shared->waiters[c.index].offered_xid, xid))
		{
			wait_shared->waiters[c.index].offered_token = token;
			wait_shared->waiters[c.index].offered_until = until;
		}
		SpinLockRelease(&q->mutex);
		batch = to.kind;
		handed++;
	}
	return handed;
}

/*
 * Take the lease that transaction "offer" handed us in its commit (see the
 * header comment): wait for it to end -- it was committing when it made the
 * offer -- up to deadline (0: no bound). Returns -1 when the wait ran out
 * first (the caller gives up, which abandons the offer), 0 when there is no
 * lease to take (it rolled back, or the lease expired meanwhile: the offer
 * is settled and the caller attempts as usual), 1 with the lease's token
 * and expiry. Reads and writes no table.
 */
int
dlock_wait_take_offer(TransactionId offer, TimestampTz deadline, int64 *token,
					  TimestampTz *until)
{
	/*
	 * Woken at its commit, it has normally left the proc array already --
	 * after its commit record was flushed and synchronous standbys confirmed
	 * it -- and there is nothing to wait for. A commit that hangs (waiting
	 * for a synchronous standby) is waited for no longer than our own wait.
	 */
	if (TransactionIdIsInProgress(offer) && !dlock_xact_wait(offer, deadline))
		return -1;
	if (!TransactionIdDidCommit(offer))
	{
		dlock_wait_offer_settled();
		return 0;
	}
	dlock_wait_offered_lease(token, until);
	if (*until > GetCurrentTimestamp())
		return 1;
	dlock_wait_offer_settled();
	return 0;
}

/*
 * Whether the live lease of lock_name that transaction xmin granted to owner
 * was handed over to a waiter that never returned it: such a lock is free.
 */
bool
dlock_wait_abandoned(text *lock_name, TransactionId xmin, const pg_uuid_t *owner)
{
	uint64		hash;
	WaitQueue  *q;
	bool		found = false;

	if (wait_shared == NULL || !TransactionIdIsNormal(xmin))
		return false;
	hash = name_hash(VARDATA_ANY(lock_name), VARSIZE_ANY_EXHDR(lock_name));
	q = queue_of(hash);

	SpinLockAcquire(&q->mutex);
	for (int i = 0; i < ABANDONED_PER_QUEUE && !found; i++)
	{
		AbandonedLease *a = &q->abandoned[i];

		found = TransactionIdEquals(a->xid, xmin) && a->hash == hash &&
			a->dbid == MyDatabaseId && memcmp(&a->owner, owner, sizeof(pg_uuid_t)) == 0;
	}
	SpinLockRelease(&q->mutex);
	return found;
}

static int64
random_between(int64 low, int64 high)
{
	if (high <= low)
		return low;
	return dlock_random_range(low, high);
}

/*
 * Sleep on our latch for up to usecs (at least 1 ms); true if it timed out.
 * Raises an error on cancel or statement_timeout.
 */
static bool
sleep_usecs(int64 usecs)
{
	int			rc;

	rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   (long) Max((usecs + 999) / 1000, 1), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	slept = true;
	CHECK_FOR_INTERRUPTS();
	return (rc & WL_TIMEOUT) != 0;
}

/*
 * Without shared memory: sleep a jittered, growing step before the next
 * attempt, never past the current lease's expiry.
 */
static void
poll_sleep(TimestampTz busy_until, int64 remaining_usecs)
{
	int64		step_ms = Min(MAX_POLL_SLEEP_MS, (int64) 2 << Min(turns, 16));
	int64		usecs = random_between(step_ms * 500, step_ms * 1000);

	if (busy_until != 0)
		usecs = Min(usecs, Max(busy_until - GetCurrentTimestamp() + 1000, 1000));
	sleep_usecs(Min(usecs, remaining_usecs));
}

/*
 * Plan the next step of a queued waiter at time now: returns how long to
 * sleep, -1 to attempt now (the head, woken or due), or 0 when the wait ran
 * out before our turn. busy_until is the
 * expiry seen by our own last attempt, if any; otherwise that handed over
 * by the waiter before us is used. The plan is published in our entry, so
 * that a waiter handing over an earlier expiry knows to wake us.
 */
static int64
plan_turn(TimestampTz now, TimestampTz deadline, TimestampTz busy_until,
		  bool attempt_due)
{
	WaitQueue  *q = &wait_shared->queues[me->queue];
	uint32		wakeups = pg_atomic_read_u32(&me->wakeups);
	int64		usecs;

	if (wakeups != seen_wakeups)
	{
		seen_wakeups = wakeups;
		attempt_due = true;
	}

	SpinLockAcquire(&q->mutex);
	if (TransactionIdIsValid(me->offered_xid))
		usecs = -1;				/* take the lease handed to us, even late */
	else if (me->head && (attempt_due || now >= deadline))
		usecs = -1;
	else if (now >= deadline)
		usecs = 0;
	else if (me->head)
	{
		if (busy_until == 0)
			busy_until = me->busy_until;
		usecs = Min(deadline - now, MAX_HEAD_SLEEP_MS * INT64CONST(1000));
		if (busy_until != 0)
			usecs = Min(usecs, busy_until - now + 1000);
		if (usecs <= 0)
			usecs = -1;			/* that lease has expired: attempt */
	}
	else
		usecs = Min(deadline - now, MAX_QUEUED_SLEEP_MS * INT64CONST(1000));
	me->sleep_until = usecs > 0 ? now + usecs : 0;
	SpinLockRelease(&q->mutex);
	return usecs;
}

/*
 * Wait until this caller may make its next attempt. busy_until is when the
 * lease that refused the last attempt expires (0 if unknown or none yet);
 * remaining_usecs is what is left of the caller's wait. Returns false when
 * the wait ran out first: then the caller gives up without another attempt.
 *
 * The first call returns at once unless earlier waiters for the name are
 * queued. A queued waiter attempts only as the head: when woken, when the
 * lease it saw expires, after MAX_HEAD_SLEEP_MS, and once more when its wait
 * runs out. Raises an error on cancel or statement_timeout.
 */
static bool
wait_turn(TimestampTz busy_until, int64 remaining_usecs)
{
	TimestampTz deadline;
	bool		timer_due = false;
	bool		first = turns++ == 0;

	if (me == NULL)
	{
		if (first)
			return true;
		if (remaining_usecs <= 0)
			return false;
		poll_sleep(busy_until, remaining_usecs);
		return true;
	}

	if (!first && remaining_usecs <= 0 && !TransactionIdIsValid(current_offer()))
		return false;
	deadline = dlock_time_plus(GetCurrentTimestamp(), Max(remaining_usecs, 0));
	for (;;)
	{
		int64		usecs = plan_turn(GetCurrentTimestamp(), deadline, busy_until,
									  first || timer_due);

		first = false;
		if (usecs < 0)
			return true;
		if (usecs == 0)
			return false;		/* the wait ran out before our turn */
		timer_due = sleep_usecs(usecs);
	}
}

/*
 * Remember a wake-up to send when the transaction commits (a release) or
 * rolls back (a grant).
 */
static PendingWakeup *
add_pending(uint64 hash, bool grant)
{
	int			level = GetCurrentTransactionNestLevel();
	PendingWakeup *p = NULL;

	for (int i = 0; i < npending && p == NULL; i++)
		if (pending[i].hash == hash && pending[i].nest_level == level &&
			pending[i].handoff_name == NULL && !TransactionIdIsValid(pending[i].handed_xid))
			p = &pending[i];
	if (p == NULL)
	{
		if (npending == pending_capacity)
		{
			pending_capacity = Max(8, pending_capacity * 2);
			pending = pending == NULL ?
				MemoryContextAlloc(TopMemoryContext, pending_capacity * sizeof(PendingWakeup)) :
				repalloc(pending, pending_capacity * sizeof(PendingWakeup));
		}
		p = &pending[npending++];
		p->hash = hash;
		p->nest_level = level;
		p->at_commit = false;
		p->at_abort = false;
		p->handoff_name = NULL;
		p->handed_xid = InvalidTransactionId;
	}
	if (grant)
		p->at_abort = true;
	else
		p->at_commit = true;
	return p;
}

/* Forget the pending wake-ups from index "from" on */
static void
drop_pending(int from)
{
	for (int i = from; i < npending; i++)
		if (pending[i].handoff_name != NULL)
			pfree(pending[i].handoff_name);
	npending = from;
}

/*
 * The call is over (acquired or given up); count the wait if there was one,
 * and time it when it ended with a grant of a lease of this kind.
 * A waiter that got the lock, a lease expiring at lease_until, leaves its
 * queue and hands that expiry to the waiter behind it, which is woken to
 * attempt only if this transaction rolls back. handed_by is the transaction
 * that handed us the lease, if one did: rolling back cannot undo its grant,
 * so it abandons the lease instead.
 */
static void
finish_wait(bool acquired, DlockLeaseKind kind, TimestampTz lease_until,
				  int64 waited_usecs, TransactionId handed_by)
{
	if (me != NULL && acquired)
	{
		PendingWakeup *p = add_pending(me->hash, true);

		if (TransactionIdIsValid(handed_by))
		{
			p->handed_xid = handed_by;
			p->handed_owner = me->to.owner;
		}
		leave_queue(lease_until, handed_by);
	}
	if (slept || turns > 1)
	{
		dlock_count(STAT_WAITS, 1);
		dlock_count(STAT_WAIT_USECS, (uint64) waited_usecs);
		if (acquired)
			dlock_observe(HISTOGRAM_WAIT, kind, waited_usecs);
	}
}

/*
 * Leave the queue if still in it, waking the waiter behind. Callers use it
 * in PG_FINALLY, so an error or cancel during the wait cannot leave a
 * waiter queued, nor swallow a wake-up meant for the next one.
 */
static void
leave_wait(void)
{
	leave_queue(0, InvalidTransactionId);
}

/*
 * The turns of dlock_wait_for_grant: take a lease a release handed over, if
 * any, or else make one attempt, until granted or the wait runs out.
 * Returns true when granted; then the queue has been left with the lease.
 */
static bool
take_turns(const DlockWaitCall *call)
{
	bool		granted = false;
	TimestampTz busy_until = 0;
	int64		waited_usecs = 0;
	TransactionId handed_by = InvalidTransactionId;
	instr_time	started;

	INSTR_TIME_SET_CURRENT(started);

	/*
	 * Callers already waiting for this lock go first, in arrival order;
	 * wait_turn says when it is our turn to attempt, or when a release has
	 * handed us the lease.
	 */
	prepare_wait(call->lock_name, call->wait_usecs, call->handoff);
	while (wait_turn(busy_until, call->wait_usecs - waited_usecs))
	{
		TransactionId offer = current_offer();

		/* only a caller that gave an owner is made offers */
		if (TransactionIdIsValid(offer) && call->take_offer != NULL)
		{
			/* the offer's commit outlasted our wait: give up, abandoning it */
			if (!call->take_offer(call->arg, offer, &granted))
				break;
			if (granted)
			{
				handed_by = offer;
				break;
			}
		}
		if (call->attempt(call->arg, &busy_until))
		{
			/*
			 * An offer made meanwhile was for the lease just taken (the
			 * attempt found it ours): a rollback must abandon it.
			 */
			granted = true;
			handed_by = current_offer();
			break;
		}
		waited_usecs = usecs_since(started);
	}
	finish_wait(granted, call->kind,
				granted && call->granted_until ? call->granted_until(call->arg) : 0,
				usecs_since(started), handed_by);
	return granted;
}

/*
 * The wait of every kind's acquire call: queue for call->lock_name and take
 * turns until granted or the wait runs out. Returns true when granted. The
 * wait is counted and timed; the queue is left on every way out (an error,
 * a cancel), so that no wake-up meant for the next waiter is lost.
 */
bool
dlock_wait_for_grant(const DlockWaitCall *call)
{
	bool		acquired = false;

	PG_TRY();
	{
		acquired = take_turns(call);
	}
	PG_CATCH();
	{
		leave_wait();
		PG_RE_THROW();
	}
	PG_END_TRY();
	leave_wait();
	return acquired;
}

/*
 * Wake the head of lock_name's queue once the current transaction commits.
 */
void
dlock_wake_waiters(text *lock_name)
{
	if (wait_shared != NULL)
		(void) add_pending(name_hash(VARDATA_ANY(lock_name), VARSIZE_ANY_EXHDR(lock_name)),
						   false);
}

/*
 * Like dlock_wake_waiters, for a release: just before the transaction
 * commits, dlock_wait_pre_commit hands the lease to the head of the queue,
 * if the lock is still free then and somebody waits.
 */
void
dlock_hand_off_at_commit(text *lock_name)
{
	PendingWakeup *p;

	if (wait_shared == NULL)
		return;
	p = add_pending(name_hash(VARDATA_ANY(lock_name), VARSIZE_ANY_EXHDR(lock_name)), false);
	if (p->handoff_name == NULL)
	{
		Size		size = VARSIZE_ANY(lock_name);

		p->handoff_name = MemoryContextAlloc(TopMemoryContext, size);
		memcpy(p->handoff_name, lock_name, size);
	}
}

/*
 * Whether anybody waits for lock_name; a waiter arriving just after the
 * answer is woken at commit instead, and attempts.
 */
static bool
has_head(text *lock_name)
{
	WaitQueue  *q;
	bool		found = lock_head(lock_name, &q) != NO_WAITER;

	SpinLockRelease(&q->mutex);
	return found;
}

/*
 * A lease handed to this transaction is given up by its rollback.
 */
static void
record_abandoned(PendingWakeup *p)
{
	WaitQueue  *q = queue_of(p->hash);

	SpinLockAcquire(&q->mutex);
	abandon_lease(q, MyDatabaseId, p->hash, p->handed_xid, &p->handed_owner);
	SpinLockRelease(&q->mutex);
}

/*
 * At pre-commit of a top-level transaction: the next lock this transaction
 * released whose lease is to be handed over to its longest waiter, from
 * pending entry *cursor on (start at 0); NULL when there is none left. The
 * transaction-end callback (pg_dlock.c) hands each over before it decides
 * how the transaction commits; a handoff may add entries, which are seen.
 */
text *
dlock_wait_next_handoff(int *cursor)
{
	while (*cursor < npending)
	{
		PendingWakeup *p = &pending[(*cursor)++];

		if (p->at_commit && p->handoff_name != NULL && has_head(p->handoff_name))
			return p->handoff_name;
	}
	return NULL;
}

/*
 * Wake the head of the queue of the lock name of len bytes at once, outside
 * any transaction (lease_policy.c: a session-bound holder's session ends).
 */
void
dlock_wake_waiters_now(const char *name, int len)
{
	if (wait_shared != NULL)
		wake_heads(name_hash(name, len));
}

void
dlock_wait_xact_end(XactEvent event)
{
	bool		commit = event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT;
	bool		abort = event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT;

	if (commit || abort)
		in_set = false;			/* a set's call that errored out */
	if (npending == 0)
		return;
	if (commit || abort)
		for (int i = 0; i < npending; i++)
		{
			PendingWakeup *p = &pending[i];

			if (abort && TransactionIdIsValid(p->handed_xid))
				record_abandoned(p);
			/* an aborted release wakes a head it may have made an offer to */
			if (commit ? p->at_commit : (p->at_abort || p->handoff_name != NULL))
				wake_heads_after_locks(p->hash);
		}

	/*
	 * A prepared transaction's releases wake nobody: the waiters find out on
	 * their timer.
	 */
	if (commit || abort || event == XACT_EVENT_PREPARE)
		drop_pending(0);

}

/*
 * A subtransaction's wake-ups move to its parent when it commits; when it
 * rolls back, its grants are undone, so the next waiters are woken now.
 */
void
dlock_wait_subxact_end(SubXactEvent event)
{
	int			level = GetCurrentTransactionNestLevel();
	int			kept = 0;

	if (event == SUBXACT_EVENT_ABORT_SUB)
		in_set = false;			/* a set's call that errored out */
	if (npending == 0 ||
		(event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB))
		return;
	for (int i = 0; i < npending; i++)
	{
		PendingWakeup p = pending[i];

		if (p.nest_level >= level)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
			{
				if (TransactionIdIsValid(p.handed_xid))
					record_abandoned(&p);
				if (p.at_abort)
					wake_heads_after_locks(p.hash);
				if (p.handoff_name != NULL)
					pfree(p.handoff_name);
				continue;
			}
			p.nest_level = level - 1;
		}
		pending[kept++] = p;
	}
	npending = kept;
}

/* Backends that can queue: the regular ones, whose pgprocno < MaxBackends */
static int
queue_entries(void)
{
	return dlock_max_backends();
}

Size
dlock_wait_shmem_size(void)
{
	return MAXALIGN(add_size(offsetof(DlockWaitShared, waiters),
							 mul_size(queue_entries(), sizeof(Waiter))));
}

/*
 * Create or attach to the queues; caller holds AddinShmemInitLock.
 */
void
dlock_wait_shmem_init(void)
{
	bool		found;

	wait_shared = ShmemInitStruct("pg_dlock waiters", dlock_wait_shmem_size(), &found);
	if (!found)
	{
		wait_shared->nwaiters = queue_entries();
		for (int i = 0; i < WAIT_SLOTS; i++)
		{
			SpinLockInit(&wait_shared->queues[i].mutex);
			wait_shared->queues[i].first = NO_WAITER;
			wait_shared->queues[i].last = NO_WAITER;
		}
		for (int i = 0; i < WAIT_SLOTS; i++)
		{
			wait_shared->queues[i].next_abandoned = 0;
			for (int j = 0; j < ABANDONED_PER_QUEUE; j++)
				wait_shared->queues[i].abandoned[j].xid = InvalidTransactionId;
		}
		for (int i = 0; i < wait_shared->nwaiters; i++)
		{
			wait_shared->waiters[i].queue = NO_WAITER;
			wait_shared->waiters[i].head = false;
			wait_shared->waiters[i].offered_xid = InvalidTransactionId;
			pg_atomic_init_u32(&wait_shared->waiters[i].wakeups, 0);
		}
	}
}

