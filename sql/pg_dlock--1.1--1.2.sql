/* pg_dlock 1.1 -> 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.2'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- Issue 13: fast path (handoff to the head waiter)

-- Issue 14: lock kinds (shared, permits, multi-lock)

-- Issue 15: leader election and lock events

-- Issue 16: lease policies

-- The lease row keeps the policies it was granted with (README "Lease
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

CREATE TEMPORARY TABLE policy_saved_acl AS
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
  FROM policy_saved_acl;
DROP TABLE policy_saved_acl;
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
		   (SELECT pg_catalog.max(pg_catalog.clock_timestamp() - l.acquired_at)
			  FROM dlock.distributed_lock l,
				   LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
													l.session_id, l.hold_limit, l.min_hold_until,
													l.lock_delay, l.not_before) s
			 WHERE s.live) AS longest_hold
	  FROM dlock.stats_counters() c, dlock.policy_counters() p;

CREATE OR REPLACE VIEW dlock.locks AS
	SELECT l.lock_name,
		   CASE WHEN l.owner_token IS NULL THEN 'free'
				WHEN p.live THEN 'held'
				ELSE 'expired' END AS state,
		   l.holder,
		   l.fencing_seq AS fencing_token,
		   l.acquired_at,
		   CASE WHEN l.owner_token IS NOT NULL THEN n.now - l.acquired_at END AS held_for,
		   l.lease_until,
		   CASE WHEN l.owner_token IS NOT NULL THEN l.lease_until - n.now END AS expires_in,
		   l.renewals,
		   l.acquisitions,
		   l.takeovers,
		   l.updated_at AS last_change,
		   p.policy_state,
		   p.available_at,
		   l.session_id IS NOT NULL AS session_bound,
		   l.session_pid,
		   l.hold_limit,
		   l.min_hold_until,
		   l.lock_delay
	  FROM dlock.distributed_lock l,
		   LATERAL (SELECT pg_catalog.clock_timestamp() AS now) n,
		   LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
											l.session_id, l.hold_limit, l.min_hold_until,
											l.lock_delay, l.not_before) p;
