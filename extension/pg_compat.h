/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *	  Every difference between the PostgreSQL majors pg_dlock builds on
 *	  (13 to 18), each behind one macro or inline function named for what
 *	  it does, so that no other file tests PG_VERSION_NUM.
 *
 * The call sites use the newest API's shape where the older majors only
 * lack a function (InitMaterializedSRF, try_table_open: defined here for
 * them), and a dlock_ name where the signature changed between majors. A
 * feature a major cannot offer is refused there with 0A000 and a message
 * naming the version (none at present: every feature works on 13 to 18).
 *
 * dlock.h includes this header, so every file has it.
 *
 * IDENTIFICATION
 *	  extension/pg_compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_PG_COMPAT_H
#define DLOCK_PG_COMPAT_H

#include "postgres.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#if PG_VERSION_NUM < 130000 || PG_VERSION_NUM >= 190000
#error "pg_dlock builds on PostgreSQL 13 to 18"
#endif

/* VARDATA_ANY and the other varlena macros: varatt.h from 16 on */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/* Wait events (PG_WAIT_EXTENSION): utils/wait_event.h from 14 on */
#if PG_VERSION_NUM >= 140000
#include "utils/wait_event.h"
#else
#include "pgstat.h"
#endif

/* A uniform random integer in [low, high]: pg_prng from 15 on */
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#define dlock_random_range(low, high) \
	((int64) pg_prng_uint64_range(&pg_global_prng_state, (low), (high)))
#else
#define dlock_random_range(low, high) \
	((int64) ((low) + random() % ((high) - (low) + 1)))
#endif

/*
 * How many processes may have a PGPROC of a regular backend, background
 * worker or WAL sender. From 15 on MaxBackends, known once shared memory is
 * requested; before 15 shared memory is requested in _PG_init, before
 * MaxBackends is set, so it is computed from the settings as
 * InitializeMaxBackends does.
 */
#if PG_VERSION_NUM >= 150000
#define dlock_max_backends() (MaxBackends)
#else
#include "postmaster/autovacuum.h"
#include "postmaster/bgworker_internals.h"
#include "replication/walsender.h"
#define dlock_max_backends() \
	(MaxConnections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders)
#endif

/* This process's index in the PGPROC array: MyProcNumber from 17 on */
#if PG_VERSION_NUM >= 170000
#define dlock_my_procno() ((int) MyProcNumber)
#else
#define dlock_my_procno() (MyProc->pgprocno)
#endif

/* A regular backend (not a worker, WAL sender, ...): from 17 and the 2024 minor releases */
#ifndef AmRegularBackendProcess
#define AmRegularBackendProcess() (MyBackendType == B_BACKEND)
#endif

/*
 * The timeline new WAL is written on (a primary's): GetWALInsertionTimeLine
 * from 15 on, the ThisTimeLineID global before.
 */
#if PG_VERSION_NUM >= 150000
#define dlock_wal_insert_timeline() GetWALInsertionTimeLine()
#else
#define dlock_wal_insert_timeline() ThisTimeLineID
#endif

/*
 * Shared memory is requested from shmem_request_hook from 15 on, and
 * directly in _PG_init before. dlock_request_shmem(&prev, fn), called from
 * _PG_init, arranges for fn to be called when the space is requested; fn
 * calls prev first when it is set (never before 15).
 */
typedef void (*dlock_shmem_request_fn) (void);

static inline void
dlock_request_shmem(dlock_shmem_request_fn *prev, dlock_shmem_request_fn fn)
{
#if PG_VERSION_NUM >= 150000
	*prev = shmem_request_hook;
	shmem_request_hook = fn;
#else
	*prev = NULL;
	fn();
#endif
}

/*
 * After a transaction that sent notifications has committed, outside any
 * transaction: signal the listening backends. From 15 on the commit does it;
 * before, the process must (ProcessCompletedNotifies, as PostgresMain calls
 * it), or a background worker's notifications wait in the queue until
 * something else wakes the listeners.
 */
#if PG_VERSION_NUM >= 150000
#define dlock_signal_listeners() ((void) 0)
#else
#include "commands/async.h"
#define dlock_signal_listeners() ProcessCompletedNotifies()
#endif

/*
 * Reserve a GUC prefix: MarkGUCPrefixReserved from 15 on. Before 15 an
 * unknown dlock.* setting can still be set (a placeholder); this only warns
 * of the ones set before the library was loaded.
 */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* EXECUTE privilege on a function: object_aclcheck from 16 on */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_proc.h"
#define dlock_proc_aclcheck(fn, role, mode) \
	object_aclcheck(ProcedureRelationId, (fn), (role), (mode))
#else
#define dlock_proc_aclcheck(fn, role, mode) pg_proc_aclcheck((fn), (role), (mode))
#endif

