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

#include "access/xact.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "nodes/lockoptions.h"
#include "portability/instr_time.h"
#include "storage/lock.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/uuid.h"

/*
 * SQLSTATE class "PD": pg_dlock's own conditions. The class is in the range
 * the SQL standard leaves to implementations (first character 5-9 or I-Z).
 */
#define ERRCODE_DLOCK_STALE_FENCING_TOKEN	MAKE_SQLSTATE('P','D','0','0','1')
#define ERRCODE_DLOCK_LOCK_NOT_HELD			MAKE_SQLSTATE('P','D','0','0','2')
/* lock kinds: the name is held in another kind than asked for */
#define ERRCODE_DLOCK_WRONG_KIND			MAKE_SQLSTATE('P','D','0','2','0')

/* Token layout: timeline ID above a per-name counter (README "Fencing tokens") */
#define DLOCK_COUNTER_BITS	40

/* Longest lock or resource name, in characters */
#define DLOCK_MAX_NAME_CHARS 200

/* Longest holder label, in characters (a host name of 255 and a process ID fit) */
#define DLOCK_MAX_HOLDER_CHARS 512

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
extern TimestampTz dlock_time_plus(TimestampTz t, int64 usecs);
extern void dlock_check_interval_end(int64 usecs, const char *argname, const Interval *given);
extern int64 dlock_arg_wait(FunctionCallInfo fcinfo, int argno);
extern char *dlock_arg_reason(FunctionCallInfo fcinfo, int argno);
extern text *dlock_arg_holder(FunctionCallInfo fcinfo, int argno);
extern pg_uuid_t *dlock_arg_owner_token(FunctionCallInfo fcinfo, int argno);

/* spi_plans.c: prepared statements kept for the life of the backend */
typedef enum DlockPlanId
{
	PLAN_FLOOR_COMPACT,
	PLAN_FENCE,
	PLAN_FENCE_CURRENT,
	PLAN_FORCE_RELEASE,
	PLAN_REAP,
	PLAN_PURGE_AUDIT,
	PLAN_PURGE_FENCE,
	PLAN_AUDIT,
	/* the expiry worker (expiry_worker.c); expiry_reported exists from 1.1 on */
	PLAN_EXPIRY_REPORT,
	PLAN_EXPIRY_FORGET,
	PLAN_EXPIRY_NEXT,
	PLAN_WORKER_REAP,
	PLAN_WORKER_PURGE_AUDIT,
	PLAN_LEADER,
	/* from here on, statements on objects of 1.2: lock kinds (holder_lease.c) */
	PLAN_HOLDERS_CLEAR_EXPIRED,
	PLAN_HOLDERS_CLEAR_EXPIRED_UNPINNED,
	PLAN_HOLDER_OWN_LOCK,
	PLAN_NAME_AND_HOLDERS,
	PLAN_HOLDER_LOCK,
	PLAN_HOLDER_INSERT,
	PLAN_HOLDER_GRANT,
	PLAN_HOLDER_CHANGE,
	PLAN_HOLDER_PIN,
	PLAN_COUNTER_LOCK,
	PLAN_COUNTER_INSERT,
	PLAN_COUNTER_UPDATE,
	PLAN_SEMAPHORE_RESIZE,
	PLAN_SET_BUSY,
	PLAN_HOLDERS_FORCE_RELEASE,
	/* the lease policies' columns (1.2 on, admin.c) */
	PLAN_REAP_AVAILABLE,
	PLAN_LOCK_DELAY_FORCED,
	PLAN_FORCE_RELEASE_LIVE,
	PLAN_REAP_HOLDER_SLOTS,
	NUM_DLOCK_PLANS
} DlockPlanId;

extern int	dlock_execute(DlockPlanId id, Datum *values, const char *nulls, long count);

/* Statements run between begin and end run as the extension owner (switched once) */
typedef struct DlockOwnerScope
{
	Oid			userid;
	int			sec_context;
	int			nestlevel;		/* -1: already the owner, nothing switched */
} DlockOwnerScope;

extern void dlock_owner_scope_begin(DlockOwnerScope *scope);
extern void dlock_owner_scope_end(DlockOwnerScope *scope);


