/*-------------------------------------------------------------------------
 *
 * holder_lease.c
 *	  Shared leases (read-write lock) and semaphore permits: leases that
 *	  several owners hold on one name at once.
 *
 * Storage. Each such lease is a row of dlock.lock_holder, a "slot" of its
 * name: owner token, lease_until and fencing token, exactly as an exclusive
 * lease is the name's row in dlock.distributed_lock. A grant updates one
 * free or expired slot row (and, the first after an exclusive grant, the
 * name's row: "Exclusion between kinds" below), so readers of one name write
 * different rows and do not queue behind each other on a hot row. A
 * semaphore of N permits uses slots 1..N; a shared lock uses as many slots
 * as it has had readers at once. Slots are reused, never deleted.
 *
 * Tokens. All kinds draw from the name's counter. A slot takes a block of
 * HOLDER_TOKEN_BLOCK tokens from dlock.holder_counter at a time and issues
 * them one by one; a block starts above the counter, above the name's last
 * exclusive token and above the reap floor, by the generation rules of
 * lease.c (dlock_next_token), so a failover or a restore moves it to a new
 * generation like any other grant. A slot takes a new block when its block
 * is used up, when an exclusive lease was granted since (the name's token
 * passed the slot's), or when the timeline or cluster changed. An exclusive
 * grant continues above the holders' counter (lease.c calls
 * dlock_holders_allow_exclusive). So every token of a name is issued once,
 * each slot's tokens grow, an exclusive token is above every earlier token
 * of the name, and a holder's token is above every earlier exclusive token.
 *
 * Exclusion between kinds. Grants of holder leases take the name's kind
 * lock (catalog.c) in a mode that conflicts with ExclusiveLock (ShareLock
 * for readers, kind_lock_mode for permits), exclusive grants that check for
 * holders in ExclusiveLock, kept to the end of the granting transaction;
 * each decides only once it holds the lock, on the committed state. So a
 * reader and a writer never both see the other's lock free: whichever
 * commits second saw the first. A refused attempt gives the kind lock back,
 * takes no row lock and no transaction ID (a free slot is locked, without
 * waiting, only once the grant is decided).
 *
 * Most names never have holders, and an exclusive grant need not pay for
 * the check. The name's row in dlock.distributed_lock carries a
 * mark, exclusive_only: set by an exclusive grant that checked (or skipped
 * the check because the mark was set), cleared by a holder grant before it
 * grants. An exclusive grant whose row, as read, carries the mark takes no
 * kind lock and reads no slot; it then locks that very row version
 * (lock_row.c), or reads again. A holder grant clears the mark by updating
 * the newest version under the row lock, taken the same way, and first
 * decides on that version that no exclusive lease is live. The two row
 * locks conflict, so one of them comes first:
 *  - the exclusive grant first: the holder grant waits for its transaction
 *    and decides again on what it committed (a live lease: refused);
 *  - the holder grant first: the exclusive grant finds the version it read
 *    locked or replaced, reads again after that transaction, sees the mark
 *    cleared and checks under the kind lock, as above.
 * The mark is only set under the kind lock held exclusively or on a row
 * whose mark is already set, and while it stays set no holder has been
 * granted, so skipping is exact: no holder lease can be live and every
 * holder token lies below the row's token. A name without a row has no
 * mark: its first exclusive grant always checks. A row written by 1.1 or by
 * anything that does not know the column has the mark clear.
 *
 * Writer preference. A holder grant is refused while an acquirer is queued
 * for the name (wait.c) ahead of the caller, so a stream of readers cannot
 * starve a waiting writer; waiters of every kind share one FIFO queue. A
 * release hands the waiters at its head their leases in its own commit
 * (dlock_holder_hand_off, driven by wait.c): the same decision and grant,
 * made by the releasing transaction for them.
 *
 * Rows. Grants, renewals and releases reach the slot rows as exclusive
 * leases reach theirs (lock_row.c), without the executor: the name's slots
 * are read by its primary key with the latest snapshot (the snapshot rule
 * of sql_executor.c), the decision is made on them at one clock reading,
 * and only then is the very version decided on locked, without waiting
 * (dlock_tuple_lock), and written (dlock_tuple_update, HOT). A version
 * found changed or locked is read and decided again, as for a lock row.
 * The rarer steps -- a new slot, a new block of tokens, freeing expired
 * slots for an exclusive grant, pins, resizing -- run statements through
 * the executor (sql_executor.c), as the extension owner, defined beside
 * the code below; their $n timestamptz parameters are the caller's one
 * clock reading.
 *
 * IDENTIFICATION
 *	  extension/holder_lease.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
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

PG_FUNCTION_INFO_V1(dlock_try_acquire_shared);
PG_FUNCTION_INFO_V1(dlock_acquire_shared);
PG_FUNCTION_INFO_V1(dlock_try_acquire_permit);
PG_FUNCTION_INFO_V1(dlock_acquire_permit);
PG_FUNCTION_INFO_V1(dlock_resize_semaphore);

/* Tokens a slot reserves from its name's counter at a time */
#define HOLDER_TOKEN_BLOCK 256

/* How soon an acquire looks again at expired slots that are still pinned */
#define PINNED_SLOT_POLL_USECS (10 * 1000)

/* Most slots a shared lock grows to; one per concurrent reader */
#define MAX_SHARED_SLOTS 10000

#define KIND_SHARED 's'
#define KIND_PERMIT 'p'

/*
 * Attribute numbers of dlock.lock_holder (pg_dlock--1.1--1.2.sql); the lease
 * policies' columns, 1.6 on, are found by name (DlockHolderColumns).
 */
#define Anum_holder_lock_name	1
#define Anum_holder_slot		2
#define Anum_holder_kind		3
#define Anum_holder_permits		4
#define Anum_holder_owner_token 5
#define Anum_holder_fencing_seq 6
#define Anum_holder_block_end	7
#define Anum_holder_lease_until 8
#define Anum_holder_holder		9
#define Anum_holder_acquired_at 10
#define Anum_holder_updated_at	11
#define Anum_holder_renewals	12
#define Anum_holder_grant_timeline 13
#define Anum_holder_grant_system 14
/* and of dlock.holder_counter */
#define Anum_counter_lock_name	1
#define Anum_counter_fencing_seq 2
#define Anum_counter_grant_timeline 3
#define Anum_counter_grant_system 4

/* A slot row as read: the version (tid), who wrote it, and all its columns */
typedef struct SlotRow
{
	ItemPointerData tid;
	TransactionId xmin;
	Datum	   *values;
	bool	   *nulls;
} SlotRow;

#define SLOT_NULL(row, att) ((row)->nulls[(att) - 1])
#define SLOT_VALUE(row, att) ((row)->values[(att) - 1])

/* A timestamp column of a slot row, 0 when NULL or absent (att 0) */
static TimestampTz
slot_time(const SlotRow *row, AttrNumber att)
{
	if (att <= 0 || SLOT_NULL(row, att))
		return 0;
	return DatumGetTimestampTz(SLOT_VALUE(row, att));
}

/*
 * A slot as the one policy decision (lease_policy.c) reads it; a slot of a
 * database not yet updated to 1.6 has no policy columns and is read as a
 * slot without policy.
 */
static void
slot_policy_row(const SlotRow *row, DlockPolicyRow *pr)
{
	const DlockHolderColumns *cols = &dlock_catalog()->holder_columns;

	memset(pr, 0, sizeof(*pr));
	pr->has_owner = !SLOT_NULL(row, Anum_holder_owner_token);
	pr->lease_until = slot_time(row, Anum_holder_lease_until);
	if (cols->policies)
	{
		pr->hold_limit = slot_time(row, cols->hold_limit);
		pr->min_hold_until = slot_time(row, cols->min_hold_until);
		pr->lock_delay_usecs = SLOT_NULL(row, cols->lock_delay) ? 0 :
			dlock_interval_usecs(DatumGetIntervalP(SLOT_VALUE(row, cols->lock_delay)));
		pr->not_before = slot_time(row, cols->not_before);
	}
}

/*
 * Copy tuple, a version of a slot row, into row, in the current memory
 * context (so that it outlives the scan's buffer pin).
 */
static void
copy_slot_row(HeapTuple tuple, TupleDesc desc, SlotRow *row)
{
	dlock_tuple_copy_values(tuple, desc, &row->values, &row->nulls);
	row->tid = tuple->t_self;
	row->xmin = HeapTupleHeaderGetXmin(tuple->t_data);
}

/* The lease a slot row holds or last held, as the reports need it */
static DlockEndedLease
slot_ended_lease(const SlotRow *row)
{
	DlockEndedLease lease = {
		.token = DatumGetInt64(SLOT_VALUE(row, Anum_holder_fencing_seq)),
		.holder = SLOT_NULL(row, Anum_holder_holder) ? NULL :
		DatumGetTextPP(SLOT_VALUE(row, Anum_holder_holder)),
		.kind = dlock_lease_kind_of(DatumGetChar(SLOT_VALUE(row, Anum_holder_kind))),
		.acquired_at = slot_time(row, Anum_holder_acquired_at),
	};

	return lease;
}

/*
 * Write row's values as the new version of the slot row version it was
 * read as, which this transaction has locked or inserted; row->tid then
 * points to the new version.
 */
static void
write_slot_row(SlotRow *row)
{
	Relation	rel = dlock_table_open(dlock_catalog()->holder_table, RowExclusiveLock);
	HeapTuple	tuple = heap_form_tuple(RelationGetDescr(rel), row->values, row->nulls);

	dlock_tuple_update(rel, &row->tid, tuple);
	row->tid = tuple->t_self;
	heap_freetuple(tuple);
	table_close(rel, NoLock);
}

