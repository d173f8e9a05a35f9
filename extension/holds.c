/*-------------------------------------------------------------------------
 *
 * holds.c
 *	  dlock.holds and dlock.assert_holds: check a fencing token in the
 *	  transaction that writes the business data, and pin the lease.
 *
 * A lease alone does not give mutual exclusion: a holder can pause past its
 * lease and write after someone else took over. holds() checks the token in
 * the business transaction and, when it is the live lease, locks the lease
 * row FOR SHARE. A takeover, release or force release must update that row,
 * so it waits until the business transaction ends: the business transaction
 * either commits while the lease is valid, or its holds() check fails.
 *
 * A pin stalls the lease's holder (renew, release) and any takeover for as
 * long as the pinning transaction lasts. So holds() is granted to the roles
 * that write fenced data rather than to PUBLIC, and dlock.max_pin bounds a
 * pin: a session whose transaction still holds a pin after dlock.max_pin is
 * terminated, as idle_in_transaction_session_timeout would, but under a
 * setting only a superuser can change.
 *
 * IDENTIFICATION
 *	  extension/holds.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "catalog.h"
#include "lock_row.h"
#include "schema.h"
#include "lease_policy.h"
#include "holder_lease.h"
#include "holds.h"

PG_FUNCTION_INFO_V1(dlock_holds);
PG_FUNCTION_INFO_V1(dlock_assert_holds);

/* dlock.max_pin, in milliseconds; 0 = pins are not bounded */
int			dlock_max_pin_ms = 0;

static TimeoutId pin_timeout = MAX_TIMEOUTS;
static bool pin_armed = false;
static volatile sig_atomic_t pin_expired = false;
static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * Timeout handler: the transaction has pinned a lease for dlock.max_pin.
 * End the session, as a pg_terminate_backend would: that also works when it
 * sits idle in its transaction.
 */
static void
pin_timeout_handler(void)
{
	pin_expired = true;
	ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * Say why the session is terminated, in the message the client gets.
 */
static void
pin_emit_log(ErrorData *edata)
{
	if (pin_expired && edata->elevel == FATAL &&
		edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN && edata->detail == NULL)
		edata->detail = psprintf("The transaction pinned a lease with dlock.holds() for longer than dlock.max_pin (%d ms).",
								 dlock_max_pin_ms);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * Start the pin bound for the current transaction, once.
 */
static void
arm_pin_bound(void)
{
	if (dlock_max_pin_ms <= 0 || pin_armed)
		return;
	if (pin_timeout == MAX_TIMEOUTS)
		pin_timeout = RegisterTimeout(USER_TIMEOUT, pin_timeout_handler);
	enable_timeout_after(pin_timeout, dlock_max_pin_ms);
	pin_armed = true;
}

void
dlock_holds_xact_end(XactEvent event)
{
	if (!pin_armed)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:

			/*
			 * A prepared transaction keeps its row locks past the session,
			 * out of reach of the bound.
			 */
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that pinned a lease while dlock.max_pin is set"),
					 errdetail("A prepared transaction would keep the pin for as long as it stays prepared.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			disable_timeout(pin_timeout, false);
			pin_armed = false;
			break;
		default:
			break;
	}
}

/*
 * The one rule for who may pin a lease: a pin stalls the lease's holder and
 * any takeover, so only a role that may execute dlock.holds or
 * dlock.assert_holds (revoked from PUBLIC) may take one, whether it asks
 * through those functions or through a strict enforce_fencing trigger on a
 * table of its own. The functions' OIDs are kept per catalog generation.
 */
static void
require_pin_privilege(text *lock_name)
{
	static uint32 generation = 0;
	static Oid	holds_oid = InvalidOid;
	static Oid	assert_holds_oid = InvalidOid;
	Oid			user = GetUserId();

	if (generation == 0 || generation != dlock_catalog()->generation)
	{
		Oid			argtypes[2] = {TEXTOID, INT8OID};

		holds_oid = dlock_own_function("holds", 2, argtypes, true);
		assert_holds_oid = dlock_own_function("assert_holds", 2, argtypes, true);
		generation = dlock_catalog()->generation;
	}
	if (dlock_proc_aclcheck(holds_oid, user, ACL_EXECUTE) == ACLCHECK_OK ||
		dlock_proc_aclcheck(assert_holds_oid, user, ACL_EXECUTE) == ACLCHECK_OK)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to pin lock \"%s\"", text_to_cstring(lock_name)),
			 errdetail("Checking a lease pins it as dlock.holds() does, and role \"%s\" may execute neither dlock.holds nor dlock.assert_holds.",
					   GetUserNameFromId(user, false)),
			 errhint("Grant EXECUTE on dlock.holds(text, bigint) to the role that writes the fenced table.")));
}

