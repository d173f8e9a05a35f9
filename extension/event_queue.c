/*-------------------------------------------------------------------------
 *
 * event_queue.c
 *	  The lock event queue: transactions hand their lock events over after
 *	  commit, and a sender process per database sends them as notifications.
 *
 * A transaction that notifies by itself (NOTIFY, Async_Notify) takes a
 * cluster-wide heavyweight lock in PreCommit_Notify and holds it through the
 * flush of its commit record, so notifying transactions commit one at a
 * time. With an event on every grant and release, that serialized the
 * commits of all lock traffic (README "Events", bench case 7). Instead, a
 * transaction with lock events copies them into a ring in shared memory,
 * and a sender -- a background worker connected to the transaction's
 * database, since a notification reaches only the listeners of the
 * notifier's database -- sends them in batches, one short transaction per
 * batch. Only the sender pays the notification lock, once per batch.
 *
 * Order. A transaction reserves its record when it is about to commit
 * (XACT_EVENT_PRE_COMMIT), marks it committed once it has committed, or done
 * (sending nothing) if it aborts; a sender sends its database's committed
 * records in ring order and stops at the first one still reserved. Two
 * transactions that change one lock row one after the other reserve in that
 * order: the second cannot see the row before the first has committed, which
 * is after the first reserved. So the events of one lock name arrive in
 * commit order. The price: a record still reserved (a commit waiting for its
 * flush, or for a synchronous standby) holds back its database's later
 * events until that commit ends.
 *
 * Full queue. A transaction whose events do not fit drops them all: a lock
 * operation never waits or fails because of its events. Drops are counted
 * (STAT_EVENTS_DROPPED) and logged at most once a minute. A batch that the
 * sender cannot send (PostgreSQL's notification queue is full because a
 * listener stopped reading) is dropped and counted the same way.
 *
 * Senders. Up to MAX_EVENT_SENDERS databases have one at a time. The
 * committing backend starts its database's sender when none runs (a dynamic
 * background worker); a sender exits after SENDER_LINGER_MS without events,
 * so that it does not hold up DROP DATABASE for long. A sender that cannot
 * connect to its database (dropped meanwhile) drops that database's events.
 * A sender also starts the sender of another database whose committed
 * events it finds waiting with no sender, so a failed start is retried.
 *
 * Locking: queue_lock (one LWLock) protects the head, the tail, every record
 * header and the sender slots. A record's payloads are written outside it
 * while the record is reserved, and read by its sender once it is committed.
 *
 * IDENTIFICATION
 *	  extension/event_queue.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <sys/mman.h>
#include <unistd.h>

#include "access/xact.h"
#include "commands/async.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "stats.h"
#include "event_queue.h"

PGDLLEXPORT void dlock_event_sender_main(Datum main_arg);

/* Databases that can have a sender at the same time */
#define MAX_EVENT_SENDERS 8

/* A sender exits after this long without events */
#define SENDER_LINGER_MS 1000

/*
 * While events keep coming (one at least every SENDER_POLL_KEEP_MS), a
 * sender looks at the queue every SENDER_POLL_MS instead of being woken by
 * every commit: the wake-up (a signal, and a process switch) cost a
 * committing backend and the sender more than sending the event itself.
 */
#define SENDER_POLL_MS 1
#define SENDER_POLL_KEEP_MS 100

/* A sender registered this long ago that has not attached is presumed lost */
#define SENDER_START_TIMEOUT_USECS (10 * USECS_PER_SEC)

/* Most notifications a sender sends in one transaction */
#define SENDER_BATCH_EVENTS 1000

/* A full queue is logged at most this often */
#define QUEUE_FULL_LOG_USECS (60 * USECS_PER_SEC)

/* Records start at multiples of this, so a record header always fits */
#define RECORD_ALIGN 16

/* Linux 5.14; older kernels refuse it (EINVAL), and faults do the work */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

typedef enum EventRecordState
{
	RECORD_RESERVED,			/* its transaction has not ended yet */
	RECORD_COMMITTED,			/* to send */
	RECORD_DONE					/* sent, rolled back, dropped or padding */
} EventRecordState;

/* One transaction's events in the ring */
typedef struct EventRecord
{
	uint32		length;			/* of the whole record, a multiple of
								 * RECORD_ALIGN */
	uint32		nevents;
	uint8		state;			/* EventRecordState */
	Oid			database;
	char		payloads[FLEXIBLE_ARRAY_MEMBER];	/* nevents strings, each
													 * NUL-terminated */
} EventRecord;