/* Arguments of one holder acquire call, checked */
typedef struct HolderArgs
{
	char		kind;
	text	   *lock_name;
	int32		permits;		/* KIND_PERMIT only */
	int64		ttl_usecs;
	pg_uuid_t  *owner;
	text	   *holder;			/* NULL when not given */
	DlockLeasePolicy policy;	/* max_hold, min_hold, lock_delay of this lease */
	bool		by_release;		/* granted by a release to a waiter (hand_off) */
} HolderArgs;

/* The kind lock taken by the current exclusive attempt, if newly taken */
static bool exclusive_kind_lock_taken = false;
static text *exclusive_kind_lock_name = NULL;

/*
 * The mode in which a grant of this kind takes the name's kind lock, kept
 * to the end of the granting transaction when it grants. Readers share it.
 *
 * A permit grant that starts a semaphore (its slots are not all of the
 * caller's size, or it has none) excludes every other permit grant
 * (ShareRowExclusiveLock): it decides on the permits committed before it,
 * so two grants asking for different numbers of permits cannot both see
 * the semaphore empty. A permit grant that joins a semaphore, one whose
 * slots are all of the caller's size (permit_may_join), takes
 * RowExclusiveLock instead: joining grants run side by side, each on a
 * slot row of its own among slots 1..permits, so no more than that many
 * are ever live; all of one size, since every live slot is of the size
 * they join; and they keep out a starting grant, which therefore decides
 * only once every joining grant in flight has committed, on what it
 * wrote. So the live permits never have two sizes. Both modes conflict
 * with the readers' ShareLock and the writers' ExclusiveLock.
 */
static LOCKMODE
kind_lock_mode(char kind, bool join)
{
	if (kind == KIND_PERMIT)
		return join ? RowExclusiveLock : ShareRowExclusiveLock;
	return ShareLock;
}

static const char *
kind_noun(char kind)
{
	return kind == KIND_SHARED ? "shared lock" : "semaphore";
}

/* One try at a kind lock without waiting, for dlock_retry_until */
typedef struct KindLockTry
{
	text	   *lock_name;
	LOCKMODE	mode;
	LockAcquireResult result;
} KindLockTry;

static bool
try_kind_lock(void *arg)
{
	KindLockTry *try = arg;

	try->result = dlock_kind_lock(try->lock_name, try->mode, false);
	return try->result != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Take lock_name's kind lock in mode, waiting up to deadline (0: as long as
 * a row lock would, bounded by lock_timeout). Returns false when the
 * deadline passed first; *waited says whether it had to wait.
 */
static bool
take_kind_lock(text *lock_name, LOCKMODE mode, TimestampTz deadline,
			   LockAcquireResult *result, bool *waited)
{
	KindLockTry try;

	*waited = false;
	*result = dlock_kind_lock(lock_name, mode, false);
	if (*result != LOCKACQUIRE_NOT_AVAIL)
		return true;
	*waited = true;
	if (deadline == 0)
	{
		*result = dlock_kind_lock(lock_name, mode, true);
		return true;
	}
	try.lock_name = lock_name;
	try.mode = mode;
	if (!dlock_retry_until(try_kind_lock, &try, deadline))
		return false;
	*result = try.result;
	return true;
}

/*
 * Scan the rows of lock_name in table relid (by its primary key, whose first
 * column is the name) with the latest snapshot, calling fn for each.
 */
