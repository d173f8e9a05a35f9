/*-------------------------------------------------------------------------
 *
 * leader.c
 *	  dlock.leader: the current leader of an election.
 *
 * An election is a lock name whose lease is held for a long time and kept
 * alive by renewal; its leader is the holder of the live lease. Others
 * follow changes through lock events (events.c) and read the state here
 * after every event and every reconnect: an event is a hint, the row is the
 * truth.
 *
 * IDENTIFICATION
 *	  extension/leader.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "funcapi.h"

#include "pg_dlock.h"

PG_FUNCTION_INFO_V1(dlock_leader);

static SPIPlanPtr leader_plan = NULL;

/*
 * dlock.leader(election) returns (holder, fencing_token, since, lease_until)
 *
 * NULL when nobody holds a live lease of the election's lock.
 */
Datum
dlock_leader(PG_FUNCTION_ARGS)
{
	text	   *election = dlock_arg_name(fcinfo, 0, "election");
	Datum		values[4];
	bool		nulls[4];
	TupleDesc	tupdesc;
	HeapTuple	result = NULL;
	MemoryContext cxt = CurrentMemoryContext;
	Datum		args[1] = {PointerGetDatum(election)};
	int			ret;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	SPI_connect();
	if (leader_plan == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};
		SPIPlanPtr	plan = SPI_prepare("SELECT l.holder, l.fencing_seq, l.acquired_at, l.lease_until"
									   "  FROM dlock.distributed_lock l"
									   " WHERE l.lock_name = $1 AND l.owner_token IS NOT NULL"
									   "   AND l.lease_until > pg_catalog.clock_timestamp()",
									   1, argtypes);

		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "pg_dlock: could not prepare the leader statement: %s",
				 SPI_result_code_string(SPI_result));
		leader_plan = plan;
	}
	ret = SPI_execute_plan(leader_plan, args, NULL, true, 1);
	if (ret < 0)
		elog(ERROR, "pg_dlock: leader statement failed: %s",
			 SPI_result_code_string(ret));
	if (SPI_processed > 0)
	{
		MemoryContext oldcxt;

		for (int i = 0; i < 4; i++)
			values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									  i + 1, &nulls[i]);
		oldcxt = MemoryContextSwitchTo(cxt);
		result = heap_form_tuple(tupdesc, values, nulls);
		MemoryContextSwitchTo(oldcxt);
	}
	SPI_finish();

	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}
