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

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "catalog.h"
#include "lock_row.h"
#include "token.h"
#include "token_epoch.h"
#include "sql_executor.h"
#include "wait.h"
#include "report.h"
#include "lease_policy.h"

PG_FUNCTION_INFO_V1(dlock_force_release);
PG_FUNCTION_INFO_V1(dlock_reap);
PG_FUNCTION_INFO_V1(dlock_after_restore);
PG_FUNCTION_INFO_V1(dlock_highest_token);
PG_FUNCTION_INFO_V1(dlock_carry_over);
PG_FUNCTION_INFO_V1(dlock_purge_resource_fence);
PG_FUNCTION_INFO_V1(dlock_purge_audit_log);
PG_FUNCTION_INFO_V1(dlock_stats_reset);

/*
 * dlock.force_release's statement for the exclusive lease; live is the
 * condition on the lock row l that the lease is live. Its columns are
 * those of every force release (ENDED_COL_*).
 */
#define FORCE_RELEASE_SQL(live) \
	"UPDATE dlock.distributed_lock l SET" \
	" owner_token = NULL," \
	" lease_until = pg_catalog.clock_timestamp()," \
	" updated_at = pg_catalog.clock_timestamp()" \
	" WHERE l.lock_name = $1 AND l.owner_token IS NOT NULL" \
	"   AND " live \
	" RETURNING l.fencing_seq, l.holder, l.acquired_at, 'e'::\"char\""

/* the lease functions' own decision on a lock row l (lease_policy.c), from 1.2 on */
#define POLICY_STATE_SQL \
	"dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until," \
	" l.session_id, l.hold_limit, l.min_hold_until, l.lock_delay, l.not_before)"

/* before 1.5: the floor is the highest token deleted; before 1.2, no lease policies */
static DlockStatement force_release_stmt = {
	.sql = FORCE_RELEASE_SQL("l.lease_until > pg_catalog.clock_timestamp()"),
	.nargs = 1,
	.argtypes = {TEXTOID},
};

/*
 * from 1.2 on: only a lease the lease functions call live (not one whose
 * session already ended)
 */
static DlockStatement force_release_live_stmt = {
	.sql = FORCE_RELEASE_SQL("(" POLICY_STATE_SQL ").live"),
	.nargs = 1,
	.argtypes = {TEXTOID},
};

/*
 * a name's shared leases or permits, all of them; from 1.6 on each slot's
 * lock delay starts, as a forced exclusive lease's does
 */
#define HOLDERS_FORCE_RELEASE_SQL(set_not_before) \
	"UPDATE dlock.lock_holder h SET owner_token = NULL," \
	"       lease_until = pg_catalog.clock_timestamp(), updated_at = pg_catalog.clock_timestamp()" \
	set_not_before \
	" WHERE h.lock_name = $1 AND h.owner_token IS NOT NULL" \
	"   AND h.lease_until > pg_catalog.clock_timestamp()" \
	" RETURNING h.fencing_seq, h.holder, h.acquired_at, h.kind"
static DlockStatement holders_force_release_stmt = {
	.sql = HOLDERS_FORCE_RELEASE_SQL(", not_before = " DLOCK_FORCED_NOT_BEFORE_SQL("h")),
	.nargs = 1,
	.argtypes = {TEXTOID},
};
static DlockStatement holders_force_release_1_5_stmt = {
	.sql = HOLDERS_FORCE_RELEASE_SQL(""),
	.nargs = 1,
	.argtypes = {TEXTOID},
};

/* The columns of the leases a force release ended */
#define ENDED_COL_TOKEN 1
#define ENDED_COL_HOLDER 2
#define ENDED_COL_ACQUIRED_AT 3
#define ENDED_COL_KIND 4

/*
 * Wake the waiters of lock_name and report the end of each of the "count"
 * leases the force release just run ended.
 */