static void
scan_name_rows(Oid relid, text *lock_name, void (*fn) (HeapTuple tuple, TupleDesc desc, void *arg),
			   void *arg)
{
	Relation	rel = dlock_table_open(relid, AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(lock_name));
	scan = systable_beginscan(rel, dlock_primary_key_index(rel), true, snapshot, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		fn(tuple, RelationGetDescr(rel), arg);
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
}

/* What an exclusive grant needs to know about a name's holder slots */
typedef struct HolderProbe
{
	TimestampTz now;
	TimestampTz first_expiry;	/* earliest time a busy slot becomes available */
	bool		any_live;		/* a slot is live, or kept from new owners */
	bool		any_expired;	/* an expired holder still owns its slot */
	int			nexpired;		/* how many */
	int64		counter;		/* highest token reserved for the slots, 0 if none */
	int32		counter_history;	/* its history position (token.c) */
	int64		counter_system;
	text	   *lock_name;
	int			nabandoned;		/* live slots handed to waiters that never took them */
	int32		abandoned_slot[8];	/* the first of them */
} HolderProbe;

/*
 * A slot keeps writers out while the one policy decision (lease_policy.c)
 * keeps it from a new owner: its lease is live, or was released inside its
 * min_hold, or was lost less than its lock_delay ago. Only then may the
 * name's exclusive lease begin.
 */
static void
probe_holder(HeapTuple tuple, TupleDesc desc, void *arg)
{
	HolderProbe *probe = arg;
	DlockPolicyRow pr;
	DlockPolicyView view;
	SlotRow		row;

	copy_slot_row(tuple, desc, &row);
	slot_policy_row(&row, &pr);
	dlock_policy_decide(&pr, probe->now, &view);
	if (view.live &&
		dlock_wait_abandoned(probe->lock_name, row.xmin,
							 DatumGetUUIDP(SLOT_VALUE(&row, Anum_holder_owner_token))))
	{
		/* handed by a release to a waiter that never took it: to be freed */
		if (probe->nabandoned < (int) lengthof(probe->abandoned_slot))
			probe->abandoned_slot[probe->nabandoned] =
				DatumGetInt32(SLOT_VALUE(&row, Anum_holder_slot));
		probe->nabandoned++;
	}
	else if (view.live || view.available_at != 0)
	{
		if (!probe->any_live || view.available_at < probe->first_expiry)
			probe->first_expiry = view.available_at;
		probe->any_live = true;
	}
	else if (pr.has_owner)
	{
		probe->any_expired = true;
		probe->nexpired++;
	}
}

static void
probe_counter(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;
	HolderProbe *probe = arg;
	Datum		seq = heap_getattr(tuple, Anum_counter_fencing_seq, desc, &isnull);

	if (isnull)
		return;
	probe->counter = DatumGetInt64(seq);
	probe->counter_history = DatumGetInt32(heap_getattr(tuple, Anum_counter_grant_timeline,
														desc, &isnull));
	probe->counter_system = DatumGetInt64(heap_getattr(tuple, Anum_counter_grant_system,
													   desc, &isnull));
}

/*
 * An exclusive grant's expired holders: waits for their pins (holds), then
 * frees their slots; the clock is read in the WHERE clause, so a slot
 * waited for is judged again as it is when its lock is granted.
 */
#define CLEARED_RETURNING \
	" RETURNING h.slot, h.fencing_seq, h.holder, h.acquired_at, h.kind, h.lease_until"
#define CLEARED_COL_SLOT	1
#define CLEARED_COL_TOKEN	2
#define CLEARED_COL_HOLDER	3
#define CLEARED_COL_ACQUIRED_AT 4
#define CLEARED_COL_KIND	5
#define CLEARED_COL_UNTIL	6
static DlockStatement holders_clear_expired_stmt = {
	.sql =
	"UPDATE dlock.lock_holder h SET owner_token = NULL, updated_at = pg_catalog.clock_timestamp()"
	" WHERE h.lock_name = $1 AND h.owner_token IS NOT NULL"
	"   AND h.lease_until <= pg_catalog.clock_timestamp()"
	CLEARED_RETURNING,
	.nargs = 1,
	.argtypes = {TEXTOID},
};

/* the same without waiting: pinned slots are left as they are */
static DlockStatement holders_clear_expired_unpinned_stmt = {
	.sql =
	"UPDATE dlock.lock_holder h SET owner_token = NULL, updated_at = pg_catalog.clock_timestamp()"
	"  FROM (SELECT e.slot FROM dlock.lock_holder e"
	"         WHERE e.lock_name = $1 AND e.owner_token IS NOT NULL"
	"           AND e.lease_until <= pg_catalog.clock_timestamp()"
	"           FOR UPDATE SKIP LOCKED) x"
	" WHERE h.lock_name = $1 AND h.slot = x.slot"
	CLEARED_RETURNING,
	.nargs = 1,
	.argtypes = {TEXTOID},
};

/*
 * A slot's lease that a release handed to a waiter that never took it
 * (wait.c), freed for an exclusive grant: as it is, unless it changed
 * since; a pin on it is waited for.
 */
static DlockStatement holder_clear_abandoned_stmt = {
	.sql =
	"UPDATE dlock.lock_holder h SET owner_token = NULL,"
	"       lease_until = pg_catalog.clock_timestamp(), updated_at = pg_catalog.clock_timestamp()"
	" WHERE h.lock_name = $1 AND h.slot = $2 AND h.owner_token IS NOT NULL",
	.nargs = 2,
	.argtypes = {TEXTOID, INT4OID},
};

/*
 * The expired leases the last statement freed (nrows rows of
 * CLEARED_RETURNING), each reported once (report.c). Copied first: the
 * reports run statements of their own.
 */
static void
settle_cleared(text *lock_name, int nrows)
{
	int32	   *slots = palloc(sizeof(int32) * (nrows + 1));
	DlockEndedLease *leases = palloc(sizeof(DlockEndedLease) * (nrows + 1));
	TimestampTz *untils = palloc(sizeof(TimestampTz) * (nrows + 1));
	bool		isnull;

	for (int i = 0; i < nrows; i++)
	{
		slots[i] = DatumGetInt32(dlock_sql_value(i, CLEARED_COL_SLOT, &isnull));
		leases[i] = dlock_result_ended_lease(i, CLEARED_COL_TOKEN, CLEARED_COL_HOLDER,
											 CLEARED_COL_ACQUIRED_AT, CLEARED_COL_KIND);
		if (leases[i].holder != NULL)
			leases[i].holder = DatumGetTextPCopy(PointerGetDatum(leases[i].holder));
		untils[i] = DatumGetTimestampTz(dlock_sql_value(i, CLEARED_COL_UNTIL, &isnull));
	}
	for (int i = 0; i < nrows; i++)
		(void) dlock_report_expiry_once(lock_name, slots[i], &leases[i], untils[i], false);
}

/*
 * Called by an exclusive grant (lease.c) before it locks the name's row:
 * takes the name's kind lock exclusively and checks that no shared lease or
 * permit is live. Expired holders pinned by dlock.holds() are waited for and
 * their slots freed, so a stale reader's fenced transaction ends before the
 * writer's lease begins. *least_token receives the least token a grant at
 * history position "history" may issue above the tokens reserved for the
 * name's slots (0 if none): the next after them, a generation up by the
 * positions crossed since they were reserved, as the row's own next token
 * is -- not from the row's position, which would count the same crossing
 * twice.
 */
DlockExclusiveCheck
dlock_holders_allow_exclusive(text *lock_name, TimestampTz deadline, int32 history,
							  TimestampTz *busy_until, int64 *least_token)
{
	LockAcquireResult result;
	bool		waited;
	HolderProbe probe;

	*least_token = 0;
	if (!OidIsValid(dlock_catalog()->holder_table))
		return EXCLUSIVE_ALLOWED;	/* 1.1 schema: no holder kinds */

	if (!take_kind_lock(lock_name, ExclusiveLock, deadline, &result, &waited))
	{
		*busy_until = 0;
		return EXCLUSIVE_BUSY;
	}
	if (result == LOCKACQUIRE_ALREADY_HELD)
		dlock_kind_unlock(lock_name, ExclusiveLock);	/* keep one reference */
	else if (!exclusive_kind_lock_taken)
	{
		exclusive_kind_lock_taken = true;
		if (exclusive_kind_lock_name != NULL)
			pfree(exclusive_kind_lock_name);
		exclusive_kind_lock_name = MemoryContextAlloc(TopMemoryContext, VARSIZE_ANY(lock_name));
		memcpy(exclusive_kind_lock_name, lock_name, VARSIZE_ANY(lock_name));
	}
	if (waited)
		return EXCLUSIVE_RETRY; /* decide on the row as it is now */

	/* without the executor: this runs on every exclusive grant */
	probe.now = GetCurrentTimestamp();
	probe.first_expiry = 0;
	probe.any_live = probe.any_expired = false;
	probe.nexpired = 0;
	probe.counter = 0;
	probe.lock_name = lock_name;
	probe.nabandoned = 0;
	scan_name_rows(dlock_catalog()->holder_table, lock_name, probe_holder, &probe);
	if (probe.any_live)
	{
		*busy_until = probe.first_expiry;
		return EXCLUSIVE_BUSY;
	}
	if (probe.nabandoned > 0)
	{
		/*
		 * Rare: end the abandoned leases in the slots, so that their owners
		 * can never renew them beside the writer, then decide again (a slot
		 * changed meanwhile is judged as it is then).
		 */
		Datum		values[2] = {PointerGetDatum(lock_name)};

		dlock_sql_connect();
		for (int i = 0; i < Min(probe.nabandoned, (int) lengthof(probe.abandoned_slot)); i++)
		{
			values[1] = Int32GetDatum(probe.abandoned_slot[i]);
			(void) dlock_execute(&holder_clear_abandoned_stmt, values, NULL, 0);
		}
		dlock_sql_finish();
		return EXCLUSIVE_RETRY;
	}
	/*
	 * The counter outlives the slots (dlock.reap deletes idle slots, not
	 * the counter), so it is read whether or not a slot is left: tokens of
	 * reaped shared leases and permits are above it no more than it is.
	 */
	scan_name_rows(dlock_catalog()->counter_table, lock_name, probe_counter, &probe);
	if (probe.counter != 0)
		*least_token = dlock_next_token(probe.counter, probe.counter_history,
										probe.counter_system, history);
	if (probe.any_expired)
	{
		/*
		 * Rare: free their slots once their pins end. Without a deadline
		 * the statement waits for the pins as an UPDATE would; with one,
		 * pinned slots are skipped and the attempt is refused until they
		 * are free, so the caller's wait bounds this one. Either way the
		 * grant is decided again on the slots as they are then: a slot
		 * waited for may have changed meanwhile.
		 */
		Datum		values[1] = {PointerGetDatum(lock_name)};
		int			freed;

		dlock_sql_connect();
		freed = dlock_execute(deadline == 0 ? &holders_clear_expired_stmt :
							  &holders_clear_expired_unpinned_stmt, values, NULL, 0);
		settle_cleared(lock_name, freed);
		dlock_sql_finish();
		if (freed < probe.nexpired && deadline != 0)
		{
			*busy_until = dlock_time_plus(GetCurrentTimestamp(), PINNED_SLOT_POLL_USECS);
			return EXCLUSIVE_BUSY;
		}
		return EXCLUSIVE_RETRY;
	}
	return EXCLUSIVE_ALLOWED;
}

/*
 * Whether a shared lease or permit of lock_name keeps writers out at clock
 * reading now, as committed (the latest snapshot): live, or kept by its
 * policies (probe_holder). A multi-lock's refusal before it writes anything.
 */
bool
dlock_holders_busy(text *lock_name, TimestampTz now)
{
	HolderProbe probe = {.now = now, .lock_name = lock_name};

	if (!OidIsValid(dlock_catalog()->holder_table))
		return false;
	scan_name_rows(dlock_catalog()->holder_table, lock_name, probe_holder, &probe);
	return probe.any_live;
}

/*
 * The exclusive attempt is over: a refused one gives back the kind lock it
 * took, so it holds nothing.
 */
void
dlock_holders_attempt_done(bool acquired)
{
	if (exclusive_kind_lock_taken && !acquired)
		dlock_kind_unlock(exclusive_kind_lock_name, ExclusiveLock);
	exclusive_kind_lock_taken = false;
}

/* The name's slot rows, as scan_name_rows collects them */
typedef struct SlotRows
{
	int			n;
	int			size;
	SlotRow    *rows;
} SlotRows;

static void
collect_slot_row(HeapTuple tuple, TupleDesc desc, void *arg)
{
	SlotRows   *rows = arg;

	if (rows->n == rows->size)
	{
		rows->size = Max(8, rows->size * 2);
		rows->rows = rows->rows == NULL ? palloc(sizeof(SlotRow) * rows->size) :
			repalloc(rows->rows, sizeof(SlotRow) * rows->size);
	}
	copy_slot_row(tuple, desc, &rows->rows[rows->n++]);
}

/*
 * The slot rows of lock_name as committed (and as this transaction wrote
 * them), in slot order, read with the latest snapshot; returns how many.
 */
static int
read_slot_rows(text *lock_name, SlotRow **rows)
{
	SlotRows	found = {0};

	/* this transaction's own statements so far are part of the state */
	CommandCounterIncrement();
	scan_name_rows(dlock_catalog()->holder_table, lock_name, collect_slot_row, &found);
	*rows = found.rows;
	return found.n;
}

/*
 * Renew (ttl_usecs > 0) or release (0) this owner's live shared lease or
 * permit of lock_name inside the caller's connection; false when it
 * holds none. *lease_until and *token receive the lease's new expiry and
 * its fencing token.
 */
static bool
change_holder(text *lock_name, pg_uuid_t *owner, int64 ttl_usecs, bool by_renew,
			  TimestampTz *lease_until, int64 *token)
{
	bool		writes_only = dlock_lease_writes_only();
	const DlockHolderColumns *cols = &dlock_catalog()->holder_columns;
	TimestampTz now;
	int			rounds = 0;
	DlockPolicyRow pr;
	TimestampTz since;
	TimestampTz not_before;
	SlotRow    *row;

	/*
	 * Decide on the owner's slot as committed, at one clock reading, and
	 * only then lock that very version without waiting: a refusal (no live
	 * lease of this owner) holds no row lock and takes no transaction ID.
	 * When another transaction has the slot (a holds() pin, a concurrent
	 * renewal), wait for it holding nothing and decide again on the slot
	 * as it is then, at a new clock reading: a lease that expired while its
	 * renewal waited for a pin is gone, as for an exclusive lease.
	 */
	for (;;)
	{
		SlotRow    *rows;
		int			nrows = read_slot_rows(lock_name, &rows);
		Relation	rel;
		DlockRowLock locked;

		/* the owner's slot; of two (a lease lost and retaken), the later */
		row = NULL;
		for (int i = 0; i < nrows; i++)
			if (!SLOT_NULL(&rows[i], Anum_holder_owner_token) &&
				memcmp(DatumGetUUIDP(SLOT_VALUE(&rows[i], Anum_holder_owner_token)),
					   owner, UUID_LEN) == 0 &&
				(row == NULL || slot_time(&rows[i], Anum_holder_lease_until) >
				 slot_time(row, Anum_holder_lease_until)))
				row = &rows[i];
		if (row == NULL)
			return false;
		since = slot_time(row, Anum_holder_updated_at);
		slot_policy_row(row, &pr);
		now = GetCurrentTimestamp();
		/* the rule of every kind: live, and a renewal not past max_hold */
		if (!dlock_policy_may_change_row(&pr, now, ttl_usecs))
			return false;

		rel = dlock_table_open(dlock_catalog()->holder_table, RowExclusiveLock);
		locked = dlock_tuple_lock(rel, &row->tid, LockTupleNoKeyExclusive);
		if (locked == ROW_BLOCKED)
			(void) dlock_tuple_wait(rel, &row->tid, 0); /* bounded by lock_timeout */
		table_close(rel, NoLock);
		if (locked == ROW_LOCKED)
			break;				/* locked as decided on */
		dlock_decision_round(&rounds, lock_name);
	}

	*token = DatumGetInt64(SLOT_VALUE(row, Anum_holder_fencing_seq));
	*lease_until = ttl_usecs > 0 ? dlock_policy_until_row(&pr, now, ttl_usecs) : now;
	not_before = ttl_usecs > 0 ? 0 : dlock_policy_released_not_before(&pr, now);
	if (ttl_usecs == 0)
		SLOT_NULL(row, Anum_holder_owner_token) = true;
	SLOT_VALUE(row, Anum_holder_lease_until) = TimestampTzGetDatum(*lease_until);
	SLOT_VALUE(row, Anum_holder_updated_at) = TimestampTzGetDatum(now);
	if (ttl_usecs > 0)
		SLOT_VALUE(row, Anum_holder_renewals) =
			Int64GetDatum(DatumGetInt64(SLOT_VALUE(row, Anum_holder_renewals)) + 1);
	if (cols->policies)
	{
		SLOT_VALUE(row, cols->not_before) = TimestampTzGetDatum(not_before);
		SLOT_NULL(row, cols->not_before) = not_before == 0;
	}
	write_slot_row(row);
	if (ttl_usecs > 0)
	{
		dlock_lease_written(writes_only, !dlock_grants_fenced());
		dlock_count(STAT_RENEWALS, 1);
		dlock_policy_count_renewal(pr.lease_until, since, now);
		if (by_renew)
			dlock_report_renewal(lock_name, *token,
								 SLOT_NULL(row, Anum_holder_holder) ? NULL :
								 DatumGetTextPP(SLOT_VALUE(row, Anum_holder_holder)));
	}
	else
	{
		DlockEndedLease lease = slot_ended_lease(row);

		dlock_lease_written(writes_only, false);
		/* the longest waiters get what it freed in this transaction's commit */
		dlock_hand_off_at_commit(lock_name);
		dlock_report_end(lock_name, "release", STAT_RELEASES, DLOCK_AUDIT_ALL, NULL, &lease);
	}
	return true;
}

/*
 * Renew (ttl_usecs > 0) or release (0) this owner's live shared lease or
 * permit of lock_name; false when it holds none. Called by dlock.renew and
 * dlock.release when the owner holds no exclusive lease of the name.
 */
bool
dlock_holder_change(text *lock_name, pg_uuid_t *owner, int64 ttl_usecs,
					TimestampTz *lease_until)
{
	TimestampTz until;
	int64		token;
	bool		changed;

	if (!OidIsValid(dlock_catalog()->holder_table))
		return false;
	dlock_sql_connect();
	changed = change_holder(lock_name, owner, ttl_usecs, true, &until, &token);
	dlock_sql_finish();
	if (changed && lease_until != NULL)
		*lease_until = until;
	return changed;
}

/* pins a live shared lease or permit with token $2 */
static DlockStatement holder_pin_stmt = {
	.sql =
	"SELECT 1 FROM dlock.lock_holder h"
	" WHERE h.lock_name = $1 AND h.fencing_seq = $2"
	"   AND h.owner_token IS NOT NULL AND h.lease_until > pg_catalog.clock_timestamp()"
	"   FOR SHARE",
	.nargs = 2,
	.argtypes = {TEXTOID, INT8OID},
};

/*
 * dlock.holds() for a token of a shared lease or permit: true when it is a
 * live one; then it is pinned (FOR SHARE) to the end of the transaction, so
 * it can be neither released nor taken over, nor an exclusive lease granted,
 * before the caller's fenced write commits.
 */
bool
dlock_holder_holds(text *lock_name, int64 token)
{
	Datum		values[2];
	bool		held;

	if (!OidIsValid(dlock_catalog()->holder_table))
		return false;
	values[0] = PointerGetDatum(lock_name);
	values[1] = Int64GetDatum(token);
	dlock_sql_connect();
	held = dlock_execute(&holder_pin_stmt, values, NULL, 1) > 0;
	dlock_sql_finish();
	return held;
}

/* The slot row locked for a grant */
typedef struct HolderSlot
{
	SlotRow		row;			/* as locked */
	int32		slot;
	int64		fencing_seq;
	int64		block_end;
	int32		grant_timeline;
	int64		grant_system;
	bool		lost;			/* it still holds an expired lease, ended by the grant */
	DlockEndedLease lost_lease;
	TimestampTz lost_until;
} HolderSlot;

/*
 * a new slot, unless another transaction made it meanwhile; its version is
 * read back (lock_slot) to be written by the grant
 */
static DlockStatement holder_insert_stmt = {
	.sql =
	"INSERT INTO dlock.lock_holder AS h (lock_name, slot, kind, fencing_seq, block_end,"
	"                                  updated_at, grant_timeline, grant_system)"
	" VALUES ($1, $2, $3, 0, 0, $4, 0, 0) ON CONFLICT DO NOTHING"
	" RETURNING h.ctid",
	.nargs = 4,
	.argtypes = {TEXTOID, INT4OID, CHAROID, TIMESTAMPTZOID},
};
#define INSERTED_COL_CTID	1

/* The new slot this transaction just inserted at tid, read back into row */
static void
read_inserted_slot(ItemPointer tid, SlotRow *row)
{
	Relation	rel = dlock_table_open(dlock_catalog()->holder_table, RowExclusiveLock);
	Snapshot	snapshot;
	HeapTupleData tuple;
	Buffer		buffer;

	CommandCounterIncrement();	/* the insert's command is over */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	tuple.t_self = *tid;
	if (!dlock_heap_fetch_keep(rel, snapshot, &tuple, &buffer))
		elog(ERROR, "pg_dlock: inserted holder slot vanished");
	copy_slot_row(&tuple, RelationGetDescr(rel), row);
	ReleaseBuffer(buffer);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
}

/*
 * Lock slot number of the name for a grant: an existing slot decided
 * available, in the version decided on (row), that nobody else has locked,
 * or a new one (row NULL). False, having locked nothing, when another
 * transaction has it or changed it since.
 */
static bool
lock_slot(const HolderArgs *args, int32 number, const SlotRow *row, TimestampTz now,
		  HolderSlot *slot)
{
	if (row != NULL)
	{
		Relation	rel = dlock_table_open(dlock_catalog()->holder_table, RowExclusiveLock);
		ItemPointerData tid = row->tid;
		DlockRowLock locked = dlock_tuple_lock(rel, &tid, LockTupleExclusive);

		table_close(rel, NoLock);
		if (locked != ROW_LOCKED)
			return false;
		/* the version decided on is the newest: its columns are as read */
		slot->row = *row;
	}
	else
	{
		Datum		values[4];
		bool		isnull;

		values[0] = PointerGetDatum(args->lock_name);
		values[1] = Int32GetDatum(number);
		values[2] = CharGetDatum(args->kind);
		values[3] = TimestampTzGetDatum(now);
		if (dlock_execute(&holder_insert_stmt, values, NULL, 1) == 0)
			return false;
		read_inserted_slot((ItemPointer) DatumGetPointer(dlock_sql_value(0, INSERTED_COL_CTID, &isnull)),
						   &slot->row);
	}
	slot->slot = number;
	slot->fencing_seq = DatumGetInt64(SLOT_VALUE(&slot->row, Anum_holder_fencing_seq));
	slot->block_end = DatumGetInt64(SLOT_VALUE(&slot->row, Anum_holder_block_end));
	slot->grant_timeline = DatumGetInt32(SLOT_VALUE(&slot->row, Anum_holder_grant_timeline));
	slot->grant_system = DatumGetInt64(SLOT_VALUE(&slot->row, Anum_holder_grant_system));
	slot->lost = !SLOT_NULL(&slot->row, Anum_holder_owner_token);
	if (slot->lost)
	{
		/* copied: the grant overwrites the row's columns before it settles it */
		slot->lost_lease = slot_ended_lease(&slot->row);
		if (slot->lost_lease.holder != NULL)
			slot->lost_lease.holder = DatumGetTextPCopy(PointerGetDatum(slot->lost_lease.holder));
		slot->lost_until = slot_time(&slot->row, Anum_holder_lease_until);
	}
	return true;
}

/* the name's counter of slot tokens, locked */
static DlockStatement counter_lock_stmt = {
	.sql =
	"SELECT c.fencing_seq, c.grant_timeline, c.grant_system"
	"  FROM dlock.holder_counter c WHERE c.lock_name = $1 FOR UPDATE",
	.nargs = 1,
	.argtypes = {TEXTOID},
};
#define COUNTER_COL_SEQ		1
#define COUNTER_COL_TIMELINE 2
#define COUNTER_COL_SYSTEM	3

static DlockStatement counter_insert_stmt = {
	.sql =
	"INSERT INTO dlock.holder_counter (lock_name, fencing_seq, grant_timeline, grant_system)"
	" VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
	.nargs = 4,
	.argtypes = {TEXTOID, INT8OID, INT4OID, INT8OID},
};

static DlockStatement counter_update_stmt = {
	.sql =
	"UPDATE dlock.holder_counter c SET fencing_seq = $2, grant_timeline = $3,"
	"       grant_system = $4 WHERE c.lock_name = $1",
	.nargs = 4,
	.argtypes = {TEXTOID, INT8OID, INT4OID, INT8OID},
};

/*
 * Reserve a new block of tokens for a slot of the name from its counter:
 * the block starts above the counter, the name's exclusive token (name_seq,
 * 0 if the name has no row) and the reap floor. Returns the block's first
 * token; *block_end its last.
 */
static int64
reserve_block(text *lock_name, bool name_exists, int64 name_seq, int32 name_timeline,
			  int64 name_system, int32 timeline, int64 *block_end)
{
	int64		system = (int64) GetSystemIdentifier();
	Datum		values[4];
	int			rounds = 0;

	values[0] = PointerGetDatum(lock_name);
	for (;;)
	{
		int64		start;
		bool		have_counter;

		dlock_decision_round(&rounds, lock_name);
		start = dlock_floor_next_token(timeline);
		have_counter = dlock_execute(&counter_lock_stmt, values, NULL, 1) > 0;

		if (name_exists)
			start = Max(start, dlock_next_token(name_seq, name_timeline, name_system, timeline));
		if (have_counter)
		{
			bool		isnull;
			int64		seq = DatumGetInt64(dlock_sql_value(0, COUNTER_COL_SEQ, &isnull));
			int32		tl = DatumGetInt32(dlock_sql_value(0, COUNTER_COL_TIMELINE, &isnull));
			int64		sys = DatumGetInt64(dlock_sql_value(0, COUNTER_COL_SYSTEM, &isnull));

			start = Max(start, dlock_next_token(seq, tl, sys, timeline));
		}
		*block_end = start + HOLDER_TOKEN_BLOCK - 1;
		values[1] = Int64GetDatum(*block_end);
		values[2] = Int32GetDatum(timeline);
		values[3] = Int64GetDatum(system);
		if (have_counter)
		{
			(void) dlock_execute(&counter_update_stmt, values, NULL, 0);
			return start;
		}
		if (dlock_execute(&counter_insert_stmt, values, NULL, 0) > 0)
			return start;
		/* another transaction created the counter meanwhile: lock it */
	}
}

/* Outcome of one holder attempt */
typedef struct HolderAttempt
{
	bool		acquired;
	HeapTuple	lease;			/* in the caller's memory context (none without tupdesc) */
	int64		token;
	TimestampTz until;
	TimestampTz busy_until;		/* when a live lease in the way expires, or 0 */
} HolderAttempt;

static HeapTuple
holder_lease_tuple(TupleDesc tupdesc, MemoryContext cxt, const HolderArgs *args,
				   int64 token, TimestampTz lease_until)
{
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	HeapTuple	lease;

	values[0] = PointerGetDatum(args->lock_name);
	values[1] = UUIDPGetDatum(args->owner);
	values[2] = Int64GetDatum(token);
	values[3] = TimestampTzGetDatum(lease_until);
	lease = heap_form_tuple(tupdesc, values, nulls);
	MemoryContextSwitchTo(oldcxt);
	return lease;
}

/* One slot of the name, as read for a grant */
typedef struct SlotState
{
	int32		number;
	bool		live;
	bool		available;		/* a new owner may have it (not live, no policy keeps it) */
	bool		abandoned;		/* live, but handed by a release to a waiter that
								 * never took it (wait.c): available */
	SlotRow    *row;			/* the version decided on */
} SlotState;

/* The name as a holder grant decides on it */
typedef struct HolderState
{
	bool		name_exists;	/* the name has a row in dlock.distributed_lock */
	int64		name_seq;		/* its last exclusive token */
	int32		name_timeline;
	int64		name_system;
	int			nslots;
	SlotState  *slots;
	int			nlive;
	int			ntaken;			/* slots not available: live, or kept by a policy */
	int32		max_slot;
	TimestampTz first_expiry;	/* earliest a taken slot becomes available, 0 if none */
	bool		own_live;		/* this owner holds a live slot already */
	int			nabandoned;		/* slots abandoned */
	bool		wrong_kind;		/* by_release: a live slot check_live_slot refuses */
} HolderState;

/*
 * Refuse a grant of the wrong kind, or of a semaphore size other than the
 * one its live permits were granted with. A grant by a release raises
 * nothing -- it runs as its transaction commits -- and returns false.
 */
static bool
check_live_slot(const HolderArgs *args, char kind, bool permits_null, int32 permits)
{
	if (args->by_release)
		return kind == args->kind &&
			!(args->kind == KIND_PERMIT && !permits_null && permits != args->permits);
	if (kind != args->kind)
		ereport(ERROR,
				(errcode(ERRCODE_DLOCK_WRONG_KIND),
				 errmsg("lock \"%s\" is held as a %s",
						text_to_cstring(args->lock_name), kind_noun(kind)),
				 errdetail("A name is used as one kind of lock at a time."),
				 errhint("Use another name, or wait until its leases end.")));
	if (args->kind == KIND_PERMIT && !permits_null && permits != args->permits)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("semaphore \"%s\" has %d permits, not %d",
						text_to_cstring(args->lock_name), permits, args->permits),
				 errdetail("Its live permits were granted with permits => %d.", permits),
				 errhint("Change the number of permits with dlock.resize_semaphore().")));
	return true;
}

