/*-------------------------------------------------------------------------
 *
 * pg_dlock.h
 *	  Declarations shared by the pg_dlock source files.
 *
 * IDENTIFICATION
 *	  extension/pg_dlock.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_DLOCK_H
#define PG_DLOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "utils/uuid.h"

/* SQLSTATE class "DL": pg_dlock's own conditions */
#define ERRCODE_DLOCK_STALE_FENCING_TOKEN	MAKE_SQLSTATE('D','L','0','0','1')
#define ERRCODE_DLOCK_LOCK_NOT_HELD			MAKE_SQLSTATE('D','L','0','0','2')

/* Token layout: timeline ID above a per-name counter (README "Fencing tokens") */
#define DLOCK_COUNTER_BITS	40

/* Longest lock or resource name, in characters */
#define DLOCK_MAX_NAME_CHARS 200

/* Settings (pg_dlock.c) */
typedef enum DlockAuditLevel
{
	DLOCK_AUDIT_NONE,
	DLOCK_AUDIT_FORCE,
	DLOCK_AUDIT_ALL
} DlockAuditLevel;

extern int	dlock_max_ttl_seconds;
extern int	dlock_audit_level;
extern bool dlock_test_ignore_timeline;

/* args.c: argument checks; each raises a PostgreSQL-style error naming the argument */
extern text *dlock_arg_name(FunctionCallInfo fcinfo, int argno, const char *argname);
extern void dlock_require_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
extern int64 dlock_arg_ttl(FunctionCallInfo fcinfo, int argno);
extern int64 dlock_interval_usecs(const Interval *interval);
extern char *dlock_arg_reason(FunctionCallInfo fcinfo, int argno);

/* spi_plans.c: prepared statements kept for the life of the backend */
typedef enum DlockPlanId
{
	PLAN_ACQUIRE_EXISTING,
	PLAN_ACQUIRE_NEW,
	PLAN_FLOOR_SHARED,
	PLAN_FLOOR_READ,
	PLAN_FLOOR_EXCLUSIVE,
	PLAN_FLOOR_COMPACT,
	PLAN_LEASE_EXPIRY,
	PLAN_RENEW,
	PLAN_RELEASE,
	PLAN_HOLDS,
	PLAN_FENCE,
	PLAN_FENCE_CURRENT,
	PLAN_FORCE_RELEASE,
	PLAN_REAP,
	PLAN_PURGE_AUDIT,
	PLAN_AUDIT,
	NUM_DLOCK_PLANS
} DlockPlanId;

extern int	dlock_execute(DlockPlanId id, Datum *values, const char *nulls, long count);
extern int	dlock_execute_latest(DlockPlanId id, Datum *values, const char *nulls, long count);

/* attempt.c */
extern bool dlock_attempt(bool (*body) (void *arg), void *arg);

/* token.c */
extern int32 dlock_token_timeline(void);

/* durability.c */
extern void dlock_require_durable_commit(void);
extern void dlock_allow_async_release(bool had_xid_before);
extern void dlock_durability_init(void);

/* wait.c */
extern int	dlock_wait_prepare(text *lock_name);
extern bool dlock_wait_others_waiting(int slot);
extern void dlock_wait_join(int slot);
extern void dlock_wait_leave(int slot);
extern void dlock_wait_defer(int slot, int64 remaining_usecs);
extern void dlock_wait_sleep(int slot, TimestampTz busy_until, int64 remaining_usecs, int round);
extern void dlock_wait_finish(bool acquired, bool waited, int64 waited_usecs);
extern void dlock_wake_waiters(text *lock_name);
extern Size dlock_wait_shmem_size(void);
extern void dlock_wait_shmem_init(void);
extern void dlock_wait_init(void);

/* audit.c */
extern void dlock_audit(const char *event, text *lock_name, Datum fencing_token,
						bool token_isnull, text *holder, const char *reason);

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
	NUM_DLOCK_COUNTERS
} DlockCounter;

extern void dlock_count(DlockCounter counter, uint64 amount);
extern Size dlock_stats_shmem_size(void);
extern void dlock_stats_shmem_init(void);

/* lease.c */
extern void dlock_lease_ended(text *lock_name, const char *event, DlockCounter counter,
							  DlockAuditLevel audit_from, const char *reason);

/* pg_dlock.c */
extern bool dlock_shmem_ready;

/* events.c: lock events (README "Lock events and leader election") */
#define DLOCK_EVENT_CHANNEL "dlock_events"
extern bool dlock_events_enabled;
extern void dlock_event(const char *event, text *lock_name, int64 token,
						text *holder, TimestampTz lease_until);
extern void dlock_events_init(void);

/* expiry_worker.c */
extern void dlock_expiry_worker_schedule(TimestampTz lease_until);
extern void dlock_expiry_worker_init(void);

#endif							/* PG_DLOCK_H */
