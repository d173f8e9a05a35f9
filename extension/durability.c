/*-------------------------------------------------------------------------
 *
 * durability.c
 *	  How the transactions that grant, extend or end leases commit.
 *
 * Under dlock.durability = durable (the default), the transaction that
 * issues a token or extends a lease commits with synchronous_commit of at
 * least "on" (WAL flushed, and synchronous standbys confirmed) even when the
 * session turned it off, so that a grant its holder was told of survives a
 * crash. The setting is raised for the transaction only.
 *
 * A release may commit asynchronously: losing it only makes the next holder
 * wait until the lease expires. Under dlock.durability = fenced, so may a
 * grant or a renewal: a crash may then lose it, and the token epoch
 * (token_epoch.c) keeps its token from being issued again. Either is done
 * only when the lease changes are the sole writes of their transaction; a
 * transaction that also wrote business data, before or after them, keeps
 * the session's setting -- and its flush makes the grant durable too.
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
#include "stats.h"
#include "durability.h"

/* State of the current top-level transaction */
static bool durable_required = false;

/*
 * Whether a grant or renewal of the transaction itself needs the flush (a
 * durable one): such a transaction cannot be prepared. durable_required
 * alone can also come from the token epoch's record (token_epoch.c), which
 * does not stop a PREPARE: PREPARE TRANSACTION flushes its WAL, and an
 * epoch recorded by a transaction that is prepared is never published by
 * it, so no other transaction relies on it (the next fenced grant marks
 * the epoch again, durably).
 */
static bool lease_needs_flush = false;

/* dlock.durability = fenced was found unavailable in this transaction */
static bool fenced_unavailable_warned = false;

/*
 * Whether this server can grant under dlock.durability = fenced: pg_dlock
 * is preloaded, so shared memory knows the server life (pg_dlock.c sets it
 * once shared memory is attached).
 */
bool		dlock_fenced_available = false;

/*
 * Where the WAL of the transaction's last lease change ended, while every
 * write of the transaction was a lease change that may commit without the
 * flush; else invalid.
 */
static XLogRecPtr unflushed_writes_end = InvalidXLogRecPtr;

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
 * Whether grants made now commit without the WAL flush: the session's
 * dlock.durability. A stored setting (ALTER ROLE or DATABASE ... SET, the
 * configuration file, connection options) may say fenced on a server that
 * does not preload pg_dlock: SHOW then says fenced, and the grants and
 * renewals commit durably, each transaction warned once that they do.
 */
bool
dlock_grants_fenced(void)
{
	if (dlock_durability != DLOCK_DURABILITY_FENCED)
		return false;
	if (dlock_fenced_available)
		return true;
	if (!fenced_unavailable_warned)
	{
		fenced_unavailable_warned = true;
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock.durability = fenced is not available on this server"),
				 errdetail("pg_dlock is not in shared_preload_libraries; leases commit durably."),
				 errhint("Add pg_dlock to shared_preload_libraries, or set dlock.durability = durable.")));
	}
	return false;
}

/*
 * Whether every write of the transaction so far was a lease change that may
 * commit without the flush; called before a lease change writes, and given
 * to dlock_lease_written after it.
 */
bool
dlock_lease_writes_only(void)
{
	if (!TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return true;
	return !XLogRecPtrIsInvalid(unflushed_writes_end) &&
		XactLastRecEnd == unflushed_writes_end;
}

/*
 * Record that a lease change just wrote its row: a release, or a grant or
 * renewal under dlock.durability = fenced (needs_flush false), or a durable
 * grant or renewal (needs_flush true). writes_only_before is what
 * dlock_lease_writes_only said before the write.
 */
void
dlock_lease_written(bool writes_only_before, bool needs_flush)
{
	if (needs_flush)
	{
		dlock_require_durable_commit();
		lease_needs_flush = true;
	}
	if (writes_only_before && !durable_required)
		unflushed_writes_end = XactLastRecEnd;
	else
		unflushed_writes_end = InvalidXLogRecPtr;
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
 * At commit: at least "on" for a transaction that made a durable grant or
 * renewal (a stronger remote_apply is kept); "off" for one whose only writes
 * were lease changes that need no flush (anything written after them moved
 * XactLastRecEnd).
 * Two-phase commit is refused for a durable grant or renewal: COMMIT
 * PREPARED may run in another session, whose synchronous_commit pg_dlock
 * does not control. A fenced one may be prepared, also when its
 * transaction recorded the token epoch (see lease_needs_flush).
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
				dlock_count(STAT_DURABLE_COMMITS, 1);
			}
			else if (!XLogRecPtrIsInvalid(unflushed_writes_end) &&
					 XactLastRecEnd == unflushed_writes_end)
			{
				if (synchronous_commit != SYNCHRONOUS_COMMIT_OFF)
					commit_with(SYNCHRONOUS_COMMIT_OFF);
				dlock_count(STAT_UNFLUSHED_COMMITS, 1);
			}
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (lease_needs_flush)
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
			lease_needs_flush = false;
			fenced_unavailable_warned = false;
			unflushed_writes_end = InvalidXLogRecPtr;
			break;
		default:
			break;
	}
}
