/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  dlock.try_acquire, dlock.acquire, dlock.renew and dlock.release.
 *
 * A lease is the lock's row with an owner token and a lease_until on the
 * server's clock. Granting it is one UPDATE of that row (or an INSERT for a
 * name seen for the first time) whose WHERE clause admits the grant only
 * when the lock is free, expired, or already this owner's. A refused attempt
 * therefore modifies nothing: it takes no row lock and no transaction ID, so
 * a caller that fails inside a long transaction never delays the holder.
 *
 * The row belongs to the caller's transaction like any other write: a lease
 * taken in a transaction that rolls back never existed, and its token is
 * only valid once that transaction commits.
 *
 * IDENTIFICATION
 *	  extension/lease.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/timestamp.h"

#include "pg_dlock.h"

PG_FUNCTION_INFO_V1(dlock_try_acquire);
PG_FUNCTION_INFO_V1(dlock_acquire);
PG_FUNCTION_INFO_V1(dlock_renew);
PG_FUNCTION_INFO_V1(dlock_release);

/* Arguments of one acquire call, checked */
typedef struct AcquireArgs
{
	text	   *lock_name;
	Datum		ttl;
	pg_uuid_t  *owner;
	text	   *holder;			/* NULL when not given */
} AcquireArgs;

/* Outcome of one attempt */
typedef struct AcquireAttempt
{
	bool		acquired;
	HeapTuple	lease;			/* in the caller's memory context */
	TimestampTz busy_until;		/* lease_until of the live lease, when busy */
} AcquireAttempt;

/*
 * A random (version 4) owner token, for callers that did not bring one.
 */
static pg_uuid_t *
new_owner_token(void)
{
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

	if (!pg_strong_random(uuid->data, UUID_LEN))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random owner token")));
	uuid->data[6] = (uuid->data[6] & 0x0f) | 0x40;
	uuid->data[8] = (uuid->data[8] & 0x3f) | 0x80;
	return uuid;
}

/*
 * Check and collect the arguments shared by try_acquire and acquire. The
 * optional owner_token and holder are at argument positions owner_arg and
 * owner_arg + 1.
 */
static void
acquire_args(FunctionCallInfo fcinfo, int owner_arg, AcquireArgs *args)
{
	args->lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	(void) dlock_arg_ttl(fcinfo, 1);
	args->ttl = PG_GETARG_DATUM(1);
	args->owner = PG_ARGISNULL(owner_arg) ? new_owner_token() :
		PG_GETARG_UUID_P(owner_arg);
	args->holder = PG_ARGISNULL(owner_arg + 1) ? NULL :
		PG_GETARG_TEXT_PP(owner_arg + 1);

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot acquire lock \"%s\" during recovery",
						text_to_cstring(args->lock_name)),
				 errhint("Locks are granted by the primary server; connect to it, for example with target_session_attrs=read-write.")));
}

/*
 * Copy the lease in the first row of SPI_tuptable into a tuple of type
 * tupdesc, allocated in memory context cxt.
 */
static HeapTuple
lease_from_spi(TupleDesc tupdesc, MemoryContext cxt)
{
	HeapTuple	row = SPI_tuptable->vals[0];
	TupleDesc	rowdesc = SPI_tuptable->tupdesc;
	Datum		values[4];
	bool		nulls[4];
	MemoryContext oldcxt;
	HeapTuple	lease;

	for (int i = 0; i < 4; i++)
		values[i] = SPI_getbinval(row, rowdesc, i + 1, &nulls[i]);
	oldcxt = MemoryContextSwitchTo(cxt);
	lease = heap_form_tuple(tupdesc, values, nulls);
	MemoryContextSwitchTo(oldcxt);
	return lease;
}

/*
 * The statements of one attempt; see try_acquire_once.
 */
