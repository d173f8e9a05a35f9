/*-------------------------------------------------------------------------
 *
 * args.h
 *	  Argument checks and the one time arithmetic (args.c).
 *
 * IDENTIFICATION
 *	  extension/args.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_ARGS_H
#define DLOCK_ARGS_H

#include "dlock.h"

/* args.c: argument checks; each raises a PostgreSQL-style error naming the argument */
extern text *dlock_arg_name(FunctionCallInfo fcinfo, int argno, const char *argname);
extern void dlock_require_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
extern int64 dlock_arg_ttl(FunctionCallInfo fcinfo, int argno);
extern uint64 dlock_name_hash(const char *name, int len);
extern int64 dlock_interval_usecs(const Interval *interval);
extern TimestampTz dlock_time_plus(TimestampTz t, int64 usecs);
extern void dlock_check_interval_end(int64 usecs, const char *argname, const Interval *given);
extern int64 dlock_arg_wait(FunctionCallInfo fcinfo, int argno);
extern char *dlock_arg_reason(FunctionCallInfo fcinfo, int argno);
extern text *dlock_arg_holder(FunctionCallInfo fcinfo, int argno);
extern pg_uuid_t *dlock_arg_owner_token(FunctionCallInfo fcinfo, int argno);

/* the one back-off of retry loops, and the bound of decision loops */
#define DLOCK_MAX_DECISION_ROUNDS 10000
extern bool dlock_retry_until(bool (*fn) (void *arg), void *arg, TimestampTz deadline);
extern void dlock_decision_round(int *rounds, text *lock_name);
extern void dlock_refuse_in_recovery(text *lock_name, const char *verb);

#endif							/* DLOCK_ARGS_H */
