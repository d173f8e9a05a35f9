/*-------------------------------------------------------------------------
 *
 * wait.h
 *	  The wait queue of each lock name (wait.c).
 *
 * IDENTIFICATION
 *	  extension/wait.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_WAIT_H
#define DLOCK_WAIT_H

#include "utils/resowner.h"

#include "dlock.h"
#include "stats.h"

/* wait.c */

/*
 * What a release needs to grant a waiter its lease (dlock_wait_offer_head,
 * dlock_wait_hand_off_holders): the kind, and the arguments and lease
 * policies (lease_policy.c) the waiter's acquire call was made with.
 */
typedef struct DlockHandoff
{
	DlockLeaseKind kind;
	int32		permits;		/* LEASE_PERMIT: the semaphore's size */
	pg_uuid_t	owner;
	int64		ttl_usecs;
	int64		max_hold_usecs; /* 0: none */
	int64		min_hold_usecs; /* 0: none */
	int64		lock_delay_usecs;	/* 0: none */
	bool		fenced;			/* the waiter grants under dlock.durability = fenced */
	int			holder_len;		/* -1: no holder */
	char		holder[DLOCK_MAX_HOLDER_CHARS * MAX_MULTIBYTE_CHAR_LEN];
} DlockHandoff;

/*
 * A holder grant made by a release for a waiter (holder_lease.c): decides on
 * the name as it is, calls claim(claim_arg) once the grant is certain and
 * writes it only if that returns true; true when written, with its token and
 * expiry.
 */
typedef bool (*DlockHolderHandOff) (text *lock_name, const DlockHandoff *to,
									bool (*claim) (void *claim_arg), void *claim_arg,
									int64 *token, TimestampTz *until);

/*
 * One acquire call of any kind, as the shared wait loop
 * (dlock_wait_for_grant) runs it; the callbacks get arg.
 */
typedef struct DlockWaitCall
{
	text	   *lock_name;
	int64		wait_usecs;
	DlockLeaseKind kind;
	/* what a release needs to hand this caller the lease; NULL: never */
	const DlockHandoff *handoff;
	/* one attempt: true when granted; *busy_until when the lease in the way ends */
	bool		(*attempt) (void *arg, TimestampTz *busy_until);
	/* take the lease transaction offer handed over: false gives the wait up */
	bool		(*take_offer) (void *arg, TransactionId offer, bool *granted);
	/* when the granted lease ends, handed to the next waiter; NULL: say nothing */
	TimestampTz (*granted_until) (void *arg);
	void	   *arg;
} DlockWaitCall;

extern bool dlock_wait_for_grant(const DlockWaitCall *call);
extern bool dlock_wait_queued_ahead(text *lock_name);
extern TimestampTz dlock_wait_deadline(int64 wait_usecs);
extern void dlock_wait_require_waitable(text *lock_name, int64 wait_usecs);
extern void dlock_wait_offered_lease(int64 *token, TimestampTz *until);
extern void dlock_wait_offer_settled(void);
extern void dlock_wake_waiters(text *lock_name);
extern void dlock_hand_off_at_commit(text *lock_name);
extern bool dlock_wait_offer_head(text *lock_name, int64 token, TimestampTz now,
								  DlockHandoff *to);
extern void dlock_wait_handoff_of(DlockHandoff *to, DlockLeaseKind kind, int32 permits,
								  const pg_uuid_t *owner, int64 ttl_usecs, text *holder);
extern void dlock_wait_set_begin(void);
extern void dlock_wait_set_end(void);
extern bool dlock_wait_head_is_holder(text *lock_name);
extern int	dlock_wait_hand_off_holders(text *lock_name, DlockHolderHandOff grant);
extern int	dlock_wait_take_offer(TransactionId offer, TimestampTz deadline, int64 *token,
								  TimestampTz *until);
extern bool dlock_wait_abandoned(text *lock_name, TransactionId xmin, const pg_uuid_t *owner);
extern text *dlock_wait_next_handoff(int *cursor);
extern void dlock_wake_waiters_now(const char *name, int len);
extern Size dlock_wait_shmem_size(void);
extern void dlock_wait_shmem_init(void);
extern void dlock_wait_xact_end(XactEvent event);
extern void dlock_wait_subxact_end(SubXactEvent event);
extern void dlock_wait_resource_release(ResourceReleasePhase phase, bool isCommit,
										bool isTopLevel, void *arg);

#endif							/* DLOCK_WAIT_H */