/*
 * Read the name's exclusive token and its holder slots at clock reading
 * now into st, with the latest snapshot. Raises the errors of
 * check_live_slot.
 */
static void
read_holder_state(const HolderArgs *args, TimestampTz now, HolderState *st)
{
	DlockRows	rows;
	DlockRow	row;
	SlotRow    *slot_rows;
	int			nrows;

	memset(st, 0, sizeof(*st));
	/* the exclusive side was decided by name_admits_holders: its token only */
	dlock_rows_open(&rows);
	if (dlock_row_read(&rows, args->lock_name, &row))
	{
		AttrNumber	system_att = rows.columns.grant_system;

		st->name_exists = true;
		st->name_seq = DatumGetInt64(row.values[Anum_fencing_seq - 1]);
		st->name_timeline = row.nulls[Anum_grant_timeline - 1] ? 0 :
			DatumGetInt32(row.values[Anum_grant_timeline - 1]);
		st->name_system = system_att == InvalidAttrNumber || row.nulls[system_att - 1] ? 0 :
			DatumGetInt64(row.values[system_att - 1]);
	}
	dlock_rows_close(&rows);

	nrows = read_slot_rows(args->lock_name, &slot_rows);
	st->slots = palloc(sizeof(SlotState) * (nrows + 1));
	for (int i = 0; i < nrows; i++)
	{
		SlotRow    *r = &slot_rows[i];
		SlotState  *slot = &st->slots[st->nslots];
		DlockPolicyRow pr;
		DlockPolicyView view;

		slot->number = DatumGetInt32(SLOT_VALUE(r, Anum_holder_slot));
		slot->row = r;
		/* the one decision of every kind (lease_policy.c), on the slot */
		slot_policy_row(r, &pr);
		dlock_policy_decide(&pr, now, &view);
		slot->live = view.live;
		slot->available = !view.live && view.available_at == 0;
		/* a lease a release handed to a waiter that never took it: free */
		slot->abandoned = view.live &&
			dlock_wait_abandoned(args->lock_name, r->xmin,
								 DatumGetUUIDP(SLOT_VALUE(r, Anum_holder_owner_token)));
		if (slot->abandoned)
		{
			slot->live = false;
			slot->available = true;
			st->nabandoned++;
		}
		st->max_slot = Max(st->max_slot, slot->number);
		st->nslots++;
		if (slot->available)
			continue;
		st->ntaken++;
		if (st->first_expiry == 0 || view.available_at < st->first_expiry)
			st->first_expiry = view.available_at;
		if (!slot->live)
			continue;
		st->nlive++;
		if (!check_live_slot(args, DatumGetChar(SLOT_VALUE(r, Anum_holder_kind)),
							 SLOT_NULL(r, Anum_holder_permits),
							 SLOT_NULL(r, Anum_holder_permits) ? 0 :
							 DatumGetInt32(SLOT_VALUE(r, Anum_holder_permits))))
			st->wrong_kind = true;
		if (memcmp(DatumGetUUIDP(SLOT_VALUE(r, Anum_holder_owner_token)), args->owner, UUID_LEN) == 0)
			st->own_live = true;
	}
}

