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

#include "access/xlog.h"
#include "catalog/pg_type_d.h"
#include "fmgr.h"
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

/* a name's shared leases or permits, all of them */
static DlockStatement holders_force_release_stmt = {
	.sql =
	"UPDATE dlock.lock_holder h SET owner_token = NULL,"
	"       lease_until = pg_catalog.clock_timestamp(), updated_at = pg_catalog.clock_timestamp()"
	" WHERE h.lock_name = $1 AND h.owner_token IS NOT NULL"
	"   AND h.lease_until > pg_catalog.clock_timestamp()"
	" RETURNING h.fencing_seq, h.holder, h.acquired_at, h.kind",
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
			 (count = dlock_execute(&holders_force_release_stmt, values, NULL, 0)) > 0)
	{
		/* no lease policy applies to shared leases and permits */
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
static DlockStatement reap_holder_slots_stmt = {
	.sql =
	"WITH victims AS ("
	"  SELECT h.lock_name, h.slot FROM dlock.lock_holder h"
	"   WHERE (h.owner_token IS NULL OR h.lease_until <= pg_catalog.clock_timestamp())"
	"     AND COALESCE(h.lease_until, h.updated_at) < pg_catalog.clock_timestamp() - $1"
	"   LIMIT $2 FOR UPDATE SKIP LOCKED"
	"), gone AS ("
	"  DELETE FROM dlock.lock_holder h USING victims v"
	"   WHERE h.lock_name = v.lock_name AND h.slot = v.slot RETURNING 1"
	") SELECT pg_catalog.count(*)::int8 FROM gone",
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
		dlock_execute(&reap_holder_slots_stmt, values, NULL, 1) == 1)
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

/*
 * dlock.highest_token() returns bigint: what to carry over a DROP EXTENSION
 * (dlock.carry_over), read before the drop.
 */
Datum
dlock_highest_token(PG_FUNCTION_ARGS)
{
	int64		highest;

	dlock_sql_connect();
	highest = highest_token();
	dlock_sql_finish();
	PG_RETURN_INT64(highest);
}

static DlockStatement carry_over_stmt = {
	.sql =
	"INSERT INTO dlock.token_floor (reaped_max, reaped_at, grant_timeline, grant_system)"
	" VALUES ($1, pg_catalog.clock_timestamp(), $2, $3)",
	.nargs = 3,
	.argtypes = {INT8OID, INT4OID, INT8OID},
};

/*
 * dlock.carry_over(highest_token) returns void
 *
 * After DROP EXTENSION and CREATE EXTENSION: the new extension's reap floor
 * becomes a state at highest_token, at the history position grants are at
 * now (the new extension's epochs start again) and in this cluster, so
 * every name starts above it and moves with every later epoch, as after a
 * reap; a floor without a position would move by the whole position at
 * every grant of a new name, which after_restore's shift need not cover.
 */
Datum
dlock_carry_over(PG_FUNCTION_ARGS)
{
	Datum		values[3];

	if (PG_GETARG_INT64(0) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("highest_token must not be negative")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("dlock.carry_over cannot run during recovery")));
	dlock_sql_connect();
	values[0] = PG_GETARG_DATUM(0);
	values[1] = Int32GetDatum(dlock_history_now());
	values[2] = Int64GetDatum((int64) GetSystemIdentifier());
	(void) dlock_execute(&carry_over_stmt, values, NULL, 0);
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
