/* sql/pg_dlock--1.0--1.1.sql -- pg_dlock 1.0 to 1.1 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.1'" to load this file. \quit

/*
 * CREATE EXTENSION pg_dlock installs 1.1 by running pg_dlock--1.0.sql and then
 * this script, so a new installation and an upgraded one are the same by
 * construction. Every change to the installed SQL from 1.0 on goes here (and
 * into a new step script for the release after).
 */

------------------------------------------------------------------------------
-- Never live in a schema another role controls. A role with
-- CREATE on the database could create schema "dlock" before the extension is
-- installed; it would own the schema the SECURITY DEFINER functions use, and
-- could rename it and put look-alike tables with triggers in its place.
-- CREATE EXTENSION runs this check (after the 1.0 script, in the same
-- transaction, so a refusal leaves nothing behind), and so does the update
-- of an existing 1.0 installation. First in this script on purpose.
------------------------------------------------------------------------------

DO $check_schema_owner$
DECLARE
	schema_name name;
	schema_owner name;
	extension_owner name;
	owner_is_superuser boolean;
BEGIN
	SELECT n.nspname, so.rolname, eo.rolname, so.rolsuper
	  INTO schema_name, schema_owner, extension_owner, owner_is_superuser
	  FROM pg_catalog.pg_extension e
	  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
	  JOIN pg_catalog.pg_roles so ON so.oid OPERATOR(pg_catalog.=) n.nspowner
	  JOIN pg_catalog.pg_roles eo ON eo.oid OPERATOR(pg_catalog.=) e.extowner
	 WHERE e.extname OPERATOR(pg_catalog.=) 'pg_dlock';
	IF schema_owner OPERATOR(pg_catalog.<>) extension_owner AND NOT owner_is_superuser THEN
		RAISE EXCEPTION USING
			ERRCODE = 'insufficient_privilege',
			MESSAGE = pg_catalog.format('schema %I is owned by role %I, not by the extension owner %I',
										schema_name, schema_owner, extension_owner),
			DETAIL = 'pg_dlock''s functions run with the extension owner''s rights and must not live in a schema another role controls.',
			HINT = pg_catalog.format('Drop schema %I or make the installing role its owner (ALTER SCHEMA %I OWNER TO %I) after checking what it contains.',
									 schema_name, schema_name, extension_owner);
	END IF;
END
$check_schema_owner$;

------------------------------------------------------------------------------
-- pg_dlock's SQLSTATEs move from class DL (reserved by the
-- SQL standard) to class PD.
------------------------------------------------------------------------------

COMMENT ON FUNCTION dlock.assert_holds(text, bigint) IS
'like holds, but raises lock_not_held (PD002) when the token is not the live lease';
COMMENT ON FUNCTION dlock.fence(text, bigint) IS
'accepts a token at or above the highest accepted for the resource and records it; raises stale_fencing_token (PD001) for a lower one';

------------------------------------------------------------------------------
-- A documented cleanup for dlock.resource_fence.
------------------------------------------------------------------------------

CREATE FUNCTION dlock.purge_resource_fence(older_than interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_purge_resource_fence'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.purge_resource_fence(interval) IS
'deletes the fence state of resources that accepted no token for longer than the interval; returns how many';
-- A purged resource accepts any token again: grant explicitly.
REVOKE ALL ON FUNCTION dlock.purge_resource_fence(interval) FROM PUBLIC;

------------------------------------------------------------------------------
-- enforce_fencing has a strict mode.
------------------------------------------------------------------------------

COMMENT ON FUNCTION dlock.enforce_fencing() IS
'row trigger. Arguments (token_column): BEFORE INSERT OR UPDATE, refuses a NULL token and any update that lowers it. (token_column, lock_name_column): also BEFORE DELETE, and the row''s token must be the live lease of the lock the row names (checked and pinned like holds)';

------------------------------------------------------------------------------
-- The lease functions reach their rows through the table
-- access routines in C, which check no table privilege, so they no longer
-- need to run as the extension owner. They run as the caller, with the
-- caller's search_path (they resolve no names). Application roles still
-- cannot read owner tokens or write the tables: only these functions change
-- the rows, and only as the lease rules allow.
------------------------------------------------------------------------------
ALTER FUNCTION dlock.try_acquire(text, interval, uuid, text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION dlock.acquire(text, interval, interval, uuid, text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION dlock.renew(text, uuid, interval) SECURITY INVOKER RESET search_path;
ALTER FUNCTION dlock.release(text, uuid) SECURITY INVOKER RESET search_path;
ALTER FUNCTION dlock.holds(text, bigint) SECURITY INVOKER RESET search_path;
ALTER FUNCTION dlock.assert_holds(text, bigint) SECURITY INVOKER RESET search_path;

------------------------------------------------------------------------------
-- A pin taken by holds() stalls the lease's holder and any
-- takeover until the pinning transaction ends. Pinning is for the roles that
-- write fenced data: grant it to them. dlock.max_pin (superuser-only) bounds
-- how long any pin may last.
------------------------------------------------------------------------------
REVOKE ALL ON FUNCTION dlock.holds(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION dlock.assert_holds(text, bigint) FROM PUBLIC;

-- Leader election and lock events
------------------------------------------------------------------------------

-- The fencing token of the last lease of each name whose expiry the expiry
-- worker reported, so that each expiry is reported once (across worker and
-- server restarts). Derived state: not dumped.
CREATE TABLE dlock.expiry_reported (
	lock_name text PRIMARY KEY,
	fencing_token bigint NOT NULL
);
COMMENT ON TABLE dlock.expiry_reported IS 'fencing token of the last lease per lock name whose expiry the expiry worker reported';
REVOKE ALL ON dlock.expiry_reported FROM PUBLIC;

CREATE FUNCTION dlock.leader(election text,
							 OUT holder text, OUT fencing_token bigint,
							 OUT since timestamptz, OUT lease_until timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_leader'
LANGUAGE C VOLATILE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.leader(text) IS
'the live lease of the election''s lock: holder, fencing token, since when and until when; NULL when nobody leads';

------------------------------------------------------------------------------
-- The general case the protocol model found: a row records
-- the cluster of its last grant with its timeline. A row from another cluster
-- (pg_dump/restore, pg_upgrade) or from before 1.1 (0) moves up by the whole
-- timeline at its next grant, whatever its old timeline was.
------------------------------------------------------------------------------
ALTER TABLE dlock.distributed_lock ADD COLUMN grant_system bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN dlock.distributed_lock.grant_system IS
'system identifier of the cluster whose server made the last grant (0: unknown, before 1.1); with grant_timeline it decides the next token''s generation';
