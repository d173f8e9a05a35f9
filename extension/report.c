/*-------------------------------------------------------------------------
 *
 * report.c
 *	  What every change of a lease reports, whatever its kind: the
 *	  counters, the audit record, the lock event and the waiters' wake-up.
 *
 * Exclusive leases (lease.c), shared leases and permits (holder_lease.c)
 * and the operator functions (admin.c) call these, so a grant or an end of
 * a lease of any kind is counted, audited at the same dlock.audit level and
 * announced with the same event.
 *
 * IDENTIFICATION
 *	  extension/report.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "stats.h"
#include "wait.h"
#include "audit.h"
#include "events.h"
#include "report.h"

/*
 * An audit record for a lease event; opens its own SPI connection, so the
 * caller may or may not have one.
 */
void
dlock_report_audit(const char *event, text *lock_name, int64 token, bool token_isnull,
				   text *holder, const char *reason)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_dlock: SPI_connect failed");
	dlock_audit(event, lock_name, Int64GetDatum(token), token_isnull, holder, reason);
	SPI_finish();
}

/*
 * A lease of lock_name was granted with fencing token "token" to "holder"
 * until lease_until: count it (kind_counter says which kind; exclusive
 * grants count STAT_ACQUISITIONS), audit it at dlock.audit = all, and
 * announce it. taken_over: it replaced a lease that was lost, not released.
 */
void
dlock_report_grant(text *lock_name, DlockCounter kind_counter, bool taken_over,
				   int64 token, text *holder, TimestampTz lease_until)
{
	const char *event = taken_over ? "takeover" : "acquire";

	dlock_count(kind_counter, 1);
	if (taken_over)
		dlock_count(STAT_TAKEOVERS, 1);
	if (dlock_audit_level == DLOCK_AUDIT_ALL)
		dlock_report_audit(event, lock_name, token, false, holder, NULL);
	dlock_event(event, lock_name, token, holder, lease_until);
}

/*
 * A lease of lock_name ended now (release or force release) with fencing
 * token "token" held by "holder": count it, announce it, and audit it as
 * "event" when dlock.audit is at least audit_from. The caller sees to the
 * waiters.
 */
void
dlock_report_end(text *lock_name, const char *event, DlockCounter counter,
				 DlockAuditLevel audit_from, const char *reason,
				 int64 token, bool token_isnull, text *holder)
{
	dlock_count(counter, 1);
	dlock_event(event, lock_name, token, holder, GetCurrentTimestamp());
	if (dlock_audit_level >= (int) audit_from)
		dlock_report_audit(event, lock_name, token, token_isnull, holder, reason);
}

/*
 * A lease of lock_name with fencing token "token", held by "holder", ran
 * out at lease_until without release: announce it (once: the expiry
 * worker, or a grant that ends the lease first, calls this) and wake the
 * name's waiters.
 */
void
dlock_report_expiry(text *lock_name, int64 token, text *holder, TimestampTz lease_until)
{
	dlock_event("expire", lock_name, token, holder, lease_until);
	dlock_wake_waiters(lock_name);
}

/*
 * dlock_report_end for each row (fencing_seq, holder) of the statement the
 * caller just ran through its SPI connection: the leases it ended, one
 * exclusive lease or all the shared leases or permits of lock_name; and
 * the name's waiters are woken.
 */
void
dlock_report_ended_rows(text *lock_name, const char *event, DlockCounter counter,
						DlockAuditLevel audit_from, const char *reason)
{
	SPITupleTable *ended = SPI_tuptable;
	uint64		count = SPI_processed;

	dlock_wake_waiters(lock_name);
	for (uint64 i = 0; i < count; i++)
	{
		bool		token_isnull;
		bool		holder_isnull;
		Datum		token = SPI_getbinval(ended->vals[i], ended->tupdesc, 1, &token_isnull);
		Datum		holder = SPI_getbinval(ended->vals[i], ended->tupdesc, 2, &holder_isnull);

		dlock_report_end(lock_name, event, counter, audit_from, reason,
						 token_isnull ? 0 : DatumGetInt64(token), token_isnull,
						 holder_isnull ? NULL : DatumGetTextPP(holder));
	}
}
