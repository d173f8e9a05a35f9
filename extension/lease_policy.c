/*-------------------------------------------------------------------------
 *
 * lease_policy.c
 *	  Lease policies: session-bound leases, maximum hold, minimum hold and
 *	  lock delay (README "Lease policies"), and their counters.
 *
 * The options are named arguments of dlock.try_acquire and dlock.acquire
 * and apply to the lease they grant; the lease row keeps them in its own
 * columns (added by 1.2), so a later change of the settings does not change
 * a lease already granted:
 *	session_id, session_pid	the session a session-bound lease ends with
 *	hold_limit				acquired_at + max_hold: renewals refused from then
 *	min_hold_until			acquired_at + min_hold: a release before it
 *							keeps the name from new owners until then
 *	lock_delay				how long the name stays ungranted after the
 *							lease is lost (expired, its session ended, or
 *							forced away)
 *	not_before				set by a release (min_hold) or a force release
 *							(lock delay): no new owner before it
 *
 * The lease functions ask this file two questions about the row they
 * decide on: is the lease live (its owner may renew or release it), and
 * until when is the name unavailable to a new owner. With no option set
 * the answers are the 1.1 ones: live while lease_until is ahead, available
 * from then on.
 *
 * The columns are found by name with the catalog (catalog.c, once per
 * catalog generation), so their position in the table does not matter; a
 * database not yet updated to 1.2 has none of them, and then no lease has
 * a policy. The option arguments are also found by name, so the functions'
 * other arguments may be in any order.
 *
 * IDENTIFICATION
 *	  extension/lease_policy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "catalog.h"
#include "args.h"
#include "lock_row.h"
#include "sql_executor.h"
#include "session_lease.h"
#include "lease_policy.h"

PG_FUNCTION_INFO_V1(dlock_policy_counters);
PG_FUNCTION_INFO_V1(dlock_lease_policy_state);

/* Settings, in milliseconds; 0 is off */
int			dlock_max_hold_ms = 0;
int			dlock_lock_delay_ms = 0;
int			dlock_max_lock_delay_ms = 60000;

/* ---------------------------------------------------------------------
 * Counters (shared memory; zero without preloading)
 * ---------------------------------------------------------------------
 */
typedef enum PolicyCounter
{
	PSTAT_EXPIRATIONS,			/* leases taken over after their ttl ran out */
	PSTAT_SESSION_ENDS,			/* taken over after their session ended */
	PSTAT_RENEWALS_REFUSED_MAX_HOLD,
	PSTAT_RENEW_LEFT_50,		/* renewals that arrived with >= 50% of the ttl left */
	PSTAT_RENEW_LEFT_25,		/* 25% to 50% */
	PSTAT_RENEW_LEFT_10,		/* 10% to 25% */
	PSTAT_RENEW_LEFT_0,			/* under 10% */
	NUM_POLICY_COUNTERS
} PolicyCounter;

typedef struct PolicyShared
{
	pg_atomic_uint64 counters[NUM_POLICY_COUNTERS];
} PolicyShared;

static PolicyShared *policy_shared = NULL;

static void
policy_count(PolicyCounter counter)
{
	if (policy_shared != NULL)
		pg_atomic_fetch_add_u64(&policy_shared->counters[counter], 1);
}

Size
dlock_policy_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(PolicyShared)), dlock_session_shmem_size());
}

/*
 * Create or attach to the counters and the session slots; caller holds
 * AddinShmemInitLock.
 */
void
dlock_policy_shmem_init(void)
{
	bool		found;

	policy_shared = ShmemInitStruct("pg_dlock policies", sizeof(PolicyShared), &found);
	if (!found)
		for (int i = 0; i < NUM_POLICY_COUNTERS; i++)
			pg_atomic_init_u64(&policy_shared->counters[i], 0);
	dlock_session_shmem_init();
}

/*
 * dlock.stats_reset() also resets these.
 */
void
dlock_policy_stats_reset(void)
{
	if (policy_shared != NULL)
		for (int i = 0; i < NUM_POLICY_COUNTERS; i++)
			pg_atomic_write_u64(&policy_shared->counters[i], 0);
}

/*
 * dlock.policy_counters() returns record (see the install script)
 */
