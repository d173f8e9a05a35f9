/*-------------------------------------------------------------------------
 *
 * token_epoch.h
 *	  The token epoch that keeps lost grants' tokens unique (token_epoch.c).
 *
 * IDENTIFICATION
 *	  extension/token_epoch.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_TOKEN_EPOCH_H
#define DLOCK_TOKEN_EPOCH_H

#include "access/xact.h"

#include "dlock.h"

/* How a grant commits, decided before it writes (token_epoch.c) */
typedef struct DlockGrantCommit
{
	bool		fenced;			/* without the WAL flush (dlock.durability) */
	bool		writes_only;	/* nothing but lease changes written before */
	int32		history;		/* history position of its token (token.c) */
} DlockGrantCommit;

/* token_epoch.c */
extern Size dlock_epoch_shmem_size(void);
extern void dlock_epoch_shmem_init(void);
extern int32 dlock_history_now(void);
extern int32 dlock_history_for_carry_over(void);
extern void dlock_epoch_carry_over(int32 history);
extern void dlock_grant_prepare(DlockGrantCommit *commit);
extern void dlock_grant_prepare_durable(DlockGrantCommit *commit);
extern void dlock_grant_written(const DlockGrantCommit *commit);
extern void dlock_epoch_xact_end(XactEvent event);
extern void dlock_epoch_subxact_end(SubXactEvent event, SubTransactionId subxid);

#endif							/* DLOCK_TOKEN_EPOCH_H */
