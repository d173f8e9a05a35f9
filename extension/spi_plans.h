/*-------------------------------------------------------------------------
 *
 * spi_plans.h
 *	  The one executor of the SQL pg_dlock runs (spi_plans.c).
 *
 * IDENTIFICATION
 *	  extension/spi_plans.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_SPI_PLANS_H
#define DLOCK_SPI_PLANS_H

#include "dlock.h"

/* spi_plans.c: prepared statements kept for the life of the backend */
typedef enum DlockPlanId
{
	PLAN_FLOOR_COMPACT,
	PLAN_FENCE,
	PLAN_FENCE_CURRENT,
	PLAN_FORCE_RELEASE,
	PLAN_REAP,
	PLAN_PURGE_AUDIT,
	PLAN_PURGE_FENCE,
	PLAN_AUDIT,
	/* the expiry worker (expiry_worker.c); expiry_reported exists from 1.1 on */
	PLAN_EXPIRY_REPORT,
	PLAN_EXPIRY_FORGET,
	PLAN_EXPIRY_NEXT,
	PLAN_EXPIRY_FORGET_ONE,
	PLAN_WORKER_REAP,
	PLAN_WORKER_PURGE_AUDIT,
	PLAN_LEADER,
	/* from here on, statements on objects of 1.2: lock kinds (holder_lease.c) */
	PLAN_HOLDERS_CLEAR_EXPIRED,
	PLAN_HOLDERS_CLEAR_EXPIRED_UNPINNED,
	PLAN_HOLDER_OWN_LOCK,
	PLAN_NAME_AND_HOLDERS,
	PLAN_HOLDER_LOCK,
	PLAN_HOLDER_INSERT,
	PLAN_HOLDER_GRANT,
	PLAN_HOLDER_CHANGE,
	PLAN_HOLDER_PIN,
	PLAN_COUNTER_LOCK,
	PLAN_COUNTER_INSERT,
	PLAN_COUNTER_UPDATE,
	PLAN_SEMAPHORE_RESIZE,
	PLAN_SET_BUSY,
	PLAN_HOLDERS_FORCE_RELEASE,
	/* the lease policies' columns (1.2 on, admin.c) */
	PLAN_REAP_AVAILABLE,
	PLAN_LOCK_DELAY_FORCED,
	PLAN_FORCE_RELEASE_LIVE,
	PLAN_REAP_HOLDER_SLOTS,
	/* the token epoch (1.4 on, token_epoch.c) */
	PLAN_EPOCH_NEWEST,
	PLAN_EPOCH_RECORD,
	/* the expiry worker's statements on holder slots (1.4 on) */
	PLAN_HOLDER_EXPIRY_REPORT,
	PLAN_HOLDER_EXPIRY_FORGET,
	PLAN_HOLDER_EXPIRY_NEXT,
	NUM_DLOCK_PLANS
} DlockPlanId;

extern int	dlock_execute(DlockPlanId id, Datum *values, const char *nulls, long count);

/* Statements run between begin and end run as the extension owner (switched once) */
typedef struct DlockOwnerScope
{
	Oid			userid;
	int			sec_context;
	int			nestlevel;		/* -1: already the owner, nothing switched */
} DlockOwnerScope;

extern void dlock_owner_scope_begin(DlockOwnerScope *scope);
extern void dlock_owner_scope_end(DlockOwnerScope *scope);

#endif							/* DLOCK_SPI_PLANS_H */