/* try_table_open from 14 on; before, the relation (always a table here) */
#if PG_VERSION_NUM < 140000
#define try_table_open(relid, lockmode) try_relation_open((relid), (lockmode))
#endif

/* A table's primary key index: from 18 on, whether a deferrable one will do */
#if PG_VERSION_NUM >= 180000
#define dlock_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define dlock_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/* An index scan: from 18 on with instrumentation (none here) */
#if PG_VERSION_NUM >= 180000
#define dlock_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define dlock_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/* Whether xid has ended, without waiting: from 18 on, whether to log a failure (no) */
#if PG_VERSION_NUM >= 180000
#define dlock_xact_ended(xid) ConditionalXactLockTableWait((xid), false)
#else
#define dlock_xact_ended(xid) ConditionalXactLockTableWait(xid)
#endif

/*
 * Fetch a tuple by TID, keeping the buffer pinned even when the version is
 * not visible (so the caller can prune the page): heap_fetch's keep_buf from
 * 15 on, heap_fetch_extended in 14. 13 cannot keep it: the buffer comes back
 * invalid for a version not visible, and the caller skips pruning then (a
 * later scan prunes the page).
 */
#if PG_VERSION_NUM >= 150000
#define dlock_heap_fetch_keep(rel, snapshot, tuple, buffer) \
	heap_fetch((rel), (snapshot), (tuple), (buffer), true)
#elif PG_VERSION_NUM >= 140000
#define dlock_heap_fetch_keep(rel, snapshot, tuple, buffer) \
	heap_fetch_extended((rel), (snapshot), (tuple), (buffer), true)
#else
#define dlock_heap_fetch_keep(rel, snapshot, tuple, buffer) \
	heap_fetch((rel), (snapshot), (tuple), (buffer))
#endif

/*
 * The number of blocks of a table's main fork as this backend last learned
 * it, InvalidBlockNumber when not known: smgr caches it from 14 on; 13 never
 * knows, and the caller asks the kernel.
 */
#if PG_VERSION_NUM >= 140000
#define dlock_known_nblocks(rel) (RelationGetSmgr(rel)->smgr_cached_nblocks[MAIN_FORKNUM])
#else
#define dlock_known_nblocks(rel) InvalidBlockNumber
#endif

/* Insert an index entry: from 14 on, whether the indexed value is unchanged (a hint) */
#if PG_VERSION_NUM >= 140000
#define dlock_index_insert(index, values, isnull, tid, heap, check, unchanged, info) \
	index_insert((index), (values), (isnull), (tid), (heap), (check), (unchanged), (info))
#else
#define dlock_index_insert(index, values, isnull, tid, heap, check, unchanged, info) \
	index_insert((index), (values), (isnull), (tid), (heap), (check), (info))
#endif

/*
 * heap_update; from 16 on it also says which indexes need entries, which
 * pg_dlock decides itself from HeapTupleIsHeapOnly (its one index).
 */
static inline TM_Result
dlock_heap_update(Relation rel, ItemPointer otid, HeapTuple tuple, CommandId cid,
				  Snapshot crosscheck, bool wait, TM_FailureData *tmfd,
				  LockTupleMode *lockmode)
{
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;

	return heap_update(rel, otid, tuple, cid, crosscheck, wait, tmfd, lockmode,
					   &update_indexes);
#else
	return heap_update(rel, otid, tuple, cid, crosscheck, wait, tmfd, lockmode);
#endif
}

/*
 * A set-returning function's tuplestore: InitMaterializedSRF from 15 on;
 * before, the same steps as 15's funcapi.c.
 */
#if PG_VERSION_NUM < 150000
#include "utils/tuplestore.h"

#define MAT_SRF_USE_EXPECTED_DESC	0x01
#define MAT_SRF_BLESS				0x02

static inline void
InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext old_context;
	TupleDesc	stored_tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (!(rsinfo->allowedModes & SFRM_Materialize) ||
		((flags & MAT_SRF_USE_EXPECTED_DESC) != 0 && rsinfo->expectedDesc == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("materialize mode required, but it is not allowed in this context")));
	old_context = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if ((flags & MAT_SRF_USE_EXPECTED_DESC) != 0)
		stored_tupdesc = CreateTupleDescCopy(rsinfo->expectedDesc);
	else if (get_call_result_type(fcinfo, NULL, &stored_tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if ((flags & MAT_SRF_BLESS) != 0)
		BlessTupleDesc(stored_tupdesc);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0,
											  false, work_mem);
	rsinfo->setDesc = stored_tupdesc;
	MemoryContextSwitchTo(old_context);
}
#endif

#endif							/* DLOCK_PG_COMPAT_H */
