/*-------------------------------------------------------------------------
 *
 * session_lease.c
 *	  Session identity for session-bound leases: which database session took
 *	  a lease, whether it is still connected, and when it ended.
 *
 * A session-bound lease row records the session that took it as a 64-bit
 * session ID (and the backend's process ID, for people). The ID is the
 * backend's PGPROC number in its low 24 bits and a random number above
 * them, so it names one session, never the next backend that gets the same
 * PGPROC or process ID. Shared memory keeps one slot per PGPROC number:
 * the session ID of the backend that registered there, when it registered,
 * and when it ended (0 while connected).
 *
 * A session is alive when its slot still holds its ID and no end time. The
 * end time is exact when the backend exited through proc_exit (disconnect,
 * pg_terminate_backend, FATAL): the exit callback records it and wakes the
 * waiters of every name the session took a session-bound lease on. When the
 * slot holds another session's ID, the session ended before that one
 * registered; when it holds none, before shared memory was initialised --
 * after a crash restart every slot is empty, so every session-bound lease
 * taken before the crash is free at once. Those upper bounds are what a
 * lock delay counts from (README "Lease policies").
 *
 * Needs pg_dlock in shared_preload_libraries; acquire refuses session_bound
 * without it.
 *
 * IDENTIFICATION
 *	  extension/session_lease.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "session_lease.h"
#include "wait.h"

#define PROCNO_BITS 24
#define PROCNO_MASK ((UINT64CONST(1) << PROCNO_BITS) - 1)

/* Names whose waiters this session wakes when it ends, at most */
#define MAX_BOUND_NAMES 64

typedef struct SessionSlot
{
	slock_t		mutex;
	uint64		session_id;		/* 0: no session registered since start */
	TimestampTz registered_at;
	TimestampTz ended_at;		/* 0 while the session is connected */
} SessionSlot;

typedef struct SessionShared
{
	TimestampTz initialized_at; /* sessions from before ended by then */
	int			nslots;
	SessionSlot slots[FLEXIBLE_ARRAY_MEMBER];
} SessionShared;

static SessionShared *session_shared = NULL;

/* This backend's session ID once it took a session-bound lease, else 0 */
static uint64 my_session_id = 0;

/* Names of this session's session-bound leases (lock_name bytes) */
static char *bound_names[MAX_BOUND_NAMES];
static int	bound_name_lens[MAX_BOUND_NAMES];
static int	nbound_names = 0;

static int
session_slots(void)
{
	return dlock_max_backends();
}

Size
dlock_session_shmem_size(void)
{
	return MAXALIGN(add_size(offsetof(SessionShared, slots),
							 mul_size(session_slots(), sizeof(SessionSlot))));
}

/*
 * Create or attach to the slots; caller holds AddinShmemInitLock.
 */
void
dlock_session_shmem_init(void)
{
	bool		found;

	session_shared = ShmemInitStruct("pg_dlock sessions", dlock_session_shmem_size(), &found);
	if (!found)
	{
		session_shared->initialized_at = GetCurrentTimestamp();
		session_shared->nslots = session_slots();
		for (int i = 0; i < session_shared->nslots; i++)
		{
			SpinLockInit(&session_shared->slots[i].mutex);
			session_shared->slots[i].session_id = 0;
			session_shared->slots[i].registered_at = 0;
			session_shared->slots[i].ended_at = 0;
		}
	}
}

/*
 * Refuse a session-bound lease where it cannot be one: without shared
 * memory, or in a process that is not a client's backend.
 */
void
dlock_session_check_usable(void)
{
	if (session_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("session-bound leases need pg_dlock in shared_preload_libraries"),
				 errhint("Add pg_dlock to shared_preload_libraries and restart the server.")));
	if (!AmRegularBackendProcess() || MyProc == NULL ||
		dlock_my_procno() < 0 || dlock_my_procno() >= session_shared->nslots)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot take a session-bound lease in a %s process",
						GetBackendTypeDesc(MyBackendType)),
				 errdetail("A session-bound lease ends with the client session that took it; this process has none.")));
}

/*
 * On the way out (disconnect, pg_terminate_backend, FATAL): record when the
 * session ended, then wake the waiters of its names so they take over at
 * once. An on_shmem_exit callback, so it runs after the before_shmem_exit
 * ones, among them the abort of an open transaction (ShutdownPostgres): a
 * woken waiter finds no row lock of ours left.
 */
static void
session_exit_callback(int code, Datum arg)
{
	SessionSlot *slot = &session_shared->slots[my_session_id & PROCNO_MASK];

	SpinLockAcquire(&slot->mutex);
	if (slot->session_id == my_session_id)
		slot->ended_at = GetCurrentTimestamp();
	SpinLockRelease(&slot->mutex);

	for (int i = 0; i < nbound_names; i++)
		dlock_wake_waiters_now(bound_names[i], bound_name_lens[i]);
}

/*
 * This session's ID, registering the session on first use; lock_name is
 * remembered so its waiters are woken when the session ends. The caller
 * has checked dlock_session_check_usable.
 */
int64
dlock_session_bind(text *lock_name)
{
	const char *name = VARDATA_ANY(lock_name);
	int			len = VARSIZE_ANY_EXHDR(lock_name);

	if (my_session_id == 0)
	{
		SessionSlot *slot = &session_shared->slots[dlock_my_procno()];
		uint64		random_part;

		do
		{
			if (!pg_strong_random(&random_part, sizeof(random_part)))
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("could not generate a random session ID")));
			/* positive as a bigint, never 0 */
			random_part &= PG_INT64_MAX >> PROCNO_BITS;
		} while (random_part == 0);

		SpinLockAcquire(&slot->mutex);
		slot->session_id = (random_part << PROCNO_BITS) | (uint64) dlock_my_procno();
		slot->registered_at = GetCurrentTimestamp();
		slot->ended_at = 0;
		SpinLockRelease(&slot->mutex);
		my_session_id = slot->session_id;
		on_shmem_exit(session_exit_callback, (Datum) 0);
	}

	for (int i = 0; i < nbound_names; i++)
		if (bound_name_lens[i] == len && memcmp(bound_names[i], name, len) == 0)
			return (int64) my_session_id;
	/* beyond the bound, waiters of further names find out on their timer */
	if (nbound_names < MAX_BOUND_NAMES)
	{
		bound_names[nbound_names] = MemoryContextAlloc(TopMemoryContext, Max(len, 1));
		memcpy(bound_names[nbound_names], name, len);
		bound_name_lens[nbound_names++] = len;
	}
	return (int64) my_session_id;
}

/*
 * Has session session_id ended? If so, *ended_at is when, or the latest
 * time it can have ended by. Without shared memory no session is known to
 * have ended.
 */
bool
dlock_session_ended(int64 session_id, TimestampTz *ended_at)
{
	uint64		id = (uint64) session_id;
	SessionSlot *slot;
	bool		ended;

	if (session_shared == NULL)
		return false;
	if ((id & PROCNO_MASK) >= (uint64) session_shared->nslots)
	{
		/* a slot this server does not have: fewer backends since a restart */
		*ended_at = session_shared->initialized_at;
		return true;
	}
	slot = &session_shared->slots[id & PROCNO_MASK];
	SpinLockAcquire(&slot->mutex);
	if (slot->session_id == id)
	{
		ended = slot->ended_at != 0;
		*ended_at = slot->ended_at;
	}
	else
	{
		ended = true;
		*ended_at = slot->session_id != 0 ? slot->registered_at :
			session_shared->initialized_at;
	}
	SpinLockRelease(&slot->mutex);
	return ended;
}
