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
 * (A grant on a free row writes without locking first, lock_row.c; if
 * another grant wins the row in between, the attempt has taken a
 * transaction ID, still no row lock, and refuses only after deciding again.)
 *
 * The row belongs to the caller's transaction like any other write: a lease
 * taken in a transaction that rolls back never existed, and its token is
 * only valid once that transaction commits.
 *
 * The exception is a lease handed over: a release that frees a lock with
 * waiters grants it to the longest waiter in its own commit (dlock_hand_off,
 * see wait.c), and the waiter returns it without writing. Its rollback
 * cannot undo that grant; it abandons the lease instead, which makes the
 * lock free for the next attempt (dlock_wait_abandoned).
 *
 * IDENTIFICATION
 *	  extension/lease.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"
#include "stats.h"
#include "token.h"
#include "catalog.h"
#include "lock_row.h"
#include "sql_executor.h"
#include "durability.h"
#include "token_epoch.h"
#include "wait.h"
#include "report.h"
#include "lease_policy.h"
#include "holder_lease.h"
#include "lease.h"

PG_FUNCTION_INFO_V1(dlock_try_acquire);
PG_FUNCTION_INFO_V1(dlock_acquire);
PG_FUNCTION_INFO_V1(dlock_renew);
PG_FUNCTION_INFO_V1(dlock_release);

/* Arguments of one acquire call, checked */
typedef struct AcquireArgs
{
	text	   *lock_name;
	int64		ttl_usecs;		/* the ttl, by dlock_arg_ttl */
	pg_uuid_t  *owner;
	text	   *holder;			/* NULL when not given */
	DlockLeasePolicy policy;	/* lease_policy.c */
} AcquireArgs;

/* Outcome of one attempt */
typedef struct AcquireAttempt
{
	bool		acquired;
	HeapTuple	lease;			/* in the caller's memory context */
	TimestampTz busy_until;		/* lease_until of the live lease, when busy */
} AcquireAttempt;

/*
 * Check and collect the arguments shared by try_acquire and acquire. The
 * optional owner_token and holder are at argument positions owner_arg and
 * owner_arg + 1.
 */
static void
acquire_args(FunctionCallInfo fcinfo, int owner_arg, AcquireArgs *args)
{
	args->lock_name = dlock_arg_name(fcinfo, 0, "lock_name");
	args->ttl_usecs = dlock_arg_ttl(fcinfo, 1);
	args->owner = dlock_arg_owner_token(fcinfo, owner_arg);
	if (args->owner == NULL)
		args->owner = dlock_new_owner_token();
	args->holder = dlock_arg_holder(fcinfo, owner_arg + 1);
	dlock_policy_args(fcinfo, args->ttl_usecs, &args->policy);

	dlock_refuse_in_recovery(args->lock_name, "acquire");
}

/*
 * Record this server's cluster as the row's grant_system, when the table has
 * that column (1.1 on; a database still at 1.0 runs without it until
 * ALTER EXTENSION pg_dlock UPDATE).
 */
static void
set_grant_system(const DlockRows *rows, DlockRow *row)
{
	AttrNumber	att = rows->columns.grant_system;

	if (att == InvalidAttrNumber)
		return;
	row->values[att - 1] = Int64GetDatum((int64) GetSystemIdentifier());
	row->nulls[att - 1] = false;
}

static bool
try_floor_lock(void *arg)
{
	return dlock_floor_lock_shared();
}

static bool
try_new_name_lock(void *arg)
{
	return dlock_new_name_lock(*(uint64 *) arg, false);
}

/*
 * A dlock.lease value (lock_name, owner_token, fencing_token, lease_until),
 * in memory context cxt.
 */
static HeapTuple
lease_tuple(TupleDesc tupdesc, MemoryContext cxt, Datum lock_name, Datum owner,
			Datum token, Datum until)
{
	Datum		values[4] = {lock_name, owner, token, until};
	bool		nulls[4] = {false, false, false, false};
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	HeapTuple	lease = heap_form_tuple(tupdesc, values, nulls);

	MemoryContextSwitchTo(oldcxt);
	return lease;
}

/*
 * Set the columns of a lease granted now to args->owner, ending at until.
 */
