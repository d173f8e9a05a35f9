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

#include "dlock.h"
#include "args.h"
#include "spi_plans.h"

PG_FUNCTION_INFO_V1(dlock_leader);

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

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_dlock: SPI_connect failed");
	if (dlock_execute(PLAN_LEADER, args, NULL, 1) > 0)
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