/*
 * Lock a free or expired slot for a grant, or make a new one: a permit in
 * slots 1..permits, a reader anywhere, starting at a slot of this backend's
 * own to spread readers. False when none could be had. A permit slot that
 * another transaction has is waited for up to deadline (0: as long as a
 * row lock would).
 */
static bool
lock_free_slot(const HolderArgs *args, const HolderState *st, TimestampTz now,
			   TimestampTz deadline, HolderSlot *slot)
{
	/*
	 * While abandoned slots are left, a grant takes one of them: they were
	 * not counted as taken, and one left beside a new grant would count
	 * again once wait.c forgets it. Their lease was never delivered: no
	 * expiry to report.
	 */
	if (st->nabandoned > 0)
	{
		for (int i = 0; i < st->nslots; i++)
			if (st->slots[i].abandoned &&
				(args->kind != KIND_PERMIT || st->slots[i].number <= args->permits) &&
				lock_slot(args, st->slots[i].number, st->slots[i].row, now, slot))
			{
				slot->lost = false;
				return true;
			}
		return false;
	}
	if (args->kind == KIND_PERMIT)
	{
		/*
		 * Starting at a slot of this backend's own, to spread grants that
		 * join the semaphore side by side: first the free slots nobody
		 * else has locked (a new one is made); then those that could not
		 * be locked. Such a slot is taken by another grant in flight, or
		 * being deleted by dlock.reap, or was deleted since it was read:
		 * make it anew, once the transaction that has it has ended -- with
		 * a deadline, waited for first, so that the insert does not wait
		 * past it. The insert does nothing if the slot is still there after
		 * all; the counter, not the slot, carries the name's tokens.
		 */
		for (int pass = 0; pass < 2; pass++)
			for (int32 k = 0; k < args->permits; k++)
			{
				int32		number = (int32) ((MyProcPid + k) % args->permits) + 1;
				const SlotRow *row = NULL;
				bool		is_free = true;

				for (int i = 0; i < st->nslots; i++)
					if (st->slots[i].number == number)
					{
						row = st->slots[i].row;
						is_free = st->slots[i].available;
					}
				if (!is_free || (pass == 1 && row == NULL))
					continue;
				if (pass == 1 && deadline != 0)
				{
					Relation	rel = dlock_table_open(dlock_catalog()->holder_table,
													   RowExclusiveLock);
					ItemPointerData tid = row->tid;
					bool		in_time = dlock_tuple_wait(rel, &tid, deadline);

					table_close(rel, NoLock);
					if (!in_time)
						return false;
				}
				if (lock_slot(args, number, pass == 0 ? row : NULL, now, slot))
					return true;
			}
		return false;
	}
	for (int k = 0; k < st->nslots; k++)
	{
		const SlotState *s = &st->slots[(MyProcPid % st->nslots + k) % st->nslots];

		if (s->available && lock_slot(args, s->number, s->row, now, slot))
			return true;
	}
	for (int32 number = st->max_slot + 1; number <= MAX_SHARED_SLOTS; number++)
		if (lock_slot(args, number, NULL, now, slot))
			return true;
	return false;
}