static void
set_owner(DlockRow *row, const AcquireArgs *args, TimestampTz now, TimestampTz until)
{
	row->values[Anum_owner_token - 1] = UUIDPGetDatum(args->owner);
	row->nulls[Anum_owner_token - 1] = false;
	row->values[Anum_holder - 1] = PointerGetDatum(args->holder);
	row->nulls[Anum_holder - 1] = args->holder == NULL;
	row->values[Anum_lease_until - 1] = TimestampTzGetDatum(until);
	row->nulls[Anum_lease_until - 1] = false;
	row->values[Anum_updated_at - 1] = TimestampTzGetDatum(now);
}

/*
 * The next token of an existing row, granted now at history position
 * "history" (token.c): above the row's last token, and at least
 * least_token, the least above the tokens reserved for the name's shared
 * leases and permits (dlock_holders_allow_exclusive; 0 if none).
 */
static int64
row_next_token(DlockRows *rows, DlockRow *row, int64 least_token, int32 history)
{
	int64		token = DatumGetInt64(row->values[Anum_fencing_seq - 1]);
	int32		grant_timeline = DatumGetInt32(row->values[Anum_grant_timeline - 1]);
	AttrNumber	system_att = rows->columns.grant_system;
	int64		grant_system = system_att != InvalidAttrNumber ?
		DatumGetInt64(row->values[system_att - 1]) : 0;

	return Max(dlock_next_token(token, grant_timeline, grant_system, history), least_token);
}

/*
 * Set the columns of a new lease granted now, at history position
 * "history", to args->owner on an existing row: the next token, a
 * generation up when the history differs. taken_over
 * says whether it replaces a lease that expired without release. The caller
 * made sure no shared lease or permit is live (or the row's
 * exclusive_only mark said so), so the row keeps or gets the mark.
 */
static void
set_new_lease(DlockRows *rows, DlockRow *row, const AcquireArgs *args, TimestampTz now,
			  bool taken_over, int64 least_token, int32 history)
{
	row->values[Anum_fencing_seq - 1] =
		Int64GetDatum(row_next_token(rows, row, least_token, history));
	row->values[Anum_grant_timeline - 1] = Int32GetDatum(history);
	set_grant_system(rows, row);
	row->values[Anum_acquisitions - 1] =
		Int64GetDatum(DatumGetInt64(row->values[Anum_acquisitions - 1]) + 1);
	row->values[Anum_renewals - 1] = Int64GetDatum(0);
	row->values[Anum_taken_over - 1] = BoolGetDatum(taken_over);
	if (taken_over)
		row->values[Anum_takeovers - 1] =
			Int64GetDatum(DatumGetInt64(row->values[Anum_takeovers - 1]) + 1);
	row->values[Anum_acquired_at - 1] = TimestampTzGetDatum(now);
	row->nulls[Anum_acquired_at - 1] = false;
	dlock_row_set_exclusive_only(rows, row, true);
	set_owner(row, args, now, dlock_time_plus(now, args->ttl_usecs));
}

/*
 * Report a new lease just written to row (report.c).
 */
static void
lease_granted(const AcquireArgs *args, DlockRow *row, bool taken_over)
{
	dlock_report_grant(args->lock_name, STAT_ACQUISITIONS, taken_over,
					   DatumGetInt64(row->values[Anum_fencing_seq - 1]), args->holder,
					   DatumGetTimestampTz(row->values[Anum_lease_until - 1]));
}

/*
 * Create the row of a name that has none, granting its first lease. Returns
 * false, having created nothing, when the row appeared meanwhile (new_row
 * unset: read again) or a lock it needs was not available by the deadline.
 */
