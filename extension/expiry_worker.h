/*-------------------------------------------------------------------------
 *
 * expiry_worker.h
 *	  The expiry worker (expiry_worker.c).
 *
 * IDENTIFICATION
 *	  extension/expiry_worker.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_EXPIRY_WORKER_H
#define DLOCK_EXPIRY_WORKER_H

#include "dlock.h"

/* expiry_worker.c */
extern void dlock_expiry_worker_schedule(TimestampTz lease_until);
extern void dlock_expiry_worker_init(void);

#endif							/* DLOCK_EXPIRY_WORKER_H */
