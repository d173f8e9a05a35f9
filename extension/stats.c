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
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "pg_dlock.h"

PG_FUNCTION_INFO_V1(dlock_stats_counters);
PG_FUNCTION_INFO_V1(dlock_stats_reset);

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
	Datum		values[15];
	bool		nulls[15] = {0};
	int			col = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");

	values[col++] = BoolGetDatum(stats_shared != NULL);
	for (int i = 0; i < NUM_DLOCK_COUNTERS; i++)
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
 * dlock.stats_reset() returns void
 */
Datum
dlock_stats_reset(PG_FUNCTION_ARGS)
{
	if (stats_shared != NULL)
	{
		for (int i = 0; i < NUM_DLOCK_COUNTERS; i++)
			pg_atomic_write_u64(&stats_shared->counters[i], 0);
		pg_atomic_write_u64(&stats_shared->reset_at, (uint64) GetCurrentTimestamp());
	}
	dlock_policy_stats_reset();
	PG_RETURN_VOID();
}
