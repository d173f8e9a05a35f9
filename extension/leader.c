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
#include "funcapi.h"

#include "dlock.h"
#include "args.h"
#include "sql_executor.h"

PG_FUNCTION_INFO_V1(dlock_leader);

/*
 * The live lease of an election; its columns are dlock.leader's result
 * columns, in their order.
 */
static DlockStatement leader_stmt = {
	.sql =
	"SELECT l.holder, l.fencing_seq, l.acquired_at, l.lease_until"
	"  FROM dlock.distributed_lock l"
	" WHERE l.lock_name = $1 AND l.owner_token IS NOT NULL"
	"   AND l.lease_until > pg_catalog.clock_timestamp()",
	.nargs = 1,
	.argtypes = {TEXTOID},
};
#define LEADER_NCOLS 4

/*
 * dlock.leader(election) returns (holder, fencing_token, since, lease_until)
 *
 * NULL when nobody holds a live lease of the election's lock.
 */
Datum
dlock_leader(PG_FUNCTION_ARGS)
{
	text	   *election = dlock_arg_name(fcinfo, 0, "election");
	Datum		values[LEADER_NCOLS];
	bool		nulls[LEADER_NCOLS];
	TupleDesc	tupdesc;
	HeapTuple	result = NULL;
	MemoryContext cxt = CurrentMemoryContext;
	Datum		args[1] = {PointerGetDatum(election)};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	dlock_sql_connect();
	if (dlock_execute(&leader_stmt, args, NULL, 1) > 0)
	{
		MemoryContext oldcxt;

		for (int i = 0; i < LEADER_NCOLS; i++)
			values[i] = dlock_sql_value(0, i + 1, &nulls[i]);
		oldcxt = MemoryContextSwitchTo(cxt);
		result = heap_form_tuple(tupdesc, values, nulls);
		MemoryContextSwitchTo(oldcxt);
	}
	dlock_sql_finish();

	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}
