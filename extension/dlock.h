/*-------------------------------------------------------------------------
 *
 * dlock.h
 *	  Declarations every pg_dlock file shares: its SQLSTATEs, limits and settings.
 *
 * IDENTIFICATION
 *	  extension/dlock.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_DLOCK_H
#define DLOCK_DLOCK_H

#include "postgres.h"

#include "access/xact.h"
#include "datatype/timestamp.h"
#include "mb/pg_wchar.h"
#include "nodes/lockoptions.h"
#include "portability/instr_time.h"
#include "storage/lock.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/uuid.h"

#include "pg_compat.h"

/*
 * SQLSTATE class "PD": pg_dlock's own conditions. The class is in the range
 * the SQL standard leaves to implementations (first character 5-9 or I-Z).
 */
#define ERRCODE_DLOCK_STALE_FENCING_TOKEN	MAKE_SQLSTATE('P','D','0','0','1')
#define ERRCODE_DLOCK_LOCK_NOT_HELD			MAKE_SQLSTATE('P','D','0','0','2')
/* lock kinds: the name is held in another kind than asked for */
#define ERRCODE_DLOCK_WRONG_KIND			MAKE_SQLSTATE('P','D','0','2','0')

/* Token layout: a generation above a per-name counter (token.c) */
#define DLOCK_COUNTER_BITS	40

/* Token epochs per timeline (token.c, token_epoch.c) */
#define DLOCK_EPOCHS	16384

/* Longest lock or resource name, in characters */
#define DLOCK_MAX_NAME_CHARS 200

/* Longest holder label, in characters (a host name of 255 and a process ID fit) */
#define DLOCK_MAX_HOLDER_CHARS 512

/* Settings (pg_dlock.c) */
typedef enum DlockAuditLevel
{
	DLOCK_AUDIT_NONE,
	DLOCK_AUDIT_FORCE,
	DLOCK_AUDIT_ALL
} DlockAuditLevel;

/* How a grant commits (durability.c, token_epoch.c) */
typedef enum DlockDurability
{
	DLOCK_DURABILITY_DURABLE,	/* the WAL flush before the grant returns */
	DLOCK_DURABILITY_FENCED		/* no flush; the token epoch keeps tokens unique */
} DlockDurability;

extern int	dlock_max_ttl_seconds;
extern int	dlock_audit_level;
extern bool dlock_test_ignore_timeline;
extern bool dlock_test_ignore_epoch;
extern bool dlock_test_handoff_past_size;
extern int	dlock_test_epoch_entries;
extern int	dlock_durability;

#endif							/* DLOCK_DLOCK_H */
