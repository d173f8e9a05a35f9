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

/* lease.c */
extern void dlock_hand_off(text *lock_name);

#endif							/* DLOCK_LEASE_H */