static void
report_forced(text *lock_name, const char *reason, int count)
{
	dlock_wake_waiters(lock_name);
	for (int i = 0; i < count; i++)
	{
		DlockEndedLease lease = dlock_result_ended_lease(i, ENDED_COL_TOKEN, ENDED_COL_HOLDER,
														 ENDED_COL_ACQUIRED_AT,
														 ENDED_COL_KIND);

		dlock_report_end(lock_name, "force_release", STAT_FORCE_RELEASES,
						 DLOCK_AUDIT_FORCE, reason, &lease);
	}
}

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
	int			count;
	bool		ended;

	dlock_sql_connect();
	count = dlock_execute(dlock_policy_present() ? &force_release_live_stmt :
						  &force_release_stmt, values, NULL, 1);
	ended = count > 0;
	if (ended)
	{
		report_forced(lock_name, reason, count);
		/* the lease was forced away, not released: its lock delay applies */
		dlock_policy_forced(lock_name);
	}
	else if (OidIsValid(dlock_catalog()->holder_table) &&
			 (count = dlock_execute(dlock_holder_statement(&holders_force_release_stmt,
												   &holders_force_release_1_5_stmt),
									values, NULL, 0)) > 0)
	{
		report_forced(lock_name, reason, count);
		ended = true;
	}
	dlock_sql_finish();

	PG_RETURN_BOOL(ended);
}

/*
 * dlock.reap's statement; only_available is a condition on the lock row l
 * that a row must also meet to be reaped. The caller holds the floor lock
 * exclusively (dlock_floor_lock_exclusive), so no new name is being created
 * from the old floor meanwhile. Rows locked by an acquire are skipped, not
 * waited for.
 */
#define REAP_SQL(only_available) \
	"WITH victims AS (" \
	"  SELECT l.lock_name FROM dlock.distributed_lock l" \
	"  WHERE (l.owner_token IS NULL OR l.lease_until <= pg_catalog.clock_timestamp())" \
	"    AND COALESCE(l.lease_until, l.updated_at)" \
	"        < pg_catalog.clock_timestamp() - $1" \
	only_available \
	"  LIMIT $2 FOR UPDATE SKIP LOCKED" \
	"), gone AS (" \
	"  DELETE FROM dlock.distributed_lock l USING victims v" \
	"  WHERE l.lock_name = v.lock_name" \
	"  RETURNING l.fencing_seq" \
	"), raised AS (" \
	"  INSERT INTO dlock.token_floor (reaped_max, reaped_at)" \
	"  SELECT pg_catalog.max(g.fencing_seq), pg_catalog.clock_timestamp() FROM gone g" \
	"  HAVING pg_catalog.count(*) > 0" \
	"  RETURNING 1" \
	") SELECT pg_catalog.count(*)::int8, (SELECT pg_catalog.count(*) FROM raised) FROM gone"
#define REAP_COL_REAPED 1

/* before 1.5: the floor is the highest token deleted; before 1.2, no lease policies */
static DlockStatement reap_stmt = {
	.sql = REAP_SQL(""),
	.nargs = 2,
	.argtypes = {INTERVALOID, INT4OID},
};

/*
 * from 1.2 on: a name not yet available to a new owner (a release inside
 * its min_hold, a lock delay still running) is not idle, whatever idle_for
 * says; deleting its row would make the name free.
 */
static DlockStatement reap_available_stmt = {
	.sql = REAP_SQL("    AND (" POLICY_STATE_SQL ").available_at IS NULL"),
	.nargs = 2,
	.argtypes = {INTERVALOID, INT4OID},
};

/*
 * From 1.5 on the floor is a token state (token.c): the reap returns what
 * it deleted, and the floor becomes the state whose next token at every
 * later position is the best that any deleted row, or the old floor,
 * would have given.
 */
#define REAP_ROWS_SQL \
	"WITH victims AS (" \
	"  SELECT l.lock_name FROM dlock.distributed_lock l" \
	"  WHERE (l.owner_token IS NULL OR l.lease_until <= pg_catalog.clock_timestamp())" \
	"    AND COALESCE(l.lease_until, l.updated_at)" \
	"        < pg_catalog.clock_timestamp() - $1" \
	"    AND (" POLICY_STATE_SQL ").available_at IS NULL" \
	"  LIMIT $2 FOR UPDATE SKIP LOCKED" \
	") DELETE FROM dlock.distributed_lock l USING victims v" \
	"  WHERE l.lock_name = v.lock_name" \
	"  RETURNING l.fencing_seq, l.grant_timeline, l.grant_system"
