/* pg_dlock 1.4 -> 1.5 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.5'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- The one token rule: the reap floor is a token state like a lock row's,
-- with the history position and cluster it was left at, so that the first
-- token of a name follows every later epoch and timeline. Rows without
-- them (written before 1.5, or by hand) are of unknown history: the first
-- token after them moves up by the whole history position.

ALTER TABLE dlock.token_floor
	ADD COLUMN grant_timeline integer CHECK (grant_timeline OPERATOR(pg_catalog.>=) 0),
	ADD COLUMN grant_system bigint;
COMMENT ON TABLE dlock.token_floor IS
'the token state left by dlock.reap (and dlock.after_restore) for the lock rows it removed: a name without a row takes the next token after it, by the rule of dlock.next_fencing_token';
COMMENT ON COLUMN dlock.token_floor.reaped_max IS
'a token at or above every token of the removed rows';
COMMENT ON COLUMN dlock.token_floor.grant_timeline IS
'history position the floor was left at, as in dlock.distributed_lock (NULL: unknown, the next token moves up by the whole position)';
COMMENT ON COLUMN dlock.token_floor.grant_system IS
'system identifier of the cluster that left the floor (NULL: unknown)';

CREATE FUNCTION dlock.next_fencing_token(prev bigint, prev_history integer, prev_system bigint,
										 history integer, system bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_next_fencing_token'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dlock.next_fencing_token(bigint, integer, bigint, integer, bigint) IS
'the token rule of every grant of every kind: the next token after the state (prev, prev_history, prev_system) -- a lock row, a holder counter, the reap floor; NULL prev: nothing -- granted at history position history by cluster system';

-- A restore that cannot hand a token out again

CREATE FUNCTION dlock.after_restore(lost_timelines integer DEFAULT 1)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_after_restore'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION dlock.after_restore(integer) IS
'after restoring anything but the latest state: ends every lease of the restored state and moves every token of every name, and the reap floor, above every history position of lost_timelines timelines, so that no token any lost server life issued after the backup is handed out again; returns the number of lock rows and holder slots moved';
REVOKE ALL ON FUNCTION dlock.after_restore(integer) FROM PUBLIC;
