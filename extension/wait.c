/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  How dlock.acquire waits between attempts.
 *
 * Everything about waiting is here, so the strategy can change without
 * touching the lease logic. A waiter holds no row lock and no transaction ID
 * while it sleeps; it only retries.
 *
 * When pg_dlock is preloaded, each lock name hashes to one of WAIT_SLOTS
 * condition variables in shared memory. A transaction that released or
 * force-released a lease signals its slot once it has committed (not before:
 * the release is invisible until then). Signalling wakes one waiter, the one
 * that has waited longest, so a handoff costs one wake-up rather than one
 * per waiter. The slot records which name was released; a waiter for another
 * name that shares the slot hands the signal on (once per release, so the
 * hand-over cannot go round for ever).
 * Without preloading, waiters poll.
 *
 * For fairness, a new dlock.acquire call that finds others already waiting on
 * its slot lets them go first (dlock_wait_defer) instead of trying at once;
 * dlock.try_acquire never waits and takes a free lock at once. Either way a sleep is short and jittered,
 * and never runs past the moment the current lease expires, so an expired
 * lease is taken over promptly even if its holder never releases it.
 *
 * IDENTIFICATION
 *	  extension/wait.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#if PG_VERSION_NUM >= 140000
#include "utils/wait_event.h"
#else
#include "pgstat.h"
#endif
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#endif

#include "pg_dlock.h"

#define WAIT_SLOTS 1024

/* Longest single sleep, with and without wake-ups on release */
#define MAX_SLEEP_NOTIFIED_MS 500
#define MAX_SLEEP_POLLING_MS 50

/* Longest a newcomer defers to callers already waiting */
#define MAX_DEFER_MS 10

typedef struct DlockWaitSlot
{
	ConditionVariable cv;		/* signalled when a lease of the slot ends */
	pg_atomic_uint32 waiters;	/* dlock.acquire calls waiting on the slot */
	pg_atomic_uint32 released_hash; /* name hash of the last release, 0 = any */
	pg_atomic_uint32 released_seq;	/* counts releases on the slot */
} DlockWaitSlot;

typedef struct DlockWaitShared
{
	DlockWaitSlot slots[WAIT_SLOTS];
} DlockWaitShared;

static DlockWaitShared *wait_shared = NULL;

/* Whether this backend is counted in a slot's waiters */
static bool joined = false;

/* Name hash this backend waits for, and the last release it handed on */
static uint32 waiting_hash = 0;
static uint32 handed_on_seq = 0;

/* Whether the current wait ended with the lock acquired */
static bool wait_acquired = false;

/* Slots this transaction must wake up when it commits, with the name hash */
static uint64 pending_wakeups[WAIT_SLOTS / 64];
static uint32 pending_hash[WAIT_SLOTS];
static bool any_pending_wakeup = false;

/* Hash of a lock name, never 0 (0 means "any name" in released_hash) */
static uint32
name_hash(text *lock_name)
{
	uint32		hash = hash_bytes((const unsigned char *) VARDATA_ANY(lock_name),
								  VARSIZE_ANY_EXHDR(lock_name));

	return hash == 0 ? 1 : hash;
}

static int
wait_slot(text *lock_name)
{
	return name_hash(lock_name) % WAIT_SLOTS;
}

static int64
random_between(int64 low, int64 high)
{
	if (high <= low)
		return low;
#if PG_VERSION_NUM >= 150000
	return (int64) pg_prng_uint64_range(&pg_global_prng_state, low, high);
#else
	return low + random() % (high - low + 1);
#endif
}

/*
 * Get ready to wait for lock_name; returns the slot to pass to
 * dlock_wait_sleep. Called before the first attempt, so that a release
 * committed between an attempt and the sleep still wakes us.
 */
int
dlock_wait_prepare(text *lock_name)
{
	int			slot = wait_slot(lock_name);

	waiting_hash = name_hash(lock_name);
	wait_acquired = false;
	if (wait_shared != NULL)
	{
		handed_on_seq = pg_atomic_read_u32(&wait_shared->slots[slot].released_seq);
		ConditionVariablePrepareToSleep(&wait_shared->slots[slot].cv);
	}
	return slot;
}

