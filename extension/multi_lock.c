/*-------------------------------------------------------------------------
 *
 * multi_lock.c
 *	  dlock.try_acquire_all, dlock.acquire_all and dlock.release_all:
 *	  exclusive leases on a set of names, all or none.
 *
 * Each name of the set gets an ordinary exclusive lease (dlock.try_acquire
 * or dlock.acquire, so every rule of lease.c holds for it: its own fencing
 * token from the name's counter, durable grant, a waiting writer's place
 * in the name's queue), all with one owner token. The names are taken in
 * one canonical order -- by their bytes -- whatever order the caller gave,
 * so two callers asking for overlapping sets never wait for each other in
 * a cycle: whoever holds the smaller shared name gets the rest first.
 *
 * All or nothing: the grants are made in a subtransaction that is rolled
 * back when one name cannot be had, so a refused or timed-out call leaves
 * none of the set taken. A first pass that only reads refuses a set with a
 * name held by another owner before anything is written, so the common
 * refusal takes no transaction ID and no row lock; only a race lost between
 * that pass and the grants costs the rolled-back subtransaction.
 *
 * The grants call the extension's own dlock.try_acquire, dlock.acquire and
 * dlock.release through fmgr, as the caller -- their EXECUTE privilege is
 * checked as the executor would -- so privileges, audit and events see the
 * caller's role, without an executor start per name (SPI).
 *
 * IDENTIFICATION
 *	  extension/multi_lock.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "token.h"
#include "schema.h"
#include "lock_row.h"
#include "lease_policy.h"
#include "wait.h"
#include "holder_lease.h"

PG_FUNCTION_INFO_V1(dlock_try_acquire_all);
PG_FUNCTION_INFO_V1(dlock_acquire_all);
PG_FUNCTION_INFO_V1(dlock_release_all);

/* Most names in one set */
#define MAX_SET_NAMES 1000

/* The extension's function one name of a set is handled by */
typedef enum SetFunction
{
	SET_TRY_ACQUIRE,
	SET_ACQUIRE,
	SET_RELEASE
} SetFunction;

/*
 * Its arguments (sql/pg_dlock--1.1--1.2.sql, where the set functions came
 * too): the leading ones this file fills in, then try_acquire's and
 * acquire's lease policy arguments, passed on from the set function's own
 * (1.6 on), so every name's lease takes them and lease.c decides them.
 */
static const struct
{
	const char *name;
	int			nargs;
	Oid			argtypes[9];
}			set_functions[] = {
	[SET_TRY_ACQUIRE] = {"try_acquire", 8,
	{TEXTOID, INTERVALOID, UUIDOID, TEXTOID, BOOLOID, INTERVALOID, INTERVALOID, INTERVALOID}},
	[SET_ACQUIRE] = {"acquire", 9,
	{TEXTOID, INTERVALOID, INTERVALOID, UUIDOID, TEXTOID, BOOLOID, INTERVALOID, INTERVALOID, INTERVALOID}},
	[SET_RELEASE] = {"release", 2, {TEXTOID, UUIDOID}},
};

/* One of them, looked up for one call of a set function */
typedef struct SetCall
{
	FmgrInfo	flinfo;
	int			nargs;
} SetCall;

/*
 * Look up the extension's own function "which" and check the caller may
 * execute it.
 */
static void
set_call_prepare(SetFunction which, SetCall *call)
{
	Oid			fn;
	AclResult	acl;

	call->nargs = set_functions[which].nargs;
	fn = dlock_own_function(set_functions[which].name, call->nargs, set_functions[which].argtypes,
							 false);
	acl = dlock_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_FUNCTION, get_func_name(fn));
	InvokeFunctionExecuteHook(fn);
	fmgr_info(fn, &call->flinfo);
}

/*
 * Call it with "args" (nulls where null[i]) for its leading arguments and
 * the defaults for the rest; *isnull says whether it returned NULL.
 */
static Datum
set_call(SetCall *call, int nargs, const Datum *args, const bool *nulls, bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 9);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, &call->flinfo, call->nargs, InvalidOid, NULL, NULL);
	for (int i = 0; i < call->nargs; i++)
	{
		/* past the given ones: session_bound false, the durations NULL */
		bool		given = i < nargs;

		fcinfo->args[i].value = given ? args[i] : BoolGetDatum(false);
		fcinfo->args[i].isnull = given ? nulls[i] : i != nargs;
	}
	result = FunctionCallInvoke(fcinfo);
	*isnull = fcinfo->isnull;
	return result;
}

/* Byte order of two names: the canonical order of a set */
static int
name_cmp(const void *a, const void *b)
{
	text	   *x = *(text *const *) a;
	text	   *y = *(text *const *) b;
	int			lx = VARSIZE_ANY_EXHDR(x);
	int			ly = VARSIZE_ANY_EXHDR(y);
	int			cmp = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(lx, ly));

	return cmp != 0 ? cmp : (lx > ly) - (lx < ly);
}

/*
 * The names of argument 0, checked (each as a lock name, no NULL, no
 * duplicate, at least one) and sorted into the canonical order.
 */
