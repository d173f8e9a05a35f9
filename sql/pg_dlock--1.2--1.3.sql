/* pg_dlock 1.2 -> 1.3 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.3'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- Contention you can see: waiters per name, wait and hold histograms

CREATE FUNCTION dlock.waiters(lock_name text)
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_waiters'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dlock.waiters(text) IS
'sessions waiting for the name in dlock.acquire or a kind''s acquire function, now; NULL when pg_dlock is not in shared_preload_libraries';

CREATE FUNCTION dlock.wait_histogram(OUT kind text, OUT le interval, OUT waits bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_wait_histogram'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dlock.wait_histogram() IS
'per lease kind, acquire calls that waited and were granted within le (NULL: +Inf), cumulative as in a Prometheus histogram; since server start or dlock.stats_reset()';

CREATE FUNCTION dlock.hold_histogram(OUT kind text, OUT le interval, OUT holds bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_hold_histogram'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dlock.hold_histogram() IS
'per lease kind, leases that ended (release, downgrade, force release, reported expiry) within le of their grant (NULL: +Inf), cumulative; since server start or dlock.stats_reset()';

-- A simple CASE compares with the = operator that search_path finds (it has
-- no OPERATOR() form, and a searched CASE would install another view):
-- pg_catalog's only, while the view is created. The line after the view
-- sets search_path back to what ALTER EXTENSION gives this script.
SET LOCAL search_path = pg_catalog, pg_temp;
CREATE OR REPLACE VIEW dlock.locks AS
	SELECT l.lock_name,
		   CASE WHEN l.owner_token IS NOT NULL AND p.live THEN 'held'
				WHEN h.live OPERATOR(pg_catalog.>) 0 THEN 'held'
				WHEN l.owner_token IS NULL THEN 'free'
				ELSE 'expired' END AS state,
		   l.holder,
		   l.fencing_seq AS fencing_token,
		   l.acquired_at,
		   CASE WHEN l.owner_token IS NOT NULL THEN n.now OPERATOR(pg_catalog.-) l.acquired_at END AS held_for,
		   l.lease_until,
		   CASE WHEN l.owner_token IS NOT NULL THEN l.lease_until OPERATOR(pg_catalog.-) n.now END AS expires_in,
		   l.renewals,
		   l.acquisitions,
		   l.takeovers,
		   l.updated_at AS last_change,
		   CASE WHEN h.live OPERATOR(pg_catalog.>) 0 THEN h.kind ELSE 'exclusive' END AS kind,
		   CASE WHEN l.owner_token IS NOT NULL AND p.live THEN 1
				ELSE COALESCE(h.live, 0) END::integer AS holders,
		   p.policy_state,
		   p.available_at,
		   l.session_id IS NOT NULL AS session_bound,
		   l.session_pid,
		   l.hold_limit,
		   l.min_hold_until,
		   l.lock_delay,
		   dlock.waiters(l.lock_name) AS waiters
	  FROM dlock.distributed_lock l
		   CROSS JOIN LATERAL (SELECT pg_catalog.clock_timestamp() AS now) n
		   CROSS JOIN LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
													   l.session_id, l.hold_limit, l.min_hold_until,
													   l.lock_delay, l.not_before) p
		   LEFT JOIN LATERAL (
			 SELECT pg_catalog.count(*) FILTER (WHERE hh.owner_token IS NOT NULL
												   AND hh.lease_until OPERATOR(pg_catalog.>) n.now) AS live,
					CASE pg_catalog.max(hh.kind::pg_catalog.text) FILTER (WHERE hh.owner_token IS NOT NULL
																   AND hh.lease_until OPERATOR(pg_catalog.>) n.now)
					  WHEN 's' THEN 'shared' ELSE 'semaphore' END AS kind
			   FROM dlock.lock_holder hh WHERE hh.lock_name OPERATOR(pg_catalog.=) l.lock_name) h ON true
	UNION ALL
	SELECT c.lock_name,
		   CASE WHEN h.live OPERATOR(pg_catalog.>) 0 THEN 'held' ELSE 'free' END,
		   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		   h.last_change,
		   h.kind,
		   h.live::integer,
		   NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		   dlock.waiters(c.lock_name)
	  FROM dlock.holder_counter c
		   CROSS JOIN LATERAL (SELECT pg_catalog.clock_timestamp() AS now) n
		   CROSS JOIN LATERAL (
			 SELECT pg_catalog.count(*) FILTER (WHERE hh.owner_token IS NOT NULL
												   AND hh.lease_until OPERATOR(pg_catalog.>) n.now) AS live,
					CASE pg_catalog.max(hh.kind::pg_catalog.text) WHEN 's' THEN 'shared' ELSE 'semaphore' END AS kind,
					pg_catalog.max(hh.updated_at) AS last_change
			   FROM dlock.lock_holder hh WHERE hh.lock_name OPERATOR(pg_catalog.=) c.lock_name) h
	 WHERE NOT EXISTS (SELECT 1 FROM dlock.distributed_lock l WHERE l.lock_name OPERATOR(pg_catalog.=) c.lock_name);
SET LOCAL search_path = dlock, pg_temp;
COMMENT ON VIEW dlock.locks IS 'one row per lock name with its state on the server clock, its kind, number of live holders, lease policy state and waiting sessions; never shows owner tokens';

-- Downgrade: an exclusive lease becomes a shared lease in one step

CREATE FUNCTION dlock.downgrade(lock_name text, owner_token uuid)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_downgrade'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.downgrade(text, uuid) IS
'turns the owner''s live exclusive lease into a shared lease until the same lease_until, with a new, higher fencing token; no writer can get in between; NULL when the owner holds no live exclusive lease';