Datum
dlock_policy_counters(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[NUM_POLICY_COUNTERS];
	bool		nulls[NUM_POLICY_COUNTERS] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	if (tupdesc->natts != NUM_POLICY_COUNTERS)
		elog(ERROR, "pg_dlock: dlock.policy_counters has %d columns, expected %d",
			 tupdesc->natts, NUM_POLICY_COUNTERS);
	for (int i = 0; i < NUM_POLICY_COUNTERS; i++)
		values[i] = Int64GetDatum(policy_shared == NULL ? 0 :
								  (int64) pg_atomic_read_u64(&policy_shared->counters[i]));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/* ---------------------------------------------------------------------
 * Settings
 * ---------------------------------------------------------------------
 */

/*
 * Define the settings; called from _PG_init.
 */
void
dlock_policy_init(void)
{
	DefineCustomIntVariable("dlock.max_hold",
							gettext_noop("Longest time a lease may be renewed for after it was granted (0: no limit)."),
							gettext_noop("Renewals after that are refused and the lease ends with its ttl. Also the largest max_hold an acquire may ask for."),
							&dlock_max_hold_ms,
							0, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.lock_delay",
							gettext_noop("How long a lock name stays ungranted after a lease is lost without release (0: no delay)."),
							gettext_noop("Applies to leases granted while it is set that do not ask for their own lock_delay."),
							&dlock_lock_delay_ms,
							0, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.max_lock_delay",
							gettext_noop("Largest lock_delay an acquire may ask for."),
							NULL,
							&dlock_max_lock_delay_ms,
							60000, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------
 * Option arguments
 * ---------------------------------------------------------------------
 */
static const char *const option_names[] = {"session_bound", "max_hold", "min_hold", "lock_delay"};

#define NUM_OPTIONS lengthof(option_names)

/* Positions of the option arguments of one function, cached in fn_extra */
typedef struct OptionPositions
{
	int			argno[NUM_OPTIONS]; /* -1: the function has no such argument */
} OptionPositions;

static OptionPositions *
option_positions(FunctionCallInfo fcinfo)
{
	OptionPositions *pos = fcinfo->flinfo->fn_extra;
	HeapTuple	proc;
	Datum		names;
	bool		isnull;

	if (pos != NULL)
		return pos;
	pos = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(OptionPositions));
	for (int i = 0; i < (int) NUM_OPTIONS; i++)
		pos->argno[i] = -1;

	proc = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(proc))
		elog(ERROR, "pg_dlock: cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	names = SysCacheGetAttr(PROCOID, proc, Anum_pg_proc_proargnames, &isnull);
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *elem_nulls;
		int			nelems;

		deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elem_nulls, &nelems);
		for (int arg = 0; arg < nelems; arg++)
		{
			char	   *name;

			if (elem_nulls[arg])
				continue;
			name = TextDatumGetCString(elems[arg]);
			for (int i = 0; i < (int) NUM_OPTIONS; i++)
				if (strcmp(name, option_names[i]) == 0)
					pos->argno[i] = arg;
		}
	}
	ReleaseSysCache(proc);
	fcinfo->flinfo->fn_extra = pos;
	return pos;
}

static char *
usecs_text(int64 usecs)
{
	Interval	interval = {.time = usecs};

	return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(&interval)));
}

/*
 * A duration option: NULL (0) or positive.
 */
static int64
duration_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	int64		usecs;

	if (argno < 0 || argno >= PG_NARGS() || PG_ARGISNULL(argno))
		return 0;
	usecs = dlock_interval_usecs(PG_GETARG_INTERVAL_P(argno));
	if (usecs > 0)
		dlock_check_interval_end(usecs, argname, PG_GETARG_INTERVAL_P(argno));
	if (usecs <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", argname),
				 errdetail("The %s given was \"%s\".", argname,
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   PG_GETARG_DATUM(argno)))),
				 errhint("Leave %s NULL for no %s.", argname, argname)));
	return usecs;
}

/*
 * Check and collect the policy options of an acquire whose ttl is
 * ttl_usecs, applying the server's defaults and caps. Raises an error
 * naming the argument, before anything changed, when they do not fit.
 */