/*
 * Check the token against the lock and pin the lease when it is live. The
 * check is made on the newest committed version of the row with one clock
 * reading; a row being changed by another transaction (a release, a
 * takeover) is waited for, without holding anything, and checked again as
 * it is then. A failed check keeps no lock and takes no transaction ID, so
 * it never delays the current holder. row receives the version checked
 * (found says whether the lock has a row at all).
 */
static bool
holds_token(text *lock_name, int64 token, DlockRow *row, bool *found)
{
	DlockRows	rows;
	bool		held = false;
	int			rounds = 0;

	require_pin_privilege(lock_name);
	dlock_rows_open(&rows);
	while ((*found = dlock_row_read(&rows, lock_name, row)))
	{
		TimestampTz now;

		dlock_decision_round(&rounds, lock_name);
		now = GetCurrentTimestamp();

		if (DatumGetInt64(row->values[Anum_fencing_seq - 1]) != token ||
			row->nulls[Anum_owner_token - 1] || row->nulls[Anum_lease_until - 1] ||
			DatumGetTimestampTz(row->values[Anum_lease_until - 1]) <= now)
			break;
		/* Policies (lease_policy.c): a session-bound lease ends with its session */
		if (!dlock_policy_may_change(&rows, row, now, 0))
			break;
		switch (dlock_row_lock(&rows, row, LockTupleShare))
		{
			case ROW_LOCKED:
				held = true;
				break;
			case ROW_CHANGED:
				continue;
			case ROW_BLOCKED:
				(void) dlock_row_wait(&rows, row, 0);
				continue;
		}
		break;
	}
	dlock_rows_close(&rows);

	/* or the token of a live shared lease or permit (holder_lease.c) */
	if (!held && dlock_holder_holds(lock_name, token))
		held = true;

	if (held)
		arm_pin_bound();
	else
		dlock_count(STAT_HOLDS_REJECTIONS, 1);
	return held;
}

/*
 * Pin the lease of lock_name whose fencing token is token, for a strict
 * enforce_fencing trigger: true when it is live, as dlock.holds() says.
 */
bool
dlock_pin_lease(text *lock_name, int64 token)
{
	DlockRow	row;
	bool		found;

	return holds_token(lock_name, token, &row, &found);
}

/*
 * dlock.holds(lock_name, fencing_token) returns boolean
 */
Datum
dlock_holds(PG_FUNCTION_ARGS)
{
	text	   *lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	DlockRow	row;
	bool		found;

	dlock_require_arg(fcinfo, 1, "fencing_token");
	PG_RETURN_BOOL(holds_token(lock_name, PG_GETARG_INT64(1), &row, &found));
}

/*
 * dlock.assert_holds(lock_name, fencing_token) returns void
 *
 * Raises lock_not_held, with what the lock's state is instead.
 */
Datum
dlock_assert_holds(PG_FUNCTION_ARGS)
{
	text	   *lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	int64		token;
	DlockRow	row;
	bool		found;
	char	   *detail;

	dlock_require_arg(fcinfo, 1, "fencing_token");
	token = PG_GETARG_INT64(1);

	if (holds_token(lock_name, token, &row, &found))
		PG_RETURN_VOID();

	if (!found)
		detail = pstrdup("The lock has never been acquired.");
	else
	{
		int64		current = DatumGetInt64(row.values[Anum_fencing_seq - 1]);
		bool		live = !row.nulls[Anum_owner_token - 1] &&
			!row.nulls[Anum_lease_until - 1] &&
			DatumGetTimestampTz(row.values[Anum_lease_until - 1]) > GetCurrentTimestamp();

		if (live && current != token)
			detail = psprintf("The live lease has fencing token " INT64_FORMAT ".", current);
		else if (live)
			detail = pstrdup("The lease changed while it was being checked.");
		else
			detail = psprintf("No lease is live; the last fencing token was " INT64_FORMAT ".",
							  current);
	}

	ereport(ERROR,
			(errcode(ERRCODE_DLOCK_LOCK_NOT_HELD),
			 errmsg("lock \"%s\" is not held with fencing token " INT64_FORMAT,
					text_to_cstring(lock_name), token),
			 errdetail_internal("%s", detail)));
	PG_RETURN_VOID();			/* keep compiler quiet */
}

/*
 * Called from _PG_init: the dlock.max_pin setting and the callbacks.
 */
void
dlock_holds_init(void)
{
	DefineCustomIntVariable("dlock.max_pin",
							gettext_noop("Longest a transaction may keep a lease pinned by dlock.holds() or dlock.assert_holds()."),
							gettext_noop("A session whose transaction holds a pin longer is terminated. 0 leaves pins unbounded."),
							&dlock_max_pin_ms,
							0, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = pin_emit_log;
}