/*
 * Write the grant decided on the locked slot at now: its next token, from a
 * new block of the name's counter if need be; and report it.
 */
static void
write_holder_grant(const HolderArgs *args, const HolderState *st, const HolderSlot *slot,
				   const DlockGrantCommit *commit, TimestampTz now, TupleDesc tupdesc,
				   MemoryContext cxt, HolderAttempt *attempt)
{
	int32		history = commit->history;
	int64		system = (int64) GetSystemIdentifier();
	const DlockHolderColumns *cols = &dlock_catalog()->holder_columns;
	TimestampTz until = dlock_time_plus(now, args->ttl_usecs);
	SlotRow		row = slot->row;
	int64		token;
	int64		block_end;
	Interval	lock_delay = {.time = args->policy.lock_delay_usecs};

	/*
	 * The slot's block goes on only while it is above every exclusive token
	 * of the name: the row's, or the reap floor's when the row was reaped.
	 */
	if (slot->fencing_seq < slot->block_end &&
		slot->fencing_seq >= Max(st->name_seq, dlock_token_floor()) &&
		slot->grant_timeline == history && slot->grant_system == system)
	{
		token = slot->fencing_seq + 1;
		block_end = slot->block_end;
	}
	else
		token = reserve_block(args->lock_name, st->name_exists, st->name_seq,
							  st->name_timeline, st->name_system, history, &block_end);

	SLOT_VALUE(&row, Anum_holder_kind) = CharGetDatum(args->kind);
	SLOT_VALUE(&row, Anum_holder_permits) = Int32GetDatum(args->permits);
	SLOT_NULL(&row, Anum_holder_permits) = args->kind != KIND_PERMIT;
	SLOT_VALUE(&row, Anum_holder_owner_token) = UUIDPGetDatum(args->owner);
	SLOT_NULL(&row, Anum_holder_owner_token) = false;
	SLOT_VALUE(&row, Anum_holder_fencing_seq) = Int64GetDatum(token);
	SLOT_VALUE(&row, Anum_holder_block_end) = Int64GetDatum(block_end);
	SLOT_VALUE(&row, Anum_holder_lease_until) = TimestampTzGetDatum(until);
	SLOT_NULL(&row, Anum_holder_lease_until) = false;
	SLOT_VALUE(&row, Anum_holder_holder) = PointerGetDatum(args->holder);
	SLOT_NULL(&row, Anum_holder_holder) = args->holder == NULL;
	SLOT_VALUE(&row, Anum_holder_acquired_at) = TimestampTzGetDatum(now);
	SLOT_NULL(&row, Anum_holder_acquired_at) = false;
	SLOT_VALUE(&row, Anum_holder_updated_at) = TimestampTzGetDatum(now);
	SLOT_VALUE(&row, Anum_holder_renewals) = Int64GetDatum(0);
	SLOT_VALUE(&row, Anum_holder_grant_timeline) = Int32GetDatum(history);
	SLOT_VALUE(&row, Anum_holder_grant_system) = Int64GetDatum(system);
	if (cols->policies)
	{
		/* the lease's own policies (1.6 on) */
		TimestampTz hold_limit;
		TimestampTz min_hold_until;

		dlock_policy_grant_times(&args->policy, now, &hold_limit, &min_hold_until);
		SLOT_VALUE(&row, cols->hold_limit) = TimestampTzGetDatum(hold_limit);
		SLOT_NULL(&row, cols->hold_limit) = hold_limit == 0;
		SLOT_VALUE(&row, cols->min_hold_until) = TimestampTzGetDatum(min_hold_until);
		SLOT_NULL(&row, cols->min_hold_until) = min_hold_until == 0;
		SLOT_VALUE(&row, cols->lock_delay) = IntervalPGetDatum(&lock_delay);
		SLOT_NULL(&row, cols->lock_delay) = lock_delay.time == 0;
		SLOT_NULL(&row, cols->not_before) = true;
	}
	write_slot_row(&row);
	/* the expired lease this grant ends, reported once */
	if (slot->lost)
		(void) dlock_report_expiry_once(args->lock_name, slot->slot, &slot->lost_lease,
										slot->lost_until, false);

	if (tupdesc != NULL)
		attempt->lease = holder_lease_tuple(tupdesc, cxt, args, token, until);
	attempt->token = token;
	attempt->until = until;
	attempt->acquired = true;
	dlock_grant_written(commit);
	dlock_report_grant(args->lock_name,
					   args->kind == KIND_SHARED ? STAT_SHARED_ACQUISITIONS : STAT_PERMIT_ACQUISITIONS,
					   false, token, args->holder, until);
}

/*
 * Decide and, when it can, make the grant, inside the caller's connection
 * (dlock_sql_connect); the caller holds the kind lock and has decided the
 * exclusive side (name_admits_holders). A slot another transaction has is
 * waited for up to deadline (lock_free_slot). Returns true when granted.
 */
static bool
grant_holder(const HolderArgs *args, const DlockGrantCommit *commit, TupleDesc tupdesc,
			 MemoryContext cxt, TimestampTz deadline, HolderAttempt *attempt)
{
	TimestampTz now = GetCurrentTimestamp();
	HolderState st;
	HolderSlot	slot;

	read_holder_state(args, now, &st);
	if (st.own_live)
	{
		/* this owner retrying: the same lease, renewed */
		TimestampTz renewed;
		int64		same_token;

		if (change_holder(args->lock_name, args->owner, args->ttl_usecs, false,
						  &renewed, &same_token))
		{
			attempt->lease = holder_lease_tuple(tupdesc, cxt, args, same_token, renewed);
			attempt->acquired = true;
			return true;
		}
		/* it ended meanwhile: decide without it, on the slots as they are now */
		now = GetCurrentTimestamp();
		read_holder_state(args, now, &st);
	}

	/* at most "permits" permits taken: live, or kept by their policies */
	if ((args->kind == KIND_PERMIT && st.ntaken >= args->permits) ||
		!lock_free_slot(args, &st, now, deadline, &slot))
	{
		/* full, or the free slots were just taken or are pinned by a stale holder */
		attempt->busy_until = st.first_expiry;
		return false;
	}
	write_holder_grant(args, &st, &slot, commit, now, tupdesc, cxt, attempt);
	return true;
}

/*
 * A holder grant ends the expired exclusive lease of row (locked, newest
 * version), as an exclusive takeover would: the row keeps no owner that a
 * step back of the server clock could make live again beside the readers.
 * Its expiry is reported here unless the expiry worker reported it already.
 */
static void
end_expired_lease(text *lock_name, DlockRow *row)
{
	DlockEndedLease lease = dlock_row_ended_lease(row);

	dlock_sql_connect();
	(void) dlock_report_expiry_once(lock_name, 0, &lease,
									DatumGetTimestampTz(row->values[Anum_lease_until - 1]),
									false);
	dlock_sql_finish();
	row->nulls[Anum_owner_token - 1] = true;
}

/*
 * Before a holder grant of lock_name (the caller holds the kind lock): may
 * the name's exclusive side let a shared lease or permit in? Decided on the
 * newest version of the name's row at one clock reading by the rule every
 * exclusive grant applies (lease_policy.c): no live exclusive lease, and
 * nothing keeping the name from new owners (a release inside min_hold, a
 * lock delay after an expiry or a force release). An expired exclusive
 * lease is ended under the row lock, which waits for a holds() pin on it,
 * so that the stale holder's fenced transaction ends before a reader's
 * lease begins; and the exclusive_only mark is cleared under it too. Returns false when
 * the name is not available, with *busy_until when it will be (0: unknown),
 * or when a wait reached deadline (0: waits as an UPDATE would); then it
 * holds no row lock. After a true return the caller decides on the slots;
 * the row lock it now holds (only when it cleared the mark or an expired
 * lease) keeps exclusive grants out until it commits. That decision does not refuse: a
 * marked row means no holder of the name is live or pinned (the exclusive
 * grant that checked freed the expired ones), and holders arriving
 * meanwhile wait for this row lock, so a free slot is there; a refused
 * attempt therefore still holds nothing.
 */
static bool
name_admits_holders(text *lock_name, TimestampTz deadline, TimestampTz *busy_until)
{
	DlockRows	rows;
	DlockRow	row;
	bool		decided = false;
	bool		refused = false;
	int			rounds = 0;

	dlock_rows_open(&rows);
	while (!decided && !refused && dlock_row_read(&rows, lock_name, &row))
	{
		TimestampTz now;
		DlockPolicyView view;

		dlock_decision_round(&rounds, lock_name);
		now = GetCurrentTimestamp();

		dlock_policy_view(&rows, &row, now, &view);
		if (view.live || view.available_at != 0)
		{
			*busy_until = view.available_at;
			refused = true;
			break;
		}
		/* nothing to clear: no mark, no expired lease */
		if (!dlock_row_exclusive_only(&rows, &row) && row.nulls[Anum_owner_token - 1])
		{
			decided = true;
			break;
		}
		switch (dlock_row_lock(&rows, &row, LockTupleNoKeyExclusive))
		{
			case ROW_LOCKED:
				dlock_row_set_exclusive_only(&rows, &row, false);
				if (!row.nulls[Anum_owner_token - 1])
					end_expired_lease(lock_name, &row);
				dlock_row_update(&rows, &row);
				decided = true;
				break;
			case ROW_CHANGED:
				break;
			case ROW_BLOCKED:
				if (!dlock_row_wait(&rows, &row, deadline))
				{
					*busy_until = 0;
					refused = true;
				}
				break;
		}
	}
	dlock_rows_close(&rows);
	return !refused;
}

