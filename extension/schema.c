/*-------------------------------------------------------------------------
 *
 * schema.c
 *	  Making sure "dlock" means the extension's own schema.
 *
 * The SPI statements name their tables "dlock.<table>" and run as the
 * extension owner (SECURITY DEFINER). Were the extension's schema renamed
 * and another schema created under the name "dlock", those statements would
 * read and write the other schema's look-alike tables and fire its triggers
 * with the owner's rights. Before a statement runs, dlock_require_own_schema
 * checks that the name resolves to the schema recorded for the extension in
 * pg_extension. The install script refuses a "dlock" schema owned by a role
 * other than the extension owner or a superuser (sql/pg_dlock--1.0--1.1.sql).
 *
 * IDENTIFICATION
 *	  extension/schema.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "dlock.h"
#include "schema.h"

/* The extension's schema as last verified in this backend */
static Oid	verified_schema = InvalidOid;

/*
 * The schema recorded in pg_extension for pg_dlock, or InvalidOid when the
 * extension is not installed in this database.
 */
static Oid
extension_schema(void)
{
	Oid			extension = get_extension_oid("pg_dlock", true);
	Oid			schema = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	if (!OidIsValid(extension))
		return InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extension));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return schema;
}

/*
 * The OID of the extension's schema. Raises an error unless the name
 * "dlock" resolves to it, so that statements naming "dlock.<object>" can
 * only reach the extension's own objects.
 */
Oid
dlock_require_own_schema(void)
{
	Oid			named = get_namespace_oid("dlock", true);
	Oid			own;

	/* common case: one syscache lookup */
	if (OidIsValid(named) && named == verified_schema)
		return named;

	own = extension_schema();
	if (!OidIsValid(own) || named != own)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("schema \"dlock\" is not the schema of extension \"pg_dlock\""),
				 errdetail("The extension's schema was renamed, and pg_dlock does not run its statements against another schema of that name."),
				 errhint("Rename the extension's schema back to \"dlock\", or drop and create the extension again.")));
	verified_schema = own;
	return own;
}

/*
 * The OID of the extension's own function "name"(argtypes), found in its
 * schema rather than by a name another role could shadow. With
 * any_schema_name the schema is the extension's whatever it is called now
 * (for callers that, like the lease functions, find their objects by OID);
 * otherwise it must still be called "dlock".
 */
Oid
dlock_own_function(const char *name, int nargs, const Oid *argtypes, bool any_schema_name)
{
	Oid			schema_oid = any_schema_name ? extension_schema() : dlock_require_own_schema();
	char	   *schema;

	if (!OidIsValid(schema_oid))
		elog(ERROR, "pg_dlock: extension \"pg_dlock\" is not installed in this database");
	schema = get_namespace_name(schema_oid);
	return LookupFuncName(list_make2(makeString(schema), makeString(pstrdup(name))),
						  nargs, argtypes, false);
}
