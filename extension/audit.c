/*-------------------------------------------------------------------------
 *
 * audit.c
 *	  Writing and purging dlock.audit_log.
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

#include "pg_dlock.h"

PG_FUNCTION_INFO_V1(dlock_purge_audit_log);

/*
 * Append an audit record; caller has an SPI connection. The role recorded
 * is the caller's (SET ROLE included), not the extension owner that
 * SECURITY DEFINER runs the statement as.
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
	(void) dlock_execute(PLAN_AUDIT, values, nulls, 0);
}

/*
 * dlock.purge_audit_log(older_than) returns bigint
 */
Datum
dlock_purge_audit_log(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(dlock_purge_older_than(fcinfo, PLAN_PURGE_AUDIT));
}
