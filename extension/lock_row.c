/*-------------------------------------------------------------------------
 *
 * lock_row.c
 *	  Reading, locking and writing one row of dlock.distributed_lock
 *	  without the executor.
 *
 * The lease functions decide on the newest committed version of a lock's
 * row, and only then take a row lock -- never waiting for it. Taking the
 * lock either succeeds at once on that very version, so the decision stands
 * as made on the row as it is now; or it reports that the row changed (read
 * it again and decide again) or that another transaction holds it (wait for
 * that transaction without holding anything, then read and decide again).
 * A refused call therefore never keeps a row lock, and takes no transaction
 * ID: heap_lock_tuple assigns one only once it locks.
 *
 * One decision skips that row lock: a new lease on a free row (no owner),
 * for a caller with no deadline, is written by dlock_row_write_decided
 * straight over the version it was decided on, when that version's header
 * shows no locker and no updater, saving the lock's own WAL record. Its
 * race and why it is harmless are told there; a wait it meets is one the
 * caller would have waited out in dlock_row_wait anyway. The promises
 * above hold for it with one exception: an attempt that finds in its write
 * that another transaction changed the row meanwhile has taken a
 * transaction ID (heap_update assigns one first); it still keeps no row
 * lock, and reads and decides again.
 *
 * Updates change no indexed column, so heap_update keeps them HOT when the
 * page has room (the table's fillfactor leaves it); when it does not, the
 * new version gets its primary-key entry here, as CatalogIndexInsert does
 * for catalogs. The table must have no other index (checked when it is
 * opened).
 *
 * Privileges: these routines check none. Callers are the extension's
 * functions, which decide what a caller may do to the row.
 *
 * IDENTIFICATION
 *	  extension/lock_row.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "storage/smgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "args.h"
#include "catalog.h"
#include "lock_row.h"
#include "token.h"


/*
 * Open the lock table and its primary key for reading and writing rows.
 */
void
dlock_rows_open(DlockRows *rows)
{
	const DlockCatalog *cat = dlock_catalog();

	rows->rel = try_table_open(cat->lock_table, RowExclusiveLock);
	if (rows->rel == NULL)
	{
		/* dropped since it was cached: look it up again */
		cat = dlock_catalog();
		rows->rel = dlock_table_open(cat->lock_table, RowExclusiveLock);
	}
	/* opening it took in the invalidations: the catalog as it is now */
	cat = dlock_catalog();
	rows->generation = cat->generation;
	rows->columns = cat->columns;
	rows->index = index_open(cat->lock_index, RowExclusiveLock);
	rows->natts = RelationGetDescr(rows->rel)->natts;
}

/*
 * Close what dlock_rows_open opened; the locks stay to the end of the
 * transaction, as the executor's do.
 */
void
dlock_rows_close(DlockRows *rows)
{
	index_close(rows->index, NoLock);
	table_close(rows->rel, NoLock);
}

/*
 * Where this backend last wrote each lock row, so that the next call on the
 * same name -- typically the release after an acquire -- can fetch the row
 * by its location instead of descending the primary key. A location is only
 * a hint: the row there is used only if it is visible to the latest
 * snapshot (then it is the newest committed version) and has the name.
 */
#define ROW_CACHE_SIZE 256

typedef struct RowCacheEntry
{
	uint32		hash;			/* of the lock name; 0 = empty */
	uint32		generation;		/* catalog generation it was stored under */
	ItemPointerData tid;
} RowCacheEntry;

static RowCacheEntry row_cache[ROW_CACHE_SIZE];

static uint32
name_hash(text *lock_name)
{
	uint32		hash = (uint32) dlock_name_hash(VARDATA_ANY(lock_name),
												VARSIZE_ANY_EXHDR(lock_name));

	return hash == 0 ? 1 : hash;
}

static void
remember_row(DlockRows *rows, DlockRow *row)
{
	text	   *name = DatumGetTextPP(row->values[Anum_lock_name - 1]);
	uint32		hash = name_hash(name);
	RowCacheEntry *entry = &row_cache[hash % ROW_CACHE_SIZE];

	entry->hash = hash;
	entry->generation = rows->generation;
	entry->tid = row->tid;
}

/*
 * The attributes of tuple (of a table with descriptor desc) in new arrays
 * *values and *nulls, copied into the current memory context, so that they
 * outlive the pin of the buffer the tuple lies in.
 */