/*
 * Whether a permit grant may join the semaphore (kind_lock_mode): its slots,
 * as committed or as this transaction wrote them, are of the caller's
 * number of permits -- every slot among 1..permits, of which there is at
 * least one, and every live slot -- so its live permits, if any, are. The
 * caller holds the kind lock in join mode, so no grant that starts the
 * semaphore runs meanwhile.
 */
static bool
permit_may_join(const HolderArgs *args)
{
	SlotRow    *rows;
	int			nrows = read_slot_rows(args->lock_name, &rows);
	TimestampTz now = GetCurrentTimestamp();
	bool		any = false;

	for (int i = 0; i < nrows; i++)
	{
		const SlotRow *row = &rows[i];
		bool		same_size = DatumGetChar(SLOT_VALUE(row, Anum_holder_kind)) == KIND_PERMIT &&
			!SLOT_NULL(row, Anum_holder_permits) &&
			DatumGetInt32(SLOT_VALUE(row, Anum_holder_permits)) == args->permits;

		if (DatumGetInt32(SLOT_VALUE(row, Anum_holder_slot)) <= args->permits)
		{
			if (!same_size)
				return false;
			any = true;
		}
		else if (!same_size)
		{
			DlockPolicyRow pr;
			DlockPolicyView view;

			slot_policy_row(row, &pr);
			dlock_policy_decide(&pr, now, &view);
			if (view.live)
				return false;
		}
	}
	return any;
}

/*
 * One attempt to grant a shared lease or permit; waits for the kind lock up
 * to deadline (0: as long as a row lock would). A refusal holds nothing.
 */
static void
attempt_holder(const HolderArgs *args, TupleDesc tupdesc, MemoryContext cxt,
			   TimestampTz deadline, HolderAttempt *attempt)
{
	LockAcquireResult result;
	bool		waited;
	DlockGrantCommit commit;
	bool		join = args->kind == KIND_PERMIT;
	LOCKMODE	mode;

	attempt->acquired = false;
	attempt->busy_until = 0;
	if (!OidIsValid(dlock_catalog()->holder_table))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"pg_dlock\" must be updated for shared leases and permits"),
				 errhint("Run ALTER EXTENSION pg_dlock UPDATE.")));
	dlock_grant_prepare(&commit);
	for (;;)
	{
		mode = kind_lock_mode(args->kind, join);
		if (!take_kind_lock(args->lock_name, mode, deadline, &result, &waited))
			return;
		/* for the rarer steps' statements (a new slot or block, reports) */
		dlock_sql_connect();
		if (!join || permit_may_join(args))
			break;
		/* nothing to join: start the semaphore, alone */
		dlock_sql_finish();
		dlock_kind_unlock(args->lock_name, mode);
		join = false;
	}

	/* writer preference: nobody queued for the name goes after us */
	if (!dlock_wait_queued_ahead(args->lock_name) &&
		name_admits_holders(args->lock_name, deadline, &attempt->busy_until))
		(void) grant_holder(args, &commit, tupdesc, cxt, deadline, attempt);
	dlock_sql_finish();
	if (!attempt->acquired)
		dlock_kind_unlock(args->lock_name, mode);
}

/*
 * Grant the waiter's lease "to" (a shared lease or a permit of lock_name) in
 * the current transaction, which released the name and is about to commit
 * (wait.c, dlock_wait_hand_off_holders): the decision and the grant of the
 * waiter's own attempt, on the name as this transaction leaves it, except
 * that nothing waits and nothing raises. Whatever is in the way -- the kind
 * lock taken, an exclusive lease or a policy keeping the name, a live lease
 * of another kind or size, the waiter's own live lease, no free slot --
 * refuses, and the waiter, woken at the commit, attempts itself. The kind
 * lock is taken in the mode of a permit grant that starts a semaphore,
 * which excludes every other grant of a shared lease or permit (joining
 * permit grants too), so that a waiter attempting meanwhile never gets a
 * second slot beside the handed one; it is kept to the commit. claim(claim_arg) is
 * called once the grant is certain: true when the grant is written, with
 * its token and expiry.
 */
bool
dlock_holder_hand_off(text *lock_name, const DlockHandoff *to,
					  bool (*claim) (void *claim_arg), void *claim_arg,
					  int64 *token, TimestampTz *until)
{
	HolderArgs	args = {0};
	HolderArgs	room;
	HolderAttempt attempt = {0};
	DlockGrantCommit commit;
	DlockOwnerScope scope;
	TimestampTz now;
	TimestampTz busy_until;
	HolderState st;
	HolderSlot	slot;
	bool		granted = false;

	if (!OidIsValid(dlock_catalog()->holder_table))
		return false;
	args.kind = to->kind == LEASE_PERMIT ? KIND_PERMIT : KIND_SHARED;
	args.lock_name = lock_name;
	args.permits = args.kind == KIND_PERMIT ? to->permits : 0;
	args.ttl_usecs = to->ttl_usecs;
	args.owner = palloc(sizeof(pg_uuid_t));
	*args.owner = to->owner;
	args.holder = to->holder_len < 0 ? NULL :
		cstring_to_text_with_len(to->holder, to->holder_len);
	args.policy.max_hold_usecs = to->max_hold_usecs;
	args.policy.min_hold_usecs = to->min_hold_usecs;
	args.policy.lock_delay_usecs = to->lock_delay_usecs;
	args.by_release = true;

	dlock_grant_prepare(&commit);
	if (dlock_kind_lock(lock_name, kind_lock_mode(KIND_PERMIT, false), false) == LOCKACQUIRE_NOT_AVAIL)
		return false;
	now = GetCurrentTimestamp();
	if (!name_admits_holders(lock_name, now, &busy_until))
		return false;
	dlock_sql_connect();
	dlock_owner_scope_begin(&scope);
	read_holder_state(&args, now, &st);
	/* the room the semaphore has; one more for the tests' planted bug */
	room = args;
	if (dlock_test_handoff_past_size)
		room.permits++;
	if (!st.wrong_kind && !st.own_live &&
		!(room.kind == KIND_PERMIT && st.ntaken >= room.permits) &&
		lock_free_slot(&room, &st, now, 0, &slot) && claim(claim_arg))
	{
		/* the grant is the waiter's: it commits as the waiter asked too */
		commit.fenced = commit.fenced && to->fenced;
		write_holder_grant(&args, &st, &slot, &commit, now, NULL, NULL, &attempt);
		*token = attempt.token;
		*until = attempt.until;
		granted = true;
	}
	dlock_owner_scope_end(&scope);
	dlock_sql_finish();
	return granted;
}

/*
 * dlock.downgrade (downgrade.c), before it ends the exclusive lease of
 * lock_name: take the kind lock a reader's grant takes, before the name's
 * row as a reader does. Kept to the end of the transaction when the
 * downgrade goes on (dlock_holder_grant_downgraded); given back by
 * dlock_holder_downgrade_refused when there was nothing to downgrade.
 */
void
dlock_holder_downgrade_begin(text *lock_name)
{
	LockAcquireResult result;
	bool		waited;

	(void) take_kind_lock(lock_name, kind_lock_mode(KIND_SHARED, false), 0, &result, &waited);
}

void
dlock_holder_downgrade_refused(text *lock_name)
{
	dlock_kind_unlock(lock_name, kind_lock_mode(KIND_SHARED, false));
}

/*
 * The second half of dlock.downgrade: grant owner a shared lease of
 * lock_name until "until" (the end of the exclusive lease it replaces,
 * which this transaction just ended). Nothing else can be live on the name:
 * the exclusive lease was, and this transaction holds the kind lock and the
 * name's row. The lease gets a token of its own, above the exclusive one.
 */
HeapTuple
dlock_holder_grant_downgraded(text *lock_name, pg_uuid_t *owner, text *holder,
							  TimestampTz until, const DlockGrantCommit *commit,
							  TupleDesc tupdesc, MemoryContext cxt)
{
	HolderArgs	args = {.kind = KIND_SHARED, .lock_name = lock_name, .owner = owner,
	.holder = holder};
	HolderAttempt attempt = {0};
	DlockOwnerScope scope;
	TimestampTz now = GetCurrentTimestamp();
	HolderState st;
	HolderSlot	slot;

	args.ttl_usecs = Max(until - now, 0);
	dlock_sql_connect();
	dlock_owner_scope_begin(&scope);
	read_holder_state(&args, now, &st);
	if (!lock_free_slot(&args, &st, now, 0, &slot))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("shared lock \"%s\" has no free slot for the downgraded lease",
						text_to_cstring(lock_name))));
	write_holder_grant(&args, &st, &slot, commit, now, tupdesc, cxt, &attempt);
	dlock_owner_scope_end(&scope);
	dlock_sql_finish();
	return attempt.lease;
}

/* the owner's live shared lease of the name, if it has one */
static DlockStatement owner_shared_stmt = {
	.sql =
	"SELECT h.fencing_seq, h.lease_until FROM dlock.lock_holder h"
	" WHERE h.lock_name = $1 AND h.owner_token = $2 AND h.kind = 's'"
	"   AND h.lease_until > pg_catalog.clock_timestamp()"
	" ORDER BY h.fencing_seq DESC LIMIT 1",
	.nargs = 2,
	.argtypes = {TEXTOID, UUIDOID},
};
#define OWNER_SHARED_COL_SEQ 1
#define OWNER_SHARED_COL_UNTIL 2