#define REAP_ROWS_COL_SEQ 1
#define REAP_ROWS_COL_HISTORY 2
#define REAP_ROWS_COL_SYSTEM 3

static DlockStatement reap_rows_stmt = {
	.sql = REAP_ROWS_SQL,
	.nargs = 2,
	.argtypes = {INTERVALOID, INT4OID},
};

static DlockStatement floor_replace_stmt = {
	.sql =
	"WITH old AS (DELETE FROM dlock.token_floor RETURNING 1)"
	" INSERT INTO dlock.token_floor (reaped_max, reaped_at, grant_timeline, grant_system)"
	" VALUES ($1, pg_catalog.clock_timestamp(), $2, $3)",
	.nargs = 3,
	.argtypes = {INT8OID, INT4OID, INT8OID},
};

/*
 * Delete the idle rows as REAP_ROWS_SQL does and raise the floor over
 * them; returns how many went. Caller holds the floor lock exclusively.
 */
static int64
reap_rows(Datum *values)
{
	int64		reaped = dlock_execute(&reap_rows_stmt, values, NULL, 0);
	int32		history;
	int64		best;
	Datum		floor_values[3];

	if (reaped == 0)
		return 0;
	history = dlock_history_now();
	best = dlock_floor_next_token(history);
	for (int64 i = 0; i < reaped; i++)
	{
		bool		isnull;
		int64		seq = DatumGetInt64(dlock_sql_value(i, REAP_ROWS_COL_SEQ, &isnull));
		int32		grant_history = DatumGetInt32(dlock_sql_value(i, REAP_ROWS_COL_HISTORY, &isnull));
		int64		grant_system = DatumGetInt64(dlock_sql_value(i, REAP_ROWS_COL_SYSTEM, &isnull));

		best = Max(best, dlock_next_token(seq, grant_history, grant_system, history));
	}
	floor_values[0] = Int64GetDatum(dlock_floor_token(best));
	floor_values[1] = Int32GetDatum(history);
	floor_values[2] = Int64GetDatum((int64) GetSystemIdentifier());
	(void) dlock_execute(&floor_replace_stmt, floor_values, NULL, 0);
	return reaped;
}

/* keep only the highest floor row */
static DlockStatement floor_compact_stmt = {
	.sql =
	"WITH old AS (DELETE FROM dlock.token_floor RETURNING reaped_max, reaped_at)"
	" INSERT INTO dlock.token_floor"
	" SELECT pg_catalog.max(reaped_max), pg_catalog.max(reaped_at) FROM old"
	" HAVING pg_catalog.count(*) > 0",
};

/*
 * Holder slots idle for longer than $1, at most $2. The name's counter
 * stays, so a slot made again later takes a new block of tokens above
 * every token the deleted slots issued.
 */
#define REAP_HOLDER_SLOTS_SQL(only_available) \
	"WITH victims AS (" \
	"  SELECT h.lock_name, h.slot FROM dlock.lock_holder h" \
	"   WHERE (h.owner_token IS NULL OR h.lease_until <= pg_catalog.clock_timestamp())" \
	"     AND COALESCE(h.lease_until, h.updated_at) < pg_catalog.clock_timestamp() - $1" \
	only_available \
	"   LIMIT $2 FOR UPDATE SKIP LOCKED" \
	"), gone AS (" \
	"  DELETE FROM dlock.lock_holder h USING victims v" \
	"   WHERE h.lock_name = v.lock_name AND h.slot = v.slot RETURNING 1" \
	") SELECT pg_catalog.count(*)::int8 FROM gone"

/*
 * from 1.6 on: only slots a new owner could have now, as for lock rows (a
 * reaped slot would give its permit back before its min_hold or lock delay
 * ended)
 */
