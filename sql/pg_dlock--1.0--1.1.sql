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
-- Issue 13 item 3: the lease functions reach their rows through the table
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
-- Issue 11 item 11: a pin taken by holds() stalls the lease's holder and any
-- takeover until the pinning transaction ends. Pinning is for the roles that
-- write fenced data: grant it to them. dlock.max_pin (superuser-only) bounds
-- how long any pin may last.
------------------------------------------------------------------------------
REVOKE ALL ON FUNCTION dlock.holds(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION dlock.assert_holds(text, bigint) FROM PUBLIC;
