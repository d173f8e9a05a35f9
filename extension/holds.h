/*-------------------------------------------------------------------------
 *
 * holds.h
 *	  Checking and pinning a lease (holds.c).
 *
 * IDENTIFICATION
 *	  extension/holds.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_HOLDS_H
#define DLOCK_HOLDS_H

#include "dlock.h"

/* holds.c */
extern int	dlock_max_pin_ms;
extern void dlock_holds_init(void);
extern void dlock_holds_xact_end(XactEvent event);
extern bool dlock_pin_lease(text *lock_name, int64 token);

#endif							/* DLOCK_HOLDS_H */