static DlockStatement reap_holder_slots_stmt = {
	.sql = REAP_HOLDER_SLOTS_SQL(
		"     AND (dlock.lease_policy_state(h.owner_token IS NOT NULL, h.lease_until, NULL::int8,"
		"          h.hold_limit, h.min_hold_until, h.lock_delay, h.not_before)).available_at IS NULL"),
	.nargs = 2,
	.argtypes = {INTERVALOID, INT4OID},
};
static DlockStatement reap_holder_slots_1_5_stmt = {
	.sql = REAP_HOLDER_SLOTS_SQL(""),
	.nargs = 2,
	.argtypes = {INTERVALOID, INT4OID},
};
#define REAP_HOLDER_SLOTS_COL_REAPED 1

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

	dlock_sql_connect();

	/*
	 * While a new name is being created (its transaction holds the floor
	 * lock shared), reaping could lower the floor it reads: try again later.
	 */
	if (!dlock_floor_lock_exclusive())
	{
		dlock_sql_finish();
		ereport(NOTICE,
				(errmsg("lock rows were not reaped because new lock names are being created"),
				 errhint("Call dlock.reap again later.")));
		PG_RETURN_INT64(0);
	}
	if (dlock_floor_has_history())
		reaped = reap_rows(values);
	else
	{
		if (dlock_execute(dlock_policy_present() ? &reap_available_stmt : &reap_stmt,
						  values, NULL, 1) != 1)
			elog(ERROR, "pg_dlock: reap returned no row");
		reaped = DatumGetInt64(dlock_sql_value(0, REAP_COL_REAPED, &isnull));
		if (reaped > 0)
			(void) dlock_execute(&floor_compact_stmt, NULL, NULL, 0);
	}
	if (OidIsValid(dlock_catalog()->holder_table) &&
		dlock_execute(dlock_holder_statement(&reap_holder_slots_stmt,
										   &reap_holder_slots_1_5_stmt), values, NULL, 1) == 1)
		reaped += DatumGetInt64(dlock_sql_value(0, REAP_HOLDER_SLOTS_COL_REAPED, &isnull));
	dlock_sql_finish();

	PG_RETURN_INT64(reaped);
}

/*
 * dlock.after_restore's statements. Grants write these tables with
 * RowExclusiveLock: EXCLUSIVE keeps them out until the move commits, and
 * lets readers (dlock.locks) on.
 */
static DlockStatement restore_lock_stmt = {
	.sql =
	"LOCK TABLE dlock.distributed_lock, dlock.lock_holder, dlock.holder_counter,"
	" dlock.token_floor IN EXCLUSIVE MODE",
};

/* the highest token of every name, holder slot and counter, and the floor */
static DlockStatement highest_token_stmt = {
	.sql =
	"SELECT pg_catalog.max(t) FROM ("
	"  SELECT pg_catalog.max(l.fencing_seq) FROM dlock.distributed_lock l"
	"  UNION ALL SELECT pg_catalog.max(h.block_end) FROM dlock.lock_holder h"
	"  UNION ALL SELECT pg_catalog.max(c.fencing_seq) FROM dlock.holder_counter c"
	"  UNION ALL SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f) m(t)",
};

/* an empty floor is the state of nothing: made explicit, so that it moves */
static DlockStatement restore_floor_stmt = {
	.sql =
	"INSERT INTO dlock.token_floor (reaped_max, reaped_at, grant_timeline, grant_system)"
	" SELECT 0, pg_catalog.clock_timestamp(), 0, 0"
	" WHERE NOT EXISTS (SELECT FROM dlock.token_floor)",
};

/* $1: the shift; every lease of the restored state ends now */
static DlockStatement restore_move_stmt = {
	.sql =
	"WITH now AS (SELECT pg_catalog.clock_timestamp() AS t),"
	" rows AS (UPDATE dlock.distributed_lock l SET fencing_seq = l.fencing_seq + $1,"
	"   lease_until = CASE WHEN l.owner_token IS NOT NULL AND l.lease_until > n.t"
	"                 THEN n.t ELSE l.lease_until END"
	"   FROM now n RETURNING 1),"
	" slots AS (UPDATE dlock.lock_holder h SET fencing_seq = h.fencing_seq + $1,"
	"   block_end = h.block_end + $1,"
	"   lease_until = CASE WHEN h.owner_token IS NOT NULL AND h.lease_until > n.t"
	"                 THEN n.t ELSE h.lease_until END"
	"   FROM now n RETURNING 1),"
	" counters AS (UPDATE dlock.holder_counter c SET fencing_seq = c.fencing_seq + $1"
	"   RETURNING 1),"
	" floors AS (UPDATE dlock.token_floor f SET reaped_max = f.reaped_max + $1 RETURNING 1)"
	" SELECT (SELECT pg_catalog.count(*) FROM rows) + (SELECT pg_catalog.count(*) FROM slots),"
	"        (SELECT pg_catalog.count(*) FROM counters), (SELECT pg_catalog.count(*) FROM floors)",
	.nargs = 1,
	.argtypes = {INT8OID},
};