static bool
grant_new_name(DlockRows *rows, const AcquireArgs *args, TimestampTz deadline,
			   int64 least_token, int32 history, DlockRow *row, bool *appeared)
{
	uint64		hash = dlock_name_hash(VARDATA_ANY(args->lock_name),
									   VARSIZE_ANY_EXHDR(args->lock_name));
	TupleDesc	tupdesc = RelationGetDescr(rows->rel);
	TimestampTz now;

	*appeared = false;

	/* a second creator of the name waits for the first, as a unique index would */
	if (deadline == 0)
		(void) dlock_new_name_lock(hash, true);
	else if (!dlock_retry_until(try_new_name_lock, &hash, deadline))
		return false;
	if (dlock_row_read(rows, args->lock_name, row))
	{
		dlock_new_name_unlock(hash);
		*appeared = true;
		return false;
	}

	/*
	 * Reap holds the floor lock only while it deletes rows and raises the
	 * floor; the floor must include what it deletes.
	 */
	if (!dlock_retry_until(try_floor_lock, NULL, deadline))
	{
		dlock_new_name_unlock(hash);
		return false;
	}

	row->values = palloc0(sizeof(Datum) * tupdesc->natts);
	row->nulls = palloc(sizeof(bool) * tupdesc->natts);
	for (int i = 0; i < tupdesc->natts; i++)
		row->nulls[i] = true;
	now = GetCurrentTimestamp();
	row->values[Anum_lock_name - 1] = PointerGetDatum(args->lock_name);
	row->nulls[Anum_lock_name - 1] = false;
	set_owner(row, args, now, dlock_time_plus(now, args->ttl_usecs));
	row->nulls[Anum_updated_at - 1] = false;
	/* above the tokens of the name's shared leases and permits too */
	row->values[Anum_fencing_seq - 1] =
		Int64GetDatum(Max(dlock_floor_next_token(history), least_token));
	row->values[Anum_acquired_at - 1] = TimestampTzGetDatum(now);
	row->values[Anum_renewals - 1] = Int64GetDatum(0);
	row->values[Anum_acquisitions - 1] = Int64GetDatum(1);
	row->values[Anum_takeovers - 1] = Int64GetDatum(0);
	row->values[Anum_taken_over - 1] = BoolGetDatum(false);
	row->values[Anum_grant_timeline - 1] = Int32GetDatum(history);
	for (int att = Anum_fencing_seq; att <= Anum_grant_timeline; att++)
		row->nulls[att - 1] = (att == Anum_holder && args->holder == NULL);
	set_grant_system(rows, row);
	/* the caller checked dlock.lock_holder, or the exclusive_only mark */
	dlock_row_set_exclusive_only(rows, row, true);
	dlock_policy_grant(rows, row, args->lock_name, &args->policy, now, NULL);
	dlock_row_insert(rows, row);
	return true;
}

/*
 * One attempt to grant the lease to args->owner, decided on the newest
 * committed version of the row with one clock reading. A refusal holds no
 * row lock and takes no transaction ID (unless it lost a free row's write
 * to another grant first: dlock_row_write_decided). Waits for a transaction that is
 * changing the row, up to deadline (0: as long as an UPDATE would, bounded
 * by lock_timeout). Counts and audits the grant; the transaction will
 * commit durably.
 */
/*
 * Decide an exclusive attempt on lock row "row" as read, at clock reading
 * now: false when the name is not available (*busy_until: when it will
 * be); otherwise *new_lease says whether a new lease is granted (false:
 * this owner's live lease, acquired again) and *taken_over whether it
 * replaces a lease that was lost rather than released. view receives the
 * policies' view of the row.
 */
static bool
decide_on_row(const AcquireArgs *args, DlockRows *rows, DlockRow *row, TimestampTz now,
			  DlockPolicyView *view, bool *new_lease, bool *taken_over,
			  TimestampTz *busy_until)
{
	/*
	 * Policies (lease_policy.c): whether the lease is live, and until when
	 * the name is unavailable to a new owner (lease_until without policies;
	 * later with a minimum hold or a lock delay; earlier for a session-bound
	 * lease whose session ended).
	 */
	dlock_policy_view(rows, row, now, view);
	*taken_over = !row->nulls[Anum_owner_token - 1];
	if (view->live)
	{
		pg_uuid_t  *holder_owner = DatumGetUUIDP(row->values[Anum_owner_token - 1]);

		if (memcmp(holder_owner, args->owner, UUID_LEN) == 0 && !view->hold_reached)
		{
			/* this owner retrying: same lease, same token, same policies */
			dlock_policy_check_retry(rows, row, args->lock_name, &args->policy);
			*new_lease = false;
			return true;
		}
		if (dlock_wait_abandoned(args->lock_name, row->xmin, holder_owner))
		{
			*taken_over = false;	/* handed to a waiter that never took it */
			return true;
		}
		*busy_until = view->available_at;
		return false;
	}
	if (view->available_at != 0)
	{
		*busy_until = view->available_at;
		return false;
	}
	return true;
}