void
dlock_policy_args(FunctionCallInfo fcinfo, int64 ttl_usecs, DlockLeasePolicy *policy)
{
	OptionPositions *pos = option_positions(fcinfo);
	int			session_arg = pos->argno[0];
	int64		max_hold_cap = (int64) dlock_max_hold_ms * 1000;
	int64		lock_delay_cap = (int64) dlock_max_lock_delay_ms * 1000;

	memset(policy, 0, sizeof(*policy));
	if (session_arg >= 0 && session_arg < PG_NARGS())
	{
		dlock_require_arg(fcinfo, session_arg, "session_bound");
		policy->session_bound = PG_GETARG_BOOL(session_arg);
	}
	policy->max_hold_usecs = duration_arg(fcinfo, pos->argno[1], "max_hold");
	policy->min_hold_usecs = duration_arg(fcinfo, pos->argno[2], "min_hold");
	policy->lock_delay_usecs = duration_arg(fcinfo, pos->argno[3], "lock_delay");

	if (policy->max_hold_usecs > 0 && max_hold_cap > 0 && policy->max_hold_usecs > max_hold_cap)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_hold exceeds dlock.max_hold"),
				 errdetail("The max_hold given was \"%s\"; dlock.max_hold is \"%s\".",
						   usecs_text(policy->max_hold_usecs), usecs_text(max_hold_cap))));
	if (policy->max_hold_usecs == 0)
		policy->max_hold_usecs = max_hold_cap;
	if (policy->max_hold_usecs > 0 && policy->max_hold_usecs < ttl_usecs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_hold must not be less than the ttl"),
				 errdetail("The max_hold is \"%s\" (%s); the ttl is \"%s\".",
						   usecs_text(policy->max_hold_usecs),
						   pos->argno[1] >= 0 && pos->argno[1] < PG_NARGS() &&
						   !PG_ARGISNULL(pos->argno[1]) ? "given" : "dlock.max_hold",
						   usecs_text(ttl_usecs)),
				 errhint("A lease is renewed for one ttl at a time; ask for a shorter ttl or a longer max_hold.")));
	if (policy->min_hold_usecs > ttl_usecs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_hold must not exceed the ttl"),
				 errdetail("The min_hold given was \"%s\"; the ttl is \"%s\".",
						   usecs_text(policy->min_hold_usecs), usecs_text(ttl_usecs)),
				 errhint("The holder must hold the lease for its minimum; ask for a ttl at least as long.")));
	if (policy->lock_delay_usecs > lock_delay_cap)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock_delay exceeds dlock.max_lock_delay"),
				 errdetail("The lock_delay given was \"%s\"; dlock.max_lock_delay is \"%s\".",
						   usecs_text(policy->lock_delay_usecs), usecs_text(lock_delay_cap))));
	if (policy->lock_delay_usecs == 0)
		policy->lock_delay_usecs = (int64) dlock_lock_delay_ms * 1000;
	if (policy->session_bound)
		dlock_session_check_usable();
}

/* ---------------------------------------------------------------------
 * The policy columns of dlock.distributed_lock
 * ---------------------------------------------------------------------
 */
/* The policy columns of the lock table rows was opened from */
static const DlockLockColumns *
policy_columns(DlockRows *rows)
{
	return &rows->columns;
}

/* Timestamp column value of row, 0 when NULL or absent */
static TimestampTz
row_time(DlockRow *row, AttrNumber att)
{
	if (att <= 0 || row->nulls[att - 1])
		return 0;
	return DatumGetTimestampTz(row->values[att - 1]);
}

static void
set_time(DlockRow *row, AttrNumber att, TimestampTz value)
{
	row->values[att - 1] = TimestampTzGetDatum(value);
	row->nulls[att - 1] = value == 0;
}

/*
 * The lease state of row as this file needs it.
 */
static void
read_policy_row(DlockRows *rows, DlockRow *row, DlockPolicyRow *pr)
{
	const DlockLockColumns *cols = policy_columns(rows);

	memset(pr, 0, sizeof(*pr));
	pr->has_owner = !row->nulls[Anum_owner_token - 1];
	pr->lease_until = row_time(row, Anum_lease_until);
	if (!cols->policies)
		return;
	pr->session_bound = !row->nulls[cols->session_id - 1];
	if (pr->session_bound)
		pr->session_id = DatumGetInt64(row->values[cols->session_id - 1]);
	pr->hold_limit = row_time(row, cols->hold_limit);
	pr->min_hold_until = row_time(row, cols->min_hold_until);
	if (!row->nulls[cols->lock_delay - 1])
		pr->lock_delay_usecs =
			dlock_interval_usecs(DatumGetIntervalP(row->values[cols->lock_delay - 1]));
	pr->not_before = row_time(row, cols->not_before);
}

/*
 * The one decision on a lease's state at time now: whether it is live and
 * until when no new owner may be granted the name.
 */
