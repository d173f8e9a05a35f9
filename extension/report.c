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

#include "catalog/pg_type_d.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "stats.h"
#include "lock_row.h"
#include "catalog.h"
#include "sql_executor.h"
#include "wait.h"
#include "audit.h"
#include "events.h"
#include "report.h"

/*
 * An audit record for a lease event; opens its own connection to the
 * executor, so the caller may or may not have one.
 */
void
dlock_report_audit(const char *event, text *lock_name, int64 token, bool token_isnull,
				   text *holder, const char *reason)
{
	dlock_sql_connect();
	dlock_audit(event, lock_name, Int64GetDatum(token), token_isnull, holder, reason);
	dlock_sql_finish();
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
 * The exclusive lease of a lock row (lock_row.c), as read before it ended.
 */
DlockEndedLease
dlock_row_ended_lease(const DlockRow *row)
{
	DlockEndedLease lease = {
		.token = DatumGetInt64(row->values[Anum_fencing_seq - 1]),
		.holder = row->nulls[Anum_holder - 1] ? NULL : DatumGetTextPP(row->values[Anum_holder - 1]),
		.kind = LEASE_EXCLUSIVE,
		.acquired_at = row->nulls[Anum_acquired_at - 1] ? 0 :
		DatumGetTimestampTz(row->values[Anum_acquired_at - 1]),
	};

	return lease;
}

/*
 * The lease that row "row" of the last executed statement (sql_executor.c)
 * describes, from its columns of the fencing token, holder, acquired_at and
 * kind; kind_col 0 when the statement reads only exclusive leases.
 */
DlockEndedLease
dlock_result_ended_lease(uint64 row, int token_col, int holder_col, int acquired_col,
						 int kind_col)
{
	DlockEndedLease lease = {.kind = LEASE_EXCLUSIVE};
	bool		isnull;
	Datum		value;

	value = dlock_sql_value(row, token_col, &lease.token_isnull);
	lease.token = lease.token_isnull ? 0 : DatumGetInt64(value);
	value = dlock_sql_value(row, holder_col, &isnull);
	lease.holder = isnull ? NULL : DatumGetTextPP(value);
	value = dlock_sql_value(row, acquired_col, &isnull);
	lease.acquired_at = isnull ? 0 : DatumGetTimestampTz(value);
	if (kind_col > 0)
	{
		value = dlock_sql_value(row, kind_col, &isnull);
		if (!isnull)
			lease.kind = dlock_lease_kind_of(DatumGetChar(value));
	}
	return lease;
}

/* Time the hold of a lease that ended at ended_at */
static void
observe_hold(const DlockEndedLease *lease, TimestampTz ended_at)
{
	if (lease->acquired_at != 0)
		dlock_observe(HISTOGRAM_HOLD, lease->kind, ended_at - lease->acquired_at);
}

/*
 * A lease of lock_name ended now (release, downgrade or force release):
 * count it, time its hold, announce it, and audit it as "event" when
 * dlock.audit is at least audit_from. The caller sees to the waiters.
 */
void
dlock_report_end(text *lock_name, const char *event, DlockCounter counter,
				 DlockAuditLevel audit_from, const char *reason,
				 const DlockEndedLease *lease)
{
	TimestampTz now = GetCurrentTimestamp();

	dlock_count(counter, 1);
	observe_hold(lease, now);
	dlock_event(event, lock_name, lease->token, lease->holder, now);
	if (dlock_audit_level >= (int) audit_from)
		dlock_report_audit(event, lock_name, lease->token, lease->token_isnull,
						   lease->holder, reason);
}

/*
 * A lease of lock_name ran out at lease_until without release: time its
 * hold, announce it, audit it at dlock.audit = all and wake the name's
 * waiters. Called once per expiry: by the expiry worker, or through
 * dlock_report_expiry_once by whatever ends the expired lease first.
 */
void
dlock_report_expiry(text *lock_name, const DlockEndedLease *lease, TimestampTz lease_until)
{
	observe_hold(lease, lease_until);
	dlock_event("expire", lock_name, lease->token, lease->holder, lease_until);
	if (dlock_audit_level == DLOCK_AUDIT_ALL)
		dlock_report_audit("expire", lock_name, lease->token, lease->token_isnull,
						   lease->holder, NULL);
	dlock_wake_waiters(lock_name);
}

/* the expiry worker's record of an exclusive lease's expiry, forgotten */
static DlockStatement expiry_forget_stmt = {
	.sql =
	"DELETE FROM dlock.expiry_reported r"
	" WHERE r.lock_name = $1 AND r.fencing_token = $2 RETURNING 1",
	.nargs = 2,
	.argtypes = {TEXTOID, INT8OID},
};

/* the same for a holder slot's lease (1.4 on) */
static DlockStatement holder_expiry_forget_stmt = {
	.sql =
	"DELETE FROM dlock.holder_expiry_reported r"
	" WHERE r.lock_name = $1 AND r.slot = $2 AND r.fencing_token = $3 RETURNING 1",
	.nargs = 3,
	.argtypes = {TEXTOID, INT4OID, INT8OID},
};

/*
 * The one rule that reports each expiry once. The expiry worker reports an
 * expired lease and records that it did (dlock.expiry_reported, per holder
 * slot dlock.holder_expiry_reported) in one transaction, holding the
 * lease's row or slot FOR SHARE and skipping rows another transaction has
 * locked. Whatever ends an expired lease -- a takeover (slot 0), a grant on
 * an expired holder slot or an exclusive grant freeing it (its slot
 * number), a holder grant ending an expired exclusive lease -- holds its
 * row lock, so the two cannot overlap: it deletes the worker's record, and
 * reports the expiry only when there was none. taken_over: the caller's
 * own grant reports the end as a "takeover" (counted and announced
 * there), so only the hold is timed here. Returns whether the worker had
 * reported it. The caller is connected (dlock_sql_connect).
 */
bool
dlock_report_expiry_once(text *lock_name, int32 slot, const DlockEndedLease *lease,
						 TimestampTz lease_until, bool taken_over)
{
	Datum		values[3];
	bool		reported;

	values[0] = PointerGetDatum(lock_name);
	if (!OidIsValid(slot == 0 ? dlock_catalog()->expiry_reported_table :
					dlock_catalog()->holder_expiry_reported_table))
		reported = false;		/* nothing records reports: none were made */
	else if (slot == 0)
	{
		values[1] = Int64GetDatum(lease->token);
		reported = dlock_execute(&expiry_forget_stmt, values, NULL, 0) > 0;
	}
	else
	{
		values[1] = Int32GetDatum(slot);
		values[2] = Int64GetDatum(lease->token);
		reported = dlock_execute(&holder_expiry_forget_stmt, values, NULL, 0) > 0;
	}
	if (reported)
		return true;
	if (taken_over)
		observe_hold(lease, lease_until);
	else
		dlock_report_expiry(lock_name, lease, lease_until);
	return false;
}

/*
 * The owner renewed its lease of lock_name (any kind) with token "token":
 * audited at dlock.audit = all. Not counted here (the callers count
 * renewals and their lateness) and not announced (no lock event).
 */
void
dlock_report_renewal(text *lock_name, int64 token, text *holder)
{
	if (dlock_audit_level == DLOCK_AUDIT_ALL)
		dlock_report_audit("renew", lock_name, token, false, holder, NULL);
}