/* schema.c */
extern Oid	dlock_require_own_schema(void);
extern Oid	dlock_own_function(const char *name, int nargs, const Oid *argtypes,
							   bool any_schema_name);

/* catalog.c: the extension's tables, found from the extension and cached */
typedef struct DlockCatalog
{
	Oid			extension;
	Oid			owner;			/* the extension's owner */
	Oid			lock_table;		/* dlock.distributed_lock */
	Oid			lock_index;		/* its primary key */
	Oid			floor_table;	/* dlock.token_floor */
	Oid			holder_table;	/* dlock.lock_holder; InvalidOid before 1.2 */
	Oid			counter_table;	/* dlock.holder_counter; InvalidOid before 1.2 */
	uint32		generation;		/* counts lookups: row locations cached
								 * under an older one are stale */
} DlockCatalog;

extern const DlockCatalog *dlock_catalog(void);
extern bool dlock_floor_lock_shared(void);
extern bool dlock_floor_lock_exclusive(void);
extern bool dlock_new_name_lock(uint64 hash, bool wait);
extern void dlock_new_name_unlock(uint64 hash);
extern LockAcquireResult dlock_kind_lock(text *lock_name, LOCKMODE mode, bool wait);
extern void dlock_kind_unlock(text *lock_name, LOCKMODE mode);

/* lock_row.c: one row of dlock.distributed_lock, without the executor */
/* columns of dlock.distributed_lock in 1.0; 1.1 adds grant_system */
#define DLOCK_LOCK_NATTS 12
/* attribute numbers of dlock.distributed_lock (sql/pg_dlock--1.0.sql, grant_system from 1.1) */
#define Anum_lock_name			1
#define Anum_owner_token		2
#define Anum_fencing_seq		3
#define Anum_lease_until		4
#define Anum_updated_at			5
#define Anum_acquired_at		6
#define Anum_holder				7
#define Anum_renewals			8
#define Anum_acquisitions		9
#define Anum_takeovers			10
#define Anum_taken_over			11
#define Anum_grant_timeline		12
#define Anum_grant_system		13

typedef struct DlockRows
{
	Relation	rel;
	Relation	index;
	int			natts;
	uint32		generation;		/* of the catalog the relations came from */
	AttrNumber	exclusive_only_att; /* InvalidAttrNumber before 1.2 */
} DlockRows;

typedef struct DlockRow
{
	ItemPointerData tid;
	TransactionId xmin;			/* of the version read */
	Datum	   *values;			/* indexed by attribute number - 1 */
	bool	   *nulls;
} DlockRow;

typedef enum DlockRowLock
{
	ROW_LOCKED,					/* locked: the version read is the newest */
	ROW_CHANGED,				/* a newer version exists: read again */
	ROW_BLOCKED					/* another transaction holds it: wait, read again */
} DlockRowLock;

extern void dlock_rows_open(DlockRows *rows);
extern void dlock_rows_close(DlockRows *rows);
extern bool dlock_row_read(DlockRows *rows, text *lock_name, DlockRow *row);
extern DlockRowLock dlock_row_lock(DlockRows *rows, DlockRow *row, LockTupleMode mode);
extern bool dlock_row_wait(DlockRows *rows, DlockRow *row, TimestampTz deadline);
extern bool dlock_row_pinned(DlockRows *rows, DlockRow *row);
extern bool dlock_xact_wait(TransactionId xid, TimestampTz deadline);
extern void dlock_row_update(DlockRows *rows, DlockRow *row);
extern void dlock_row_insert(DlockRows *rows, DlockRow *row);
extern int64 dlock_token_floor(void);
extern bool dlock_row_exclusive_only(const DlockRows *rows, const DlockRow *row);
extern void dlock_row_set_exclusive_only(const DlockRows *rows, DlockRow *row, bool value);

/* token.c: how fencing tokens and owner tokens are made, for every kind */
extern int32 dlock_token_timeline(void);
extern int64 dlock_first_token(int64 floor, int32 timeline);
extern int64 dlock_next_token(int64 token, int32 grant_timeline, int64 grant_system,
							  int32 timeline);
extern pg_uuid_t *dlock_new_owner_token(void);

