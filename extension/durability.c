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

#include "dlock.h"
#include "durability.h"

/* State of the current top-level transaction */
static bool durable_required = false;
static XLogRecPtr async_release_end = InvalidXLogRecPtr;

/*
 * The session's synchronous_commit while the commit record is written with
 * another level; -1 when not overridden. See dlock_xact_callback.
 */
static int	saved_synchronous_commit = -1;

/*
 * Record that the current transaction granted or extended a lease. With the
 * default synchronous_commit (on) nothing else happens here. A session that
 * lowered it sees it raised to "on" for the rest of the transaction, so that
 * SHOW tells the truth about how the transaction will commit.
 */
void
dlock_require_durable_commit(void)
{
	durable_required = true;
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		(void) set_config_option("synchronous_commit", "on",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
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
 * Commit this transaction with synchronous_commit "level". The setting's
 * variable is changed for the commit record alone -- RecordTransactionCommit
 * reads it, and so does the synchronous standby wait -- and put back as soon
 * as the transaction has ended, before GUC's own end-of-transaction work.
 * No GUC machinery runs: the session's setting, its SET LOCAL stack and
 * what SHOW says are untouched.
 */
static void
commit_with(int level)
{
	saved_synchronous_commit = synchronous_commit;
	synchronous_commit = level;
}

static void
restore_synchronous_commit(void)
{
	if (saved_synchronous_commit >= 0)
	{
		synchronous_commit = saved_synchronous_commit;
		saved_synchronous_commit = -1;
	}
}

/*
 * At commit: at least "on" for a transaction that granted or extended a
 * lease (a stronger remote_apply is kept); "off" for one whose only write
 * was a release (anything written after the release moved XactLastRecEnd).
 * Two-phase commit is refused for a grant: COMMIT PREPARED may run in
 * another session, whose synchronous_commit pg_dlock does not control.
 */
void
dlock_durability_xact_end(XactEvent event)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:

			/*
			 * Checked again here: a function's own SET clause, or a SET
			 * LOCAL after the grant, may have lowered it since.
			 */
			if (durable_required)
			{
				if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
					commit_with(SYNCHRONOUS_COMMIT_REMOTE_FLUSH);
			}
			else if (!XLogRecPtrIsInvalid(async_release_end) &&
					 XactLastRecEnd == async_release_end &&
					 synchronous_commit != SYNCHRONOUS_COMMIT_OFF)
				commit_with(SYNCHRONOUS_COMMIT_OFF);
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (durable_required)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that acquired or renewed a lease"),
						 errdetail("A lease must be durable when its transaction commits, and COMMIT PREPARED does not guarantee that."),
						 errhint("Acquire and renew leases in transactions that commit directly.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			restore_synchronous_commit();
			durable_required = false;
			async_release_end = InvalidXLogRecPtr;
			break;
		default:
			break;
	}
}
