/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  Fencing where the data lives: dlock.fence and the
 *	  dlock.enforce_fencing trigger (dlock.holds is in holds.c).
 *
 * A lease alone does not give mutual exclusion: a holder can pause past its
 * lease and write after someone else took over. These functions check the
 * token in the transaction that writes the business data, so a stale
 * holder's write fails at the database instead of being merely discouraged.
 *
 * IDENTIFICATION
 *	  extension/fence.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "sql_executor.h"
#include "holds.h"

PG_FUNCTION_INFO_V1(dlock_fence);
PG_FUNCTION_INFO_V1(dlock_enforce_fencing);

/*
 * The fence of a resource moves up to $2, or stays where it is and returns
 * no row when it is higher already.
 */
static DlockStatement fence_stmt = {
	.sql =
	"INSERT INTO dlock.resource_fence AS f (resource, fencing_token, updated_at)"
	" VALUES ($1, $2, pg_catalog.clock_timestamp())"
	" ON CONFLICT (resource) DO UPDATE"
	"   SET fencing_token = EXCLUDED.fencing_token, updated_at = EXCLUDED.updated_at"
	"   WHERE f.fencing_token <= EXCLUDED.fencing_token"
	" RETURNING f.fencing_token",
	.nargs = 2,
	.argtypes = {TEXTOID, INT8OID},
};

/* the highest token resource $1 has accepted, for the error */
static DlockStatement fence_current_stmt = {
	.sql = "SELECT f.fencing_token FROM dlock.resource_fence f WHERE f.resource = $1",
	.nargs = 1,
	.argtypes = {TEXTOID},
};
#define FENCE_CURRENT_COL_TOKEN 1

/*
 * dlock.fence(resource, fencing_token) returns void
 *
 * The upsert takes the resource's row lock, so concurrent callers on one
 * resource are serialized and each compares against the latest accepted
 * token.
 */
Datum
dlock_fence(PG_FUNCTION_ARGS)
{
	text	   *resource = dlock_arg_name(fcinfo, 0, "resource");
	int64		token;
	Datum		values[2];
	int64		accepted = 0;
	bool		stale;

	dlock_require_arg(fcinfo, 1, "fencing_token");
	token = PG_GETARG_INT64(1);
	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(token);

	dlock_sql_connect();
	stale = dlock_execute(&fence_stmt, values, NULL, 1) == 0;
	if (stale)
	{
		bool		isnull;

		if (dlock_execute(&fence_current_stmt, values, NULL, 1) > 0)
			accepted = DatumGetInt64(dlock_sql_value(0, FENCE_CURRENT_COL_TOKEN, &isnull));
		dlock_count(STAT_FENCE_REJECTIONS, 1);
	}
	dlock_sql_finish();

	if (stale)
		ereport(ERROR,
				(errcode(ERRCODE_DLOCK_STALE_FENCING_TOKEN),
				 errmsg("stale fencing token for resource \"%s\"",
						text_to_cstring(resource)),
				 errdetail("Token " INT64_FORMAT " is below " INT64_FORMAT ", the highest token the resource has accepted.",
						   token, accepted)));
	PG_RETURN_VOID();
}

/*
 * Strict mode of enforce_fencing: the row's token must be the live lease of
 * the lock named in the row's lock_column, checked and pinned until the
 * writing transaction ends exactly as an explicit holds() would, under the
 * same privilege rule (holds.c).
 */
static void
require_live_lease(Relation rel, HeapTuple tuple, int lock_attnum,
				   const char *lock_column, int64 token)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	bool		isnull;
	Datum		lock_name = heap_getattr(tuple, lock_attnum, tupdesc, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock name column \"%s\" of relation \"%s\" must not be null",
						lock_column, RelationGetRelationName(rel))));
	if (!dlock_pin_lease(DatumGetTextPP(lock_name), token))
	{
		dlock_count(STAT_FENCE_REJECTIONS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_DLOCK_LOCK_NOT_HELD),
				 errmsg("lock \"%s\" is not held with fencing token " INT64_FORMAT " for a row of relation \"%s\"",
						TextDatumGetCString(lock_name), token, RelationGetRelationName(rel)),
				 errdetail("In strict mode a row is written or deleted only under the live lease of its fencing token."),
				 errhint("Acquire the lock and write its fencing token into the row.")));
	}
}