static text **
set_names(FunctionCallInfo fcinfo, int *nnames)
{
	ArrayType  *array;
	Datum	   *elems;
	bool	   *elem_nulls;
	text	  **names;
	int			n;

	dlock_require_arg(fcinfo, 0, "lock_names");
	array = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock_names must be a one-dimensional array")));
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock_names must not be empty")));
	if (n > MAX_SET_NAMES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock_names has too many names"),
				 errdetail("It has %d names; at most %d are allowed.", n, MAX_SET_NAMES)));
	names = palloc(sizeof(text *) * n);
	for (int i = 0; i < n; i++)
	{
		int			chars;

		if (elem_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("lock_names must not contain null")));
		names[i] = DatumGetTextPP(elems[i]);
		chars = pg_mbstrlen_with_len(VARDATA_ANY(names[i]), VARSIZE_ANY_EXHDR(names[i]));
		if (chars == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock_names must not contain an empty name")));
		if (chars > DLOCK_MAX_NAME_CHARS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock_names contains a name that is too long"),
					 errdetail("It has %d characters; at most %d are allowed.",
							   chars, DLOCK_MAX_NAME_CHARS)));
	}
	qsort(names, n, sizeof(text *), name_cmp);
	for (int i = 1; i < n; i++)
		if (name_cmp(&names[i - 1], &names[i]) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock_names contains \"%s\" more than once",
							text_to_cstring(names[i]))));
	*nnames = n;
	return names;
}

/*
 * Grant every name of the set, in order, inside a subtransaction; with
 * wait_usecs < 0 by try_acquire, otherwise by acquire waiting what is left
 * of the wait. Leases go into the tuplestore. Returns false, having rolled
 * everything back, when a name was busy; a wait that ran out re-raises its
 * lock_not_available after the rollback.
 */
/* The lease policy options of a set call, in try_acquire's order */
#define SET_OPTIONS 4

static bool
grant_set(text **names, int nnames, Datum ttl, int64 wait_usecs, pg_uuid_t *owner,
		  Datum holder, bool holder_null, const Datum *options, const bool *option_nulls,
		  Tuplestorestate *store, TupleDesc tupdesc)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner_before = CurrentResourceOwner;
	TimestampTz deadline = dlock_time_plus(GetCurrentTimestamp(), Max(wait_usecs, 0));
	Datum	   *leases = palloc(sizeof(Datum) * nnames);
	SetCall		call;
	volatile bool granted = true;
	volatile int current = 0;

	set_call_prepare(wait_usecs < 0 ? SET_TRY_ACQUIRE : SET_ACQUIRE, &call);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		for (int i = 0; i < nnames && granted; i++)
		{
			Datum		args[5 + SET_OPTIONS];
			bool		nulls[5 + SET_OPTIONS] = {0};
			bool		isnull;
			int			arg = 0;

			current = i;

			args[arg++] = PointerGetDatum(names[i]);
			args[arg++] = ttl;
			if (wait_usecs >= 0)
			{
				Interval   *left = palloc0(sizeof(Interval));

				left->time = Max(deadline - GetCurrentTimestamp(), 0);
				args[arg++] = IntervalPGetDatum(left);
			}
			args[arg++] = UUIDPGetDatum(owner);
			args[arg] = holder;
			nulls[arg++] = holder_null;
			for (int o = 0; o < SET_OPTIONS; o++)
			{
				args[arg] = options[o];
				nulls[arg++] = option_nulls[o];
			}
			/* in cxt, so the lease outlives the subtransaction */
			leases[i] = set_call(&call, arg, args, nulls, &isnull);
			if (isnull)
				granted = false;	/* try_acquire returned NULL: busy */
		}
		if (granted)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner_before;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner_before;
		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			dlock_count(STAT_MULTI_BUSY, 1);
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not acquire all %d locks within " INT64_FORMAT " ms",
							nnames, wait_usecs / 1000),
					 errdetail("Lock \"%s\" was held by another owner for the rest of the wait; none of the set was taken.",
							   text_to_cstring(names[current]))));
		}
		ReThrowError(edata);
	}
	PG_END_TRY();

	if (!granted)
		return false;
	for (int i = 0; i < nnames; i++)
	{
		HeapTupleHeader lease = DatumGetHeapTupleHeader(leases[i]);
		HeapTupleData tuple;
		Datum		values[4];
		bool		nulls[4];

		tuple.t_len = HeapTupleHeaderGetDatumLength(lease);
		ItemPointerSetInvalid(&tuple.t_self);
		tuple.t_tableOid = InvalidOid;
		tuple.t_data = lease;
		heap_deform_tuple(&tuple, tupdesc, values, nulls);
		tuplestore_putvalues(store, tupdesc, values, nulls);
	}
	return true;
}

/*
 * Is a name of the set held by another owner, in any kind: a live exclusive
 * lease of another owner, or a shared lease or permit that keeps writers
 * out (dlock_holders_busy)? Read as
 * committed (the latest snapshot) at one clock reading, without the
 * executor; decides nothing, it only spares a refusal the grants.
 */