/* durability.c */
extern void dlock_require_durable_commit(void);
extern void dlock_allow_async_release(bool had_xid_before);
extern void dlock_durability_xact_end(XactEvent event);

/* wait.c */

/* What a release needs to grant the lease to a waiter (dlock_wait_offer_head) */
typedef struct DlockHandoff
{
	pg_uuid_t	owner;
	int64		ttl_usecs;
	int			holder_len;		/* -1: no holder */
	char		holder[DLOCK_MAX_HOLDER_CHARS * MAX_MULTIBYTE_CHAR_LEN];
} DlockHandoff;

extern void dlock_wait_prepare(text *lock_name, int64 wait_usecs, const pg_uuid_t *owner,
							   int64 ttl_usecs, text *holder);
extern bool dlock_wait_queued_ahead(text *lock_name);
extern int64 dlock_usecs_since(instr_time started);
extern TimestampTz dlock_wait_deadline(int64 wait_usecs);
extern bool dlock_wait_turn(TimestampTz busy_until, int64 remaining_usecs);
extern TransactionId dlock_wait_offer(void);
extern void dlock_wait_offered_lease(int64 *token, TimestampTz *until);
extern void dlock_wait_offer_settled(void);
extern void dlock_wait_finish(bool acquired, TimestampTz lease_until, int64 waited_usecs,
							  TransactionId handed_by);
extern void dlock_wait_leave(void);
extern void dlock_wake_waiters(text *lock_name);
extern void dlock_hand_off_at_commit(text *lock_name);
extern bool dlock_wait_offer_head(text *lock_name, int64 token, TimestampTz now,
								  DlockHandoff *to);
extern bool dlock_wait_abandoned(text *lock_name, TransactionId xmin, const pg_uuid_t *owner);
extern text *dlock_wait_next_handoff(int *cursor);
extern void dlock_wake_waiters_now(const char *name, int len);
extern Size dlock_wait_shmem_size(void);
extern void dlock_wait_shmem_init(void);
extern void dlock_wait_xact_end(XactEvent event);
extern void dlock_wait_subxact_end(SubXactEvent event);

/* holds.c */
extern int	dlock_max_pin_ms;
extern void dlock_holds_init(void);
extern void dlock_holds_xact_end(XactEvent event);
extern bool dlock_pin_lease(text *lock_name, int64 token);

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
	NUM_DLOCK_COUNTERS
} DlockCounter;

extern void dlock_count(DlockCounter counter, uint64 amount);
extern void dlock_stats_reset_counters(void);
extern Size dlock_stats_shmem_size(void);
extern void dlock_stats_shmem_init(void);

/* report.c: what every lease change of any kind reports */
extern void dlock_report_audit(const char *event, text *lock_name, int64 token,
							   bool token_isnull, text *holder, const char *reason);
extern void dlock_report_grant(text *lock_name, DlockCounter kind_counter, bool taken_over,
							   int64 token, text *holder, TimestampTz lease_until);
extern void dlock_report_end(text *lock_name, const char *event, DlockCounter counter,
							 DlockAuditLevel audit_from, const char *reason,
							 int64 token, bool token_isnull, text *holder);
extern void dlock_report_ended_rows(text *lock_name, const char *event, DlockCounter counter,
									DlockAuditLevel audit_from, const char *reason);

/* lease.c */
extern void dlock_hand_off(text *lock_name);


/* holder_lease.c: shared leases and semaphore permits */
typedef enum DlockExclusiveCheck
{
	EXCLUSIVE_ALLOWED,			/* no live holder: grant, tokens above theirs */
	EXCLUSIVE_BUSY,				/* a live shared lease or permit */
	EXCLUSIVE_RETRY				/* waited for a holder's transaction: read again */
} DlockExclusiveCheck;

extern DlockExclusiveCheck dlock_holders_allow_exclusive(text *lock_name, TimestampTz deadline,
														 TimestampTz *busy_until,
														 int64 *holder_token);
extern void dlock_holders_attempt_done(bool acquired);
extern bool dlock_holder_change(text *lock_name, pg_uuid_t *owner, int64 ttl_usecs,
								TimestampTz *lease_until);
extern bool dlock_holder_holds(text *lock_name, int64 token);

