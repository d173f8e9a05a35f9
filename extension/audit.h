/*-------------------------------------------------------------------------
 *
 * audit.h
 *	  Audit records (audit.c).
 *
 * IDENTIFICATION
 *	  extension/audit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_AUDIT_H
#define DLOCK_AUDIT_H

#include "dlock.h"

/* audit.c */
extern void dlock_audit(const char *event, text *lock_name, Datum fencing_token,
						bool token_isnull, text *holder, const char *reason);

#endif							/* DLOCK_AUDIT_H */
