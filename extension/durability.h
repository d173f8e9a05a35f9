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
extern bool dlock_fenced_available;
extern bool dlock_grants_fenced(void);
extern bool dlock_lease_writes_only(void);
extern void dlock_lease_written(bool writes_only_before, bool needs_flush);
extern void dlock_durability_xact_end(XactEvent event);

#endif							/* DLOCK_DURABILITY_H */
