/*-------------------------------------------------------------------------
 *
 * lock_row.h
 *	  One row of dlock.distributed_lock, without the executor (lock_row.c).
 *
 * IDENTIFICATION
 *	  extension/lock_row.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_LOCK_ROW_H
#define DLOCK_LOCK_ROW_H

#include "dlock.h"
#include "catalog.h"

/* lock_row.c: one row of dlock.distributed_lock, without the executor */
/* columns of dlock.distributed_lock in 1.0; 1.1 adds grant_system */
#define DLOCK_LOCK_NATTS 12
/*
 * attribute numbers of the 1.0 columns of dlock.distributed_lock
 * (sql/pg_dlock--1.0.sql); later ones are found by name (DlockLockColumns)
 */
#define Anum_lock_name			1
#define Anum_owner_token		2
#define Anum_fencing_seq		3
#define Anum_lease_until		4
#define Anum_updated_at			5
#define Anum_acquired_at		6
#define Anum_holder				7
#define Anum_renewals			8
#define Anum_acquisitions		9
#define Anum_takeovers			10
#define Anum_taken_over			11
#define Anum_grant_timeline		12

typedef struct DlockRows
{
	Relation	rel;
	Relation	index;
	int			natts;
	uint32		generation;		/* of the catalog the relations came from */
	DlockLockColumns columns;	/* its later columns, as the catalog found them */
} DlockRows;

typedef struct DlockRow
{
	ItemPointerData tid;
	TransactionId xmin;			/* of the version read */
	Datum	   *values;			/* indexed by attribute number - 1 */
	bool	   *nulls;
} DlockRow;

typedef enum DlockRowLock
{
	ROW_LOCKED,					/* locked: the version read is the newest */
	ROW_CHANGED,				/* a newer version exists: read again */
	ROW_BLOCKED					/* another transaction holds it: wait, read again */
} DlockRowLock;

extern void dlock_rows_open(DlockRows *rows);
extern void dlock_rows_close(DlockRows *rows);
extern bool dlock_row_read(DlockRows *rows, text *lock_name, DlockRow *row);
extern DlockRowLock dlock_row_lock(DlockRows *rows, DlockRow *row, LockTupleMode mode);
extern bool dlock_row_wait(DlockRows *rows, DlockRow *row, TimestampTz deadline);
extern void dlock_tuple_copy_values(HeapTuple tuple, TupleDesc desc, Datum **values,
									bool **nulls);
extern DlockRowLock dlock_tuple_lock(Relation rel, ItemPointer tid, LockTupleMode mode);
extern void dlock_tuple_update(Relation rel, ItemPointer tid, HeapTuple tuple);
extern bool dlock_tuple_wait(Relation rel, ItemPointer tid, TimestampTz deadline);
extern bool dlock_xact_wait(TransactionId xid, TimestampTz deadline);
extern void dlock_row_update(DlockRows *rows, DlockRow *row);
extern DlockRowLock dlock_row_write_decided(DlockRows *rows, DlockRow *row);
extern void dlock_row_insert(DlockRows *rows, DlockRow *row);
extern int64 dlock_token_floor(void);
extern int64 dlock_floor_next_token(int32 history);
extern bool dlock_floor_has_history(void);
extern bool dlock_row_exclusive_only(const DlockRows *rows, const DlockRow *row);
extern void dlock_row_set_exclusive_only(const DlockRows *rows, DlockRow *row, bool value);

#endif							/* DLOCK_LOCK_ROW_H */
