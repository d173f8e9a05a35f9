/* sql/pg_dlock--1.0.sql -- pg_dlock 1.0: leases, fencing, operations */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pg_dlock" to load this file. \quit

/*
 * Privilege model (docs/reference.md, "Privileges"):
 *   - the tables below belong to the extension owner; nobody else may write
 *     them, and only the owner may read owner tokens (they are capabilities);
 *   - the lease functions and holds/assert_holds are SECURITY DEFINER with
 *     a pinned search_path and are executable by PUBLIC;
 *   - fence, force_release, reap, audit purge, stats reset and owner-token
 *     reading need a grant.
 */

-- Everyone may use the schema; what they may do in it is granted per object.
GRANT USAGE ON SCHEMA dlock TO PUBLIC;

CREATE TYPE dlock.lease AS (
	lock_name text,
	owner_token uuid,
	fencing_token bigint,
	lease_until timestamptz
);
COMMENT ON TYPE dlock.lease IS 'a lease granted by dlock.try_acquire or dlock.acquire';

-- One row per lock name. Lease updates touch no indexed column and leave room
-- on the page (fillfactor), so they stay HOT and the table does not bloat.
CREATE TABLE dlock.distributed_lock (
	lock_name text PRIMARY KEY
		CONSTRAINT lock_name_length CHECK (pg_catalog.char_length(lock_name) OPERATOR(pg_catalog.>=) 1
									 AND pg_catalog.char_length(lock_name) OPERATOR(pg_catalog.<=) 200),
	owner_token uuid,
	fencing_seq bigint NOT NULL,
	lease_until timestamptz,
	updated_at timestamptz NOT NULL,
	acquired_at timestamptz,
	holder text,
	renewals bigint NOT NULL DEFAULT 0,
	acquisitions bigint NOT NULL DEFAULT 0,
	takeovers bigint NOT NULL DEFAULT 0,
	taken_over boolean NOT NULL DEFAULT false,
	grant_timeline integer NOT NULL
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.distributed_lock IS 'lock state: one row per lock name; owner_token is NULL when the lock is free';
COMMENT ON COLUMN dlock.distributed_lock.fencing_seq IS 'fencing token of the current or last holder: (generation << 40) | per-name counter';
COMMENT ON COLUMN dlock.distributed_lock.renewals IS 'renewals of the current lease';
COMMENT ON COLUMN dlock.distributed_lock.acquisitions IS 'leases granted for this name so far';
COMMENT ON COLUMN dlock.distributed_lock.takeovers IS 'leases granted after a previous lease expired without release';
COMMENT ON COLUMN dlock.distributed_lock.taken_over IS 'the current lease began by taking over an expired one';
COMMENT ON COLUMN dlock.distributed_lock.grant_timeline IS 'server timeline ID at the last grant; a higher one moves the token to a new generation';

-- The highest token of any row removed by dlock.reap: a name that comes back
-- starts above it, so tokens never repeat even after its row was deleted.
-- The table starts empty (so that pg_restore can load it back) and reap keeps
-- one row in it.
CREATE TABLE dlock.token_floor (
	reaped_max bigint NOT NULL,
	reaped_at timestamptz NOT NULL
);
COMMENT ON TABLE dlock.token_floor IS 'highest fencing token among reaped lock rows';

-- Highest token accepted per fenced resource (dlock.fence).
CREATE TABLE dlock.resource_fence (
	resource text PRIMARY KEY
		CONSTRAINT resource_length CHECK (pg_catalog.char_length(resource) OPERATOR(pg_catalog.>=) 1
									 AND pg_catalog.char_length(resource) OPERATOR(pg_catalog.<=) 200),
	fencing_token bigint NOT NULL,
	updated_at timestamptz NOT NULL
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.resource_fence IS 'highest fencing token accepted per resource by dlock.fence';

CREATE TABLE dlock.audit_log (
	id bigserial PRIMARY KEY,
	logged_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	event text NOT NULL,
	lock_name text NOT NULL,
	fencing_token bigint,
	holder text,
	role_name name NOT NULL,
	reason text
);
CREATE INDEX audit_log_logged_at ON dlock.audit_log (logged_at);
COMMENT ON TABLE dlock.audit_log IS 'force releases, and with dlock.audit = all every lease event';

-- pg_dump must carry the lock state: restoring without it would restart the
-- fencing counters and hand out tokens a second time.
SELECT pg_catalog.pg_extension_config_dump('dlock.distributed_lock', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.token_floor', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.resource_fence', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.audit_log', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.audit_log_id_seq', '');

REVOKE ALL ON dlock.distributed_lock, dlock.token_floor, dlock.resource_fence,
	dlock.audit_log FROM PUBLIC;

------------------------------------------------------------------------------
-- Leases
------------------------------------------------------------------------------

CREATE FUNCTION dlock.try_acquire(lock_name text, ttl interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.try_acquire(text, interval, uuid, text) IS
'takes the lock if it is free or its lease expired; NULL when another owner holds a live lease';

CREATE FUNCTION dlock.acquire(lock_name text, ttl interval, wait interval,
							  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.acquire(text, interval, interval, uuid, text) IS
'like try_acquire, but waits up to "wait" for the lock; raises lock_not_available (55P03) when the wait runs out';

CREATE FUNCTION dlock.renew(lock_name text, owner_token uuid, ttl interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.renew(text, uuid, interval) IS
'extends a live lease of this owner and returns the new lease_until; NULL when the owner holds no live lease';

CREATE FUNCTION dlock.release(lock_name text, owner_token uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.release(text, uuid) IS
'ends a live lease of this owner; true when this call ended it';

------------------------------------------------------------------------------
-- Fencing
------------------------------------------------------------------------------

CREATE FUNCTION dlock.holds(lock_name text, fencing_token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_holds'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.holds(text, bigint) IS
'true when the token is the live lease of the lock; then pins the lease until the end of the calling transaction';

CREATE FUNCTION dlock.assert_holds(lock_name text, fencing_token bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'dlock_assert_holds'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.assert_holds(text, bigint) IS
'like holds, but raises lock_not_held (DL002) when the token is not the live lease';

CREATE FUNCTION dlock.fence(resource text, fencing_token bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'dlock_fence'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.fence(text, bigint) IS
'accepts a token at or above the highest accepted for the resource and records it; raises stale_fencing_token (DL001) for a lower one';
-- Fence state is shared by every role and accepts any token: a role could
-- raise a resource's token out of reach of its real holders. Grant it to the
-- roles that write the fenced resources.
REVOKE ALL ON FUNCTION dlock.fence(text, bigint) FROM PUBLIC;

CREATE FUNCTION dlock.enforce_fencing()
RETURNS trigger
AS 'MODULE_PATHNAME', 'dlock_enforce_fencing'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.enforce_fencing() IS
'BEFORE INSERT OR UPDATE row trigger: refuses a NULL token and any update that lowers the token column named by the trigger argument';

------------------------------------------------------------------------------
-- Operations
------------------------------------------------------------------------------

CREATE FUNCTION dlock.force_release(lock_name text, reason text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_force_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.force_release(text, text) IS
'ends the current lease whoever holds it, and records the reason in dlock.audit_log';
-- Ending someone else's lease is an administrative act: grant it explicitly.
REVOKE ALL ON FUNCTION dlock.force_release(text, text) FROM PUBLIC;

CREATE FUNCTION dlock.reap(idle_for interval DEFAULT '1 day', max_rows integer DEFAULT 10000)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_reap'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.reap(interval, integer) IS
'removes rows of locks free or expired for longer than idle_for, at most max_rows; returns how many';
-- Reaping is maintenance; harmless but not for every application role.
REVOKE ALL ON FUNCTION dlock.reap(interval, integer) FROM PUBLIC;

CREATE FUNCTION dlock.purge_audit_log(older_than interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_purge_audit_log'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION dlock.purge_audit_log(interval) IS
'deletes audit records older than the interval; returns how many';
-- Deleting audit records hides history: grant explicitly.
REVOKE ALL ON FUNCTION dlock.purge_audit_log(interval) FROM PUBLIC;

CREATE FUNCTION dlock.stats_counters(
	OUT shared_memory boolean,
	OUT acquisitions bigint, OUT busy bigint, OUT takeovers bigint,
	OUT renewals bigint, OUT renewals_refused bigint,
	OUT releases bigint, OUT releases_refused bigint,
	OUT force_releases bigint, OUT fence_rejections bigint, OUT holds_rejections bigint,
	OUT waits bigint, OUT wait_timeouts bigint, OUT wait_seconds double precision,
	OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'dlock_stats_counters'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock.stats_counters() IS
'server-wide counters kept in shared memory (zero unless pg_dlock is in shared_preload_libraries)';

CREATE FUNCTION dlock.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'dlock_stats_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION dlock.stats_reset() IS 'sets the counters of dlock.stats to zero';
-- Resetting counters hides what monitoring would have seen: grant explicitly.
REVOKE ALL ON FUNCTION dlock.stats_reset() FROM PUBLIC;

CREATE VIEW dlock.stats AS
	SELECT c.*,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock l
			 WHERE l.owner_token IS NOT NULL
			   AND l.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()) AS live_leases,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock) AS lock_rows
	  FROM dlock.stats_counters() c;
COMMENT ON VIEW dlock.stats IS 'server-wide pg_dlock counters and current lease counts';
GRANT SELECT ON dlock.stats TO PUBLIC;

CREATE VIEW dlock.locks AS
	SELECT l.lock_name,
		   CASE WHEN l.owner_token IS NULL THEN 'free'
				WHEN l.lease_until OPERATOR(pg_catalog.>) n.now THEN 'held'
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
		   l.updated_at AS last_change
	  FROM dlock.distributed_lock l,
		   LATERAL (SELECT pg_catalog.clock_timestamp() AS now) n;
COMMENT ON VIEW dlock.locks IS 'one row per lock name with its state on the server clock; never shows owner tokens';
GRANT SELECT ON dlock.locks TO PUBLIC;

CREATE VIEW dlock.lock_owners AS
	SELECT l.lock_name, l.owner_token, l.fencing_seq AS fencing_token, l.lease_until
	  FROM dlock.distributed_lock l
	 WHERE l.owner_token IS NOT NULL;
COMMENT ON VIEW dlock.lock_owners IS 'owner tokens of current and expired leases: capabilities, readable only with a grant';
REVOKE ALL ON dlock.lock_owners FROM PUBLIC;