void
dlock_tuple_copy_values(HeapTuple tuple, TupleDesc desc, Datum **values, bool **nulls)
{
	*values = palloc(sizeof(Datum) * desc->natts);
	*nulls = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(tuple, desc, *values, *nulls);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!(*nulls)[i] && !att->attbyval)
			(*values)[i] = datumCopy((*values)[i], false, att->attlen);
	}
}

/*
 * Copy the attributes of tuple into row, in the current memory context.
 */
static void
copy_row(DlockRows *rows, HeapTuple tuple, DlockRow *row)
{
	dlock_tuple_copy_values(tuple, RelationGetDescr(rows->rel), &row->values, &row->nulls);
	row->tid = tuple->t_self;
	row->xmin = HeapTupleHeaderGetXmin(tuple->t_data);
}

/*
 * Whether block exists in rel's main fork. The size this backend last saw is
 * enough when the block lies below it -- a relation only shrinks under an
 * AccessExclusiveLock, whose smgr invalidation this backend processed when it
 * opened the table -- which saves the lseek of asking the kernel on each call.
 */
static bool
block_exists(Relation rel, BlockNumber block)
{
	BlockNumber known = dlock_known_nblocks(rel);

	if (known != InvalidBlockNumber && block < known)
		return true;
	return block < RelationGetNumberOfBlocks(rel);
}

/*
 * The row at the location remembered for lock_name, if it is still the
 * visible version of that row. Prunes the page first, as an index scan
 * would, so that the HOT chains of rows found this way stay short.
 */
static bool
read_remembered_row(DlockRows *rows, text *lock_name, Snapshot snapshot, DlockRow *row)
{
	uint32		hash = name_hash(lock_name);
	RowCacheEntry *entry = &row_cache[hash % ROW_CACHE_SIZE];
	HeapTupleData tuple;
	Buffer		buffer;
	bool		found = false;

	if (entry->hash != hash || entry->generation != rows->generation ||
		!block_exists(rows->rel, ItemPointerGetBlockNumber(&entry->tid)))
		return false;
	tuple.t_self = entry->tid;
	if (dlock_heap_fetch_keep(rows->rel, snapshot, &tuple, &buffer))
	{
		bool		isnull;
		Datum		name = heap_getattr(&tuple, Anum_lock_name, RelationGetDescr(rows->rel), &isnull);

		if (!isnull && DatumGetBool(DirectFunctionCall2Coll(texteq, rows->index->rd_indcollation[0],
														   name, PointerGetDatum(lock_name))))
		{
			copy_row(rows, &tuple, row);
			found = true;
		}
	}
	if (BufferIsValid(buffer))
	{
		/* after the copy: pruning may move tuples within the page */
		heap_page_prune_opt(rows->rel, buffer);
		ReleaseBuffer(buffer);
	}
	return found;
}

/*
 * Read the newest committed version of lock_name's row (or this
 * transaction's own newest version) into row, copied into the current
 * memory context. Returns false when the name has no row.
 */
bool
dlock_row_read(DlockRows *rows, text *lock_name, DlockRow *row)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TupleTableSlot *slot;
	ScanKeyData key;
	IndexScanDesc scan;
	bool		found;

	if (read_remembered_row(rows, lock_name, snapshot, row))
	{
		UnregisterSnapshot(snapshot);
		return true;
	}

	slot = table_slot_create(rows->rel, NULL);
	/* the index's own collation: the key must order as the index does */
	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   rows->index->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(lock_name));
	scan = dlock_index_beginscan(rows->rel, rows->index, snapshot, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		bool		should_free;

		copy_row(rows, ExecFetchSlotHeapTuple(slot, false, &should_free), row);
		Assert(!should_free);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	return found;
}

/*
 * What a lock or a write of a decided version found: TM_Ok, it is this
 * transaction's now; another transaction holds it (TM_WouldBlock, a lock
 * without waiting only); or it changed since it was read.
 */
static DlockRowLock
row_lock_outcome(TM_Result result)
{
	switch (result)
	{
		case TM_Ok:
			return ROW_LOCKED;
		case TM_WouldBlock:
			return ROW_BLOCKED;
		case TM_Updated:
		case TM_Deleted:
			return ROW_CHANGED;
		case TM_SelfModified:
			/* changed earlier in this command: see it, then decide again */
			CommandCounterIncrement();
			return ROW_CHANGED;
		default:
			elog(ERROR, "pg_dlock: unexpected result %d locking or writing a lock row",
				 (int) result);
	}
	return ROW_CHANGED;			/* keep compiler quiet */
}

