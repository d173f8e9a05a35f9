/* pg_dlock 1.1 -> 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.2'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- Issue 13: fast path (handoff to the head waiter)

-- Issue 14: lock kinds (shared, permits, multi-lock)

-- Issue 15: leader election and lock events

-- dlock.stats gains events_sent and events_dropped (lock events handed to the
-- event queue's senders, event_queue.c). The function's row type changes, so
-- it and the view over it are created again.
DROP VIEW dlock.stats;
DROP FUNCTION dlock.stats_counters();

CREATE FUNCTION dlock.stats_counters(
	OUT shared_memory boolean,
	OUT acquisitions bigint, OUT busy bigint, OUT takeovers bigint,
	OUT renewals bigint, OUT renewals_refused bigint,
	OUT releases bigint, OUT releases_refused bigint,
	OUT force_releases bigint, OUT fence_rejections bigint, OUT holds_rejections bigint,
	OUT waits bigint, OUT wait_timeouts bigint, OUT wait_seconds double precision,
	OUT events_sent bigint, OUT events_dropped bigint,
	OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_stats_counters'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock.stats_counters() IS
'server-wide counters kept in shared memory (zero unless pg_dlock is in shared_preload_libraries)';

CREATE VIEW dlock.stats AS
	SELECT c.*,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock l
			 WHERE l.owner_token IS NOT NULL
			   AND l.lease_until > pg_catalog.clock_timestamp()) AS live_leases,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock) AS lock_rows
	  FROM dlock.stats_counters() c;
COMMENT ON VIEW dlock.stats IS 'server-wide pg_dlock counters and current lease counts';
GRANT SELECT ON dlock.stats TO PUBLIC;

-- Issue 16: lease policies
