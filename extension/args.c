/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Argument checks shared by the SQL-callable functions.
 *
 * The functions are not STRICT: a NULL argument must raise
 * null_value_not_allowed rather than silently return NULL, so each entry
 * point checks its arguments here before changing anything.
 *
 * IDENTIFICATION
 *	  extension/args.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "mb/pg_wchar.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"

/*
 * Raise null_value_not_allowed when argument argno is NULL.
 */
void
dlock_require_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

/*
 * Return argument argno as a lock or resource name: not NULL, 1 to
 * DLOCK_MAX_NAME_CHARS characters.
 */
text *
dlock_arg_name(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	text	   *name;
	int			chars;

	dlock_require_arg(fcinfo, argno, argname);
	name = PG_GETARG_TEXT_PP(argno);
	chars = pg_mbstrlen_with_len(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
	if (chars == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", argname)));
	if (chars > DLOCK_MAX_NAME_CHARS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", argname),
				 errdetail("It has %d characters; at most %d are allowed.",
						   chars, DLOCK_MAX_NAME_CHARS)));
	return name;
}

/*
 * The one hash of a lock name (len bytes at name), for everything keyed by
 * it in memory: its wait queue, its kind lock and new-name lock tags, the
 * row cache. Every backend must compute the same value.
 */
uint64
dlock_name_hash(const char *name, int len)
{
	return hash_bytes_extended((const unsigned char *) name, len, 0);
}

/*
 * Length of an interval in microseconds, counting a month as 30 days as
 * interval comparison does.
 */
int64
dlock_interval_usecs(const Interval *interval)
{
	int64		days = (int64) interval->month * DAYS_PER_MONTH + interval->day;
	int64		day_usecs;
	int64		usecs;

	/* saturate rather than wrap: "300000 years" is too long, not negative */
	if (pg_mul_s64_overflow(days, USECS_PER_DAY, &day_usecs) ||
		pg_add_s64_overflow(day_usecs, interval->time, &usecs))
		return days < 0 ? PG_INT64_MIN : PG_INT64_MAX;
	return usecs;
}

/* An interval as PostgreSQL prints it, for messages */
static char *
interval_text(const Interval *interval)
{
	return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(interval)));
}

/*
 * Required interval argument argno, named argname; *usecs receives its
 * length (dlock_interval_usecs).
 */
static Interval *
required_interval(FunctionCallInfo fcinfo, int argno, const char *argname, int64 *usecs)
{
	Interval   *given;

	dlock_require_arg(fcinfo, argno, argname);
	given = PG_GETARG_INTERVAL_P(argno);
	*usecs = dlock_interval_usecs(given);
	return given;
}

/*
 * t + usecs, saturated to the finite timestamps: the one addition of a
 * duration to a clock reading for deadlines and lease ends. The arguments
 * that reach it were bounded by dlock_check_interval_end, so saturation only
 * guards against a clock far in the future.
 */
TimestampTz
dlock_time_plus(TimestampTz t, int64 usecs)
{
	TimestampTz result;

	if (pg_add_s64_overflow(t, usecs, &result) || result >= END_TIMESTAMP)
		return END_TIMESTAMP - 1;
	if (result < MIN_TIMESTAMP)
		return MIN_TIMESTAMP;
	return result;
}

/*
 * Refuse (invalid_parameter_value) a duration argument whose end, counted
 * from the current clock reading, is not a finite timestamp: a wait of
 * "1000000 years" or a max_hold of "300000 years" has no deadline and no
 * end a lease row could store.
 */
void
dlock_check_interval_end(int64 usecs, const char *argname, const Interval *given)
{
	TimestampTz end;

	if (!pg_add_s64_overflow(GetCurrentTimestamp(), usecs, &end) &&
		IS_VALID_TIMESTAMP(end))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s is too long", argname),
			 errdetail("The %s given was \"%s\"; counted from now it ends past the last timestamp PostgreSQL can represent.",
					   argname, interval_text(given))));
}

/*
 * Return the wait argument in microseconds: not NULL, not negative, and
 * ending at a finite timestamp.
 */
int64
dlock_arg_wait(FunctionCallInfo fcinfo, int argno)
{
	int64		usecs;
	Interval   *wait = required_interval(fcinfo, argno, "wait", &usecs);

	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait must not be negative")));
	dlock_check_interval_end(usecs, "wait", wait);
	return usecs;
}

/*
 * Return the ttl argument in microseconds: positive and at most dlock.max_ttl.
 *
 * This is the one conversion of a ttl: the lease ends exactly this many
 * microseconds after the server clock reading of the grant or renewal, so
 * the check and the lease agree. A month counts 30 days and a day 24 hours
 * (as interval comparison does); calendar arithmetic would let "1000 mon
 * -29999 days" pass as one day and then run for 436.
 */