/*
 * Lock the version of the row that dlock_row_read returned, in "mode"
 * (LockTupleNoKeyExclusive to write it, LockTupleShare to pin it), without
 * waiting.
 */
DlockRowLock
dlock_row_lock(DlockRows *rows, DlockRow *row, LockTupleMode mode)
{
	return dlock_tuple_lock(rows->rel, &row->tid, mode);
}

/*
 * The same for the row version at tid of any of pg_dlock's tables (rel),
 * read with the latest snapshot and decided on: ROW_LOCKED when that very
 * version is now locked by this transaction, so the decision stands.
 */
DlockRowLock
dlock_tuple_lock(Relation rel, ItemPointer tid, LockTupleMode mode)
{
	HeapTupleData tuple;
	Buffer		buffer;
	TM_FailureData tmfd;
	TM_Result	result;

	tuple.t_self = *tid;
	result = heap_lock_tuple(rel, &tuple, GetCurrentCommandId(true), mode,
							 LockWaitSkip, false, &buffer, &tmfd);
	ReleaseBuffer(buffer);
	return row_lock_outcome(result);
}

/*
 * Whether the version of the row that dlock_row_read returned shows, in its
 * header as it is now, no locker and no updater: the hint that its xmax is
 * invalid, on that very version (same xmin). Only the clearly free case
 * counts: a lock-only xmax of a finished transaction, or an aborted one
 * without the hint, is left to heap_lock_tuple to sort out.
 */
static bool
version_unlocked(DlockRows *rows, DlockRow *row)
{
	Buffer		buffer = ReadBuffer(rows->rel, ItemPointerGetBlockNumber(&row->tid));
	OffsetNumber offnum = ItemPointerGetOffsetNumber(&row->tid);
	Page		page;
	bool		unlocked = false;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buffer);
	if (offnum <= PageGetMaxOffsetNumber(page))
	{
		ItemId		lp = PageGetItemId(page, offnum);

		if (ItemIdIsNormal(lp))
		{
			HeapTupleHeader htup = (HeapTupleHeader) PageGetItem(page, lp);

			unlocked = (htup->t_infomask & HEAP_XMAX_INVALID) != 0 &&
				TransactionIdEquals(HeapTupleHeaderGetXmin(htup), row->xmin);
		}
	}
	UnlockReleaseBuffer(buffer);
	return unlocked;
}

/*
 * The other transactions that lock or update the row version at tid; the
 * number found is returned, at most max_xids.
 */
static int
row_lockers(Relation rel, ItemPointer tid, TransactionId *xids, int max_xids)
{
	Buffer		buffer = ReadBuffer(rel, ItemPointerGetBlockNumber(tid));
	Page		page;
	ItemId		lp;
	int			n = 0;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buffer);
	lp = PageGetItemId(page, ItemPointerGetOffsetNumber(tid));
	if (ItemIdIsNormal(lp))
	{
		HeapTupleHeader htup = (HeapTupleHeader) PageGetItem(page, lp);
		uint16		infomask = htup->t_infomask;
		TransactionId xmax = HeapTupleHeaderGetRawXmax(htup);

		if (!(infomask & HEAP_XMAX_INVALID))
		{
			if (infomask & HEAP_XMAX_IS_MULTI)
			{
				MultiXactMember *members;
				int			nmembers;

				LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
				nmembers = GetMultiXactIdMembers(xmax, &members, false,
												 HEAP_XMAX_IS_LOCKED_ONLY(infomask));
				for (int i = 0; i < nmembers && n < max_xids; i++)
					if (!TransactionIdIsCurrentTransactionId(members[i].xid))
						xids[n++] = members[i].xid;
				if (nmembers > 0)
					pfree(members);
				ReleaseBuffer(buffer);
				return n;
			}
			if (!TransactionIdIsCurrentTransactionId(xmax))
				xids[n++] = xmax;
		}
	}
	UnlockReleaseBuffer(buffer);
	return n;
}

#define MAX_WAITED_LOCKERS 64

/*
 * Wait, holding nothing, until the transactions that locked or were
 * updating the row when dlock_row_lock reported ROW_BLOCKED have ended.
 * With deadline 0 the wait is bounded only by lock_timeout, like an
 * UPDATE's; otherwise it polls and gives up at the deadline, returning
 * false. Cancel interrupts it either way.
 */