/* The highest token this database issued or reserved, 0 if none. Caller is connected. */
static int64
highest_token(void)
{
	bool		isnull;
	int64		highest;

	(void) dlock_execute(&highest_token_stmt, NULL, NULL, 1);
	highest = DatumGetInt64(dlock_sql_value(0, 1, &isnull));
	return isnull ? 0 : highest;
}

/* every token state of the database: lock rows, holder slots and counters, the floor */
static DlockStatement token_states_stmt = {
	.sql =
	"SELECT l.fencing_seq, l.grant_timeline, l.grant_system FROM dlock.distributed_lock l"
	" UNION ALL SELECT h.block_end, h.grant_timeline, h.grant_system FROM dlock.lock_holder h"
	" UNION ALL SELECT c.fencing_seq, c.grant_timeline, c.grant_system FROM dlock.holder_counter c"
	" UNION ALL SELECT f.reaped_max, COALESCE(f.grant_timeline, 0),"
	"        COALESCE(f.grant_system, 0) FROM dlock.token_floor f",
};

/*
 * dlock.highest_token(OUT fencing_token bigint, OUT history integer)
 * returns record
 *
 * Read before DROP EXTENSION, for dlock.carry_over after CREATE EXTENSION:
 * the state whose next token at the position a grant would have now is
 * the best of every state of the database, as a reap of every row would
 * leave the floor, and that position. The life's epoch is started as a
 * grant would start it.
 */
Datum
dlock_highest_token(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int32		history;
	int64		best;
	uint64		n;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("dlock.highest_token cannot run during recovery")));
	dlock_sql_connect();
	history = dlock_history_for_carry_over();
	best = dlock_next_token(0, 0, 0, history);
	n = dlock_execute(&token_states_stmt, NULL, NULL, 0);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		int64		token = DatumGetInt64(dlock_sql_value(i, 1, &isnull));
		int32		grant_history = DatumGetInt32(dlock_sql_value(i, 2, &isnull));
		int64		grant_system = DatumGetInt64(dlock_sql_value(i, 3, &isnull));

		best = Max(best, dlock_next_token(token, grant_history, grant_system, history));
	}
	dlock_sql_finish();
	values[0] = Int64GetDatum(dlock_floor_token(best));
	values[1] = Int32GetDatum(history);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

static DlockStatement carry_over_stmt = {
	.sql =
	"INSERT INTO dlock.token_floor (reaped_max, reaped_at, grant_timeline, grant_system)"
	" VALUES ($1, pg_catalog.clock_timestamp(), $2, $3)",
	.nargs = 3,
	.argtypes = {INT8OID, INT4OID, INT8OID},
};

/* whether the extension has issued or recorded anything yet */
static DlockStatement anything_issued_stmt = {
	.sql =
	"SELECT EXISTS (SELECT FROM dlock.distributed_lock) OR EXISTS (SELECT FROM dlock.lock_holder)"
	"    OR EXISTS (SELECT FROM dlock.holder_counter) OR EXISTS (SELECT FROM dlock.token_floor)"
	"    OR EXISTS (SELECT FROM dlock.token_epoch)",
};

/*
 * dlock.carry_over(fencing_token, history) returns void
 *
 * Right after DROP EXTENSION and CREATE EXTENSION, with what
 * dlock.highest_token() gave before the drop: the reap floor becomes that
 * state, and the new extension's epochs go on from the old one's on this
 * timeline, so that carrying over is a reap of every row. Refused once the
 * new extension has issued anything: its epochs would have started again.
 */