static void
attempt_grant_row(const AcquireArgs *args, TupleDesc tupdesc, MemoryContext cxt,
				  TimestampTz deadline, AcquireAttempt *attempt)
{
	int64		least_token = 0;
	DlockRows	rows;
	DlockRow	row;
	bool		new_lease = true;
	bool		taken_over = false;
	DlockPolicyView view;
	DlockGrantCommit commit;
	int			rounds = 0;
	DlockEndedLease lost = {0};
	TimestampTz lost_until = 0;

	dlock_grant_prepare(&commit);
	attempt->acquired = false;
	attempt->busy_until = 0;

	dlock_rows_open(&rows);
	for (;;)
	{
		TimestampTz now = 0;
		bool		found;
		bool		appeared;
		bool		free_row;
		DlockRowLock locked;

		dlock_decision_round(&rounds, args->lock_name);
		new_lease = true;
		found = dlock_row_read(&rows, args->lock_name, &row);
		if (found)
		{
			now = GetCurrentTimestamp();
			if (!decide_on_row(args, &rows, &row, now, &view, &new_lease, &taken_over,
							   &attempt->busy_until))
			{
				dlock_rows_close(&rows);
				return;
			}
		}

		/*
		 * A new lease also needs no live shared lease or permit; unless the
		 * row, once locked as read, says the name has had none since an
		 * exclusive grant last checked (holder_lease.c, "Exclusion between
		 * kinds").
		 */
		if (new_lease && !(found && dlock_row_exclusive_only(&rows, &row)))
		{
			switch (dlock_holders_allow_exclusive(args->lock_name, deadline, commit.history,
												  &attempt->busy_until, &least_token))
			{
				case EXCLUSIVE_ALLOWED:
					break;
				case EXCLUSIVE_RETRY:
					continue;
				case EXCLUSIVE_BUSY:
					dlock_rows_close(&rows);
					return;
			}
		}

		if (!found)
		{
			if (grant_new_name(&rows, args, deadline, least_token, commit.history, &row,
							   &appeared))
				break;
			if (appeared)
				continue;
			dlock_rows_close(&rows);
			return;
		}

		/*
		 * A new lease on a free row, for a caller without a deadline, is
		 * written over the version decided on without a row lock taken
		 * first (dlock_row_write_decided: a wait there cannot make it wrong,
		 * and it waits only as long as dlock_row_wait would without a
		 * deadline). Its columns are set before the write, and again on a
		 * retry: nothing in them counts or binds a session for a free row's
		 * grant (no lost lease, session_bound excluded). Any other grant
		 * locks the row first and sets them under the lock.
		 */
		free_row = deadline == 0 && new_lease && row.nulls[Anum_owner_token - 1] &&
			!args->policy.session_bound;
		if (free_row)
		{
			set_new_lease(&rows, &row, args, now, taken_over, least_token,
						  commit.history);
			dlock_policy_grant(&rows, &row, args->lock_name, &args->policy, now, &view);
			locked = dlock_row_write_decided(&rows, &row);
		}
		else
			locked = dlock_row_lock(&rows, &row, LockTupleNoKeyExclusive);
		switch (locked)
		{
			case ROW_LOCKED:
				break;
			case ROW_CHANGED:
				continue;
			case ROW_BLOCKED:
				if (dlock_row_wait(&rows, &row, deadline))
					continue;
				dlock_rows_close(&rows);
				return;
		}
		if (free_row)
			break;				/* written */

		if (new_lease)
		{
			if (taken_over)
			{
				/* the lost lease, as read: its end is settled below */
				lost = dlock_row_ended_lease(&row);
				if (lost.holder != NULL)
					lost.holder = DatumGetTextPCopy(PointerGetDatum(lost.holder));
				lost_until = Min(DatumGetTimestampTz(row.values[Anum_lease_until - 1]), now);
			}
			set_new_lease(&rows, &row, args, now, taken_over, least_token,
						  commit.history);
			dlock_policy_grant(&rows, &row, args->lock_name, &args->policy, now, &view);
		}
		else
		{
			row.values[Anum_renewals - 1] =
				Int64GetDatum(DatumGetInt64(row.values[Anum_renewals - 1]) + 1);
			/* the same lease: its max_hold still bounds it */
			set_owner(&row, args, now,
					  dlock_policy_lease_until(&rows, &row, now, args->ttl_usecs));
		}
		dlock_row_update(&rows, &row);
		break;
	}
	dlock_rows_close(&rows);

	attempt->acquired = true;
	attempt->lease = lease_tuple(tupdesc, cxt, row.values[Anum_lock_name - 1],
								 row.values[Anum_owner_token - 1],
								 row.values[Anum_fencing_seq - 1],
								 row.values[Anum_lease_until - 1]);
	dlock_grant_written(&commit);
	if (new_lease && taken_over)
	{
		/* timed once: here, unless the expiry worker reported it first */
		dlock_sql_connect();
		(void) dlock_report_expiry_once(args->lock_name, 0, &lost, lost_until, true);
		dlock_sql_finish();
	}
	if (new_lease)
		lease_granted(args, &row, taken_over);
}

