/*-------------------------------------------------------------------------
 *
 * durability.c
 *	  How the transactions that grant, extend or end leases commit.
 *
 * A token must never be handed out twice, so the transaction that issues a
 * token or extends a lease commits with synchronous_commit of at least "on"
 * (WAL flushed, and synchronous standbys confirmed) even when the session
 * turned it off: a grant lost in a crash could be granted again to someone
 * else with the same token. The setting is raised for the transaction only.
 *
 * A release may commit asynchronously: losing it only makes the next holder
 * wait until the lease expires. That is done only when the release is the
 * sole write of its transaction; a transaction that also wrote business data,
 * before or after the release, keeps the session's setting.
 *
 * IDENTIFICATION
 *	  extension/durability.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "replication/syncrep.h"
#include "utils/guc.h"

#include "pg_dlock.h"

/* State of the current top-level transaction */
static bool durable_required = false;
static XLogRecPtr async_release_end = InvalidXLogRecPtr;

/*
 * Set synchronous_commit for the rest of the current transaction only.
 */
static void
set_synchronous_commit_local(const char *value)
{
	(void) set_config_option("synchronous_commit", value,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
}

/*
 * Raise synchronous_commit to "on" unless it is at least that already; a
 * stronger setting (remote_apply) is kept.
 */
static void
raise_to_durable(void)
{
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		set_synchronous_commit_local("on");
}

/*
 * Record that the current transaction granted or extended a lease.
 */
void
dlock_require_durable_commit(void)
{
	durable_required = true;
	raise_to_durable();
}

/*
 * Record that a release just wrote its row. had_xid_before says whether the
 * transaction had written anything before it.
 */
void
dlock_allow_async_release(bool had_xid_before)
{
	if (had_xid_before || durable_required)
		async_release_end = InvalidXLogRecPtr;
	else
		async_release_end = XactLastRecEnd;
}

/*
 * At commit: lower synchronous_commit for a transaction whose only write was
 * a release. Anything written after the release moved XactLastRecEnd.
 */
static void
dlock_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:

			/*
			 * Raised again here: a function's own SET clause, or a SET LOCAL
			 * after the grant, may have lowered it since.
			 */
			if (durable_required)
				raise_to_durable();
			else if (!XLogRecPtrIsInvalid(async_release_end) &&
					 XactLastRecEnd == async_release_end &&
					 synchronous_commit != SYNCHRONOUS_COMMIT_OFF)
				set_synchronous_commit_local("off");
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			durable_required = false;
			async_release_end = InvalidXLogRecPtr;
			break;
		default:
			break;
	}
}

/*
 * Called from _PG_init.
 */
void
dlock_durability_init(void)
{
	RegisterXactCallback(dlock_xact_callback, NULL);
}
