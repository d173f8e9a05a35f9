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

#include "dlock.h"
#include "stats.h"

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
extern void dlock_wait_require_waitable(text *lock_name, int64 wait_usecs);
extern bool dlock_wait_turn(TimestampTz busy_until, int64 remaining_usecs);
extern TransactionId dlock_wait_offer(void);
extern void dlock_wait_offered_lease(int64 *token, TimestampTz *until);
extern void dlock_wait_offer_settled(void);
extern void dlock_wait_finish(bool acquired, DlockLeaseKind kind, TimestampTz lease_until,
							  int64 waited_usecs, TransactionId handed_by);
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

#endif							/* DLOCK_WAIT_H */
