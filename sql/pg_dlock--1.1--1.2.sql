/* pg_dlock 1.1 -> 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.2'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- Fast path (handoff to the head waiter)

-- An exclusive grant skips the lock kinds' check of dlock.lock_holder (and
-- the name's kind lock) while the row says the name has had no shared lease
-- or permit since the last exclusive grant that made that check
-- (holder_lease.c, "Exclusion between kinds"). A shared or permit grant
-- clears the mark under the row's lock before it grants. Rows written by
-- 1.1 start false, so their first exclusive grant after the update checks;
-- the default adds the column without rewriting the table.
ALTER TABLE dlock.distributed_lock
	ADD COLUMN exclusive_only boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN dlock.distributed_lock.exclusive_only IS 'no shared lease or permit of this name since its last exclusive grant checked for them: the next exclusive grant need not check again';

-- Lock kinds (shared, permits, multi-lock)

/*
 * Holders of shared leases and semaphore permits: one row per slot of a
 * name, reused from one holder to the next (updates change no indexed
 * column, so they stay HOT). A shared lease or permit is the slot's
 * owner_token and lease_until, as an exclusive lease is the name's row in
 * dlock.distributed_lock; readers of one name write different slot rows, so
 * they do not queue on one hot row. docs/lock-kinds.md.
 */