/*
 * The fencing token of tuple, in column "column" (attribute attnum); a
 * NULL token is refused: the row would be written or deleted under no lease.
 */
static int64
row_token(Relation rel, HeapTuple tuple, int attnum, const char *column)
{
	bool		isnull;
	Datum		token = heap_getattr(tuple, attnum, RelationGetDescr(rel), &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fencing token column \"%s\" of relation \"%s\" must not be null",
						column, RelationGetRelationName(rel)),
				 errhint("Write the fencing token of the lease under which the row is written.")));
	return DatumGetInt64(token);
}

/*
 * Attribute number of trigger argument "column" of rel, which must be of
 * type "type" (described as "what" in errors).
 */
static int
trigger_column(Relation rel, const char *column, Oid type, const char *what)
{
	int			attnum = attnameAttNum(rel, column, false);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						column, RelationGetRelationName(rel))));
	if (TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid != type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" of relation \"%s\" must be of type %s",
						what, column, RelationGetRelationName(rel), format_type_be(type))));
	return attnum;
}

/*
 * dlock.enforce_fencing() trigger, FOR EACH ROW, arguments: the name of a
 * bigint token column, and optionally the name of a text column holding the
 * lock name.
 *
 * With one argument (monotonic mode, BEFORE INSERT OR UPDATE) it refuses a
 * row without a token and an update that would lower the row's token: the
 * database applies "UPDATE ... WHERE token <= :token" for every writer. An
 * update that leaves the token as it is passes.
 *
 * With the lock column as well (strict mode, BEFORE INSERT OR UPDATE OR
 * DELETE) the row's token must in addition be the live lease of the lock
 * the row names, checked and pinned in the writing transaction: a writer
 * that does not present the token of a live lease -- including one that
 * leaves an old token untouched -- is refused.
 */
Datum
dlock_enforce_fencing(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	tupdesc;
	const char *column;
	int			attnum;
	bool		strict;
	int			lock_attnum = 0;
	HeapTuple	newtuple;
	int64		new_token;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dlock.enforce_fencing() must be called as a trigger")));
	rel = trigdata->tg_relation;
	tupdesc = RelationGetDescr(rel);
	strict = trigdata->tg_trigger->tgnargs == 2;
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		(TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) && !strict) ||
		TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dlock.enforce_fencing() must be a BEFORE INSERT OR UPDATE FOR EACH ROW trigger"),
				 errhint("With a lock name column as second argument it may also fire BEFORE DELETE.")));

	if (trigdata->tg_trigger->tgnargs != 1 && !strict)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" on relation \"%s\" must name the fencing token column, and optionally a lock name column, as its arguments",
						trigdata->tg_trigger->tgname, RelationGetRelationName(rel))));
	column = trigdata->tg_trigger->tgargs[0];
	attnum = trigger_column(rel, column, INT8OID, "fencing token");
	if (strict)
		lock_attnum = trigger_column(rel, trigdata->tg_trigger->tgargs[1], TEXTOID, "lock name");

	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
	{
		/*
		 * Strict mode only: the row goes under the live lease of its token;
		 * a row without a token names no lease and is not deleted.
		 */
		new_token = row_token(rel, trigdata->tg_trigtuple, attnum, column);
		require_live_lease(rel, trigdata->tg_trigtuple, lock_attnum,
						   trigdata->tg_trigger->tgargs[1], new_token);
		return PointerGetDatum(trigdata->tg_trigtuple);
	}

	newtuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
		trigdata->tg_newtuple : trigdata->tg_trigtuple;
	new_token = row_token(rel, newtuple, attnum, column);

	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		bool		old_isnull;
		int64		old_token = DatumGetInt64(heap_getattr(trigdata->tg_trigtuple, attnum,
														   tupdesc, &old_isnull));

		if (!old_isnull && new_token < old_token)
		{
			dlock_count(STAT_FENCE_REJECTIONS, 1);
			ereport(ERROR,
					(errcode(ERRCODE_DLOCK_STALE_FENCING_TOKEN),
					 errmsg("stale fencing token for a row of relation \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("Token " INT64_FORMAT " in column \"%s\" is below " INT64_FORMAT ", the token the row already has.",
							   new_token, column, old_token)));
		}
	}
	if (strict)
		require_live_lease(rel, newtuple, lock_attnum,
						   trigdata->tg_trigger->tgargs[1], new_token);
	return PointerGetDatum(newtuple);
}
