/*-------------------------------------------------------------------------
 *
 * lease_policy.h
 *	  Lease policies: the decision on a lease row (lease_policy.c).
 *
 * IDENTIFICATION
 *	  extension/lease_policy.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_POLICY_H
#define DLOCK_LEASE_POLICY_H

#include "dlock.h"
#include "lock_row.h"

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
extern void dlock_policy_check_downgrade(DlockRows *rows, DlockRow *row, text *lock_name);
extern bool dlock_policy_may_change(DlockRows *rows, DlockRow *row, TimestampTz now, int64 ttl_usecs);
extern void dlock_policy_change(DlockRows *rows, DlockRow *row, TimestampTz now, int64 ttl_usecs);
extern TimestampTz dlock_policy_lease_until(DlockRows *rows, DlockRow *row, TimestampTz now,
											int64 ttl_usecs);
extern void dlock_policy_forced(text *lock_name);
extern void dlock_policy_grant_times(const DlockLeasePolicy *policy, TimestampTz now,
									 TimestampTz *hold_limit, TimestampTz *min_hold_until);
extern bool dlock_policy_may_change_row(const DlockPolicyRow *pr, TimestampTz now,
										int64 ttl_usecs);
extern TimestampTz dlock_policy_until_row(const DlockPolicyRow *pr, TimestampTz now,
										  int64 ttl_usecs);
extern void dlock_policy_count_renewal(TimestampTz until, TimestampTz since, TimestampTz now);
extern TimestampTz dlock_policy_released_not_before(const DlockPolicyRow *pr, TimestampTz now);

/*
 * The not_before a force release leaves on a lease row or holder slot
 * (alias): its lock delay from the moment it was forced away (NULL: none).
 */
#define DLOCK_FORCED_NOT_BEFORE_SQL(alias) \
	"pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) " alias ".lock_delay"

extern bool dlock_policy_present(void);

#endif							/* DLOCK_LEASE_POLICY_H */
