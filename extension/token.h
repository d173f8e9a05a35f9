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
extern int32 dlock_token_history(int32 epoch);
extern int64 dlock_first_token(int64 floor, int32 history);
extern int64 dlock_next_token(int64 token, int32 grant_history, int64 grant_system,
							  int32 history);
extern pg_uuid_t *dlock_new_owner_token(void);

#endif							/* DLOCK_TOKEN_H */
