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
'after restoring anything but the latest state: ends every lease of the restored state and moves every token of every name, and the reap floor, above every history position of lost_timelines timelines (count the backup''s, one per promotion and one per DROP EXTENSION since the backup), so that no token any lost server life issued after the backup is handed out again; returns the number of lock rows and holder slots moved';
REVOKE ALL ON FUNCTION dlock.after_restore(integer) FROM PUBLIC;

-- Carrying tokens over DROP EXTENSION: what a reap of every row would leave,
-- read before the drop, becomes the new extension's floor and epoch.

CREATE FUNCTION dlock.highest_token(OUT fencing_token bigint, OUT history integer)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_highest_token'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION dlock.highest_token() IS
'read before DROP EXTENSION, for dlock.carry_over: the token state whose next token, at the history position a grant would have now, is above every token this database issued or reserved (lock rows, holder slots and counters, the reap floor), and that position';
REVOKE ALL ON FUNCTION dlock.highest_token() FROM PUBLIC;

CREATE FUNCTION dlock.carry_over(fencing_token bigint, history integer)
RETURNS void
AS 'MODULE_PATHNAME', 'dlock_carry_over'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION dlock.carry_over(bigint, integer) IS
'right after DROP EXTENSION and CREATE EXTENSION, with what dlock.highest_token() gave before the drop: the reap floor becomes that state and the token epochs go on from that position, as if every row had been reaped';
REVOKE ALL ON FUNCTION dlock.carry_over(bigint, integer) FROM PUBLIC;
