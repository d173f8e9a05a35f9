/*-------------------------------------------------------------------------
 *
 * events.c
 *	  Lock events: a notification on channel "dlock_events" for every grant,
 *	  takeover, release, force release and expiry of a lease.
 *
 * Events follow the transaction that decided them: they are sent after it
 * commits and never when it rolls back (or when the savepoint they were
 * decided under is rolled back). The payload is a JSON object (README "Lock
 * events and leader election"); it never carries the owner token, which is
 * a capability.
 *
 * The transaction does not notify by itself: it keeps its events until it
 * commits and then hands them to the event queue (event_queue.c), whose
 * sender notifies in batches, so that lock transactions do not take
 * NOTIFY's cluster-wide commit lock. Without shared_preload_libraries there
 * is no queue, and the transaction notifies by itself (Async_Notify), with
 * that cost.
 *
 * dlock.events is off by default: events cost a little on every grant and
 * release, and whether anyone listens is an installation's choice.
 *
 * IDENTIFICATION
 *	  extension/events.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "stats.h"
#include "event_queue.h"
#include "events.h"

/* Longest holder description carried in a payload, in bytes */
#define EVENT_MAX_HOLDER_BYTES 1024

bool		dlock_events_enabled = false;

/* An event of the current transaction, not handed over yet */
typedef struct PendingEvent
{
	int			nest_level;		/* of the (sub)transaction that decided it */
	char	   *payload;
} PendingEvent;

/* The current transaction's events, in TopTransactionContext */
static List *pending_events = NIL;

/*
 * Where the current transaction's events went at pre-commit: their records
 * in the event queue (one, or one per event when they did not fit in one),
 * and how many did not fit at all
 */
static int64 *reserved = NULL;	/* in TopMemoryContext */
static int	nreserved = 0;
static int	reserved_capacity = 0;
static int	dropped_at_commit = 0;

/* Earliest lease_until granted by the current transaction, 0 if none */
static TimestampTz pending_expiry = 0;

/*
 * Append "key":"value" (a JSON string) to buf.
 */
static void
append_string_field(StringInfo buf, const char *key, const char *value, int len)
{
	char	   *copy = pnstrdup(value, len);

	appendStringInfo(buf, ",\"%s\":", key);
	escape_json(buf, copy);
	pfree(copy);
}

/*
 * Record one lease event of the current transaction, to be sent when it
 * commits: "event" happened to lock_name's lease with fencing token "token",
 * held by "holder" (NULL when it has no description) until lease_until (for
 * the events that end a lease: when it ended). Does nothing while
 * dlock.events is off.
 */
void
dlock_event(const char *event, text *lock_name, int64 token, text *holder,
			TimestampTz lease_until)
{
	MemoryContext old_context;
	StringInfoData buf;
	char		timestamp[MAXDATELEN + 1];

	if (!dlock_events_enabled)
		return;

	/*
	 * At most about 7.5 kB (a 1024-byte holder and a 200-character name, all
	 * escaped as \uXXXX), below the 8000 bytes a notification may carry.
	 */
	old_context = MemoryContextSwitchTo(TopTransactionContext);
	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"event\":\"%s\"", event);
	append_string_field(&buf, "lock_name", VARDATA_ANY(lock_name),
						VARSIZE_ANY_EXHDR(lock_name));
	appendStringInfo(&buf, ",\"fencing_token\":" INT64_FORMAT, token);
	if (holder == NULL)
		appendStringInfoString(&buf, ",\"holder\":null");
	else
		append_string_field(&buf, "holder", VARDATA_ANY(holder),
							pg_mbcliplen(VARDATA_ANY(holder),
										 VARSIZE_ANY_EXHDR(holder),
										 EVENT_MAX_HOLDER_BYTES));
	JsonEncodeDateTime(timestamp, TimestampTzGetDatum(lease_until),
					   TIMESTAMPTZOID, NULL);
	appendStringInfo(&buf, ",\"lease_until\":\"%s\"}", timestamp);

	if (dlock_event_queue_ready())
	{
		PendingEvent *pending = palloc(sizeof(PendingEvent));

		pending->nest_level = GetCurrentTransactionNestLevel();
		pending->payload = buf.data;
		pending_events = lappend(pending_events, pending);
	}
	else
	{
		Async_Notify(DLOCK_EVENT_CHANNEL, buf.data);
		pfree(buf.data);
	}
	MemoryContextSwitchTo(old_context);

	/* a new lease: the expiry worker may have to wake earlier */
	if ((strcmp(event, "acquire") == 0 || strcmp(event, "takeover") == 0) &&
		(pending_expiry == 0 || lease_until < pending_expiry))
		pending_expiry = lease_until;
}