/*
 * attempt_grant_row, and for a refusal give back the kind lock it may have
 * taken (holder_lease.c), so a refused attempt holds nothing.
 */
static void
attempt_grant(const AcquireArgs *args, TupleDesc tupdesc, MemoryContext cxt,
			  TimestampTz deadline, AcquireAttempt *attempt)
{
	attempt_grant_row(args, tupdesc, cxt, deadline, attempt);
	dlock_holders_attempt_done(attempt->acquired);
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

	attempt_grant(&args, tupdesc, cxt, 0, &attempt);

	if (!attempt.acquired)
	{
		dlock_count(STAT_BUSY, 1);
		PG_RETURN_NULL();
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(attempt.lease));
}

/*
 * lease_until of a lease tuple (dlock.lease's fourth column).
 */
static TimestampTz
lease_expiry(HeapTuple lease, TupleDesc tupdesc)
{
	bool		isnull;
	Datum		until = heap_getattr(lease, 4, tupdesc, &isnull);

	return isnull ? 0 : DatumGetTimestampTz(until);
}

/*
 * Take the lease that transaction "offer" granted us in its commit (see
 * wait.c): wait for it to end -- it was committing when it made the offer --
 * and, if it committed, return the lease it wrote, as published with the
 * offer. Reads and writes nothing: the grant has committed as this session's
 * dlock.durability asks (dlock_hand_off). Not
 * acquired when that transaction rolled back, or its commit took longer
 * than the ttl; then the offer is settled and the caller attempts as usual. An offer taken
 * stands until the wait is over (dlock_wait_for_grant), so that an error before
 * then abandons it.
 */
static bool
take_handed_lease(const AcquireArgs *args, TransactionId offer, TimestampTz deadline,
				  TupleDesc tupdesc, MemoryContext cxt, AcquireAttempt *attempt)
{
	int64		token;
	TimestampTz until;

	attempt->acquired = false;
	switch (dlock_wait_take_offer(offer, deadline, &token, &until))
	{
		case -1:
			return false;
		case 0:
			return true;
	}
	attempt->lease = lease_tuple(tupdesc, cxt, PointerGetDatum(args->lock_name),
								 UUIDPGetDatum(args->owner), Int64GetDatum(token),
								 TimestampTzGetDatum(until));
	attempt->acquired = true;
	return true;
}

/*
 * Hand the lease of lock_name, released by the current transaction, to the
 * longest waiter, in this transaction: called just before it commits
 * (dlock_wait_pre_commit), when no user code runs any more. Does nothing
 * when the lock is not free any more (taken again later in the
 * transaction) or nobody waits. The transaction then commits durably, like
 * any grant, unless both the releasing session and the waiter grant under
 * dlock.durability = fenced. A waiter for a shared lease or a permit, and
 * those of its kind behind it, are granted by holder_lease.c
 * (dlock_wait_hand_off_holders); an exclusive waiter on the name's row,
 * once no shared lease or permit is live.
 */