void
dlock_policy_decide(const DlockPolicyRow *pr, TimestampTz now, DlockPolicyView *view)
{
	TimestampTz lost_at = 0;

	memset(view, 0, sizeof(*view));
	if (pr->has_owner)
	{
		view->live = pr->lease_until > now;
		if (view->live && pr->session_bound)
		{
			TimestampTz ended_at;

			if (dlock_session_ended(pr->session_id, &ended_at))
			{
				view->live = false;
				view->session_ended = true;
				lost_at = Min(ended_at, pr->lease_until);
			}
		}
		if (!view->live && !view->session_ended)
		{
			view->expired = true;
			lost_at = pr->lease_until;
		}
		/* a live lease is lost at its expiry at the latest */
		view->available_at = dlock_time_plus(view->live ? pr->lease_until : lost_at,
										 pr->lock_delay_usecs);
		view->hold_reached = view->live && pr->hold_limit != 0 && now >= pr->hold_limit;
		view->hold_ended = view->expired && pr->hold_limit != 0 &&
			pr->lease_until >= pr->hold_limit;
	}
	else
		view->available_at = pr->not_before;
	if (view->available_at <= now && !view->live)
		view->available_at = 0;
}

/*
 * dlock_policy_decide on a lock row.
 */
void
dlock_policy_view(DlockRows *rows, DlockRow *row, TimestampTz now, DlockPolicyView *view)
{
	DlockPolicyRow pr;

	read_policy_row(rows, row, &pr);
	dlock_policy_decide(&pr, now, view);
}

/*
 * The hold limit and the end of the minimum hold of a lease of any kind
 * granted at now with policy (0: none).
 */
void
dlock_policy_grant_times(const DlockLeasePolicy *policy, TimestampTz now,
						 TimestampTz *hold_limit, TimestampTz *min_hold_until)
{
	*hold_limit = policy->max_hold_usecs > 0 ? dlock_time_plus(now, policy->max_hold_usecs) : 0;
	*min_hold_until = policy->min_hold_usecs > 0 ? dlock_time_plus(now, policy->min_hold_usecs) : 0;
}

/*
 * Set the policy columns of a lease granted now on row (a new lease, not
 * an owner's repeated acquire); previous is the view of the lease it
 * replaces (NULL for a new name), for the counters.
 */
void
dlock_policy_grant(DlockRows *rows, DlockRow *row, text *lock_name,
				   const DlockLeasePolicy *policy, TimestampTz now,
				   const DlockPolicyView *previous)
{
	const DlockLockColumns *cols = policy_columns(rows);

	if (previous != NULL && previous->session_ended)
		policy_count(PSTAT_SESSION_ENDS);
	else if (previous != NULL && previous->expired)
		policy_count(PSTAT_EXPIRATIONS);

	if (!cols->policies)
		return;
	if (policy->session_bound)
	{
		row->values[cols->session_id - 1] = Int64GetDatum(dlock_session_bind(lock_name));
		row->nulls[cols->session_id - 1] = false;
		row->values[cols->session_pid - 1] = Int32GetDatum(MyProcPid);
		row->nulls[cols->session_pid - 1] = false;
	}
	else
	{
		row->nulls[cols->session_id - 1] = true;
		row->nulls[cols->session_pid - 1] = true;
	}
	{
		TimestampTz hold_limit;
		TimestampTz min_hold_until;

		dlock_policy_grant_times(policy, now, &hold_limit, &min_hold_until);
		set_time(row, cols->hold_limit, hold_limit);
		set_time(row, cols->min_hold_until, min_hold_until);
	}
	if (policy->lock_delay_usecs > 0)
	{
		Interval   *delay = palloc0(sizeof(Interval));

		delay->time = policy->lock_delay_usecs;
		row->values[cols->lock_delay - 1] = IntervalPGetDatum(delay);
		row->nulls[cols->lock_delay - 1] = false;
	}
	else
		row->nulls[cols->lock_delay - 1] = true;
	set_time(row, cols->not_before, 0);
}

/*
 * The owner of the live lease on row acquires it again asking for policy:
 * the lease keeps the policies it was granted with, so a repeated acquire
 * may not ask for a session-bound lease the lease is not (it would not end
 * with the session, silently). Raises before anything changed.
 */
