/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Server-wide counters behind the dlock.stats view.
 *
 * Counters live in shared memory as atomics, so counting adds no write to
 * the database (a refused attempt stays free of writes) and no lock. They
 * exist only when pg_dlock is in shared_preload_libraries; otherwise
 * dlock.stats shows shared_memory = false and zero counters. Counters start
 * at zero at server start and at dlock.stats_reset().
 *
 * IDENTIFICATION
 *	  extension/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(dlock_stats_counters);
PG_FUNCTION_INFO_V1(dlock_kind_stats);

typedef struct DlockStatsShared
{
	pg_atomic_uint64 counters[NUM_DLOCK_COUNTERS];
	pg_atomic_uint64 reset_at;	/* a TimestampTz */
} DlockStatsShared;

static DlockStatsShared *stats_shared = NULL;

/*
 * Add amount to a counter; a no-op without shared memory.
 */
void
dlock_count(DlockCounter counter, uint64 amount)
{
	if (stats_shared != NULL)
		pg_atomic_fetch_add_u64(&stats_shared->counters[counter], amount);
}

Size
dlock_stats_shmem_size(void)
{
	return MAXALIGN(sizeof(DlockStatsShared));
}

/*
 * Create or attach to the counters; caller holds AddinShmemInitLock.
 */
void
dlock_stats_shmem_init(void)
{
	bool		found;

	stats_shared = ShmemInitStruct("pg_dlock stats", sizeof(DlockStatsShared), &found);
	if (!found)
	{
		for (int i = 0; i < NUM_DLOCK_COUNTERS; i++)
			pg_atomic_init_u64(&stats_shared->counters[i], 0);
		pg_atomic_init_u64(&stats_shared->reset_at, (uint64) GetCurrentTimestamp());
	}
}

/*
 * dlock.stats_counters() returns record (see the install script)
 */
Datum
dlock_stats_counters(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[NUM_DLOCK_COUNTERS + 2];
	bool		nulls[NUM_DLOCK_COUNTERS + 2] = {0};
	int			col = 0;
	int			counters;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	/* shared_memory, the counters, stats_reset: fewer counters before 1.2 */
	counters = tupdesc->natts - 2;
	if (counters < 0 || counters > NUM_DLOCK_COUNTERS)
		elog(ERROR, "pg_dlock: dlock.stats_counters() has %d columns", tupdesc->natts);

	values[col++] = BoolGetDatum(stats_shared != NULL);
	/* the per-kind counters after these are dlock.kind_stats()'s */
	for (int i = 0; i < counters; i++)
	{
		uint64		value = stats_shared ?
			pg_atomic_read_u64(&stats_shared->counters[i]) : 0;

		if (i == STAT_WAIT_USECS)
			values[col++] = Float8GetDatum((double) value / USECS_PER_SEC);
		else
			values[col++] = Int64GetDatum((int64) value);
	}
	if (stats_shared)
		values[col++] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&stats_shared->reset_at));
	else
		nulls[col++] = true;
	Assert(col == tupdesc->natts);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/*
 * Zero the counters and note when (dlock.stats_reset, admin.c).
 */
void
dlock_stats_reset_counters(void)
{
	if (stats_shared != NULL)
	{
		for (int i = 0; i < NUM_DLOCK_COUNTERS; i++)
			pg_atomic_write_u64(&stats_shared->counters[i], 0);
		pg_atomic_write_u64(&stats_shared->reset_at, (uint64) GetCurrentTimestamp());
	}
}

static uint64
counter_value(DlockCounter counter)
{
	return stats_shared ? pg_atomic_read_u64(&stats_shared->counters[counter]) : 0;
}

/*
 * dlock.kind_stats() returns setof (kind, acquisitions, busy): grants and
 * refusals per lock kind. Exclusive leases count every grant, including the
 * ones a multi-lock makes for each of its names.
 */
Datum
dlock_kind_stats(PG_FUNCTION_ARGS)
{
	static const struct
	{
		const char *kind;
		DlockCounter acquisitions;
		DlockCounter busy;
	}			kinds[] = {
		{"exclusive", STAT_ACQUISITIONS, STAT_BUSY},
		{"shared", STAT_SHARED_ACQUISITIONS, STAT_SHARED_BUSY},
		{"permit", STAT_PERMIT_ACQUISITIONS, STAT_PERMIT_BUSY},
		{"multi", STAT_MULTI_ACQUISITIONS, STAT_MULTI_BUSY},
	};
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < (int) lengthof(kinds); i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(kinds[i].kind);
		values[1] = Int64GetDatum((int64) counter_value(kinds[i].acquisitions));
		values[2] = Int64GetDatum((int64) counter_value(kinds[i].busy));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
