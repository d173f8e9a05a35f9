/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The extension's own objects, found once per backend and cached.
 *
 * The hot path reaches dlock.distributed_lock and dlock.token_floor through
 * the table access routines, so it needs their OIDs. They are found from
 * the extension itself -- the relations that pg_depend records as members
 * of pg_dlock -- never by a schema-qualified name, which another role could
 * shadow. The cache is dropped on any relcache invalidation of a cached
 * relation (DROP EXTENSION, ALTER TABLE, a rename), and on a full reset.
 *
 * The file also defines pg_dlock's internal heavyweight locks. They use
 * advisory lock tags with a fourth field no SQL function produces
 * (pg_advisory_lock and friends use 1 and 2), so no SQL caller can take or
 * release them.
 *
 * IDENTIFICATION
 *	  extension/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class_d.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lock.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "dlock.h"
#include "args.h"
#include "catalog.h"
#include "lock_row.h"

/* Fourth field of pg_dlock's advisory lock tags */
#define DLOCK_LOCKTAG_FLOOR		0x6401
#define DLOCK_LOCKTAG_NEW_NAME	0x6402
#define DLOCK_LOCKTAG_KIND		0x6403

static DlockCatalog catalog = {.generation = 0};
static bool catalog_valid = false;
static bool callback_registered = false;

static void
catalog_invalidate(Datum arg, Oid relid)
{
	if (!catalog_valid)
		return;
	if (relid == InvalidOid || relid == catalog.lock_table ||
		relid == catalog.lock_index || relid == catalog.floor_table ||
		(OidIsValid(catalog.holder_table) && relid == catalog.holder_table) ||
		(OidIsValid(catalog.counter_table) && relid == catalog.counter_table))
		catalog_valid = false;
}

/*
 * Owner and schema of extension extoid (pg_extension has no syscache).
 */
static void
extension_owner_schema(Oid extoid, Oid *owner, Oid *schema)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	*owner = *schema = InvalidOid;
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		*owner = ((Form_pg_extension) GETSTRUCT(tuple))->extowner;
		*schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * The member table of extension extoid named relname, or InvalidOid.
 */
static Oid
member_table(Oid extoid, Oid schema, const char *relname)
{
	Relation	rel = table_open(DependRelationId, AccessShareLock);
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			found = InvalidOid;

	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ExtensionRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, DependReferenceIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tuple);

		if (dep->classid == RelationRelationId &&
			dep->deptype == DEPENDENCY_EXTENSION &&
			get_rel_relkind(dep->objid) == RELKIND_RELATION &&
			get_rel_namespace(dep->objid) == schema)
		{
			char	   *name = get_rel_name(dep->objid);

			if (name != NULL && strcmp(name, relname) == 0)
			{
				found = dep->objid;
				break;
			}
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

static void
catalog_missing(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("extension \"pg_dlock\" is not installed correctly"),
			 errdetail("Its member %s was not found.", what),
			 errhint("Run ALTER EXTENSION pg_dlock UPDATE, or reinstall the extension.")));
}

/*
 * The one lookup of the lock table's later columns, made with the catalog.
 */
static void
find_lock_columns(Oid relid, DlockLockColumns *columns)
{
	columns->grant_system = get_attnum(relid, "grant_system");
	columns->exclusive_only = get_attnum(relid, "exclusive_only");
	columns->session_pid = get_attnum(relid, "session_pid");
	columns->session_id = get_attnum(relid, "session_id");
	columns->hold_limit = get_attnum(relid, "hold_limit");
	columns->min_hold_until = get_attnum(relid, "min_hold_until");
	columns->lock_delay = get_attnum(relid, "lock_delay");
	columns->not_before = get_attnum(relid, "not_before");
	columns->policies = columns->session_pid > 0 && columns->session_id > 0 &&
		columns->hold_limit > 0 && columns->min_hold_until > 0 &&
		columns->lock_delay > 0 && columns->not_before > 0;
}

/*
 * The one lookup of the holder table's policy columns.
 */
static void
find_holder_columns(Oid relid, DlockHolderColumns *columns)
{
	memset(columns, 0, sizeof(*columns));
	if (!OidIsValid(relid))
		return;
	columns->hold_limit = get_attnum(relid, "hold_limit");
	columns->min_hold_until = get_attnum(relid, "min_hold_until");
	columns->lock_delay = get_attnum(relid, "lock_delay");
	columns->not_before = get_attnum(relid, "not_before");
	columns->policies = columns->hold_limit > 0 && columns->min_hold_until > 0 &&
		columns->lock_delay > 0 && columns->not_before > 0;
}

/*
 * The cached OIDs, looked up when the cache is empty.
 */