/* pg_dlock.c */
extern bool dlock_shmem_ready;

/* lease_policy.c: lease policies (README "Lease policies") */
typedef struct DlockLeasePolicy
{
	bool		session_bound;
	int64		max_hold_usecs; /* 0: none */
	int64		min_hold_usecs; /* 0: none */
	int64		lock_delay_usecs;	/* 0: none */
} DlockLeasePolicy;

/* What the policies need of a lease row */
typedef struct DlockPolicyRow
{
	bool		has_owner;
	TimestampTz lease_until;	/* 0: NULL */
	bool		session_bound;
	int64		session_id;
	TimestampTz hold_limit;		/* 0: none */
	TimestampTz min_hold_until; /* 0: none */
	int64		lock_delay_usecs;
	TimestampTz not_before;		/* 0: none */
} DlockPolicyRow;

/* The decision on a lease row at one clock reading */
typedef struct DlockPolicyView
{
	bool		live;			/* its owner may renew or release it */
	bool		expired;		/* lost: lease_until passed without release */
	bool		session_ended;	/* lost: its session ended first */
	bool		hold_reached;	/* live, but max_hold refuses renewals */
	bool		hold_ended;		/* expired at its hold_limit (max_hold) */
	TimestampTz available_at;	/* no new owner before; 0: available now */
} DlockPolicyView;

extern int	dlock_max_hold_ms;
extern int	dlock_lock_delay_ms;
extern int	dlock_max_lock_delay_ms;
extern void dlock_policy_init(void);
extern Size dlock_policy_shmem_size(void);
extern void dlock_policy_shmem_init(void);
extern void dlock_policy_stats_reset(void);
extern void dlock_policy_args(FunctionCallInfo fcinfo, int64 ttl_usecs, DlockLeasePolicy *policy);
extern void dlock_policy_decide(const DlockPolicyRow *pr, TimestampTz now, DlockPolicyView *view);
extern void dlock_policy_view(DlockRows *rows, DlockRow *row, TimestampTz now, DlockPolicyView *view);
extern void dlock_policy_grant(DlockRows *rows, DlockRow *row, text *lock_name,
							   const DlockLeasePolicy *policy, TimestampTz now,
							   const DlockPolicyView *previous);
extern void dlock_policy_check_retry(DlockRows *rows, DlockRow *row, text *lock_name,
									 const DlockLeasePolicy *policy);
extern bool dlock_policy_may_change(DlockRows *rows, DlockRow *row, TimestampTz now, int64 ttl_usecs);
extern void dlock_policy_change(DlockRows *rows, DlockRow *row, TimestampTz now, int64 ttl_usecs);
extern TimestampTz dlock_policy_lease_until(DlockRows *rows, DlockRow *row, TimestampTz now,
											int64 ttl_usecs);
extern void dlock_policy_forced(text *lock_name);
extern bool dlock_policy_present(void);

/* session_lease.c: identity of the session a session-bound lease ends with */
extern Size dlock_session_shmem_size(void);
extern void dlock_session_shmem_init(void);
extern void dlock_session_check_usable(void);
extern int64 dlock_session_bind(text *lock_name);
extern bool dlock_session_ended(int64 session_id, TimestampTz *ended_at);

/* events.c: lock events (README "Lock events and leader election") */
#define DLOCK_EVENT_CHANNEL "dlock_events"
extern bool dlock_events_enabled;
extern void dlock_event(const char *event, text *lock_name, int64 token,
						text *holder, TimestampTz lease_until);
extern void dlock_events_init(void);
extern TimestampTz dlock_events_xact_end(XactEvent event);
extern void dlock_events_subxact_end(SubXactEvent event);

/* event_queue.c: hands committed events to a sender per database */
extern bool dlock_event_queue_ready(void);
extern int64 dlock_event_queue_reserve(const char *payloads, Size len, int nevents);
extern void dlock_event_queue_finish(int64 pos, bool committed);
extern void dlock_event_queue_init(void);

/* expiry_worker.c */
extern void dlock_expiry_worker_schedule(TimestampTz lease_until);
extern void dlock_expiry_worker_init(void);

#endif							/* PG_DLOCK_H */