bool
dlock_row_wait(DlockRows *rows, DlockRow *row, TimestampTz deadline)
{
	return dlock_tuple_wait(rows->rel, &row->tid, deadline);
}

/*
 * The same for the row version at tid of any of pg_dlock's tables (rel):
 * a caller that read it, decided, and found it locked by another
 * transaction waits here holding nothing, then reads and decides again.
 */
bool
dlock_tuple_wait(Relation rel, ItemPointer tid, TimestampTz deadline)
{
	TransactionId xids[MAX_WAITED_LOCKERS];
	int			n = row_lockers(rel, tid, xids, MAX_WAITED_LOCKERS);

	/*
	 * Nobody in xmax: another session is queued for the row's tuple lock
	 * (a force release waiting for a pin). Let it go first.
	 */
	if (n == 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		return deadline == 0 || GetCurrentTimestamp() < deadline;
	}
	for (int i = 0; i < n; i++)
	{
		if (deadline == 0)
		{
			XactLockTableWait(xids[i], rel, tid, XLTW_Lock);
			continue;
		}
		if (!dlock_xact_wait(xids[i], deadline))
			return false;
	}
	return true;
}

/* Whether transaction *arg has ended, for dlock_retry_until */
static bool
xact_ended(void *arg)
{
	return dlock_xact_ended(*(TransactionId *) arg);
}

/*
 * Wait, holding nothing, until transaction xid has ended or deadline (not 0)
 * has passed, polling with short sleeps; false at the deadline. Cancel
 * interrupts it.
 */
bool
dlock_xact_wait(TransactionId xid, TimestampTz deadline)
{
	return dlock_retry_until(xact_ended, &xid, deadline);
}

/*
 * Insert index entries for a tuple that heap_update or heap_insert did not
 * put on a HOT chain.
 */
static void
insert_index_entry(DlockRows *rows, HeapTuple tuple, Datum *values, bool *nulls,
				   bool unchanged)
{
	IndexInfo  *info = BuildIndexInfo(rows->index);

	/* the key is the lock_name column itself */
	Assert(info->ii_NumIndexAttrs == 1 && info->ii_IndexAttrNumbers[0] == 1);
	(void) dlock_index_insert(rows->index, &values[0], &nulls[0], &tuple->t_self,
							  rows->rel, UNIQUE_CHECK_YES, unchanged, info);
}

/*
 * heap_update row->values over the version at row->tid, waiting for any
 * transaction that locks or changes it, as an UPDATE does. On TM_Ok the new
 * version is in place (its index entry too), row->tid points to it, and it
 * is visible to the rest of the transaction at once; otherwise nothing was
 * written.
 */
static TM_Result
update_version(DlockRows *rows, DlockRow *row)
{
	HeapTuple	tuple = heap_form_tuple(RelationGetDescr(rows->rel), row->values, row->nulls);
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;

	result = dlock_heap_update(rows->rel, &row->tid, tuple, GetCurrentCommandId(true),
							   InvalidSnapshot, true, &tmfd, &lockmode);
	if (result == TM_Ok)
	{
		if (!HeapTupleIsHeapOnly(tuple))
			insert_index_entry(rows, tuple, row->values, row->nulls, true);
		row->tid = tuple->t_self;
		remember_row(rows, row);
		CommandCounterIncrement();
	}
	heap_freetuple(tuple);
	return result;
}

/*
 * Write tuple as the new version of the row version at tid of rel, one of
 * pg_dlock's tables other than the lock table, which this transaction has
 * locked (dlock_tuple_lock) or inserted. Updates change no indexed column,
 * so they stay HOT when the page has room; when not, every index of rel
 * gets the new version's entry, as CatalogIndexInsert does. The new version
 * is visible to the rest of the transaction at once; tuple->t_self points
 * to it.
 */