-- No CHECK constraints: only the extension's functions write the table, and
-- they check the values; a constraint would cost every grant its evaluation.
CREATE TABLE dlock.lock_holder (
	lock_name text NOT NULL,
	slot integer NOT NULL,
	kind "char" NOT NULL,
	permits integer,
	owner_token uuid,
	fencing_seq bigint NOT NULL,
	block_end bigint NOT NULL,
	lease_until timestamptz,
	holder text,
	acquired_at timestamptz,
	updated_at timestamptz NOT NULL,
	renewals bigint NOT NULL DEFAULT 0,
	grant_timeline integer NOT NULL,
	grant_system bigint NOT NULL,
	PRIMARY KEY (lock_name, slot)
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.lock_holder IS 'shared leases and semaphore permits: one row per slot of a lock name; owner_token is NULL when the slot is free';
COMMENT ON COLUMN dlock.lock_holder.kind IS 's: a shared lease; p: a semaphore permit';
COMMENT ON COLUMN dlock.lock_holder.permits IS 'size of the semaphore the permit belongs to';
COMMENT ON COLUMN dlock.lock_holder.fencing_seq IS 'fencing token of the current or last holder of the slot';
COMMENT ON COLUMN dlock.lock_holder.block_end IS 'last token of the block of the name''s counter reserved for this slot';

/*
 * The name's counter for holder slots: tokens are reserved from it in
 * blocks, above the name's last exclusive token, so a grant on a slot
 * updates only its slot row.
 */
CREATE TABLE dlock.holder_counter (
	lock_name text PRIMARY KEY,
	fencing_seq bigint NOT NULL,
	grant_timeline integer NOT NULL,
	grant_system bigint NOT NULL
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.holder_counter IS 'highest fencing token reserved for the holder slots of each lock name';

SELECT pg_catalog.pg_extension_config_dump('dlock.lock_holder', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.holder_counter', '');
REVOKE ALL ON dlock.lock_holder, dlock.holder_counter FROM PUBLIC;

CREATE FUNCTION dlock.try_acquire_shared(lock_name text, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire_shared'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text) IS
'takes a shared lease unless an exclusive lease is live or an exclusive acquirer waits; NULL otherwise';

CREATE FUNCTION dlock.acquire_shared(lock_name text, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire_shared'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text) IS
'like try_acquire_shared, but waits up to "wait" in the name''s queue; raises lock_not_available (55P03) when the wait runs out';

CREATE FUNCTION dlock.try_acquire_permit(semaphore_name text, permits integer, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire_permit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text) IS
'takes one of "permits" permits of the semaphore as its own lease; NULL when all are held';

CREATE FUNCTION dlock.acquire_permit(semaphore_name text, permits integer, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire_permit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text) IS
'like try_acquire_permit, but waits up to "wait" in the name''s queue; raises lock_not_available (55P03) when the wait runs out';

CREATE FUNCTION dlock.resize_semaphore(semaphore_name text, permits integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_resize_semaphore'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.resize_semaphore(text, integer) IS
'changes the number of permits of a semaphore with live permits; returns how many permits are live';
REVOKE ALL ON FUNCTION dlock.resize_semaphore(text, integer) FROM PUBLIC;

CREATE FUNCTION dlock.try_acquire_all(lock_names text[], ttl interval,
									  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS SETOF dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 4;
COMMENT ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text) IS
'takes exclusive leases on every name with one owner token, or on none (no rows)';

CREATE FUNCTION dlock.acquire_all(lock_names text[], ttl interval, wait interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS SETOF dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 4;
COMMENT ON FUNCTION dlock.acquire_all(text[], interval, interval, uuid, text) IS
'like try_acquire_all, but waits up to "wait" in all; raises lock_not_available (55P03) and takes none when the wait runs out';

CREATE FUNCTION dlock.release_all(lock_names text[], owner_token uuid)
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.release_all(text[], uuid) IS
'releases the leases of this owner on the names; returns how many it ended';

CREATE FUNCTION dlock.kind_stats(OUT kind text, OUT acquisitions bigint, OUT busy bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_kind_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock.kind_stats() IS
'server-wide grants and refusals per lock kind (zero unless pg_dlock is in shared_preload_libraries)';

-- A simple CASE compares with the = operator that search_path finds (it has
-- no OPERATOR() form, and a searched CASE would install another view):
-- pg_catalog's only, while the view is created. The line after the view
-- sets search_path back to what ALTER EXTENSION gives this script.
SET LOCAL search_path = pg_catalog, pg_temp;
CREATE VIEW dlock.stats_by_kind AS
	SELECT s.kind, s.acquisitions, s.busy,
		   CASE s.kind
			 WHEN 'exclusive' THEN (SELECT pg_catalog.count(*) FROM dlock.distributed_lock l
									 WHERE l.owner_token IS NOT NULL
									   AND l.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())
			 WHEN 'multi' THEN NULL
			 ELSE (SELECT pg_catalog.count(*) FROM dlock.lock_holder h
					WHERE h.kind OPERATOR(pg_catalog.=) pg_catalog.left(s.kind, 1)::pg_catalog."char" AND h.owner_token IS NOT NULL
					  AND h.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())
		   END AS live_leases
	  FROM dlock.kind_stats() s;
SET LOCAL search_path = dlock, pg_temp;
COMMENT ON VIEW dlock.stats_by_kind IS 'pg_dlock counters and live leases per lock kind (exclusive, shared, permit, multi)';
GRANT SELECT ON dlock.stats_by_kind TO PUBLIC;

/* one row per live holder of any kind; owner tokens only in dlock.holders_with_tokens */
-- A simple CASE compares with the = operator that search_path finds (it has
-- no OPERATOR() form, and a searched CASE would install another view):
-- pg_catalog's only, while the view is created. The line after the view
-- sets search_path back to what ALTER EXTENSION gives this script.
SET LOCAL search_path = pg_catalog, pg_temp;
CREATE VIEW dlock.lock_holders AS
	SELECT l.lock_name, 'exclusive'::pg_catalog.text AS kind, NULL::integer AS permits, l.holder,
		   l.fencing_seq AS fencing_token, l.acquired_at, l.lease_until
	  FROM dlock.distributed_lock l
	 WHERE l.owner_token IS NOT NULL AND l.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
	UNION ALL
	SELECT h.lock_name, CASE h.kind WHEN 's' THEN 'shared' ELSE 'permit' END, h.permits, h.holder,
		   h.fencing_seq, h.acquired_at, h.lease_until
	  FROM dlock.lock_holder h
	 WHERE h.owner_token IS NOT NULL AND h.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
SET LOCAL search_path = dlock, pg_temp;
COMMENT ON VIEW dlock.lock_holders IS 'one row per live lease of any kind; never shows owner tokens';
GRANT SELECT ON dlock.lock_holders TO PUBLIC;

/* dlock.locks gains each name's kind and number of live holders: see the
   lease policies section, which defines the view once with the policy state too */

-- Leader election and lock events

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
			   AND l.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()) AS live_leases,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock) AS lock_rows
	  FROM dlock.stats_counters() c;
COMMENT ON VIEW dlock.stats IS 'server-wide pg_dlock counters and current lease counts';
GRANT SELECT ON dlock.stats TO PUBLIC;

-- Lease policies

-- The lease row keeps the policies it was granted with (docs/lease-policies.md, "Lease
-- policies"). All nullable without a default: rows written by 1.1 have no
-- policy, and adding the columns rewrites nothing. The C code finds them by
-- name (lease_policy.c), so their position does not matter.
ALTER TABLE dlock.distributed_lock
	ADD COLUMN session_pid integer,
	ADD COLUMN session_id bigint,
	ADD COLUMN hold_limit timestamptz,
	ADD COLUMN min_hold_until timestamptz,
	ADD COLUMN lock_delay interval,
	ADD COLUMN not_before timestamptz;
COMMENT ON COLUMN dlock.distributed_lock.session_pid IS 'process ID of the session a session-bound lease ends with';
COMMENT ON COLUMN dlock.distributed_lock.session_id IS 'that session''s ID (PGPROC number and a random part); NULL for a lease not bound to its session';
COMMENT ON COLUMN dlock.distributed_lock.hold_limit IS 'acquired_at + max_hold: renewals are refused from then on';
COMMENT ON COLUMN dlock.distributed_lock.min_hold_until IS 'acquired_at + min_hold: a release before it keeps the name from new owners until then';
COMMENT ON COLUMN dlock.distributed_lock.lock_delay IS 'how long the name stays ungranted after the lease is lost (expired, session ended, forced away)';
COMMENT ON COLUMN dlock.distributed_lock.not_before IS 'set by a release (min_hold) or a force release (lock_delay): no new owner before it';

-- The acquire functions get the policy options as named arguments with
-- defaults. Adding them as overloads would make every existing call
-- ambiguous, so the functions are replaced; their grants are carried over.
CREATE FUNCTION dlock.policy_acl_save(fn regprocedure)
RETURNS aclitem[] LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT proacl FROM pg_catalog.pg_proc WHERE oid = fn $$;

CREATE FUNCTION dlock.policy_acl_restore(fn regprocedure, acl aclitem[])
RETURNS void LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	grantee oid;
BEGIN
	IF acl IS NULL THEN
		RETURN;				-- default privileges: EXECUTE to PUBLIC, as created
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(acl) a WHERE a.grantee = 0) THEN
		EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
	END IF;
	FOR grantee IN SELECT DISTINCT a.grantee FROM pg_catalog.aclexplode(acl) a
					WHERE a.grantee <> 0 AND a.privilege_type = 'EXECUTE'
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', fn,
								  pg_catalog.pg_get_userbyid(grantee));
	END LOOP;
END
$$;

CREATE TEMPORARY TABLE pg_temp.policy_saved_acl AS
	SELECT dlock.policy_acl_save('dlock.try_acquire(text, interval, uuid, text)') AS try_acquire_acl,
		   dlock.policy_acl_save('dlock.acquire(text, interval, interval, uuid, text)') AS acquire_acl;

DROP FUNCTION dlock.try_acquire(text, interval, uuid, text);
DROP FUNCTION dlock.acquire(text, interval, interval, uuid, text);

CREATE FUNCTION dlock.try_acquire(lock_name text, ttl interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
								  session_bound boolean DEFAULT false,
								  max_hold interval DEFAULT NULL,
								  min_hold interval DEFAULT NULL,
								  lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.try_acquire(text, interval, uuid, text, boolean, interval, interval, interval) IS
'takes the lock if it is free or its lease ended; NULL when another owner holds a live lease. Options: session_bound (the lease also ends with this session), max_hold (renewals refused after it), min_hold (a release before it keeps the lock from others until then), lock_delay (no new owner for that long after the lease is lost)';

CREATE FUNCTION dlock.acquire(lock_name text, ttl interval, wait interval,
							  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
							  session_bound boolean DEFAULT false,
							  max_hold interval DEFAULT NULL,
							  min_hold interval DEFAULT NULL,
							  lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.acquire(text, interval, interval, uuid, text, boolean, interval, interval, interval) IS
'like try_acquire, but waits up to "wait" for the lock; raises lock_not_available (55P03) when the wait runs out. Same options as try_acquire';

SELECT dlock.policy_acl_restore('dlock.try_acquire(text, interval, uuid, text, boolean, interval, interval, interval)',
								try_acquire_acl),
	   dlock.policy_acl_restore('dlock.acquire(text, interval, interval, uuid, text, boolean, interval, interval, interval)',
								acquire_acl)
  FROM pg_temp.policy_saved_acl;
DROP TABLE pg_temp.policy_saved_acl;
DROP FUNCTION dlock.policy_acl_save(regprocedure);
DROP FUNCTION dlock.policy_acl_restore(regprocedure, aclitem[]);

CREATE FUNCTION dlock.lease_policy_state(has_owner boolean, lease_until timestamptz,
										 session_id bigint, hold_limit timestamptz,
										 min_hold_until timestamptz, lock_delay interval,
										 not_before timestamptz,
										 OUT live boolean, OUT policy_state text,
										 OUT available_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_lease_policy_state'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock.lease_policy_state(boolean, timestamptz, bigint, timestamptz, timestamptz, interval, timestamptz) IS
'the lease functions'' decision on a lease row now: live, its policy state, and when a new owner may be granted the name (NULL: now)';

CREATE FUNCTION dlock.policy_counters(
	OUT expirations bigint, OUT session_ends bigint,
	OUT renewals_refused_max_hold bigint,
	OUT renewals_left_50 bigint, OUT renewals_left_25 bigint,
	OUT renewals_left_10 bigint, OUT renewals_left_0 bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_policy_counters'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock.policy_counters() IS
'server-wide lease policy counters kept in shared memory (zero unless pg_dlock is in shared_preload_libraries)';

-- Columns are appended, so existing queries of the views keep working.
CREATE OR REPLACE VIEW dlock.stats AS
	SELECT c.*,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock l,
				   LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
													l.session_id, l.hold_limit, l.min_hold_until,
													l.lock_delay, l.not_before) p
			 WHERE p.live) AS live_leases,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock) AS lock_rows,
		   p.*,
		   (SELECT pg_catalog.max(pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) l.acquired_at)
			  FROM dlock.distributed_lock l,
				   LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
													l.session_id, l.hold_limit, l.min_hold_until,
													l.lock_delay, l.not_before) s
			 WHERE s.live) AS longest_hold,
		   k.shared_acquisitions, k.shared_busy,
		   k.permit_acquisitions, k.permit_busy,
		   k.multi_acquisitions, k.multi_busy
	  FROM dlock.stats_counters() c, dlock.policy_counters() p,
		   -- the lock kinds' counters, one column per kind and counter
		   LATERAL (SELECT pg_catalog.max(ks.acquisitions) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'shared') AS shared_acquisitions,
						   pg_catalog.max(ks.busy) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'shared') AS shared_busy,
						   pg_catalog.max(ks.acquisitions) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'permit') AS permit_acquisitions,
						   pg_catalog.max(ks.busy) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'permit') AS permit_busy,
						   pg_catalog.max(ks.acquisitions) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'multi') AS multi_acquisitions,
						   pg_catalog.max(ks.busy) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'multi') AS multi_busy
					  FROM dlock.kind_stats() ks) k;

-- dlock.locks gains each name's kind and number of live holders (names
-- with only shared leases or permits come from dlock.holder_counter)
-- and the policy state of each exclusive lease (none for the other kinds).
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
		   l.lock_delay
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
		   NULL, NULL, NULL, NULL, NULL, NULL, NULL
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
COMMENT ON VIEW dlock.locks IS 'one row per lock name with its state on the server clock, its kind, number of live holders and lease policy state; never shows owner tokens';
