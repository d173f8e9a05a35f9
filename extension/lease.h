/*-------------------------------------------------------------------------
 *
 * lease.h
 *	  Exclusive leases (lease.c).
 *
 * IDENTIFICATION
 *	  extension/lease.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LEASE_H
#define DLOCK_LEASE_H

#include "dlock.h"
#include "lock_row.h"

/* lease.c */
extern void dlock_hand_off(text *lock_name);
extern bool dlock_lease_end_for_downgrade(text *lock_name, pg_uuid_t *owner, DlockRow *row);

#endif							/* DLOCK_LEASE_H */
