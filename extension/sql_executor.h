/*-------------------------------------------------------------------------
 *
 * sql_executor.h
 *	  The one executor of the SQL pg_dlock runs (sql_executor.c).
 *
 * IDENTIFICATION
 *	  extension/sql_executor.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_SQL_EXECUTOR_H
#define DLOCK_SQL_EXECUTOR_H

#include "dlock.h"

#define DLOCK_SQL_MAX_ARGS 16

/*
 * A statement, defined as a static variable in the file that binds its
 * parameters and reads its columns. plan belongs to the executor: the
 * statement prepared on its first run in this backend, kept for the
 * backend's life; leave it NULL.
 */
typedef struct DlockStatement
{
	const char *sql;
	int			nargs;
	Oid			argtypes[DLOCK_SQL_MAX_ARGS];
	struct _SPI_plan *plan;
} DlockStatement;

extern void dlock_sql_connect(void);
extern void dlock_sql_finish(void);
extern int	dlock_execute(DlockStatement *stmt, Datum *values, const char *nulls, long count);
extern Datum dlock_sql_value(uint64 row, int column, bool *isnull);

/* Statements run between begin and end run as the extension owner (switched once) */
typedef struct DlockOwnerScope
{
	Oid			userid;
	int			sec_context;
	int			nestlevel;		/* -1: already the owner, nothing switched */
} DlockOwnerScope;

extern void dlock_owner_scope_begin(DlockOwnerScope *scope);
extern void dlock_owner_scope_end(DlockOwnerScope *scope);

#endif							/* DLOCK_SQL_EXECUTOR_H */