typedef struct EventSender
{
	Oid			database;		/* InvalidOid: the slot is free */
	uint32		generation;		/* the registration that owns the slot */
	bool		attached;		/* the sender runs and "latch" is set */
	bool		polling;		/* it looks by itself: no need to wake it */
	TimestampTz registered_at;
	Latch	   *latch;
} EventSender;

typedef struct EventQueueShared
{
	Size		size;			/* of the ring, a multiple of RECORD_ALIGN */
	uint64		head;			/* byte positions: a record is at position %
								 * size */
	uint64		tail;			/* records before it are done */
	uint32		next_generation;
	TimestampTz full_logged_at;
	EventSender senders[MAX_EVENT_SENDERS];
	char		ring[FLEXIBLE_ARRAY_MEMBER];
} EventQueueShared;

#define RECORD_AT(pos) ((EventRecord *) (queue->ring + (pos) % queue->size))

static EventQueueShared *queue = NULL;
static LWLock *queue_lock = NULL;
static int	event_queue_kb = 8192;

/* In a sender: its slot and what it found so far */
static int	sender_slot = -1;
static uint32 sender_generation = 0;
static bool sender_connected = false;
static uint64 sender_cursor = 0;	/* this database's records before it are
									 * done */

static dlock_shmem_request_fn prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
queue_shmem_size(void)
{
	return add_size(offsetof(EventQueueShared, ring),
					TYPEALIGN(RECORD_ALIGN, (Size) event_queue_kb * 1024));
}

/*
 * The ring enters a process's page table a chunk at a time, with one system
 * call. A process's first touch of each page of shared memory is a page
 * fault, and the records march through all of the ring: every new session
 * that wrote events, and every sender, took up to one fault per 4 kB of
 * events until it had touched each page (case 7 at 8 clients: 8 800 page
 * faults in 3 s against 230 with events off, and 75-100 us more backend
 * CPU per pair on a virtual machine, where a fault is dear).
 */
#define RING_CHUNK (256 * 1024)
#define MAX_EVENT_QUEUE_KB (1024 * 1024)
#define MAX_RING_CHUNKS (MAX_EVENT_QUEUE_KB * 1024L / RING_CHUNK)

/* In this process: which chunks of the ring are in its page table */
static bool ring_chunk_mapped[MAX_RING_CHUNKS + 1];

/*
 * Make sure the chunk of the ring that holds position pos is in this
 * process's page table. An advice: whatever the kernel says (a kernel
 * before 5.14 refuses it), the pages fault in when touched.
 */
static void
map_ring_chunk(uint64 pos)
{
	Size		chunk = (Size) (pos % queue->size) / RING_CHUNK;
	uintptr_t	page;
	uintptr_t	start;
	uintptr_t	end;

	if (ring_chunk_mapped[chunk])
		return;
	ring_chunk_mapped[chunk] = true;
	page = (uintptr_t) sysconf(_SC_PAGESIZE);
	start = (uintptr_t) (queue->ring + chunk * RING_CHUNK) & ~(page - 1);
	end = (uintptr_t) (queue->ring + Min((chunk + 1) * RING_CHUNK, queue->size));
	(void) madvise((void *) start, end - start, MADV_POPULATE_WRITE);
}

/*
 * True when the queue exists: pg_dlock is preloaded.
 */
bool
dlock_event_queue_ready(void)
{
	return queue != NULL;
}

/*
 * Move the tail past the records that are done. Caller holds queue_lock
 * exclusively.
 */
static void
advance_tail(void)
{
	while (queue->tail < queue->head &&
		   RECORD_AT(queue->tail)->state == RECORD_DONE)
		queue->tail += RECORD_AT(queue->tail)->length;
}

/*
 * Free a sender slot if the registration "generation" still owns it. Caller
 * holds queue_lock exclusively.
 */
static void
release_slot(int slot, uint32 generation)
{
	EventSender *sender = &queue->senders[slot];

	if (sender->generation == generation && OidIsValid(sender->database))
	{
		sender->database = InvalidOid;
		sender->attached = false;
		sender->polling = false;
		sender->latch = NULL;
	}
}

/*
 * What it takes for "database" to have a running sender. Caller holds
 * queue_lock exclusively. Returns the sender's latch to set, or NULL; when a
 * sender has to be started, claims a slot for it and sets *start_slot and
 * *generation (else *start_slot is -1).
 */
