/*-------------------------------------------------------------------------
 *
 * admin.c
 *	  Operator functions: dlock.force_release, dlock.reap,
 *	  dlock.purge_resource_fence, dlock.purge_audit_log and
 *	  dlock.stats_reset.
 *
 * All are revoked from PUBLIC in the install script; a role needs an
 * explicit GRANT EXECUTE (README "Privileges").
 *
 * IDENTIFICATION
 *	  extension/admin.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "catalog.h"
#include "spi_plans.h"
#include "report.h"
#include "lease_policy.h"

PG_FUNCTION_INFO_V1(dlock_force_release);
PG_FUNCTION_INFO_V1(dlock_reap);
PG_FUNCTION_INFO_V1(dlock_purge_resource_fence);
PG_FUNCTION_INFO_V1(dlock_purge_audit_log);
PG_FUNCTION_INFO_V1(dlock_stats_reset);

/*
 * dlock.force_release(lock_name, reason) returns boolean
 *
 * Ends the live exclusive lease whoever holds it, or else every live shared
 * lease or permit of the name, and records who did it and why, a record
 * per lease. The lock's counter is untouched, so the next grant gets a
 * higher token and the old holders' fenced writes are refused.
 */
Datum
dlock_force_release(PG_FUNCTION_ARGS)
{
	text	   *lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	char	   *reason = dlock_arg_reason(fcinfo, 1);
	Datum		values[1] = {PointerGetDatum(lock_name)};
	bool		ended;

	SPI_connect();
	ended = dlock_execute(dlock_policy_present() ? PLAN_FORCE_RELEASE_LIVE : PLAN_FORCE_RELEASE,
						  values, NULL, 1) > 0;
	if (ended)
	{
		dlock_report_ended_rows(lock_name, "force_release", STAT_FORCE_RELEASES,
						  DLOCK_AUDIT_FORCE, reason);
		/* the lease was forced away, not released: its lock delay applies */
		dlock_policy_forced(lock_name);
	}
	else if (OidIsValid(dlock_catalog()->holder_table) &&
			 dlock_execute(PLAN_HOLDERS_FORCE_RELEASE, values, NULL, 0) > 0)
	{
		/* no lease policy applies to shared leases and permits */
		dlock_report_ended_rows(lock_name, "force_release", STAT_FORCE_RELEASES,
						  DLOCK_AUDIT_FORCE, reason);
		ended = true;
	}
	SPI_finish();

	PG_RETURN_BOOL(ended);
}

/*
 * dlock.reap(idle_for, max_rows) returns bigint
 *
 * Deletes at most max_rows rows of locks free or expired for longer than
 * idle_for and available to a new owner now (no min_hold or lock delay
 * running), skipping rows another session has locked, and raises the token
 * floor to the highest deleted token so a name that comes back continues
 * above it; then at most max_rows holder slots (shared leases, permits)
 * idle as long. Returns how many rows and slots it deleted. Returns 0 with a NOTICE, changing nothing, while a new name is
 * being created in an open transaction. Call repeatedly (for example from pg_cron) until it returns 0.
 */
Datum
dlock_reap(PG_FUNCTION_ARGS)
{
	Datum		values[2];
	int64		reaped;
	bool		isnull;

	dlock_require_arg(fcinfo, 0, "idle_for");
	dlock_require_arg(fcinfo, 1, "max_rows");
	if (dlock_interval_usecs(PG_GETARG_INTERVAL_P(0)) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idle_for must not be negative")));
	if (PG_GETARG_INT32(1) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must be positive")));
	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(1);

	SPI_connect();

	/*
	 * While a new name is being created (its transaction holds the floor
	 * lock shared), reaping could lower the floor it reads: try again later.
	 */
	if (!dlock_floor_lock_exclusive())
	{
		SPI_finish();
		ereport(NOTICE,
				(errmsg("lock rows were not reaped because new lock names are being created"),
				 errhint("Call dlock.reap again later.")));
		PG_RETURN_INT64(0);
	}
	if (dlock_execute(dlock_policy_present() ? PLAN_REAP_AVAILABLE : PLAN_REAP,
					  values, NULL, 1) != 1)
		elog(ERROR, "pg_dlock: reap returned no row");
	reaped = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1, &isnull));
	if (reaped > 0)
		(void) dlock_execute(PLAN_FLOOR_COMPACT, NULL, NULL, 0);
	if (OidIsValid(dlock_catalog()->holder_table) &&
		dlock_execute(PLAN_REAP_HOLDER_SLOTS, values, NULL, 1) == 1)
		reaped += DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();

	PG_RETURN_INT64(reaped);
}

/*
 * Run purge statement "plan", which deletes rows older than the interval in
 * argument 0 ("older_than") and returns how many went; shared by the purge
 * functions.
 */
static int64
purge_older_than(FunctionCallInfo fcinfo, DlockPlanId plan)
{
	Datum		values[1];
	int64		purged;
	bool		isnull;

	dlock_require_arg(fcinfo, 0, "older_than");
	if (dlock_interval_usecs(PG_GETARG_INTERVAL_P(0)) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("older_than must not be negative")));
	values[0] = PG_GETARG_DATUM(0);

	SPI_connect();
	(void) dlock_execute(plan, values, NULL, 1);
	purged = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return purged;
}

/*
 * dlock.purge_resource_fence(older_than) returns bigint
 *
 * Deletes the fence state of resources that accepted no token for longer
 * than older_than. A purged resource accepts any token again, so older_than
 * must exceed the longest time a stale holder can still try to write (its
 * lease plus the longest pause); README "Cleanup of idle rows".
 */
Datum
dlock_purge_resource_fence(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(purge_older_than(fcinfo, PLAN_PURGE_FENCE));
}

/*
 * dlock.purge_audit_log(older_than) returns bigint
 */
Datum
dlock_purge_audit_log(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(purge_older_than(fcinfo, PLAN_PURGE_AUDIT));
}

/*
 * dlock.stats_reset() returns void: every counter, the policies' too
 */
Datum
dlock_stats_reset(PG_FUNCTION_ARGS)
{
	dlock_stats_reset_counters();
	dlock_policy_stats_reset();
	PG_RETURN_VOID();
}
