/*-------------------------------------------------------------------------
 *
 * session_lease.h
 *	  The sessions session-bound leases end with (session_lease.c).
 *
 * IDENTIFICATION
 *	  extension/session_lease.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_SESSION_LEASE_H
#define DLOCK_SESSION_LEASE_H

#include "dlock.h"

/* session_lease.c: identity of the session a session-bound lease ends with */
extern Size dlock_session_shmem_size(void);
extern void dlock_session_shmem_init(void);
extern void dlock_session_check_usable(void);
extern int64 dlock_session_bind(text *lock_name);
extern bool dlock_session_ended(int64 session_id, TimestampTz *ended_at);

#endif							/* DLOCK_SESSION_LEASE_H */