static Latch *
sender_for(Oid database, int *start_slot, uint32 *generation)
{
	EventSender *free_sender = NULL;

	*start_slot = -1;
	for (int i = 0; i < MAX_EVENT_SENDERS; i++)
	{
		EventSender *sender = &queue->senders[i];

		if (!OidIsValid(sender->database))
		{
			if (free_sender == NULL)
				free_sender = sender;
			continue;
		}
		if (sender->database != database)
			continue;
		if (sender->attached)
			return sender->polling ? NULL : sender->latch;
		if (GetCurrentTimestamp() - sender->registered_at < SENDER_START_TIMEOUT_USECS)
			return NULL;		/* starting; it will look at the queue */
		free_sender = sender;	/* lost before it attached: start another */
		break;
	}
	if (free_sender == NULL)
		return NULL;			/* all slots busy: the events wait */

	free_sender->database = database;
	free_sender->generation = ++queue->next_generation;
	free_sender->attached = false;
	free_sender->polling = false;
	free_sender->latch = NULL;
	free_sender->registered_at = GetCurrentTimestamp();
	*start_slot = free_sender - queue->senders;
	*generation = free_sender->generation;
	return NULL;
}

/*
 * Register the sender claimed by sender_for; gives the slot back when no
 * background worker slot is free (the next commit tries again). Raises no
 * error: the caller may have committed already.
 */
static void
start_sender(int slot, Oid database, uint32 generation)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_dlock");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "dlock_event_sender_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_dlock event sender for database %u", database);
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_dlock event sender");
	worker.bgw_main_arg = Int32GetDatum(slot);
	memcpy(worker.bgw_extra, &database, sizeof(Oid));
	memcpy(worker.bgw_extra + sizeof(Oid), &generation, sizeof(uint32));
	worker.bgw_notify_pid = 0;

	if (!RegisterDynamicBackgroundWorker(&worker, NULL))
	{
		LWLockAcquire(queue_lock, LW_EXCLUSIVE);
		release_slot(slot, generation);
		LWLockRelease(queue_lock);
	}
}

/*
 * Log, at most once a minute across the server, that events were dropped.
 */
void
dlock_event_queue_log_dropped(int nevents)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		log_now;

	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	log_now = now - queue->full_logged_at >= QUEUE_FULL_LOG_USECS;
	if (log_now)
		queue->full_logged_at = now;
	LWLockRelease(queue_lock);
	if (log_now)
		ereport(LOG,
				(errmsg("pg_dlock dropped %d lock events: the event queue is full", nevents),
				 errdetail("Dropped events are counted in dlock.stats.events_dropped."),
				 errhint("Check that the pg_dlock event sender of each database runs (it needs a free max_worker_processes slot), or raise dlock.event_queue_size.")));
}

/*
 * Reserve a record for the current transaction's "nevents" events, whose
 * payloads (each NUL-terminated) are the "len" bytes at "payloads". Returns
 * the record's position, or -1 when the queue has no room (the caller may
 * try smaller records; what it drops it counts and logs with
 * dlock_event_queue_log_dropped).
 */
int64
dlock_event_queue_reserve(const char *payloads, Size len, int nevents)
{
	Size		need = TYPEALIGN(RECORD_ALIGN, offsetof(EventRecord, payloads) + len);
	Size		to_end;
	Size		pad;
	uint64		pos;
	EventRecord *record;

	StaticAssertStmt(offsetof(EventRecord, payloads) <= RECORD_ALIGN,
					 "a record header must fit in RECORD_ALIGN bytes");
	Assert(queue != NULL && nevents > 0);
	/* where the record will most likely go: not under the lock */
	map_ring_chunk(queue->head);
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	pos = queue->head;
	to_end = queue->size - pos % queue->size;
	pad = to_end < need ? to_end : 0;
	if (queue->size - (queue->head - queue->tail) < pad + need)
	{
		advance_tail();
		if (queue->size - (queue->head - queue->tail) < pad + need)
		{
			LWLockRelease(queue_lock);
			return -1;
		}
	}
	if (pad > 0)
	{
		/* records never wrap: fill the end of the ring and start over */
		record = RECORD_AT(pos);
		record->length = pad;
		record->nevents = 0;
		record->state = RECORD_DONE;
		record->database = InvalidOid;
		pos += pad;
	}
	record = RECORD_AT(pos);
	record->length = need;
	record->nevents = nevents;
	record->state = RECORD_RESERVED;
	record->database = MyDatabaseId;
	queue->head = pos + need;
	LWLockRelease(queue_lock);

	/* nobody reads a reserved record's payloads */
	map_ring_chunk(pos + need - 1);
	memcpy(record->payloads, payloads, len);
	return (int64) pos;
}

/*
 * Make sure "database" has a sender that will look at the queue: wake it,
 * or start one. When committed_pos is not -1, first mark the record there
 * committed. Raises no error.
 */
