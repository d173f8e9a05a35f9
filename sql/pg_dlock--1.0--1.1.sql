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
-- Issue 15: leader election and lock events
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