static void
attempt_grant(const AcquireArgs *args, TupleDesc tupdesc, MemoryContext cxt,
				 AcquireAttempt *attempt)
{
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = PointerGetDatum(args->lock_name);
	values[1] = args->ttl;
	values[2] = UUIDPGetDatum(args->owner);
	values[3] = PointerGetDatum(args->holder);
	if (args->holder == NULL)
		nulls[3] = 'n';
	values[4] = Int64GetDatum((int64) dlock_token_timeline());

	attempt->acquired = false;
	attempt->busy_until = 0;

	/*
	 * Normally one round: the row exists and the UPDATE decides. The INSERT
	 * runs for a name never seen (or reaped); losing that race to another
	 * session, or a lease expiring between two statements, sends us round
	 * again.
	 */
	for (int round = 0; round < 3; round++)
	{
		bool		isnull;

		if (dlock_execute(PLAN_ACQUIRE_EXISTING, values, nulls, 1) == 0)
		{
			Datum		values_name[1] = {values[0]};

			if (dlock_execute(PLAN_LEASE_EXPIRY, values_name, NULL, 1) > 0)
			{
				bool		live = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
															  SPI_tuptable->tupdesc,
															  2, &isnull));

				if (live)
				{
					attempt->busy_until =
						DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
														  SPI_tuptable->tupdesc,
														  1, &isnull));
					return;
				}
				continue;		/* expired since the UPDATE looked: again */
			}
			(void) dlock_execute(PLAN_FLOOR_SHARED, NULL, NULL, 1);
			(void) dlock_execute_latest(PLAN_FLOOR_READ, NULL, NULL, 1);
			values[5] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
			if (dlock_execute(PLAN_ACQUIRE_NEW, values, nulls, 1) == 0)
				continue;		/* another session created it first */
		}

		/* Granted, or extended for a retrying owner */
		{
			HeapTuple	row = SPI_tuptable->vals[0];
			TupleDesc	rowdesc = SPI_tuptable->tupdesc;
			bool		new_lease = DatumGetBool(SPI_getbinval(row, rowdesc, 5, &isnull));
			bool		taken_over = DatumGetBool(SPI_getbinval(row, rowdesc, 6, &isnull));
			Datum		token = SPI_getbinval(row, rowdesc, 3, &isnull);

			attempt->acquired = true;
			attempt->lease = lease_from_spi(tupdesc, cxt);
			dlock_require_durable_commit();
			if (new_lease)
			{
				dlock_count(STAT_ACQUISITIONS, 1);
				if (taken_over)
					dlock_count(STAT_TAKEOVERS, 1);
				if (dlock_audit_level == DLOCK_AUDIT_ALL)
					dlock_audit(taken_over ? "takeover" : "acquire", args->lock_name,
								token, false, args->holder, NULL);
				dlock_event(taken_over ? "takeover" : "acquire", args->lock_name, DatumGetInt64(token), args->holder, DatumGetTimestampTz(SPI_getbinval(row, rowdesc, 4, &isnull)));
			}
			return;
		}
	}
}

/* Arguments of attempt_grant when run through dlock_attempt */
typedef struct GrantCall
{
	const AcquireArgs *args;
	TupleDesc	tupdesc;
	MemoryContext cxt;
	AcquireAttempt *attempt;
} GrantCall;

static bool
grant_call(void *arg)
{
	GrantCall  *call = (GrantCall *) arg;

	attempt_grant(call->args, call->tupdesc, call->cxt, call->attempt);
	return call->attempt->acquired;
}

/*
 * One attempt to grant the lease; caller has an SPI connection. Counts and
 * audits the outcome; on success, the transaction will commit durably. A
 * refused attempt keeps no row lock (see dlock_attempt).
 */
static void
try_acquire_once(const AcquireArgs *args, TupleDesc tupdesc, MemoryContext cxt,
				 AcquireAttempt *attempt)
{
	GrantCall	call = {args, tupdesc, cxt, attempt};

	dlock_attempt(grant_call, &call);
}

/*
 * Result type of the calling function, which must be dlock.lease.
 */
static TupleDesc
lease_tupdesc(FunctionCallInfo fcinfo)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	return BlessTupleDesc(tupdesc);
}

/*
 * dlock.try_acquire(lock_name, ttl, owner_token, holder) returns dlock.lease
 */
Datum
dlock_try_acquire(PG_FUNCTION_ARGS)
{
	AcquireArgs args;
	AcquireAttempt attempt;
	TupleDesc	tupdesc;
	MemoryContext cxt = CurrentMemoryContext;

	acquire_args(fcinfo, 2, &args);
	tupdesc = lease_tupdesc(fcinfo);

	SPI_connect();
	try_acquire_once(&args, tupdesc, cxt, &attempt);
	SPI_finish();

	if (!attempt.acquired)
	{
		dlock_count(STAT_BUSY, 1);
		PG_RETURN_NULL();
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(attempt.lease));
}

/*
 * dlock.acquire(lock_name, ttl, wait, owner_token, holder) returns dlock.lease
 *
 * Waits in the server without holding a row lock or a transaction ID between
 * attempts; cancel and statement_timeout interrupt it.
 */