static void
wake_sender(Oid database, int64 committed_pos)
{
	Latch	   *latch;
	int			start_slot;
	uint32		generation;

	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	if (committed_pos >= 0)
		RECORD_AT((uint64) committed_pos)->state = RECORD_COMMITTED;
	latch = sender_for(database, &start_slot, &generation);
	LWLockRelease(queue_lock);

	if (latch != NULL)
		SetLatch(latch);
	if (start_slot >= 0)
		start_sender(start_slot, database, generation);
}

/*
 * The transaction that reserved the record at "pos" ended: committed, its
 * events are to be sent; otherwise they are discarded. Raises no error.
 */
void
dlock_event_queue_finish(int64 pos, bool committed)
{
	if (committed)
	{
		wake_sender(MyDatabaseId, pos);
		return;
	}
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	RECORD_AT((uint64) pos)->state = RECORD_DONE;
	LWLockRelease(queue_lock);
}

/*
 * A sender's exit: give up its slot; if it never connected (its database
 * was dropped), drop its database's committed events.
 */
static void
sender_exit(int code, Datum arg)
{
	Oid			database = DatumGetObjectId(arg);
	int			dropped = 0;

	/* an error while taking a batch (out of memory) left queue_lock held */
	LWLockReleaseAll();
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	release_slot(sender_slot, sender_generation);
	if (!sender_connected)
	{
		for (uint64 pos = queue->tail; pos < queue->head; pos += RECORD_AT(pos)->length)
		{
			EventRecord *record = RECORD_AT(pos);

			if (record->database == database && record->state == RECORD_COMMITTED)
			{
				record->state = RECORD_DONE;
				dropped += record->nevents;
			}
		}
		advance_tail();
	}
	LWLockRelease(queue_lock);
	dlock_count(STAT_EVENTS_DROPPED, dropped);
}

/* What take_batch left in the queue for its database */
typedef enum QueueRest
{
	REST_NONE,					/* nothing */
	REST_MORE,					/* committed events beyond a full batch */
	REST_WAITING				/* a record whose transaction has not ended */
} QueueRest;

/*
 * Take the next batch of this sender's committed events: appended to
 * "batch", each NUL-terminated; returns how many, and in *rest what is left.
 * When another database's committed events wait without a sender, sets
 * *orphan to that database.
 */
static int
take_batch(Oid database, StringInfo batch, QueueRest *rest, Oid *orphan)
{
	int			taken = 0;
	uint64		pos;

	*rest = REST_NONE;
	*orphan = InvalidOid;
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	for (pos = Max(sender_cursor, queue->tail); pos < queue->head;
		 pos += RECORD_AT(pos)->length)
	{
		EventRecord *record;

		map_ring_chunk(pos);
		record = RECORD_AT(pos);
		if (record->database != database)
		{
			if (record->state == RECORD_COMMITTED && !OidIsValid(*orphan))
				*orphan = record->database;
			continue;
		}
		if (record->state == RECORD_RESERVED)
		{
			*rest = REST_WAITING;	/* keep the order: stop at it */
			break;
		}
		if (record->state == RECORD_COMMITTED)
		{
			char	   *payload = record->payloads;

			map_ring_chunk(pos + record->length - 1);

			if (taken >= SENDER_BATCH_EVENTS)
			{
				*rest = REST_MORE;
				break;
			}
			for (uint32 i = 0; i < record->nevents; i++)
			{
				Size		len = strlen(payload) + 1;

				appendBinaryStringInfo(batch, payload, len);
				payload += len;
			}
			taken += record->nevents;
			record->state = RECORD_DONE;
		}
	}
	sender_cursor = pos;
	advance_tail();
	LWLockRelease(queue_lock);
	return taken;
}

/*
 * Send "count" notifications, the NUL-terminated payloads in "batch", in
 * one transaction. If that fails, the batch is dropped and counted.
 */
static void
send_batch(StringInfo batch, int count)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		const char *payload = batch->data;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		pgstat_report_activity(STATE_RUNNING, "pg_dlock event sender: sending lock events");
		for (int i = 0; i < count; i++)
		{
			Async_Notify(DLOCK_EVENT_CHANNEL, payload);
			payload += strlen(payload) + 1;
		}
		CommitTransactionCommand();
		dlock_signal_listeners();
		pgstat_report_activity(STATE_IDLE, NULL);
		dlock_count(STAT_EVENTS_SENT, count);
	}
	PG_CATCH();
	{
		/* for instance, PostgreSQL's notification queue is full */
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		pgstat_report_activity(STATE_IDLE, NULL);
		dlock_count(STAT_EVENTS_DROPPED, count);
	}
	PG_END_TRY();
}