void
dlock_tuple_update(Relation rel, ItemPointer tid, HeapTuple tuple)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;

	result = dlock_heap_update(rel, tid, tuple, GetCurrentCommandId(true),
							   InvalidSnapshot, true, &tmfd, &lockmode);
	if (result != TM_Ok)
		elog(ERROR, "pg_dlock: unexpected result %d updating a locked row of \"%s\"",
			 (int) result, RelationGetRelationName(rel));
	if (!HeapTupleIsHeapOnly(tuple))
	{
		TupleDesc	tupdesc = RelationGetDescr(rel);
		Datum	   *values = palloc(sizeof(Datum) * tupdesc->natts);
		bool	   *nulls = palloc(sizeof(bool) * tupdesc->natts);
		List	   *indexes = RelationGetIndexList(rel);
		ListCell   *lc;

		heap_deform_tuple(tuple, tupdesc, values, nulls);
		foreach(lc, indexes)
		{
			Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);
			IndexInfo  *info = BuildIndexInfo(index);
			Datum		key[INDEX_MAX_KEYS];
			bool		key_nulls[INDEX_MAX_KEYS];

			/* pg_dlock's tables have plain column keys only */
			if (info->ii_Expressions != NIL || info->ii_Predicate != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("table \"%s\" must have no index on expressions or with a predicate",
								RelationGetRelationName(rel)),
						 errhint("Drop the index that was added to it.")));
			for (int i = 0; i < info->ii_NumIndexAttrs; i++)
			{
				AttrNumber	att = info->ii_IndexAttrNumbers[i];

				key[i] = values[att - 1];
				key_nulls[i] = nulls[att - 1];
			}
			(void) dlock_index_insert(index, key, key_nulls, &tuple->t_self, rel,
									  index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
									  true, info);
			index_close(index, NoLock);
		}
		list_free(indexes);
	}
	CommandCounterIncrement();
}

/*
 * Write row->values as the new version of the row; the caller holds its
 * lock (dlock_row_lock returned ROW_LOCKED). The new version is visible to
 * the rest of the transaction at once.
 */
void
dlock_row_update(DlockRows *rows, DlockRow *row)
{
	TM_Result	result = update_version(rows, row);

	if (result != TM_Ok)
		elog(ERROR, "pg_dlock: unexpected result %d updating a locked lock row",
			 (int) result);
}

/*
 * Write row->values, a new lease decided on the free row that
 * dlock_row_read returned, over that version: ROW_LOCKED when it is written
 * (the transaction now holds the row, as after dlock_row_lock and
 * dlock_row_update), or ROW_CHANGED (nothing written: read again and
 * decide again) or ROW_BLOCKED (another transaction holds the row: wait,
 * read again) as dlock_row_lock reports them. The caller computed
 * row->values without side effects, since a retry computes them again.
 *
 * When the version shows no locker or updater (version_unlocked), it is
 * updated at once, with no row lock taken before. Between that look and
 * heap_update's own lock on the page, another transaction may still lock
 * or change the version; heap_update then waits for it as an UPDATE does,
 * in line for the row's tuple lock, bounded by lock_timeout only -- so only
 * a caller without a deadline may use this, one that would wait as long in
 * dlock_row_wait (a try_acquire) -- and:
 *
 *	- if it updated or deleted the row (a grant, a holder grant clearing the
 *	  exclusive_only mark, dlock.reap), reports TM_Updated or TM_Deleted:
 *	  nothing is written, and the caller reads and decides again, as after
 *	  dlock_row_lock's ROW_CHANGED;
 *	- if it rolled back, or only locked the row and ended, writes the
 *	  decision made before the wait, on a row that has not changed since it
 *	  was read. That decision stays right: the row was free and available
 *	  at the clock reading it was made at, nothing but a write makes it
 *	  live or unavailable, and the clock only advances; the lease written
 *	  ends ttl after that earlier reading, so it is only shorter than one
 *	  decided after the wait. The token is the row's next, as it would be.
 *
 * The second case is rare: it needs a lock taken on a free row within
 * that window, and pg_dlock takes none there without writing the row
 * next (holds() pins only live leases; the expiry worker locks only rows
 * with an owner). Only a user's own SELECT ... FOR SHARE of the table
 * does. The other writes keep taking the row lock first (dlock_row_lock):
 * a decision made on a live lease (a renewal, a release, this owner's
 * retry) can be undone during such a wait -- the lease expires, or a
 * holds() pin landing in the window outlives the release's clock
 * reading -- and a takeover of an expired lease races the expiry worker,
 * which locks such rows FOR SHARE SKIP LOCKED to report their expiry and
 * would report the one the takeover reports. So does a version whose
 * header shows anything but a clearly free xmax.
 */