/*
 * Sleep on the slot's condition variable for up to timeout_ms. A signal
 * that was meant for another name of the slot is handed on to the next
 * waiter, and the sleep goes on.
 */
static void
sleep_on_slot(int slot, int64 timeout_ms)
{
	DlockWaitSlot *s = &wait_shared->slots[slot];
	instr_time	start;

	INSTR_TIME_SET_CURRENT(start);
	for (;;)
	{
		instr_time	elapsed;
		int64		left_ms;
		uint32		seq;
		uint32		released;

		if (ConditionVariableTimedSleep(&s->cv, timeout_ms, PG_WAIT_EXTENSION))
			return;				/* timed out */
		seq = pg_atomic_read_u32(&s->released_seq);
		pg_read_barrier();
		released = pg_atomic_read_u32(&s->released_hash);
		if (released == 0 || released == waiting_hash || seq == handed_on_seq)
			return;				/* ours, or not a release: try again */
		handed_on_seq = seq;
		ConditionVariableSignal(&s->cv);
		CHECK_FOR_INTERRUPTS();

		INSTR_TIME_SET_CURRENT(elapsed);
		INSTR_TIME_SUBTRACT(elapsed, start);
		left_ms = timeout_ms - (int64) INSTR_TIME_GET_MILLISEC(elapsed);
		if (left_ms <= 0)
			return;
		timeout_ms = left_ms;
	}
}

/*
 * Whether other dlock.acquire calls are waiting on the slot (possibly for
 * another name with the same hash: then deferring costs at most
 * MAX_DEFER_MS). Always false without shared memory.
 */
bool
dlock_wait_others_waiting(int slot)
{
	return wait_shared != NULL &&
		pg_atomic_read_u32(&wait_shared->slots[slot].waiters) > 0;
}

/* Slot this backend is counted in, while joined */
static int	joined_slot = -1;

/*
 * A backend ended by FATAL (pg_terminate_backend, a lost client) does not
 * unwind to dlock_wait_leave: uncount it on the way out.
 */
static void
wait_exit_callback(int code, Datum arg)
{
	dlock_wait_leave(joined_slot);
}

/*
 * Count this backend among the slot's waiters until dlock_wait_leave.
 */
void
dlock_wait_join(int slot)
{
	static bool exit_callback_registered = false;

	if (wait_shared == NULL || joined)
		return;
	if (!exit_callback_registered)
	{
		before_shmem_exit(wait_exit_callback, (Datum) 0);
		exit_callback_registered = true;
	}
	pg_atomic_fetch_add_u32(&wait_shared->slots[slot].waiters, 1);
	joined_slot = slot;
	joined = true;
}

/*
 * Stop counting this backend among the slot's waiters; safe to call when
 * not counted. Callers use it in PG_FINALLY, so an error or cancel during
 * the wait cannot leave a phantom waiter behind.
 */
void
dlock_wait_leave(int slot)
{
	if (!joined)
		return;
	Assert(slot == joined_slot);
	pg_atomic_fetch_sub_u32(&wait_shared->slots[joined_slot].waiters, 1);
	joined = false;

	/*
	 * A signal this backend received but did not use (it gave up, or was
	 * cancelled, before acquiring) must not be lost to the others. Waking one
	 * more waiter than needed costs one attempt.
	 */
	if (!wait_acquired &&
		pg_atomic_read_u32(&wait_shared->slots[joined_slot].waiters) > 0)
		ConditionVariableSignal(&wait_shared->slots[joined_slot].cv);
}

/*
 * Let earlier waiters go first: sleep until the next release on the slot,
 * at most MAX_DEFER_MS and at most remaining_usecs.
 */
void
dlock_wait_defer(int slot, int64 remaining_usecs)
{
	int64		sleep_ms = Min(MAX_DEFER_MS, remaining_usecs / 1000);

	if (wait_shared != NULL && sleep_ms > 0)
		sleep_on_slot(slot, sleep_ms);
	CHECK_FOR_INTERRUPTS();
}

