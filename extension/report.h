/*-------------------------------------------------------------------------
 *
 * report.h
 *	  What every lease change of any kind reports (report.c).
 *
 * IDENTIFICATION
 *	  extension/report.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_REPORT_H
#define DLOCK_REPORT_H

#include "dlock.h"
#include "stats.h"
#include "lock_row.h"

/* report.c: what every lease change of any kind reports */
extern void dlock_report_audit(const char *event, text *lock_name, int64 token,
							   bool token_isnull, text *holder, const char *reason);
extern void dlock_report_grant(text *lock_name, DlockCounter kind_counter, bool taken_over,
							   int64 token, text *holder, TimestampTz lease_until);
/* A lease that ended, as the reports need it */
typedef struct DlockEndedLease
{
	int64		token;
	bool		token_isnull;
	text	   *holder;			/* NULL when none */
	DlockLeaseKind kind;
	TimestampTz acquired_at;	/* 0: unknown, the hold is not timed */
} DlockEndedLease;

extern DlockEndedLease dlock_row_ended_lease(const DlockRow *row);
extern DlockEndedLease dlock_result_ended_lease(uint64 row, int token_col, int holder_col,
												int acquired_col, int kind_col);
extern void dlock_report_end(text *lock_name, const char *event, DlockCounter counter,
							 DlockAuditLevel audit_from, const char *reason,
							 const DlockEndedLease *lease);
extern void dlock_report_expiry(text *lock_name, const DlockEndedLease *lease,
								TimestampTz lease_until);
extern bool dlock_report_expiry_once(text *lock_name, int32 slot, const DlockEndedLease *lease,
									 TimestampTz lease_until, bool taken_over);
extern void dlock_report_renewal(text *lock_name, int64 token, text *holder);

#endif							/* DLOCK_REPORT_H */