DlockRowLock
dlock_row_write_decided(DlockRows *rows, DlockRow *row)
{
	DlockRowLock locked;

	if (version_unlocked(rows, row))
		return row_lock_outcome(update_version(rows, row));
	locked = dlock_row_lock(rows, row, LockTupleNoKeyExclusive);
	if (locked != ROW_LOCKED)
		return locked;
	dlock_row_update(rows, row);
	return ROW_LOCKED;
}

/*
 * Insert row->values as a new row. The caller holds the new-name lock for
 * its name (dlock_new_name_lock) and saw no row for it after taking it.
 */
void
dlock_row_insert(DlockRows *rows, DlockRow *row)
{
	HeapTuple	tuple = heap_form_tuple(RelationGetDescr(rows->rel), row->values, row->nulls);

	heap_insert(rows->rel, tuple, GetCurrentCommandId(true), 0, NULL);
	insert_index_entry(rows, tuple, row->values, row->nulls, false);
	row->tid = tuple->t_self;
	heap_freetuple(tuple);
	remember_row(rows, row);
	CommandCounterIncrement();
}

/*
 * The reap floor (dlock.token_floor), read with the latest snapshot: in
 * REPEATABLE READ the transaction's snapshot may predate a reap the caller
 * has just waited for. Each row is a token state (token.c): reaped_max,
 * and from 1.5 on the history position and cluster it was left at
 * (grant_timeline, grant_system); a row without them, written before 1.5
 * or by hand, is of unknown history. Returns the highest reaped_max (0 if
 * none) and, when history is positive, sets *next to the floor's next token
 * at that position: the best of its rows', or that of nothing.
 */
/* from 1.5 on the floor's rows carry grant_timeline and grant_system */
static bool
floor_has_history(Relation rel)
{
	return RelationGetDescr(rel)->natts >= 4;
}

static int64
read_token_floor(int32 history, int64 *next)
{
	Relation	rel = dlock_table_open(dlock_catalog()->floor_table, AccessShareLock);
	bool		has_history = floor_has_history(rel);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	int64		floor = 0;

	if (history > 0)
		*next = dlock_next_token(0, 0, 0, history);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		int64		reaped = DatumGetInt64(slot_getattr(slot, 1, &isnull));
		int32		reaped_history = 0;
		int64		reaped_system = 0;

		if (isnull)
			continue;
		floor = Max(floor, reaped);
		if (history <= 0)
			continue;
		if (has_history)
		{
			Datum		h = slot_getattr(slot, 3, &isnull);
			Datum		sys;

			if (!isnull)
			{
				reaped_history = DatumGetInt32(h);
				sys = slot_getattr(slot, 4, &isnull);
				reaped_system = isnull ? 0 : DatumGetInt64(sys);
			}
		}
		*next = Max(*next, dlock_next_token(reaped, reaped_history, reaped_system, history));
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return floor;
}

/*
 * Whether the reap floor's rows carry their history (1.5 on).
 */
bool
dlock_floor_has_history(void)
{
	Relation	rel = dlock_table_open(dlock_catalog()->floor_table, AccessShareLock);
	bool		has_history = floor_has_history(rel);

	table_close(rel, AccessShareLock);
	return has_history;
}

/*
 * The highest token the reap floor holds, 0 if none.
 */
int64
dlock_token_floor(void)
{
	return read_token_floor(0, NULL);
}

/*
 * The first token of a name that has no row, granted at history position
 * "history": the floor's next token.
 */
int64
dlock_floor_next_token(int32 history)
{
	int64		next = 0;

	(void) read_token_floor(history, &next);
	return next;
}

/*
 * Whether row says that the name has had no shared lease or permit since an
 * exclusive grant last checked dlock.lock_holder (holder_lease.c, "Exclusion
 * between kinds"). False when the column is missing (1.1) or NULL: then the
 * grant checks.
 */
bool
dlock_row_exclusive_only(const DlockRows *rows, const DlockRow *row)
{
	AttrNumber	att = rows->columns.exclusive_only;

	return att != InvalidAttrNumber && !row->nulls[att - 1] &&
		DatumGetBool(row->values[att - 1]);
}

/*
 * Set the exclusive_only mark of row (when the table has the column), for
 * the next dlock_row_update or dlock_row_insert.
 */
void
dlock_row_set_exclusive_only(const DlockRows *rows, DlockRow *row, bool value)
{
	AttrNumber	att = rows->columns.exclusive_only;

	if (att == InvalidAttrNumber)
		return;
	row->values[att - 1] = BoolGetDatum(value);
	row->nulls[att - 1] = false;
}