/*
 * Sleep before attempt number round + 1. busy_until is when the current
 * lease expires (0 if unknown); remaining_usecs is what is left of the
 * caller's wait. Returns early on a release broadcast, and raises an error
 * on cancel or statement_timeout.
 */
void
dlock_wait_sleep(int slot, TimestampTz busy_until, int64 remaining_usecs, int round)
{
	int64		max_ms = wait_shared ? MAX_SLEEP_NOTIFIED_MS : MAX_SLEEP_POLLING_MS;
	int64		step_ms = Min(max_ms, (int64) 2 << Min(round, 16));
	int64		sleep_usecs = random_between(step_ms * 500, step_ms * 1000);

	if (busy_until != 0)
	{
		int64		until_expiry = busy_until - GetCurrentTimestamp() + 1000;

		sleep_usecs = Min(sleep_usecs, Max(until_expiry, 1000));
	}
	sleep_usecs = Min(sleep_usecs, remaining_usecs);
	sleep_usecs = Max(sleep_usecs, 1000);

	if (wait_shared != NULL)
		sleep_on_slot(slot, sleep_usecs / 1000);
	else
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_usecs / 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
}

/*
 * The wait is over (acquired or given up); count it if there was one.
 */
void
dlock_wait_finish(bool acquired, bool waited, int64 waited_usecs)
{
	wait_acquired = acquired;
	if (wait_shared != NULL)
		(void) ConditionVariableCancelSleep();
	if (waited)
	{
		dlock_count(STAT_WAITS, 1);
		dlock_count(STAT_WAIT_USECS, (uint64) waited_usecs);
	}
}

/*
 * Wake the waiters for lock_name once the current transaction commits.
 */
void
dlock_wake_waiters(text *lock_name)
{
	uint32		hash = name_hash(lock_name);
	int			slot = hash % WAIT_SLOTS;
	uint64		bit = UINT64CONST(1) << (slot % 64);

	if (wait_shared == NULL)
		return;
	/* two names of one slot in one transaction: wake every waiter */
	if ((pending_wakeups[slot / 64] & bit) && pending_hash[slot] != hash)
		hash = 0;
	pending_wakeups[slot / 64] |= bit;
	pending_hash[slot] = hash;
	any_pending_wakeup = true;
}

static void
wait_xact_callback(XactEvent event, void *arg)
{
	if (!any_pending_wakeup)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		for (int word = 0; word < WAIT_SLOTS / 64; word++)
			for (int bit = 0; bit < 64 && pending_wakeups[word] != 0; bit++)
				if (pending_wakeups[word] & (UINT64CONST(1) << bit))
				{
					int			slot = word * 64 + bit;
					DlockWaitSlot *s = &wait_shared->slots[slot];

					pg_atomic_write_u32(&s->released_hash, pending_hash[slot]);
					pg_write_barrier();
					pg_atomic_fetch_add_u32(&s->released_seq, 1);
					if (pending_hash[slot] == 0)
						ConditionVariableBroadcast(&s->cv);
					else
						ConditionVariableSignal(&s->cv);
					pending_wakeups[word] &= ~(UINT64CONST(1) << bit);
				}
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		memset(pending_wakeups, 0, sizeof(pending_wakeups));
		any_pending_wakeup = false;
	}
}

Size
dlock_wait_shmem_size(void)
{
	return MAXALIGN(sizeof(DlockWaitShared));
}

/*
 * Create or attach to the condition variables; caller holds
 * AddinShmemInitLock.
 */
void
dlock_wait_shmem_init(void)
{
	bool		found;

	wait_shared = ShmemInitStruct("pg_dlock waiters", sizeof(DlockWaitShared), &found);
	if (!found)
		for (int i = 0; i < WAIT_SLOTS; i++)
		{
			ConditionVariableInit(&wait_shared->slots[i].cv);
			pg_atomic_init_u32(&wait_shared->slots[i].waiters, 0);
			pg_atomic_init_u32(&wait_shared->slots[i].released_hash, 0);
			pg_atomic_init_u32(&wait_shared->slots[i].released_seq, 0);
		}
}

/*
 * Called from _PG_init.
 */
void
dlock_wait_init(void)
{
	RegisterXactCallback(wait_xact_callback, NULL);
}