Datum
dlock_acquire(PG_FUNCTION_ARGS)
{
	AcquireArgs args;
	AcquireAttempt attempt;
	TupleDesc	tupdesc;
	MemoryContext cxt = CurrentMemoryContext;
	int64		wait_usecs;
	instr_time	started;
	int			slot;
	volatile int round = 0;

	acquire_args(fcinfo, 3, &args);
	dlock_require_arg(fcinfo, 2, "wait");
	wait_usecs = dlock_interval_usecs(PG_GETARG_INTERVAL_P(2));
	if (wait_usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait must not be negative")));
	if (wait_usecs > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot wait for lock \"%s\" in a REPEATABLE READ or SERIALIZABLE transaction",
						text_to_cstring(args.lock_name)),
				 errdetail("Such a transaction keeps its first snapshot and would never see the lock released."),
				 errhint("Wait in a READ COMMITTED transaction, or use a zero wait and retry in a new transaction.")));
	tupdesc = lease_tupdesc(fcinfo);

	INSTR_TIME_SET_CURRENT(started);
	slot = dlock_wait_prepare(args.lock_name);

	SPI_connect();
	PG_TRY();
	{
		/*
		 * Callers already waiting for this lock go first: without this, a
		 * holder that releases and acquires again in a loop would win every
		 * time against waiters that first have to wake up.
		 */
		if (wait_usecs > 0 && dlock_wait_others_waiting(slot))
		{
			dlock_wait_join(slot);
			dlock_wait_defer(slot, wait_usecs);
			round = 1;
		}
		for (;;)
		{
			instr_time	elapsed;
			int64		waited_usecs;

			try_acquire_once(&args, tupdesc, cxt, &attempt);

			INSTR_TIME_SET_CURRENT(elapsed);
			INSTR_TIME_SUBTRACT(elapsed, started);
			waited_usecs = INSTR_TIME_GET_MICROSEC(elapsed);

			if (attempt.acquired || waited_usecs >= wait_usecs)
			{
				dlock_wait_finish(attempt.acquired, round > 0, waited_usecs);
				break;
			}
			dlock_wait_join(slot);
			dlock_wait_sleep(slot, attempt.busy_until, wait_usecs - waited_usecs, round++);
		}
	}
	PG_FINALLY();
	{
		dlock_wait_leave(slot);
	}
	PG_END_TRY();
	SPI_finish();

	if (!attempt.acquired)
	{
		dlock_count(STAT_BUSY, 1);
		dlock_count(STAT_WAIT_TIMEOUTS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not acquire lock \"%s\" within " INT64_FORMAT " ms",
						text_to_cstring(args.lock_name), wait_usecs / 1000),
				 errdetail("Another owner held a live lease for the whole wait.")));
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(attempt.lease));
}

/*
 * dlock.renew(lock_name, owner_token, ttl) returns timestamptz
 *
 * Extends a live lease of this owner. An expired lease is gone, even if
 * nobody took it yet: renewing it would let a paused holder that missed its
 * deadline carry on as if nothing happened.
 */
Datum
dlock_renew(PG_FUNCTION_ARGS)
{
	text	   *lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	Datum		values[3];
	bool		renewed;
	TimestampTz lease_until = 0;

	dlock_require_arg(fcinfo, 1, "owner_token");
	(void) dlock_arg_ttl(fcinfo, 2);
	values[0] = PointerGetDatum(lock_name);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = PG_GETARG_DATUM(2);

	SPI_connect();
	renewed = dlock_execute(PLAN_RENEW, values, NULL, 1) > 0;
	if (renewed)
	{
		bool		isnull;

		lease_until = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc,
														1, &isnull));
		dlock_require_durable_commit();
		dlock_count(STAT_RENEWALS, 1);
	}
	else
	{
		dlock_count(STAT_RENEWALS_REFUSED, 1);
		if (dlock_audit_level == DLOCK_AUDIT_ALL)
			dlock_audit("renew_refused", lock_name, (Datum) 0, true, NULL, NULL);
	}
	SPI_finish();

	if (!renewed)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(lease_until);
}

/*
 * After a statement that ended a lease returned (fencing_seq, holder): wake
 * the waiters once the transaction commits, count it, and audit it as
 * "event" when dlock.audit is at least audit_from. Caller has an SPI
 * connection.
 */
void
dlock_lease_ended(text *lock_name, const char *event, DlockCounter counter,
				  DlockAuditLevel audit_from, const char *reason)
{
	bool		token_isnull;
	bool		holder_isnull;
	Datum		token = SPI_getbinval(SPI_tuptable->vals[0],
									  SPI_tuptable->tupdesc, 1, &token_isnull);
	Datum		holder = SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 2, &holder_isnull);

	dlock_wake_waiters(lock_name);
	dlock_count(counter, 1);
	dlock_event(event, lock_name, DatumGetInt64(token), holder_isnull ? NULL : DatumGetTextPP(holder), GetCurrentTimestamp());
	if (dlock_audit_level >= (int) audit_from)
		dlock_audit(event, lock_name, token, token_isnull,
					holder_isnull ? NULL : DatumGetTextPP(holder), reason);
}

/*
 * dlock.release(lock_name, owner_token) returns boolean
 *
 * Ends this owner's live lease and nothing else: a release that arrives
 * after the lease expired, or after another owner took the lock, is a no-op.
 */
Datum
dlock_release(PG_FUNCTION_ARGS)
{
	text	   *lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	Datum		values[2];
	bool		had_xid = TransactionIdIsValid(GetTopTransactionIdIfAny());
	bool		released;

	dlock_require_arg(fcinfo, 1, "owner_token");
	values[0] = PointerGetDatum(lock_name);
	values[1] = PG_GETARG_DATUM(1);

	SPI_connect();
	released = dlock_execute(PLAN_RELEASE, values, NULL, 1) > 0;
	if (released)
	{
		dlock_allow_async_release(had_xid);
		dlock_lease_ended(lock_name, "release", STAT_RELEASES, DLOCK_AUDIT_ALL, NULL);
	}
	else
		dlock_count(STAT_RELEASES_REFUSED, 1);
	SPI_finish();

	PG_RETURN_BOOL(released);
}
