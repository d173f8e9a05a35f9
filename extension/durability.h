/*-------------------------------------------------------------------------
 *
 * durability.h
 *	  How a transaction that changed a lease commits (durability.c).
 *
 * IDENTIFICATION
 *	  extension/durability.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_DURABILITY_H
#define DLOCK_DURABILITY_H

#include "dlock.h"

/* durability.c */
extern void dlock_require_durable_commit(void);
extern void dlock_allow_async_release(bool had_xid_before);
extern void dlock_durability_xact_end(XactEvent event);

#endif							/* DLOCK_DURABILITY_H */
