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

/* What a release needs to grant the lease to a waiter (dlock_wait_offer_head) */
typedef struct DlockHandoff
{
	pg_uuid_t	owner;
	int64		ttl_usecs;
	bool		fenced;			/* the waiter grants under dlock.durability = fenced */
	int			holder_len;		/* -1: no holder */
	char		holder[DLOCK_MAX_HOLDER_CHARS * MAX_MULTIBYTE_CHAR_LEN];
} DlockHandoff;

/*
 * One acquire call of any kind, as the shared wait loop
 * (dlock_wait_for_grant) runs it; the callbacks get arg.
 */
typedef struct DlockWaitCall
{
	text	   *lock_name;
	int64		wait_usecs;
	DlockLeaseKind kind;
	/* what a release needs to hand this caller the lease; owner NULL: never */
	const pg_uuid_t *owner;
	int64		ttl_usecs;
	text	   *holder;
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
