/*-------------------------------------------------------------------------
 *
 * sql_executor.c
 *	  The one executor of the SQL pg_dlock runs.
 *
 * These are the rare paths (fence, force release, reap, audit records, the
 * expiry worker, shared leases and permits); exclusive leases reach their
 * rows through lock_row.c. Each statement is defined beside the code that
 * binds its parameters and reads its columns, as a DlockStatement; the
 * executor knows none of them. It prepares a statement on its first run in
 * the backend and keeps the plan, and runs every statement as the extension
 * owner with search_path pinned to pg_catalog, pg_temp, whoever calls it
 * (see dlock_owner_scope_begin), so it resolves names the same way on every
 * call, and only after checking that "dlock" is still the extension's own
 * schema (schema.c). Values always travel as parameters: lock names are
 * data, never SQL.
 *
 * One snapshot rule. Every statement reads the latest committed state, in
 * every isolation level: a lease is decided on what is committed when the
 * decision is made, under the lock that orders it (the name's kind lock, a
 * row lock), never on the snapshot a REPEATABLE READ or SERIALIZABLE
 * transaction took before. Such a transaction's own snapshot would hide a
 * grant committed after it began (a shared lease beside an exclusive one, a
 * slot the clearing UPDATE never sees while the probe does) or make its
 * statements fail with a serialization error where READ COMMITTED follows
 * the row to its newest version. So dlock_execute runs each statement on a
 * new latest snapshot, and with the executor's row-level rules of READ
 * COMMITTED: an UPDATE or a row lock that finds the row changed meanwhile
 * judges its newest version again (EvalPlanQual) instead of raising a
 * serialization failure. The caller's own queries keep their snapshot.
 *
 * Statements decide expiry with clock_timestamp() inside the statement,
 * never now(): now() is the transaction's start, and a lease judged on it
 * could be live for a caller whose transaction began long ago. Because the
 * WHERE clause calls clock_timestamp() itself, a statement that waited for
 * a row lock re-judges the row at the moment it gets it.
 *
 * IDENTIFICATION
 *	  extension/sql_executor.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "dlock.h"
#include "catalog.h"
#include "schema.h"
#include "sql_executor.h"

/*
 * Open an SPI connection for the statements that follow; every
 * dlock_sql_connect is matched by a dlock_sql_finish (an error needs
 * neither: transaction abort closes the connection).
 */
void
dlock_sql_connect(void)
{
	int			ret = SPI_connect();

	if (ret != SPI_OK_CONNECT)
		elog(ERROR, "pg_dlock: SPI_connect failed: %s",
			 SPI_result_code_string(ret));
}

/*
 * Close the connection dlock_sql_connect opened; the rows of its
 * statements are gone, those of an outer connection are readable again.
 */
void
dlock_sql_finish(void)
{
	int			ret = SPI_finish();

	if (ret != SPI_OK_FINISH)
		elog(ERROR, "pg_dlock: SPI_finish failed: %s",
			 SPI_result_code_string(ret));
}

/*
 * The kept plan of statement stmt, prepared on its first use in this
 * backend.
 */
static SPIPlanPtr
statement_plan(DlockStatement *stmt)
{
	if (stmt->plan == NULL)
	{
		SPIPlanPtr	plan;

		Assert(stmt->nargs >= 0 && stmt->nargs <= DLOCK_SQL_MAX_ARGS);
		plan = SPI_prepare(stmt->sql, stmt->nargs, stmt->argtypes);
		if (plan == NULL)
			elog(ERROR, "pg_dlock: SPI_prepare failed for \"%s\": %s",
				 stmt->sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "pg_dlock: SPI_keepplan failed for \"%s\"", stmt->sql);
		stmt->plan = plan;
	}
	return stmt->plan;
}

/*
 * Run the statements between begin and end as the extension owner with a
 * pinned search_path.
 *
 * The lease functions run with the caller's privileges (they reach their
 * rows without the executor), so a statement they need -- an audit record
 * -- switches to the extension owner and a pinned search_path for its
 * duration, as a SECURITY DEFINER function would. The search_path is pinned
 * even when the caller already is the owner: the expiry worker connects as
 * the bootstrap superuser under the database's own settings, which the
 * database owner chooses, and an operator it shadowed in an earlier schema
 * would otherwise run with those rights.
 */
