/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The extension's tables and lock tags, found and cached (catalog.c).
 *
 * IDENTIFICATION
 *	  extension/catalog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_CATALOG_H
#define DLOCK_CATALOG_H

#include "dlock.h"

/*
 * Columns of dlock.distributed_lock added after 1.0, found by name so their
 * position does not matter; InvalidAttrNumber where the installed version
 * has none.
 */
typedef struct DlockLockColumns
{
	AttrNumber	grant_system;	/* 1.1 on */
	AttrNumber	exclusive_only; /* 1.2 on, and the lease policies' below */
	AttrNumber	session_pid;
	AttrNumber	session_id;
	AttrNumber	hold_limit;
	AttrNumber	min_hold_until;
	AttrNumber	lock_delay;
	AttrNumber	not_before;
	bool		policies;		/* all of the lease policies' columns are there */
} DlockLockColumns;

/*
 * The lease policies' columns of dlock.lock_holder (1.6 on, the same names
 * and meaning as the lock table's); InvalidAttrNumber before.
 */
typedef struct DlockHolderColumns
{
	AttrNumber	hold_limit;
	AttrNumber	min_hold_until;
	AttrNumber	lock_delay;
	AttrNumber	not_before;
	bool		policies;		/* all of them are there */
} DlockHolderColumns;

/* catalog.c: the extension's tables, found from the extension and cached */
typedef struct DlockCatalog
{
	Oid			extension;
	Oid			owner;			/* the extension's owner */
	Oid			lock_table;		/* dlock.distributed_lock */
	Oid			lock_index;		/* its primary key */
	Oid			floor_table;	/* dlock.token_floor */
	Oid			holder_table;	/* dlock.lock_holder; InvalidOid before 1.2 */
	Oid			counter_table;	/* dlock.holder_counter; InvalidOid before 1.2 */
	Oid			epoch_table;	/* dlock.token_epoch; InvalidOid before 1.4 */
	Oid			expiry_reported_table;	/* InvalidOid before 1.1 */
	Oid			holder_expiry_reported_table;	/* InvalidOid before 1.4 */
	DlockLockColumns columns;	/* of lock_table */
	DlockHolderColumns holder_columns;	/* of holder_table */
	uint32		generation;		/* counts lookups: row locations cached
								 * under an older one are stale */
} DlockCatalog;

extern const DlockCatalog *dlock_catalog(void);

/*
 * Of the two forms of a statement over dlock.lock_holder, the one for the
 * installed table: with the lease policies' columns (1.6 on) or without.
 */
#define dlock_holder_statement(with_policies, without) \
	(dlock_catalog()->holder_columns.policies ? (with_policies) : (without))
extern bool dlock_floor_lock_shared(void);
extern bool dlock_floor_lock_exclusive(void);
extern bool dlock_new_name_lock(uint64 hash, bool wait);
extern void dlock_new_name_unlock(uint64 hash);
extern Relation dlock_table_open(Oid relid, LOCKMODE mode);
extern LockAcquireResult dlock_kind_lock(text *lock_name, LOCKMODE mode, bool wait);
extern void dlock_kind_unlock(text *lock_name, LOCKMODE mode);

#endif							/* DLOCK_CATALOG_H */
