/* sql_edition/pg_dlock_sql--1.4--1.4.1.sql -- pg_dlock_sql 1.4 -> 1.4.1: the nil UUID names no lease */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.4.1'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * The C extension refuses the nil UUID only as the owner token of an acquire
 * (docs/reference.md: two clients that never set their token would share one
 * lease, so no lease ever has it). Given to renew, release, release_all or
 * downgrade it names no lease: NULL, false, 0 and NULL, as for any owner
 * without a lease. This edition raised 22023 from renew, release and
 * release_all. The SQL API is the C extension's 1.4; only this check changes.
 */

-- An owner token argument. required: the token of a lease the caller holds
-- (renew, release, release_all): NULL is refused (22004), any UUID is looked
-- up. Otherwise an acquire's token: NULL (the server makes one) or anything
-- but the nil UUID (22023).
CREATE OR REPLACE FUNCTION dlock._check_owner(owner_token uuid, required boolean)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF required THEN
		PERFORM dlock._not_null('owner_token', owner_token IS NULL);
	ELSIF owner_token = '00000000-0000-0000-0000-000000000000'::uuid THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = 'owner_token must not be the nil UUID',
			HINT = 'Pass NULL to have the server generate an owner token, or use a random (version 4) UUID.';
	END IF;
END
$$;
