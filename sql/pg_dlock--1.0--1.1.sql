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
-- Issue 11 item 7: pg_dlock's SQLSTATEs move from class DL (reserved by the
-- SQL standard) to class PD.
------------------------------------------------------------------------------

COMMENT ON FUNCTION dlock.assert_holds(text, bigint) IS
'like holds, but raises lock_not_held (PD002) when the token is not the live lease';
COMMENT ON FUNCTION dlock.fence(text, bigint) IS
'accepts a token at or above the highest accepted for the resource and records it; raises stale_fencing_token (PD001) for a lower one';

------------------------------------------------------------------------------
-- Issue 11 item 13: a documented cleanup for dlock.resource_fence.
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
