/*-------------------------------------------------------------------------
 *
 * events.c
 *	  Lock events: a notification on channel "dlock_events" for every grant,
 *	  takeover, release, force release and expiry of a lease.
 *
 * Events go through the same queue as NOTIFY (Async_Notify), so they follow
 * the transaction that decided them: they are delivered when it commits and
 * dropped when it rolls back. The payload is a JSON object (README "Lock
 * events and leader election"); it never carries the owner token, which is
 * a capability.
 *
 * dlock.events is off by default. When on, every transaction that grants or
 * ends a lease also queues a notification, and PostgreSQL serializes the
 * commits of notifying transactions on one lock (PreCommit_Notify); a
 * listener that stops reading fills the notification queue until NOTIFY --
 * and with it every grant -- fails. Both are costs an installation should
 * choose, not inherit.
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
#include "utils/timestamp.h"

#include "pg_dlock.h"

/* Longest holder description carried in a payload, in bytes */
#define EVENT_MAX_HOLDER_BYTES 1024

bool		dlock_events_enabled = false;

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
 * Queue the notification for one lease event of the current transaction:
 * "event" happened to lock_name's lease with fencing token "token", held by
 * "holder" (NULL when it has no description) until lease_until (for the
 * events that end a lease: when it ended). Does nothing while dlock.events
 * is off.
 */
void
dlock_event(const char *event, text *lock_name, int64 token, text *holder,
			TimestampTz lease_until)
{
	StringInfoData buf;
	char		timestamp[MAXDATELEN + 1];

	if (!dlock_events_enabled)
		return;

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

	Async_Notify(DLOCK_EVENT_CHANNEL, buf.data);
	pfree(buf.data);

	/* a new lease: the expiry worker may have to wake earlier */
	if ((strcmp(event, "acquire") == 0 || strcmp(event, "takeover") == 0) &&
		(pending_expiry == 0 || lease_until < pending_expiry))
		pending_expiry = lease_until;
}

/*
 * At commit, tell the expiry worker about the earliest lease this
 * transaction granted; only then is the lease visible to the worker's scan.
 */
static void
events_xact_callback(XactEvent event, void *arg)
{
	if (pending_expiry == 0)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		dlock_expiry_worker_schedule(pending_expiry);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		pending_expiry = 0;
}

/*
 * Define dlock.events; called once from _PG_init.
 */
void
dlock_events_init(void)
{
	DefineCustomBoolVariable("dlock.events",
							 gettext_noop("Sends a notification on channel \"" DLOCK_EVENT_CHANNEL "\" for every grant, takeover, release, force release and expiry of a lease."),
							 gettext_noop("Notifications are sent when the transaction commits, like NOTIFY."),
							 &dlock_events_enabled,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	RegisterXactCallback(events_xact_callback, NULL);
}
