/* pg_dlock 1.3 -> 1.4 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.4'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- Fenced grants: the token epoch

CREATE TABLE dlock.token_epoch (
	system_identifier bigint NOT NULL,
	timeline integer NOT NULL,
	epoch integer NOT NULL CHECK (epoch OPERATOR(pg_catalog.>=) 0 AND epoch OPERATOR(pg_catalog.<=) 16383),
	fenced boolean NOT NULL,
	server_life bigint NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE dlock.token_epoch IS
'token epochs used per cluster and timeline: the newest is the current one (none: epoch 0); fenced = true records, durably, that a server life granted leases without flushing them in that epoch, so the next server life moves to a new epoch';
COMMENT ON COLUMN dlock.token_epoch.server_life IS
'random identifier of the server life (server start or crash restart) that recorded the row; 0 without shared_preload_libraries';
SELECT pg_catalog.pg_extension_config_dump('dlock.token_epoch', '');
REVOKE ALL ON dlock.token_epoch FROM PUBLIC;

-- A grant's history position, (timeline - 1) * 16384 + epoch + 1, takes the
-- place of its timeline ID; epoch 0 keeps timeline 1's value, so the rows of
-- a server that never failed over do not change.
UPDATE dlock.distributed_lock SET grant_timeline = (grant_timeline OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.*) 16384 OPERATOR(pg_catalog.+) 1
 WHERE grant_timeline OPERATOR(pg_catalog.>) 1;
UPDATE dlock.lock_holder SET grant_timeline = (grant_timeline OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.*) 16384 OPERATOR(pg_catalog.+) 1
 WHERE grant_timeline OPERATOR(pg_catalog.>) 1;
UPDATE dlock.holder_counter SET grant_timeline = (grant_timeline OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.*) 16384 OPERATOR(pg_catalog.+) 1
 WHERE grant_timeline OPERATOR(pg_catalog.>) 1;
COMMENT ON COLUMN dlock.distributed_lock.grant_timeline IS
'history position of the last grant: (timeline ID - 1) * 16384 + token epoch + 1; a higher one moves the token to a new generation';
COMMENT ON COLUMN dlock.lock_holder.grant_timeline IS
'history position of the slot''s grant, as in dlock.distributed_lock';
COMMENT ON COLUMN dlock.holder_counter.grant_timeline IS
'history position of the last block reserved, as in dlock.distributed_lock';

-- A change to the table's definition: sessions already running find the
-- epoch table at their next call (pg_dlock caches the installed tables
-- until a table of theirs changes), before they grant by the new positions.
ALTER TABLE dlock.distributed_lock ALTER COLUMN grant_timeline SET STATISTICS -1;

CREATE FUNCTION dlock.durability_stats(OUT token_epoch integer, OUT epoch_fenced boolean,
									   OUT durable_commits bigint, OUT unflushed_commits bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_durability_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dlock.durability_stats() IS
'this server life''s token epoch in this database (NULL before its first grant) and whether fenced grants marked it; transactions that changed leases and committed durably, and without the WAL flush (releases, and grants and renewals under dlock.durability = fenced), since server start or dlock.stats_reset()';

-- Expire events for shared leases and permits: the slots whose expiry the
-- expiry worker reported, as dlock.expiry_reported does for lock rows

CREATE TABLE dlock.holder_expiry_reported (
	lock_name text NOT NULL,
	slot integer NOT NULL,
	fencing_token bigint NOT NULL,
	PRIMARY KEY (lock_name, slot)
);
COMMENT ON TABLE dlock.holder_expiry_reported IS
'fencing token of the last shared lease or permit per slot whose expiry the expiry worker reported';
REVOKE ALL ON dlock.holder_expiry_reported FROM PUBLIC;