void
dlock_hand_off(text *lock_name)
{
	DlockRows	rows;
	DlockRow	row;
	DlockHandoff to;
	TimestampTz now = GetCurrentTimestamp();
	DlockGrantCommit commit;

	/* at pre-commit no statement is running: the audit's SPI needs a snapshot */
	PushActiveSnapshot(GetTransactionSnapshot());
	if (dlock_wait_head_is_holder(lock_name))
	{
		(void) dlock_wait_hand_off_holders(lock_name, dlock_holder_hand_off);
		PopActiveSnapshot();
		return;
	}
	dlock_grant_prepare(&commit);
	dlock_rows_open(&rows);

	/*
	 * The newest version is this transaction's own release, whose row lock
	 * it holds, or -- after a release of a shared lease or permit, which
	 * does not write the row -- a free version it locks now, without
	 * waiting: nobody else can change it until the commit. A name with shared leases
	 * or permits (holder_lease.c) is handed over only when none is live and
	 * its kind lock is free now; its token goes above theirs. The check is
	 * skipped when the row is marked exclusive_only: a holder grant clears
	 * the mark under the row lock this transaction holds, so none can have.
	 */
	if (dlock_row_read(&rows, lock_name, &row) &&
		row.nulls[Anum_owner_token - 1] &&
		(TransactionIdIsCurrentTransactionId(row.xmin) ||
		 dlock_row_lock(&rows, &row, LockTupleNoKeyExclusive) == ROW_LOCKED))
	{
		TimestampTz busy_until;
		int64		least_token;
		bool		allowed;
		DlockPolicyView view;

		/* not while a minimum hold keeps the name (lease_policy.c) */
		dlock_policy_view(&rows, &row, now, &view);
		least_token = 0;
		allowed = !view.live && view.available_at == 0 &&
			(dlock_row_exclusive_only(&rows, &row) ||
			 dlock_holders_allow_exclusive(lock_name, now, commit.history, &busy_until,
										   &least_token) == EXCLUSIVE_ALLOWED);
		if (allowed &&
			dlock_wait_offer_head(lock_name,
								  row_next_token(&rows, &row, least_token, commit.history),
								  now, &to))
		{
			AcquireArgs args;

			args.lock_name = lock_name;
			args.ttl_usecs = to.ttl_usecs;
			args.owner = palloc(sizeof(pg_uuid_t));
			*args.owner = to.owner;
			args.holder = to.holder_len < 0 ? NULL :
				cstring_to_text_with_len(to.holder, to.holder_len);
			set_new_lease(&rows, &row, &args, now, false, least_token, commit.history);
			/* the waiter's own policies (never session_bound: not handed) */
			memset(&args.policy, 0, sizeof(args.policy));
			args.policy.max_hold_usecs = to.max_hold_usecs;
			args.policy.min_hold_usecs = to.min_hold_usecs;
			args.policy.lock_delay_usecs = to.lock_delay_usecs;
			dlock_policy_grant(&rows, &row, lock_name, &args.policy, now, NULL);
			dlock_row_update(&rows, &row);
			/* the grant is the waiter's: it commits as the waiter asked too */
			commit.fenced = commit.fenced && to.fenced;
			dlock_grant_written(&commit);
			lease_granted(&args, &row, false);
			dlock_holders_attempt_done(true);
		}
		else
			dlock_holders_attempt_done(false);
	}
	dlock_rows_close(&rows);
	PopActiveSnapshot();
}

/* An exclusive acquire call as the shared wait loop runs it (wait.c) */
typedef struct ExclusiveWait
{
	const AcquireArgs *args;
	TupleDesc	tupdesc;
	MemoryContext cxt;
	TimestampTz deadline;
	AcquireAttempt attempt;
} ExclusiveWait;

static bool
exclusive_attempt(void *arg, TimestampTz *busy_until)
{
	ExclusiveWait *wait = arg;

	attempt_grant(wait->args, wait->tupdesc, wait->cxt, wait->deadline, &wait->attempt);
	*busy_until = wait->attempt.busy_until;
	return wait->attempt.acquired;
}

