/*-------------------------------------------------------------------------
 *
 * token.h
 *	  How fencing tokens and owner tokens are made (token.c).
 *
 * IDENTIFICATION
 *	  extension/token.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_TOKEN_H
#define DLOCK_TOKEN_H

#include "dlock.h"

/* token.c: how fencing tokens and owner tokens are made, for every kind */
extern int32 dlock_token_timeline(void);
extern int32 dlock_token_history(int32 timeline, int32 epoch);
extern int64 dlock_token_rule(int64 token, int32 grant_history, int64 grant_system,
							  int32 history, int64 system);
extern int64 dlock_floor_token(int64 best_next);
extern int64 dlock_restore_shift(int32 lost_timelines, int64 highest);
extern int64 dlock_next_token(int64 token, int32 grant_history, int64 grant_system,
							  int32 history);
extern pg_uuid_t *dlock_new_owner_token(void);

#endif							/* DLOCK_TOKEN_H */
