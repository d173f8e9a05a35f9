/*-------------------------------------------------------------------------
 *
 * audit.c
 *	  Writing dlock.audit_log (dlock.purge_audit_log is in admin.c).
 *
 * dlock.audit chooses what is recorded: "force" (the default) records force
 * releases only; "all" adds every grant, takeover, release and refused
 * renewal -- one more row written per lease event, which costs about as
 * much as the event itself.
 *
 * IDENTIFICATION
 *	  extension/audit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "sql_executor.h"
#include "audit.h"

/* The record; $5, the role, is the caller's */
static DlockStatement audit_stmt = {
	.sql =
	"INSERT INTO dlock.audit_log (event, lock_name, fencing_token, holder, role_name, reason)"
	" VALUES ($1, $2, $3, $4, $5, $6)",
	.nargs = 6,
	.argtypes = {TEXTOID, TEXTOID, INT8OID, TEXTOID, NAMEOID, TEXTOID},
};

/*
 * Append an audit record; caller is connected (dlock_sql_connect). The
 * role recorded is the caller's (SET ROLE included), not the extension
 * owner that the executor runs the statement as.
 */
void
dlock_audit(const char *event, text *lock_name, Datum fencing_token,
			bool token_isnull, text *holder, const char *reason)
{
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	NameData	role;

	namestrcpy(&role, GetUserNameFromId(GetOuterUserId(), false));
	values[0] = CStringGetTextDatum(event);
	values[1] = PointerGetDatum(lock_name);
	values[2] = fencing_token;
	if (token_isnull)
		nulls[2] = 'n';
	values[3] = PointerGetDatum(holder);
	if (holder == NULL)
		nulls[3] = 'n';
	values[4] = NameGetDatum(&role);
	values[5] = reason ? CStringGetTextDatum(reason) : (Datum) 0;
	if (reason == NULL)
		nulls[5] = 'n';
	(void) dlock_execute(&audit_stmt, values, nulls, 0);
}