void
dlock_policy_check_retry(DlockRows *rows, DlockRow *row, text *lock_name,
						 const DlockLeasePolicy *policy)
{
	DlockPolicyRow pr;

	read_policy_row(rows, row, &pr);
	if (policy->session_bound && !pr.session_bound)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lease of lock \"%s\" is not session-bound", text_to_cstring(lock_name)),
				 errdetail("This owner already holds the lease, granted without session_bound; a repeated acquire keeps the lease as it was granted."),
				 errhint("Release the lease and acquire it again with session_bound => true.")));
}

/*
 * The owner of the live lease on row turns it into a shared lease
 * (dlock.downgrade). Shared leases carry no policy, so a lease whose policy
 * would be lost is refused rather than silently weakened: session_bound
 * (the shared lease would outlive the session), max_hold (renewals would no
 * longer be capped) and min_hold (readers would get in before it ends). A
 * lock delay only applies when a lease is lost, which a downgrade is not.
 * Raises before anything changed.
 */
void
dlock_policy_check_downgrade(DlockRows *rows, DlockRow *row, text *lock_name)
{
	DlockPolicyRow pr;
	const char *policy = NULL;

	read_policy_row(rows, row, &pr);
	if (pr.session_bound)
		policy = "session_bound";
	else if (pr.hold_limit != 0)
		policy = "max_hold";
	else if (pr.min_hold_until != 0)
		policy = "min_hold";
	if (policy != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot downgrade the lease of lock \"%s\": it was granted with %s",
						text_to_cstring(lock_name), policy),
				 errdetail("Shared leases carry no lease policy; the downgrade would drop it."),
				 errhint("Release the lease and acquire a shared lease instead.")));
}

/*
 * May this owner's lease on row be renewed (ttl_usecs > 0) or released (0)
 * now? Only a live lease: not expired, and not session-bound to a session
 * that ended. A renewal once max_hold is reached is refused and counted,
 * also when the lease already ended at its hold_limit.
 */
bool
dlock_policy_may_change(DlockRows *rows, DlockRow *row, TimestampTz now, int64 ttl_usecs)
{
	DlockPolicyRow pr;

	read_policy_row(rows, row, &pr);
	return dlock_policy_may_change_row(&pr, now, ttl_usecs);
}

/*
 * dlock_policy_may_change on a lease of any kind as pr describes it: a
 * holder slot's as well as a lock row's.
 */
bool
dlock_policy_may_change_row(const DlockPolicyRow *pr, TimestampTz now, int64 ttl_usecs)
{
	DlockPolicyView view;

	dlock_policy_decide(pr, now, &view);
	if (!view.live)
	{
		if (ttl_usecs > 0 && view.hold_ended)
			policy_count(PSTAT_RENEWALS_REFUSED_MAX_HOLD);
		return false;
	}
	if (ttl_usecs > 0 && view.hold_reached)
	{
		policy_count(PSTAT_RENEWALS_REFUSED_MAX_HOLD);
		return false;
	}
	return true;
}

/*
 * When the live lease of row, renewed at now for ttl_usecs, ends: a ttl
 * from now, but never past its hold_limit, so max_hold bounds the whole
 * hold whatever ttl a renewal asks for.
 */
TimestampTz
dlock_policy_lease_until(DlockRows *rows, DlockRow *row, TimestampTz now, int64 ttl_usecs)
{
	DlockPolicyRow pr;

	read_policy_row(rows, row, &pr);
	return dlock_policy_until_row(&pr, now, ttl_usecs);
}

/*
 * dlock_policy_lease_until on a lease of any kind as pr describes it.
 */
TimestampTz
dlock_policy_until_row(const DlockPolicyRow *pr, TimestampTz now, int64 ttl_usecs)
{
	TimestampTz until = dlock_time_plus(now, ttl_usecs);

	return pr->hold_limit != 0 && until > pr->hold_limit ? pr->hold_limit : until;
}

/*
 * The owner renews (ttl_usecs > 0) or releases (0) its live lease on row at
 * now; row still holds the lease as it was. A renewal is counted by how
 * much of the current ttl was left; a release before min_hold keeps the
 * name from new owners until then.
 */
void
dlock_policy_change(DlockRows *rows, DlockRow *row, TimestampTz now, int64 ttl_usecs)
{
	const DlockLockColumns *cols = policy_columns(rows);
	DlockPolicyRow pr;

	if (ttl_usecs > 0)
	{
		dlock_policy_count_renewal(row_time(row, Anum_lease_until),
								   row_time(row, Anum_updated_at), now);
		return;
	}
	read_policy_row(rows, row, &pr);
	if (cols->policies)
		set_time(row, cols->not_before, dlock_policy_released_not_before(&pr, now));
}