/* Remember a record reserved for this transaction */
static void
remember_reserved(int64 pos)
{
	if (nreserved == reserved_capacity)
	{
		reserved_capacity = Max(8, reserved_capacity * 2);
		reserved = reserved == NULL ?
			MemoryContextAlloc(TopMemoryContext, sizeof(int64) * reserved_capacity) :
			repalloc(reserved, sizeof(int64) * reserved_capacity);
	}
	reserved[nreserved++] = pos;
}

/*
 * Before commit, reserve the transaction's events their place in the event
 * queue (this fixes their order, see event_queue.c): one record for all of
 * them; when they do not fit in one, a record per event, in order, as long
 * as there is room, so a transaction with more events than the queue holds
 * loses only those that do not fit. The rest are dropped and counted.
 */
static void
reserve_pending_events(void)
{
	StringInfoData payloads;
	ListCell   *cell;
	int			count = list_length(pending_events);
	int64		pos;

	initStringInfo(&payloads);
	foreach(cell, pending_events)
	{
		PendingEvent *pending = lfirst(cell);

		appendBinaryStringInfo(&payloads, pending->payload, strlen(pending->payload) + 1);
	}
	pos = dlock_event_queue_reserve(payloads.data, payloads.len, count);
	pfree(payloads.data);
	if (pos >= 0)
		remember_reserved(pos);
	else if (count == 1)
		dropped_at_commit = 1;
	else
		foreach(cell, pending_events)
		{
			PendingEvent *pending = lfirst(cell);

			pos = dlock_event_queue_reserve(pending->payload, strlen(pending->payload) + 1, 1);
			if (pos < 0)
			{
				dropped_at_commit = count - foreach_current_index(cell);
				break;
			}
			remember_reserved(pos);
		}
	pending_events = NIL;
}

/* Hand over (committed) or give back every record reserved at pre-commit */
static void
finish_reserved(bool committed)
{
	for (int i = 0; i < nreserved; i++)
		dlock_event_queue_finish(reserved[i], committed);
	nreserved = 0;
}

/*
 * The transaction has ended: nothing of it is pending any more.
 */
static void
forget_events(void)
{
	pending_events = NIL;		/* freed with TopTransactionContext */
	nreserved = 0;
	dropped_at_commit = 0;
	pending_expiry = 0;
}

/*
 * Hand the transaction's events over when it commits, discard them when it
 * aborts (called by the transaction-end callback, pg_dlock.c). At commit,
 * returns the earliest lease this transaction granted (0 if none), for the
 * expiry worker: only then is it visible to the worker's scan.
 */
TimestampTz
dlock_events_xact_end(XactEvent event)
{
	TimestampTz granted_until = 0;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			if (pending_events != NIL)
				reserve_pending_events();
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (pending_events != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that has sent lock events"),
						 errdetail("dlock.events is on, and lock events are sent only when their transaction commits.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			finish_reserved(true);
			if (dropped_at_commit > 0)
			{
				dlock_count(STAT_EVENTS_DROPPED, dropped_at_commit);
				dlock_event_queue_log_dropped(dropped_at_commit);
			}
			granted_until = pending_expiry;
			forget_events();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			finish_reserved(false);
			forget_events();
			break;
		default:
			break;
	}
	return granted_until;
}

/*
 * Events decided in a subtransaction belong to its parent when it commits
 * and are discarded when it rolls back.
 */
void
dlock_events_subxact_end(SubXactEvent event)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *cell;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(cell, pending_events)
	{
		PendingEvent *pending = lfirst(cell);

		if (pending->nest_level < level)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			pending->nest_level = level - 1;
		else
			pending_events = foreach_delete_current(pending_events, cell);
	}
}

/*
 * Define dlock.events and the event queue's setting; called once from
 * _PG_init.
 */
void
dlock_events_init(void)
{
	DefineCustomBoolVariable("dlock.events",
							 gettext_noop("Sends a notification on channel \"" DLOCK_EVENT_CHANNEL "\" for every grant, takeover, release, force release and expiry of a lease."),
							 gettext_noop("Notifications are sent after the transaction commits."),
							 &dlock_events_enabled,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	dlock_event_queue_init();
}