static bool
exclusive_take_offer(void *arg, TransactionId offer, bool *granted)
{
	ExclusiveWait *wait = arg;

	if (!take_handed_lease(wait->args, offer, wait->deadline, wait->tupdesc, wait->cxt,
						   &wait->attempt))
		return false;
	*granted = wait->attempt.acquired;
	return true;
}

static TimestampTz
exclusive_granted_until(void *arg)
{
	ExclusiveWait *wait = arg;

	return lease_expiry(wait->attempt.lease, wait->tupdesc);
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
	ExclusiveWait wait;
	DlockWaitCall call = {0};
	AcquireArgs args;
	DlockHandoff handoff;
	int64		wait_usecs;

	acquire_args(fcinfo, 3, &args);
	wait_usecs = dlock_arg_wait(fcinfo, 2);
	dlock_wait_require_waitable(args.lock_name, wait_usecs);

	wait.args = &args;
	wait.tupdesc = lease_tupdesc(fcinfo);
	wait.cxt = CurrentMemoryContext;
	wait.deadline = dlock_wait_deadline(wait_usecs);
	wait.attempt.acquired = false;
	wait.attempt.busy_until = 0;

	call.lock_name = args.lock_name;
	call.wait_usecs = wait_usecs;
	call.kind = LEASE_EXCLUSIVE;
	/*
	 * A release hands the lease with the policies asked for, decided by the
	 * same rules; not a session-bound one, which only the waiter's own
	 * session can bind.
	 */
	dlock_wait_handoff_of(&handoff, LEASE_EXCLUSIVE, 0, args.owner, args.ttl_usecs,
						  args.holder);
	handoff.max_hold_usecs = args.policy.max_hold_usecs;
	handoff.min_hold_usecs = args.policy.min_hold_usecs;
	handoff.lock_delay_usecs = args.policy.lock_delay_usecs;
	call.handoff = args.policy.session_bound ? NULL : &handoff;
	call.attempt = exclusive_attempt;
	call.take_offer = exclusive_take_offer;
	call.granted_until = exclusive_granted_until;
	call.arg = &wait;

	if (!dlock_wait_for_grant(&call))
	{
		dlock_count(STAT_BUSY, 1);
		dlock_count(STAT_WAIT_TIMEOUTS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not acquire lock \"%s\" within " INT64_FORMAT " ms",
						text_to_cstring(args.lock_name), wait_usecs / 1000),
				 errdetail("The lock stayed taken for the whole wait: by another owner's live lease, an expired lease still pinned by dlock.holds(), a lock delay, or callers waiting ahead.")));
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(wait.attempt.lease));
}

/*
 * Change this owner's live lease of lock_name: extend it by ttl_usecs from
 * now (renew), end it now (ttl_usecs 0, release), or end it for a
 * downgrade (dlock_lease_end_for_downgrade). Decided on the newest
 * committed version of the row with one clock reading; when another
 * transaction holds the row (a holds() pin, a concurrent renew), waits for
 * it without holding anything and decides again on the row as it is then.
 * On success row holds the new version.
 */