/*
 * A downgrade retried by its owner, whose exclusive lease is gone: the
 * shared lease it holds of the name, as it is (NULL if none). So a caller
 * that did not learn whether its downgrade committed asks again and gets
 * the shared lease's token, without extending or changing anything.
 */
HeapTuple
dlock_holder_downgraded_lease(text *lock_name, pg_uuid_t *owner, TupleDesc tupdesc,
							  MemoryContext cxt)
{
	HolderArgs	args = {.kind = KIND_SHARED, .lock_name = lock_name, .owner = owner};
	Datum		values[2];
	HeapTuple	lease = NULL;

	if (!OidIsValid(dlock_catalog()->holder_table))
		return NULL;
	values[0] = PointerGetDatum(lock_name);
	values[1] = UUIDPGetDatum(owner);
	dlock_sql_connect();
	if (dlock_execute(&owner_shared_stmt, values, NULL, 1) == 1)
	{
		bool		isnull;
		int64		token = DatumGetInt64(dlock_sql_value(0, OWNER_SHARED_COL_SEQ, &isnull));
		TimestampTz until = DatumGetTimestampTz(dlock_sql_value(0, OWNER_SHARED_COL_UNTIL, &isnull));

		lease = holder_lease_tuple(tupdesc, cxt, &args, token, until);
	}
	dlock_sql_finish();
	return lease;
}

/*
 * Check and collect the arguments. The kind's own arguments come first:
 * (lock_name, ttl) for shared, (semaphore_name, permits, ttl) for permits;
 * wait, when with_wait, follows ttl; then owner_token and holder.
 */
static int64
holder_args(FunctionCallInfo fcinfo, char kind, bool with_wait, HolderArgs *args)
{
	int			arg = 0;
	int64		wait_usecs = 0;

	args->kind = kind;
	args->by_release = false;
	args->lock_name = dlock_arg_name(fcinfo, arg++,
									 kind == KIND_SHARED ? "lock_name" : "semaphore_name");
	args->permits = 0;
	if (kind == KIND_PERMIT)
	{
		dlock_require_arg(fcinfo, arg, "permits");
		args->permits = PG_GETARG_INT32(arg++);
		if (args->permits < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("permits must be at least 1")));
	}
	args->ttl_usecs = dlock_arg_ttl(fcinfo, arg++);
	if (with_wait)
		wait_usecs = dlock_arg_wait(fcinfo, arg++);
	args->owner = dlock_arg_owner_token(fcinfo, arg++);
	if (args->owner == NULL)
		args->owner = dlock_new_owner_token();
	args->holder = dlock_arg_holder(fcinfo, arg);
	/* the policy options, found by name, and the settings: as for try_acquire */
	dlock_policy_args(fcinfo, args->ttl_usecs, &args->policy);

	dlock_refuse_in_recovery(args->lock_name, "acquire");
	dlock_wait_require_waitable(args->lock_name, wait_usecs);
	return wait_usecs;
}

static TupleDesc
holder_tupdesc(FunctionCallInfo fcinfo)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	return BlessTupleDesc(tupdesc);
}

static void
count_busy(char kind)
{
	dlock_count(kind == KIND_SHARED ? STAT_SHARED_BUSY : STAT_PERMIT_BUSY, 1);
}

/*
 * try_acquire_shared and try_acquire_permit
 */
static Datum
try_acquire_holder(FunctionCallInfo fcinfo, char kind)
{
	HolderArgs	args;
	HolderAttempt attempt;
	TupleDesc	tupdesc;

	(void) holder_args(fcinfo, kind, false, &args);
	tupdesc = holder_tupdesc(fcinfo);
	attempt_holder(&args, tupdesc, CurrentMemoryContext, 0, &attempt);
	if (!attempt.acquired)
	{
		count_busy(kind);
		PG_RETURN_NULL();
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(attempt.lease));
}

/* A holder acquire call as the shared wait loop runs it (wait.c) */
typedef struct HolderWait
{
	const HolderArgs *args;
	TupleDesc	tupdesc;
	MemoryContext cxt;
	TimestampTz deadline;
	HolderAttempt attempt;
} HolderWait;

static bool
holder_attempt(void *arg, TimestampTz *busy_until)
{
	HolderWait *wait = arg;

	attempt_holder(wait->args, wait->tupdesc, wait->cxt, wait->deadline, &wait->attempt);
	*busy_until = wait->attempt.busy_until;
	return wait->attempt.acquired;
}

/* Take the lease a release handed over (dlock_holder_hand_off), writing nothing */
static bool
holder_take_offer(void *arg, TransactionId offer, bool *granted)
{
	HolderWait *wait = arg;
	int64		token;
	TimestampTz until;

	*granted = false;
	switch (dlock_wait_take_offer(offer, wait->deadline, &token, &until))
	{
		case -1:
			return false;
		case 0:
			return true;
	}
	wait->attempt.lease = holder_lease_tuple(wait->tupdesc, wait->cxt, wait->args, token, until);
	wait->attempt.acquired = true;
	*granted = true;
	return true;
}

/*
 * acquire_shared and acquire_permit: wait in the name's queue (wait.c), as
 * dlock.acquire does, without holding a row lock or transaction ID between
 * attempts.
 */
static Datum
acquire_holder(FunctionCallInfo fcinfo, char kind)
{
	HolderArgs	args;
	HolderWait	wait;
	DlockWaitCall call = {0};
	DlockHandoff handoff;
	int64		wait_usecs;

	wait_usecs = holder_args(fcinfo, kind, true, &args);
	wait.args = &args;
	wait.tupdesc = holder_tupdesc(fcinfo);
	wait.cxt = CurrentMemoryContext;
	wait.deadline = dlock_wait_deadline(wait_usecs);
	wait.attempt.acquired = false;
	wait.attempt.busy_until = 0;

	/*
	 * A release may hand the lease over (dlock_holder_hand_off); a grant
	 * hands the next waiter no expiry to sleep to: it may be another reader,
	 * which can be granted at once.
	 */
	call.lock_name = args.lock_name;
	call.wait_usecs = wait_usecs;
	call.kind = dlock_lease_kind_of(kind);
	dlock_wait_handoff_of(&handoff, call.kind, args.permits, args.owner, args.ttl_usecs,
						  args.holder);
	handoff.max_hold_usecs = args.policy.max_hold_usecs;
	handoff.min_hold_usecs = args.policy.min_hold_usecs;
	handoff.lock_delay_usecs = args.policy.lock_delay_usecs;
	call.handoff = &handoff;
	call.attempt = holder_attempt;
	call.take_offer = holder_take_offer;
	call.arg = &wait;
	if (!dlock_wait_for_grant(&call))
	{
		count_busy(kind);
		dlock_count(STAT_WAIT_TIMEOUTS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not acquire lock \"%s\" within " INT64_FORMAT " ms",
						text_to_cstring(args.lock_name), wait_usecs / 1000),
				 errdetail(kind == KIND_SHARED ?
						   "An exclusive lease was live, or an exclusive acquirer waited, for the whole wait." :
						   "All permits were held for the whole wait.")));
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(wait.attempt.lease));
}

/*
 * dlock.try_acquire_shared(lock_name, ttl, owner_token, holder) returns dlock.lease
 */
Datum
dlock_try_acquire_shared(PG_FUNCTION_ARGS)
{
	return try_acquire_holder(fcinfo, KIND_SHARED);
}

/*
 * dlock.acquire_shared(lock_name, ttl, wait, owner_token, holder) returns dlock.lease
 */
Datum
dlock_acquire_shared(PG_FUNCTION_ARGS)
{
	return acquire_holder(fcinfo, KIND_SHARED);
}

/*
 * dlock.try_acquire_permit(semaphore_name, permits, ttl, owner_token, holder)
 * returns dlock.lease
 */
Datum
dlock_try_acquire_permit(PG_FUNCTION_ARGS)
{
	return try_acquire_holder(fcinfo, KIND_PERMIT);
}

/*
 * dlock.acquire_permit(semaphore_name, permits, ttl, wait, owner_token, holder)
 * returns dlock.lease
 */
Datum
dlock_acquire_permit(PG_FUNCTION_ARGS)
{
	return acquire_holder(fcinfo, KIND_PERMIT);
}

/* the new number of permits, on the live permits */
static DlockStatement semaphore_resize_stmt = {
	.sql =
	"UPDATE dlock.lock_holder h SET permits = $2"
	" WHERE h.lock_name = $1 AND h.kind = 'p' AND h.owner_token IS NOT NULL"
	"   AND h.lease_until > pg_catalog.clock_timestamp()",
	.nargs = 2,
	.argtypes = {TEXTOID, INT4OID},
};

/*
 * dlock.resize_semaphore(semaphore_name, permits) returns integer
 *
 * Records the new number of permits on the live permits, under the kind
 * lock, so acquirers asking for the new number are admitted. Shrinking ends
 * no permit: the semaphore admits nobody until fewer than the new number
 * are live. Returns how many permits are live.
 */
Datum
dlock_resize_semaphore(PG_FUNCTION_ARGS)
{
	text	   *name = dlock_arg_name(fcinfo, 0, "semaphore_name");
	int32		permits;
	Datum		values[2];
	int			live;

	dlock_require_arg(fcinfo, 1, "permits");
	permits = PG_GETARG_INT32(1);
	if (permits < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be at least 1")));
	if (!OidIsValid(dlock_catalog()->holder_table))
		PG_RETURN_INT32(0);
	(void) dlock_kind_lock(name, ExclusiveLock, true);
	values[0] = PointerGetDatum(name);
	values[1] = Int32GetDatum(permits);
	dlock_sql_connect();
	live = dlock_execute(&semaphore_resize_stmt, values, NULL, 0);
	dlock_sql_finish();
	PG_RETURN_INT32(live);
}