void
dlock_owner_scope_begin(DlockOwnerScope *scope)
{
	Oid			owner = dlock_catalog()->owner;

	GetUserIdAndSecContext(&scope->userid, &scope->sec_context);
	if (scope->userid != owner)
		SetUserIdAndSecContext(owner, scope->sec_context | SECURITY_LOCAL_USERID_CHANGE);
	scope->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
dlock_owner_scope_end(DlockOwnerScope *scope)
{
	AtEOXact_GUC(true, scope->nestlevel);
	SetUserIdAndSecContext(scope->userid, scope->sec_context);
}

/*
 * Run plan on a new latest snapshot, with READ COMMITTED's row-level rules
 * (see "One snapshot rule" above); returns SPI_execute_snapshot's result.
 *
 * In REPEATABLE READ and SERIALIZABLE the transaction's isolation level is
 * READ COMMITTED for the statement only, so that the executor follows a row
 * changed after the snapshot to its newest version rather than fail; it is
 * set back on every way out. Nothing in the statement may take the
 * transaction snapshot meanwhile (with a snapshot given, SPI takes none, and
 * pg_dlock's tables have no triggers or foreign keys); the check after it
 * makes sure the caller's snapshot is still the one it had. Predicate locks
 * of a SERIALIZABLE transaction are still taken on what the statement reads.
 */
static int
execute_on_latest(SPIPlanPtr plan, Datum *values, const char *nulls, long count)
{
	int			isolation = XactIsoLevel;
	Snapshot	xact_snapshot = NULL;
	int			ret;

	if (!IsolationUsesXactSnapshot())
		return SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(),
									InvalidSnapshot, false, true, count);

	xact_snapshot = GetTransactionSnapshot();
	PG_TRY();
	{
		XactIsoLevel = XACT_READ_COMMITTED;
		ret = SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(),
								   InvalidSnapshot, false, true, count);
	}
	PG_FINALLY();
	{
		XactIsoLevel = isolation;
	}
	PG_END_TRY();
	if (GetTransactionSnapshot() != xact_snapshot)
		elog(ERROR, "pg_dlock: a statement replaced the transaction snapshot");
	return ret;
}

/*
 * Run statement stmt with the given parameters inside the connection the
 * caller opened (dlock_sql_connect); returns the number of rows processed,
 * which dlock_sql_value reads. nulls follows SPI_execute_plan ('n' = NULL).
 *
 * dlock_owner_scope_begin/end serve a caller that runs several statements in
 * a row (the switch of user and search_path is then made once): an error
 * inside the scope needs no cleanup, transaction or subtransaction abort
 * restores both, as for a SECURITY DEFINER function.
 */
int
dlock_execute(DlockStatement *stmt, Datum *values, const char *nulls, long count)
{
	DlockOwnerScope scope;
	int			ret;

	dlock_owner_scope_begin(&scope);
	(void) dlock_require_own_schema();
	ret = execute_on_latest(statement_plan(stmt), values, nulls, count);
	if (ret < 0)
		elog(ERROR, "pg_dlock: statement \"%s\" failed: %s",
			 stmt->sql, SPI_result_code_string(ret));
	dlock_owner_scope_end(&scope);
	return (int) SPI_processed;
}

/*
 * Column "column" (numbered from 1) of row "row" (from 0) of the rows the
 * last statement run through this connection returned.
 */
Datum
dlock_sql_value(uint64 row, int column, bool *isnull)
{
	Datum		value;

	if (SPI_tuptable == NULL || row >= SPI_processed)
		elog(ERROR, "pg_dlock: statement result has no row " UINT64_FORMAT, row);
	value = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						  column, isnull);
	if (SPI_result == SPI_ERROR_NOATTRIBUTE)
		elog(ERROR, "pg_dlock: statement result has no column %d", column);
	return value;
}
