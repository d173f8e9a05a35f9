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
PG_FUNCTION_INFO_V1(dlock_wait_histogram);
PG_FUNCTION_INFO_V1(dlock_hold_histogram);

/*
 * Upper bounds of the histogram buckets, Prometheus style: from 1 ms to a
 * minute, then one bucket for everything longer (+Inf).
 */
static const int64 bucket_bounds_usecs[] = {
	1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000, 60000000
};

#define NUM_BUCKETS (lengthof(bucket_bounds_usecs) + 1)

typedef struct DlockStatsShared
{
	pg_atomic_uint64 counters[NUM_DLOCK_COUNTERS];
	/* observations per bucket, not cumulative: one atomic add each */
	pg_atomic_uint64 buckets[NUM_DLOCK_HISTOGRAMS][NUM_LEASE_KINDS][NUM_BUCKETS];
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

/*
 * The lease kind of a holder slot's kind column ('s' or 'p'); anything else
 * is an exclusive lease.
 */
DlockLeaseKind
dlock_lease_kind_of(char holder_kind)
{
	return holder_kind == 's' ? LEASE_SHARED :
		holder_kind == 'p' ? LEASE_PERMIT : LEASE_EXCLUSIVE;
}

/*
 * Count one wait or hold of usecs in its histogram; a no-op without shared
 * memory. A negative duration (a step back of the clock) counts as zero.
 */
void
dlock_observe(DlockHistogram histogram, DlockLeaseKind kind, int64 usecs)
{
	int			bucket = 0;

	if (stats_shared == NULL)
		return;
	while (bucket < (int) lengthof(bucket_bounds_usecs) && usecs > bucket_bounds_usecs[bucket])
		bucket++;
	pg_atomic_fetch_add_u64(&stats_shared->buckets[histogram][kind][bucket], 1);
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
		for (int h = 0; h < NUM_DLOCK_HISTOGRAMS; h++)
			for (int k = 0; k < NUM_LEASE_KINDS; k++)
				for (int b = 0; b < (int) NUM_BUCKETS; b++)
					pg_atomic_init_u64(&stats_shared->buckets[h][k][b], 0);
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
		for (int h = 0; h < NUM_DLOCK_HISTOGRAMS; h++)
			for (int k = 0; k < NUM_LEASE_KINDS; k++)
				for (int b = 0; b < (int) NUM_BUCKETS; b++)
					pg_atomic_write_u64(&stats_shared->buckets[h][k][b], 0);
		pg_atomic_write_u64(&stats_shared->reset_at, (uint64) GetCurrentTimestamp());
	}
}

/*
 * A counter's value; 0 without shared memory.
 */
uint64
dlock_counter_value(DlockCounter counter)
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
		values[1] = Int64GetDatum((int64) dlock_counter_value(kinds[i].acquisitions));
		values[2] = Int64GetDatum((int64) dlock_counter_value(kinds[i].busy));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * The rows of one histogram: per lease kind, each bucket's upper bound
 * (NULL for +Inf) and the cumulative count of observations up to it, as
 * Prometheus shapes a histogram. No rows without shared memory.
 */
static Datum
histogram_rows(FunctionCallInfo fcinfo, DlockHistogram histogram)
{
	static const char *const kind_names[NUM_LEASE_KINDS] = {"exclusive", "shared", "permit"};
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (stats_shared == NULL)
		return (Datum) 0;
	for (int k = 0; k < NUM_LEASE_KINDS; k++)
	{
		uint64		cumulative = 0;

		for (int b = 0; b < (int) NUM_BUCKETS; b++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			cumulative += pg_atomic_read_u64(&stats_shared->buckets[histogram][k][b]);
			values[0] = CStringGetTextDatum(kind_names[k]);
			if (b < (int) lengthof(bucket_bounds_usecs))
			{
				Interval   *le = palloc0(sizeof(Interval));

				le->time = bucket_bounds_usecs[b];
				values[1] = IntervalPGetDatum(le);
			}
			else
				nulls[1] = true;
			values[2] = Int64GetDatum((int64) cumulative);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/*
 * dlock.wait_histogram() returns setof (kind, le, waits): acquire calls that
 * waited in the queue and were granted, by how long they waited.
 */
Datum
dlock_wait_histogram(PG_FUNCTION_ARGS)
{
	return histogram_rows(fcinfo, HISTOGRAM_WAIT);
}

/*
 * dlock.hold_histogram() returns setof (kind, le, holds): leases that ended,
 * by how long after their grant.
 */
Datum
dlock_hold_histogram(PG_FUNCTION_ARGS)
{
	return histogram_rows(fcinfo, HISTOGRAM_HOLD);
}