const DlockCatalog *
dlock_catalog(void)
{
	Oid			extoid;
	Oid			schema;
	Relation	rel;

	if (catalog_valid)
		return &catalog;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(catalog_invalidate, (Datum) 0);
		callback_registered = true;
	}

	extoid = get_extension_oid("pg_dlock", true);
	if (!OidIsValid(extoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"pg_dlock\" is not installed in this database")));
	catalog.extension = extoid;
	extension_owner_schema(extoid, &catalog.owner, &schema);
	catalog.lock_table = member_table(extoid, schema, "distributed_lock");
	catalog.floor_table = member_table(extoid, schema, "token_floor");
	/* from 1.2 on; a database not yet updated has exclusive leases only */
	catalog.holder_table = member_table(extoid, schema, "lock_holder");
	catalog.counter_table = member_table(extoid, schema, "holder_counter");
	/* from 1.4 on; before it, grant_timeline holds the timeline ID alone */
	catalog.epoch_table = member_table(extoid, schema, "token_epoch");
	/* the expiry worker's records of what it reported (1.1 on, slots 1.4 on) */
	catalog.expiry_reported_table = member_table(extoid, schema, "expiry_reported");
	catalog.holder_expiry_reported_table = member_table(extoid, schema, "holder_expiry_reported");
	if (!OidIsValid(catalog.lock_table))
		catalog_missing("table \"distributed_lock\"");
	if (!OidIsValid(catalog.floor_table))
		catalog_missing("table \"token_floor\"");

	rel = try_table_open(catalog.lock_table, AccessShareLock);
	if (rel == NULL)
	{
		/* dropped while we waited for its lock: look the extension up again */
		return dlock_catalog();
	}
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		RelationGetDescr(rel)->natts < DLOCK_LOCK_NATTS)
		catalog_missing("table \"distributed_lock\" as a heap table with its columns");
	catalog.lock_index = dlock_primary_key_index(rel);
	if (OidIsValid(catalog.lock_index) && list_length(RelationGetIndexList(rel)) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" must have no index but its primary key",
						RelationGetRelationName(rel)),
				 errhint("Drop the index that was added to it.")));
	table_close(rel, AccessShareLock);
	if (!OidIsValid(catalog.lock_index))
		catalog_missing("primary key of \"distributed_lock\"");
	find_lock_columns(catalog.lock_table, &catalog.columns);
	find_holder_columns(catalog.holder_table, &catalog.holder_columns);
	catalog.generation++;

	catalog_valid = true;
	return &catalog;
}

/*
 * Open one of the extension's tables by the OID the catalog found. The OID
 * is stale when a DROP EXTENSION committed while this backend waited for
 * the table's lock (the wait took in its invalidation): then the extension
 * is looked up again, which reports it gone (55000), rather than failing on
 * the dropped OID with an internal error.
 */
Relation
dlock_table_open(Oid relid, LOCKMODE mode)
{
	Relation	rel = try_table_open(relid, mode);

	if (rel == NULL)
	{
		(void) dlock_catalog();
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a table of extension \"pg_dlock\" was dropped while this call waited for it"),
				 errhint("Call it again.")));
	}
	return rel;
}

/*
 * Take the token floor lock in "mode" for the rest of the transaction; with
 * wait false, return false at once if another transaction holds it in a
 * conflicting mode.
 */
static bool
floor_lock(LOCKMODE mode, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, dlock_catalog()->extension, 0,
						 DLOCK_LOCKTAG_FLOOR);
	return LockAcquire(&tag, mode, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Shared mode: held by a transaction that creates a lock name from the
 * floor it read, until it ends. Never waits.
 */
bool
dlock_floor_lock_shared(void)
{
	return floor_lock(ShareLock, false);
}

/*
 * Exclusive mode: held by dlock.reap while it deletes rows and raises the
 * floor, so that no name is created from the floor it is about to raise.
 * Never waits.
 */
bool
dlock_floor_lock_exclusive(void)
{
	return floor_lock(ExclusiveLock, false);
}

/*
 * Lock the creation of a lock name whose 64-bit hash is "hash" for the rest
 * of the transaction. With wait false, return false at once if another
 * transaction is creating a name with that hash.
 */
static void
new_name_locktag(LOCKTAG *tag, uint64 hash)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 DLOCK_LOCKTAG_NEW_NAME);
}

bool
dlock_new_name_lock(uint64 hash, bool wait)
{
	LOCKTAG		tag;

	new_name_locktag(&tag, hash);
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Give the new-name lock back when no name was created under it.
 */
void
dlock_new_name_unlock(uint64 hash)
{
	LOCKTAG		tag;

	new_name_locktag(&tag, hash);
	(void) LockRelease(&tag, ExclusiveLock, false);
}

/*
 * The kind lock of a name orders grants of different kinds (holder_lease.c):
 * a shared lease or permit is granted under it in ShareLock, an exclusive
 * lease in ExclusiveLock, each kept to the end of the granting transaction.
 * Names are told apart by a 64-bit hash; two names that collide only share
 * the lock, which costs waiting, never correctness.
 */
static void
kind_locktag(LOCKTAG *tag, text *lock_name)
{
	uint64		hash = dlock_name_hash(VARDATA_ANY(lock_name), VARSIZE_ANY_EXHDR(lock_name));

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 DLOCK_LOCKTAG_KIND);
}

/*
 * Take lock_name's kind lock in "mode" for the rest of the transaction;
 * with wait false, LOCKACQUIRE_NOT_AVAIL when another transaction holds it
 * in a conflicting mode.
 */
LockAcquireResult
dlock_kind_lock(text *lock_name, LOCKMODE mode, bool wait)
{
	LOCKTAG		tag;

	kind_locktag(&tag, lock_name);
	return LockAcquire(&tag, mode, false, !wait);
}

/*
 * Give back a kind lock taken by a refused attempt.
 */
void
dlock_kind_unlock(text *lock_name, LOCKMODE mode)
{
	LOCKTAG		tag;

	kind_locktag(&tag, lock_name);
	(void) LockRelease(&tag, mode, false);
}