/*
 * Count a renewal at now of a lease of any kind that ran until "until" from
 * "since" (its grant or last renewal) by how much of that ttl was left.
 */
void
dlock_policy_count_renewal(TimestampTz until, TimestampTz since, TimestampTz now)
{
	double		left = until > since ? (double) (until - now) / (until - since) : 0;

	policy_count(left >= 0.5 ? PSTAT_RENEW_LEFT_50 :
				 left >= 0.25 ? PSTAT_RENEW_LEFT_25 :
				 left >= 0.1 ? PSTAT_RENEW_LEFT_10 : PSTAT_RENEW_LEFT_0);
}

/*
 * The not_before a release at now leaves on a lease of any kind as pr
 * describes it: the end of its minimum hold when that is still ahead, so no
 * new owner gets what it held before then (0: none).
 */
TimestampTz
dlock_policy_released_not_before(const DlockPolicyRow *pr, TimestampTz now)
{
	return pr->min_hold_until > now ? pr->min_hold_until : 0;
}

/*
 * Whether the installed lock table has the policy columns (1.2 on).
 */
bool
dlock_policy_present(void)
{
	return dlock_catalog()->columns.policies;
}

/* a force release starts the lease's lock delay */
static DlockStatement lock_delay_forced_stmt = {
	.sql =
	"UPDATE dlock.distributed_lock l"
	"   SET not_before = " DLOCK_FORCED_NOT_BEFORE_SQL("l")
	" WHERE l.lock_name = $1 AND l.lock_delay IS NOT NULL",
	.nargs = 1,
	.argtypes = {TEXTOID},
};

/*
 * After dlock.force_release ended the lease of lock_name in this
 * transaction: a lease with a lock delay keeps the name from new owners
 * for that long. Caller is connected (dlock_sql_connect).
 */
void
dlock_policy_forced(text *lock_name)
{
	Datum		values[1] = {PointerGetDatum(lock_name)};

	if (!dlock_policy_present())
		return;
	(void) dlock_execute(&lock_delay_forced_stmt, values, NULL, 0);
}

/*
 * dlock.lease_policy_state(has_owner, lease_until, session_id, hold_limit,
 *		min_hold_until, lock_delay, not_before)
 *	returns (live, policy_state, available_at)
 *
 * The decision the lease functions make, for dlock.locks and dlock.stats.
 */
Datum
dlock_lease_policy_state(PG_FUNCTION_ARGS)
{
	DlockPolicyRow pr = {0};
	DlockPolicyView view;
	TimestampTz now = GetCurrentTimestamp();
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	const char *state;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");

	pr.has_owner = !PG_ARGISNULL(0) && PG_GETARG_BOOL(0);
	pr.lease_until = PG_ARGISNULL(1) ? 0 : PG_GETARG_TIMESTAMPTZ(1);
	pr.session_bound = !PG_ARGISNULL(2);
	pr.session_id = pr.session_bound ? PG_GETARG_INT64(2) : 0;
	pr.hold_limit = PG_ARGISNULL(3) ? 0 : PG_GETARG_TIMESTAMPTZ(3);
	pr.min_hold_until = PG_ARGISNULL(4) ? 0 : PG_GETARG_TIMESTAMPTZ(4);
	pr.lock_delay_usecs = PG_ARGISNULL(5) ? 0 : dlock_interval_usecs(PG_GETARG_INTERVAL_P(5));
	pr.not_before = PG_ARGISNULL(6) ? 0 : PG_GETARG_TIMESTAMPTZ(6);
	dlock_policy_decide(&pr, now, &view);

	if (view.live)
		state = view.hold_reached ? "held, renewals refused (max_hold)" : "held";
	else if (view.session_ended)
		state = view.available_at > now ? "session ended, delayed (lock_delay)" : "session ended";
	else if (view.expired)
		state = view.available_at > now ? "expired, delayed (lock_delay)" : "expired";
	else if (view.available_at > now)
		state = pr.not_before == pr.min_hold_until ? "released, held until min_hold" :
			"forced, delayed (lock_delay)";
	else
		state = "free";

	values[0] = BoolGetDatum(view.live);
	values[1] = CStringGetTextDatum(state);
	values[2] = TimestampTzGetDatum(view.available_at);
	nulls[2] = view.available_at == 0;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
