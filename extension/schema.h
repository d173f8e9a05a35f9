/*-------------------------------------------------------------------------
 *
 * schema.h
 *	  The extension's own schema and functions (schema.c).
 *
 * IDENTIFICATION
 *	  extension/schema.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_SCHEMA_H
#define DLOCK_SCHEMA_H

#include "dlock.h"

/* schema.c */
extern Oid	dlock_require_own_schema(void);
extern Oid	dlock_own_function(const char *name, int nargs, const Oid *argtypes,
							   bool any_schema_name);

#endif							/* DLOCK_SCHEMA_H */