static bool
change_own_lease(text *lock_name, pg_uuid_t *owner, int64 ttl_usecs, bool downgrade,
				 DlockRow *row)
{
	DlockRows	rows;
	bool		changed = false;
	int			rounds = 0;

	dlock_rows_open(&rows);
	while (dlock_row_read(&rows, lock_name, row))
	{
		TimestampTz now;

		dlock_decision_round(&rounds, lock_name);
		now = GetCurrentTimestamp();

		if (row->nulls[Anum_owner_token - 1] ||
			memcmp(DatumGetUUIDP(row->values[Anum_owner_token - 1]), owner, UUID_LEN) != 0)
			break;
		/* live, and the policies allow it (lease_policy.c) */
		if (!dlock_policy_may_change(&rows, row, now, ttl_usecs))
			break;
		if (downgrade)
			dlock_policy_check_downgrade(&rows, row, lock_name);

		switch (dlock_row_lock(&rows, row, LockTupleNoKeyExclusive))
		{
			case ROW_LOCKED:
				break;
			case ROW_CHANGED:
				continue;
			case ROW_BLOCKED:
				(void) dlock_row_wait(&rows, row, 0);
				continue;
		}

		if (downgrade)
		{
			/* a holder of the name is coming: exclusive grants must check */
			dlock_row_set_exclusive_only(&rows, row, false);
			row->nulls[Anum_owner_token - 1] = true;
			row->values[Anum_updated_at - 1] = TimestampTzGetDatum(now);
			dlock_row_update(&rows, row);
			changed = true;
			break;
		}
		dlock_policy_change(&rows, row, now, ttl_usecs);
		if (ttl_usecs > 0)
			row->values[Anum_renewals - 1] =
				Int64GetDatum(DatumGetInt64(row->values[Anum_renewals - 1]) + 1);
		else
			row->nulls[Anum_owner_token - 1] = true;
		row->values[Anum_lease_until - 1] = TimestampTzGetDatum(ttl_usecs > 0 ?
																dlock_policy_lease_until(&rows, row, now, ttl_usecs) :
																now);
		row->values[Anum_updated_at - 1] = TimestampTzGetDatum(now);
		dlock_row_update(&rows, row);
		changed = true;
		break;
	}
	dlock_rows_close(&rows);
	return changed;
}

/*
 * For dlock.downgrade (downgrade.c), which grants the owner a shared lease
 * in the same transaction: end owner's live exclusive lease of lock_name
 * like a release, but hand it to no waiter, keep its lease_until in row
 * (when it would have ended), and clear the exclusive_only mark. A lease
 * with a policy a shared lease cannot keep is refused (lease_policy.c).
 * False when owner holds no live exclusive lease of the name.
 */
bool
dlock_lease_end_for_downgrade(text *lock_name, pg_uuid_t *owner, DlockRow *row)
{
	return change_own_lease(lock_name, owner, 0, true, row);
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
	bool		writes_only = dlock_lease_writes_only();
	int64		ttl_usecs;
	DlockRow	row;

	dlock_require_arg(fcinfo, 1, "owner_token");
	ttl_usecs = dlock_arg_ttl(fcinfo, 2);

	if (!change_own_lease(lock_name, PG_GETARG_UUID_P(1), ttl_usecs, false, &row))
	{
		TimestampTz holder_until;

		/* or a shared lease or permit of this owner */
		if (dlock_holder_change(lock_name, PG_GETARG_UUID_P(1), ttl_usecs, &holder_until))
			PG_RETURN_TIMESTAMPTZ(holder_until);
		dlock_count(STAT_RENEWALS_REFUSED, 1);
		if (dlock_audit_level == DLOCK_AUDIT_ALL)
			dlock_report_audit("renew_refused", lock_name, 0, true, NULL, NULL);
		PG_RETURN_NULL();
	}
	dlock_lease_written(writes_only, !dlock_grants_fenced());
	dlock_count(STAT_RENEWALS, 1);
	dlock_report_renewal(lock_name, DatumGetInt64(row.values[Anum_fencing_seq - 1]),
						 row.nulls[Anum_holder - 1] ? NULL :
						 DatumGetTextPP(row.values[Anum_holder - 1]));
	PG_RETURN_DATUM(row.values[Anum_lease_until - 1]);
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
	bool		writes_only = dlock_lease_writes_only();
	DlockRow	row;
	DlockEndedLease ended;

	dlock_require_arg(fcinfo, 1, "owner_token");

	if (!change_own_lease(lock_name, PG_GETARG_UUID_P(1), 0, false, &row))
	{
		/* or a shared lease or permit of this owner */
		if (dlock_holder_change(lock_name, PG_GETARG_UUID_P(1), 0, NULL))
			PG_RETURN_BOOL(true);
		dlock_count(STAT_RELEASES_REFUSED, 1);
		PG_RETURN_BOOL(false);
	}
	dlock_lease_written(writes_only, false);
	/* the longest waiter gets the lease in this transaction's commit */
	dlock_hand_off_at_commit(lock_name);
	ended = dlock_row_ended_lease(&row);
	dlock_report_end(lock_name, "release", STAT_RELEASES, DLOCK_AUDIT_ALL, NULL, &ended);
	PG_RETURN_BOOL(true);
}
