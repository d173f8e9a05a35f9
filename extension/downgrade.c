/*-------------------------------------------------------------------------
 *
 * downgrade.c
 *	  dlock.downgrade: the owner of a live exclusive lease turns it into a
 *	  shared lease in one step.
 *
 * One transaction ends the exclusive lease (lease.c) and grants the owner a
 * shared lease until the same lease_until (holder_lease.c). It takes the
 * name's kind lock as a reader's grant does, then the name's row, so until
 * it commits no writer can be granted: an exclusive acquirer either waits
 * for the row or, finding it free, checks the holders under the kind lock
 * and then sees the shared lease. The waiters are woken at commit; readers
 * queued before any writer are granted at once, a writer keeps waiting for
 * the shared leases to end. The exclusive lease is handed to nobody.
 *
 * Fencing: the shared lease gets a new token, above the exclusive one. So
 * dlock.holds() stops passing the exclusive token in the same commit, and a
 * fenced resource that sees the new token refuses any write still in
 * flight under the exclusive one.
 *
 * Durability: a downgrade commits durably, also under dlock.durability =
 * fenced (dlock_grant_prepare_durable).
 *
 * Upgrading (shared to exclusive) is not offered: two readers asking for it
 * at once would each wait for the other to leave.
 *
 * IDENTIFICATION
 *	  extension/downgrade.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "token_epoch.h"
#include "lock_row.h"
#include "wait.h"
#include "report.h"
#include "lease.h"
#include "holder_lease.h"

PG_FUNCTION_INFO_V1(dlock_downgrade);

/*
 * dlock.downgrade(lock_name, owner_token) returns dlock.lease
 *
 * NULL when owner_token holds no live exclusive lease of lock_name, nor a
 * live shared lease of it: an owner that already downgraded (a retry after
 * an unknown outcome) gets its shared lease as it is.
 */
Datum
dlock_downgrade(PG_FUNCTION_ARGS)
{
	text	   *lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	pg_uuid_t  *owner;
	TupleDesc	tupdesc;
	DlockRow	row;
	DlockEndedLease ended;
	HeapTuple	lease;
	DlockGrantCommit commit;

	dlock_require_arg(fcinfo, 1, "owner_token");
	owner = PG_GETARG_UUID_P(1);
	dlock_refuse_in_recovery(lock_name, "downgrade");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	dlock_grant_prepare_durable(&commit);
	dlock_holder_downgrade_begin(lock_name);
	if (!dlock_lease_end_for_downgrade(lock_name, owner, &row))
	{
		dlock_holder_downgrade_refused(lock_name);
		/* a retry after a downgrade that committed: its shared lease */
		lease = dlock_holder_downgraded_lease(lock_name, owner, tupdesc, CurrentMemoryContext);
		if (lease == NULL)
			PG_RETURN_NULL();
		PG_RETURN_DATUM(HeapTupleGetDatum(lease));
	}
	ended = dlock_row_ended_lease(&row);
	dlock_report_end(lock_name, "downgrade", STAT_RELEASES, DLOCK_AUDIT_ALL, NULL, &ended);
	lease = dlock_holder_grant_downgraded(lock_name, owner, ended.holder,
										  DatumGetTimestampTz(row.values[Anum_lease_until - 1]),
										  &commit, tupdesc, CurrentMemoryContext);
	/* readers queued before any writer may join now */
	dlock_wake_waiters(lock_name);
	PG_RETURN_DATUM(HeapTupleGetDatum(lease));
}
