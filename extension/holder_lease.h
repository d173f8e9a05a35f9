/*-------------------------------------------------------------------------
 *
 * holder_lease.h
 *	  Shared leases and semaphore permits (holder_lease.c).
 *
 * IDENTIFICATION
 *	  extension/holder_lease.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_HOLDER_LEASE_H
#define DLOCK_HOLDER_LEASE_H

#include "dlock.h"
#include "token_epoch.h"
#include "wait.h"

/* holder_lease.c: shared leases and semaphore permits */
typedef enum DlockExclusiveCheck
{
	EXCLUSIVE_ALLOWED,			/* no live holder: grant, tokens above theirs */
	EXCLUSIVE_BUSY,				/* a live shared lease or permit */
	EXCLUSIVE_RETRY				/* waited for a holder's transaction: read again */
} DlockExclusiveCheck;

extern DlockExclusiveCheck dlock_holders_allow_exclusive(text *lock_name, TimestampTz deadline,
														 int32 history,
														 TimestampTz *busy_until,
														 int64 *least_token);
extern void dlock_holders_attempt_done(bool acquired);
extern bool dlock_holder_hand_off(text *lock_name, const DlockHandoff *to,
								  bool (*claim) (void *claim_arg), void *claim_arg,
								  int64 *token, TimestampTz *until);
extern bool dlock_holders_busy(text *lock_name, TimestampTz now);
extern bool dlock_holder_change(text *lock_name, pg_uuid_t *owner, int64 ttl_usecs,
								TimestampTz *lease_until);
extern bool dlock_holder_holds(text *lock_name, int64 token);
extern void dlock_holder_downgrade_begin(text *lock_name);
extern void dlock_holder_downgrade_refused(text *lock_name);
extern HeapTuple dlock_holder_downgraded_lease(text *lock_name, pg_uuid_t *owner,
												TupleDesc tupdesc, MemoryContext cxt);
extern HeapTuple dlock_holder_grant_downgraded(text *lock_name, pg_uuid_t *owner, text *holder,
												TimestampTz until,
												const DlockGrantCommit *commit,
												TupleDesc tupdesc, MemoryContext cxt);

#endif							/* DLOCK_HOLDER_LEASE_H */