static bool
set_busy(text **names, int nnames, pg_uuid_t *owner)
{
	TimestampTz now = GetCurrentTimestamp();
	DlockRows	rows;
	bool		busy = false;

	dlock_rows_open(&rows);
	for (int i = 0; i < nnames && !busy; i++)
	{
		DlockRow	row;

		if (dlock_row_read(&rows, names[i], &row) &&
			!row.nulls[Anum_owner_token - 1] && !row.nulls[Anum_lease_until - 1] &&
			memcmp(DatumGetUUIDP(row.values[Anum_owner_token - 1]), owner, UUID_LEN) != 0 &&
			DatumGetTimestampTz(row.values[Anum_lease_until - 1]) > now)
			busy = true;
		else
			busy = dlock_holders_busy(names[i], now);
	}
	dlock_rows_close(&rows);
	return busy;
}

/*
 * try_acquire_all and acquire_all; wait_arg is the position of "wait", or
 * -1 for try_acquire_all.
 */
static Datum
acquire_set(FunctionCallInfo fcinfo, int wait_arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			owner_arg = wait_arg < 0 ? 2 : 3;
	int			nnames;
	text	  **names = set_names(fcinfo, &nnames);
	int64		wait_usecs = -1;
	pg_uuid_t  *owner;
	text	   *holder;
	bool		granted;
	int64		ttl_usecs;
	DlockLeasePolicy policy;
	Datum		options[SET_OPTIONS] = {BoolGetDatum(false), 0, 0, 0};
	bool		option_nulls[SET_OPTIONS] = {false, true, true, true};

	ttl_usecs = dlock_arg_ttl(fcinfo, 1);
	if (wait_arg >= 0)
		wait_usecs = dlock_arg_wait(fcinfo, wait_arg);
	owner = dlock_arg_owner_token(fcinfo, owner_arg);
	if (owner == NULL)
		owner = dlock_new_owner_token();
	holder = dlock_arg_holder(fcinfo, owner_arg + 1);
	/* the options each name's grant takes, checked before anything is read or written */
	dlock_policy_args(fcinfo, ttl_usecs, &policy);
	for (int o = 0; o < SET_OPTIONS && owner_arg + 2 + o < PG_NARGS(); o++)
	{
		options[o] = PG_GETARG_DATUM(owner_arg + 2 + o);
		option_nulls[o] = PG_ARGISNULL(owner_arg + 2 + o);
	}
	if (nnames > 0)
		dlock_refuse_in_recovery(names[0], "acquire");

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	/* a name held by another owner refuses the set before anything is written */
	if (wait_usecs <= 0 && set_busy(names, nnames, owner))
	{
		dlock_count(STAT_MULTI_BUSY, 1);
		if (wait_usecs == 0)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not acquire all %d locks within 0 ms", nnames),
					 errdetail("A lock of the set was held by another owner.")));
		return (Datum) 0;
	}

	/* no release hands the set a name (wait.c, dlock_wait_set_begin) */
	dlock_wait_set_begin();
	granted = grant_set(names, nnames, PG_GETARG_DATUM(1), wait_usecs, owner,
						PointerGetDatum(holder), holder == NULL, options, option_nulls,
						rsinfo->setResult, rsinfo->setDesc);
	dlock_wait_set_end();
	dlock_count(granted ? STAT_MULTI_ACQUISITIONS : STAT_MULTI_BUSY, 1);
	return (Datum) 0;
}

/*
 * dlock.try_acquire_all(lock_names, ttl, owner_token, holder) returns setof dlock.lease
 */
Datum
dlock_try_acquire_all(PG_FUNCTION_ARGS)
{
	return acquire_set(fcinfo, -1);
}

/*
 * dlock.acquire_all(lock_names, ttl, wait, owner_token, holder) returns setof dlock.lease
 */
Datum
dlock_acquire_all(PG_FUNCTION_ARGS)
{
	return acquire_set(fcinfo, 2);
}

/*
 * dlock.release_all(lock_names, owner_token) returns integer
 *
 * Releases this owner's live lease of each name (dlock.release); returns
 * how many it ended. The commit waits for no WAL flush when the releases
 * are all the transaction wrote, as for dlock.release (durability.c).
 */
Datum
dlock_release_all(PG_FUNCTION_ARGS)
{
	int			nnames;
	text	  **names = set_names(fcinfo, &nnames);
	int			released = 0;
	SetCall		call;

	dlock_require_arg(fcinfo, 1, "owner_token");
	set_call_prepare(SET_RELEASE, &call);
	for (int i = 0; i < nnames; i++)
	{
		Datum		args[2] = {PointerGetDatum(names[i]), PG_GETARG_DATUM(1)};
		bool		nulls[2] = {false, false};
		bool		isnull;
		Datum		ended = set_call(&call, 2, args, nulls, &isnull);

		if (!isnull && DatumGetBool(ended))
			released++;
	}
	PG_RETURN_INT32(released);
}