Datum
dlock_carry_over(PG_FUNCTION_ARGS)
{
	Datum		values[3];
	bool		isnull;

	if (PG_GETARG_INT64(0) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fencing_token must not be negative")));
	if (PG_GETARG_INT32(1) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("history must be positive")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("dlock.carry_over cannot run during recovery")));
	dlock_sql_connect();
	(void) dlock_execute(&anything_issued_stmt, NULL, NULL, 1);
	if (DatumGetBool(dlock_sql_value(0, 1, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock.carry_over needs an extension that has issued no token yet"),
				 errhint("Run it right after CREATE EXTENSION, before any grant.")));
	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = Int64GetDatum((int64) GetSystemIdentifier());
	(void) dlock_execute(&carry_over_stmt, values, NULL, 0);
	dlock_epoch_carry_over(PG_GETARG_INT32(1));
	dlock_sql_finish();
	PG_RETURN_VOID();
}

/*
 * dlock.after_restore(lost_timelines) returns bigint
 *
 * After restoring a backup or dump older than the last grants of the lost
 * server: the servers that ran after the backup issued tokens at history
 * positions the restored tables never saw, up to the last epoch of the
 * backup's timeline (epochs are bounded per timeline), and on later
 * timelines if they were promoted. Moving every token by lost_timelines
 * whole timelines of positions puts every next token -- of a name's row, a
 * holder slot's block, or a new name's floor -- above all of them. Every
 * lease of the restored state ends now: its holder cannot know the moved
 * token. Returns how many lock rows and holder slots moved.
 */
Datum
dlock_after_restore(PG_FUNCTION_ARGS)
{
	int32		lost_timelines = PG_GETARG_INT32(0);
	Datum		shift;
	int64		highest;
	int64		moved;
	bool		isnull;

	if (lost_timelines < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lost_timelines must be at least 1")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("dlock.after_restore cannot run during recovery"),
				 errhint("Run it on the restored server once it accepts writes.")));

	dlock_sql_connect();
	(void) dlock_execute(&restore_lock_stmt, NULL, NULL, 0);
	highest = highest_token();
	shift = Int64GetDatum(dlock_restore_shift(lost_timelines, highest));
	(void) dlock_execute(&restore_floor_stmt, NULL, NULL, 0);
	if (dlock_execute(&restore_move_stmt, &shift, NULL, 1) != 1)
		elog(ERROR, "pg_dlock: after_restore returned no row");
	moved = DatumGetInt64(dlock_sql_value(0, 1, &isnull));
	dlock_sql_finish();

	PG_RETURN_INT64(moved);
}

/* The purges: rows older than $1 go; they return how many went */
static DlockStatement purge_fence_stmt = {
	.sql =
	"WITH gone AS (DELETE FROM dlock.resource_fence f"
	"  WHERE f.updated_at < pg_catalog.clock_timestamp() - $1 RETURNING 1)"
	" SELECT pg_catalog.count(*)::int8 FROM gone",
	.nargs = 1,
	.argtypes = {INTERVALOID},
};

static DlockStatement purge_audit_stmt = {
	.sql =
	"WITH gone AS (DELETE FROM dlock.audit_log a"
	"  WHERE a.logged_at < pg_catalog.clock_timestamp() - $1 RETURNING 1)"
	" SELECT pg_catalog.count(*)::int8 FROM gone",
	.nargs = 1,
	.argtypes = {INTERVALOID},
};
#define PURGE_COL_PURGED 1

/*
 * Run purge statement stmt with the interval in argument 0 ("older_than")
 * and return how many rows went; shared by the purge functions.
 */
static int64
purge_older_than(FunctionCallInfo fcinfo, DlockStatement *stmt)
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

	dlock_sql_connect();
	if (dlock_execute(stmt, values, NULL, 1) != 1)
		elog(ERROR, "pg_dlock: purge returned no row");
	purged = DatumGetInt64(dlock_sql_value(0, PURGE_COL_PURGED, &isnull));
	dlock_sql_finish();
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
	PG_RETURN_INT64(purge_older_than(fcinfo, &purge_fence_stmt));
}

/*
 * dlock.purge_audit_log(older_than) returns bigint
 */
Datum
dlock_purge_audit_log(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(purge_older_than(fcinfo, &purge_audit_stmt));
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