/*
 * Say whether this sender looks at the queue by itself (see SENDER_POLL_MS);
 * returns "polling".
 */
static bool
set_polling(bool polling)
{
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	queue->senders[sender_slot].polling = polling;
	LWLockRelease(queue_lock);
	return polling;
}

/*
 * Give this sender's slot up, unless events of its database arrived since
 * it last looked; true if given up (the sender then exits). The next commit
 * with events starts another sender.
 */
static bool
give_up_slot(Oid database)
{
	bool		idle = true;

	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	for (uint64 pos = Max(sender_cursor, queue->tail); pos < queue->head;
		 pos += RECORD_AT(pos)->length)
	{
		if (RECORD_AT(pos)->database == database &&
			RECORD_AT(pos)->state != RECORD_DONE)
		{
			idle = false;
			break;
		}
	}
	if (idle)
		release_slot(sender_slot, sender_generation);
	LWLockRelease(queue_lock);
	return idle;
}

/*
 * Entry point of a sender (a dynamic background worker): its slot in
 * main_arg, its database and generation in bgw_extra.
 */
void
dlock_event_sender_main(Datum main_arg)
{
	Oid			database;
	bool		attached;
	bool		polling = false;
	StringInfoData batch;
	TimestampTz last_activity;

	sender_slot = DatumGetInt32(main_arg);
	memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	memcpy(&sender_generation, MyBgworkerEntry->bgw_extra + sizeof(Oid), sizeof(uint32));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	before_shmem_exit(sender_exit, ObjectIdGetDatum(database));
	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
	sender_connected = true;

	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	attached = queue->senders[sender_slot].generation == sender_generation &&
		queue->senders[sender_slot].database == database;
	if (attached)
	{
		queue->senders[sender_slot].attached = true;
		queue->senders[sender_slot].latch = MyLatch;
	}
	LWLockRelease(queue_lock);
	if (!attached)
		proc_exit(0);			/* presumed lost, and replaced */

	/* a notification is not durable: its transaction need not wait for a flush */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_activity(STATE_IDLE, NULL);

	initStringInfo(&batch);
	last_activity = GetCurrentTimestamp();
	for (;;)
	{
		QueueRest	rest;
		Oid			orphan;
		int			count;
		long		sleep_ms;
		TimestampTz now;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		resetStringInfo(&batch);
		count = take_batch(database, &batch, &rest, &orphan);
		if (OidIsValid(orphan))
			wake_sender(orphan, -1);
		if (count > 0)
			send_batch(&batch, count);
		now = GetCurrentTimestamp();
		if (count > 0 || rest != REST_NONE)
			last_activity = now;
		if (rest == REST_MORE)
			continue;
		if (count > 0 && !polling)
			polling = set_polling(true);

		if (polling)
		{
			if (now - last_activity < SENDER_POLL_KEEP_MS * 1000L)
			{
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 SENDER_POLL_MS, PG_WAIT_EXTENSION);
				continue;
			}
			/* from now on committers wake us: look once more before sleeping */
			polling = set_polling(false);
			continue;
		}

		/* committers wake us; after SENDER_LINGER_MS without events, exit */
		sleep_ms = SENDER_LINGER_MS - (long) ((now - last_activity) / 1000);
		if (sleep_ms <= 0 && give_up_slot(database))
			proc_exit(0);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(sleep_ms, SENDER_POLL_MS), PG_WAIT_EXTENSION);
	}
}

static void
queue_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(queue_shmem_size());
	RequestNamedLWLockTranche("pg_dlock event queue", 1);
}

static void
queue_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	queue = ShmemInitStruct("pg_dlock event queue", queue_shmem_size(), &found);
	if (!found)
	{
		memset(queue, 0, offsetof(EventQueueShared, ring));
		queue->size = queue_shmem_size() - offsetof(EventQueueShared, ring);
	}
	queue_lock = &(GetNamedLWLockTranche("pg_dlock event queue"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/*
 * When preloaded, define dlock.event_queue_size and reserve the queue.
 * Called once from _PG_init (through dlock_events_init). Without preloading
 * there is no queue, and no setting for its size: a server-start setting
 * cannot be defined once the server runs.
 */
void
dlock_event_queue_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable("dlock.event_queue_size",
							gettext_noop("Size of the shared memory queue that hands lock events to the pg_dlock event senders."),
							gettext_noop("A transaction whose events do not fit drops them (dlock.stats.events_dropped)."),
							&event_queue_kb,
							8192, 64, MAX_EVENT_QUEUE_KB,
							PGC_POSTMASTER,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	dlock_request_shmem(&prev_shmem_request_hook, queue_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = queue_shmem_startup;
}