int64
dlock_arg_ttl(FunctionCallInfo fcinfo, int argno)
{
	int64		usecs;
	Interval   *ttl = required_interval(fcinfo, argno, "ttl", &usecs);

	if (usecs <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be positive"),
				 errdetail("The ttl given was \"%s\".", interval_text(ttl))));
	if (usecs > (int64) dlock_max_ttl_seconds * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl exceeds dlock.max_ttl"),
				 errdetail("The ttl given was \"%s\"; dlock.max_ttl is %d seconds.",
						   interval_text(ttl), dlock_max_ttl_seconds),
				 errhint("Renew the lease before it expires instead of asking for a longer one.")));
	return usecs;
}

/*
 * Return the reason argument of an administrative call: required, and not
 * empty or blank, since it is what the audit log is for.
 */
char *
dlock_arg_reason(FunctionCallInfo fcinfo, int argno)
{
	char	   *reason;
	const char *p;

	dlock_require_arg(fcinfo, argno, "reason");
	reason = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	for (p = reason; *p; p++)
		if (!isspace((unsigned char) *p))
			return reason;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("reason must not be empty"),
			 errhint("Say why the lease is ended; the reason is written to dlock.audit_log.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * Return the optional holder argument, or NULL when it is NULL; at most
 * DLOCK_MAX_HOLDER_CHARS characters, since every lease row and audit record
 * carries it.
 */
text *
dlock_arg_holder(FunctionCallInfo fcinfo, int argno)
{
	text	   *holder;
	int			chars;

	if (PG_ARGISNULL(argno))
		return NULL;
	holder = PG_GETARG_TEXT_PP(argno);
	chars = pg_mbstrlen_with_len(VARDATA_ANY(holder), VARSIZE_ANY_EXHDR(holder));
	if (chars > DLOCK_MAX_HOLDER_CHARS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("holder is too long"),
				 errdetail("It has %d characters; at most %d are allowed.",
						   chars, DLOCK_MAX_HOLDER_CHARS)));
	return holder;
}

/*
 * Return the optional owner_token argument of an acquire, or NULL when it
 * is NULL (the caller then makes a random one). The nil UUID is refused: it
 * is what a client that never filled its token in sends, and two such
 * clients would share one lease.
 */
pg_uuid_t *
dlock_arg_owner_token(FunctionCallInfo fcinfo, int argno)
{
	pg_uuid_t  *owner;
	int			i;

	if (PG_ARGISNULL(argno))
		return NULL;
	owner = PG_GETARG_UUID_P(argno);
	for (i = 0; i < UUID_LEN; i++)
		if (owner->data[i] != 0)
			return owner;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("owner_token must not be the nil UUID"),
			 errhint("Pass NULL to have the server generate an owner token, or use a random (version 4) UUID.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * The one back-off of pg_dlock's retry loops: try fn(arg) until it returns
 * true or deadline passes (deadline 0: once only). Between tries it sleeps
 * on the latch 1, 2, 4, 8, then 16 ms at a time, never past the deadline;
 * cancel and statement_timeout interrupt it, and the postmaster's death
 * ends it. Returns whether fn succeeded.
 */
bool
dlock_retry_until(bool (*fn) (void *arg), void *arg, TimestampTz deadline)
{
	for (int round = 0;; round++)
	{
		TimestampTz now;

		if (fn(arg))
			return true;
		now = GetCurrentTimestamp();
		if (deadline == 0 || now >= deadline)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min((long) 1 << Min(round, 4), (deadline - now + 999) / 1000),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Count one more round of a loop that decides again after a change it
 * found (a row changed or locked meanwhile, a wait ended): checks for
 * interrupts, and ends a loop that went DLOCK_MAX_DECISION_ROUNDS rounds
 * without deciding with an error rather than spin. Each round follows
 * another transaction's commit or a wait, so the bound is only reached
 * when something keeps changing what the decision reads.
 */
void
dlock_decision_round(int *rounds, text *lock_name)
{
	CHECK_FOR_INTERRUPTS();
	if (++(*rounds) > DLOCK_MAX_DECISION_ROUNDS)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not decide on lock \"%s\"",
						text_to_cstring(lock_name)),
				 errdetail("What the decision reads changed %d times in a row.",
						   DLOCK_MAX_DECISION_ROUNDS),
				 errhint("Try again.")));
}

/*
 * Refuse, with 25006, a call that would grant a lease (and so issue a
 * token) on a server in recovery, before it reads the WAL timeline or the
 * token epoch: every function that issues a token calls this first. verb
 * says what the caller was asked to do ("acquire", "downgrade").
 */
void
dlock_refuse_in_recovery(text *lock_name, const char *verb)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot %s lock \"%s\" during recovery",
						verb, text_to_cstring(lock_name)),
				 errhint("Locks are granted by the primary server; connect to it, for example with target_session_attrs=read-write.")));
}
