/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  The shared-memory counters (stats.c).
 *
 * IDENTIFICATION
 *	  extension/stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_STATS_H
#define DLOCK_STATS_H

#include "dlock.h"

/* stats.c */
typedef enum DlockCounter
{
	STAT_ACQUISITIONS,
	STAT_BUSY,
	STAT_TAKEOVERS,
	STAT_RENEWALS,
	STAT_RENEWALS_REFUSED,
	STAT_RELEASES,
	STAT_RELEASES_REFUSED,
	STAT_FORCE_RELEASES,
	STAT_FENCE_REJECTIONS,
	STAT_HOLDS_REJECTIONS,
	STAT_WAITS,
	STAT_WAIT_TIMEOUTS,
	STAT_WAIT_USECS,
	/* from 1.2 on; a 1.1 dlock.stats_counters() has no column for them */
	STAT_EVENTS_SENT,
	STAT_EVENTS_DROPPED,
	/* per lock kind, shown by dlock.kind_stats() only */
	STAT_SHARED_ACQUISITIONS,
	STAT_SHARED_BUSY,
	STAT_PERMIT_ACQUISITIONS,
	STAT_PERMIT_BUSY,
	STAT_MULTI_ACQUISITIONS,
	STAT_MULTI_BUSY,
	/* how transactions that changed leases committed, dlock.durability_stats() */
	STAT_DURABLE_COMMITS,
	STAT_UNFLUSHED_COMMITS,
	NUM_DLOCK_COUNTERS
} DlockCounter;

/* The kinds of lease, for the histograms */
typedef enum DlockLeaseKind
{
	LEASE_EXCLUSIVE,
	LEASE_SHARED,
	LEASE_PERMIT,
	NUM_LEASE_KINDS
} DlockLeaseKind;

/* What the histograms time: from the call to the grant, from grant to end */
typedef enum DlockHistogram
{
	HISTOGRAM_WAIT,
	HISTOGRAM_HOLD,
	NUM_DLOCK_HISTOGRAMS
} DlockHistogram;

extern void dlock_count(DlockCounter counter, uint64 amount);
extern uint64 dlock_counter_value(DlockCounter counter);
extern DlockLeaseKind dlock_lease_kind_of(char holder_kind);
extern void dlock_observe(DlockHistogram histogram, DlockLeaseKind kind, int64 usecs);
extern void dlock_stats_reset_counters(void);
extern Size dlock_stats_shmem_size(void);
extern void dlock_stats_shmem_init(void);

#endif							/* DLOCK_STATS_H */
