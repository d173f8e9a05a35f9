-- farm/proxy.sql: the lock farm's proxy database (PL/Proxy 2.10), for pg_dlock 1.6.
--
-- Schema dlock here has the extension's functions that act on one name, with
-- the same arguments and results; each call runs on the partition that owns
-- the name: partition hashtext(name) & (N - 1) of the N (a power of two)
-- partitions of foreign server dlock_farm (docs/farm.md). The partitions are
-- ordinary databases with pg_dlock. farm/setup.sh loads this file after
-- CREATE EXTENSION plproxy and creates the server and its user mapping.
--
-- Run as a superuser, in a database that has no schema dlock yet.

\set ON_ERROR_STOP 1

CREATE SCHEMA dlock;
COMMENT ON SCHEMA dlock IS 'pg_dlock through the lock farm''s proxy: each call runs on the partition that owns the name';
-- the routed calls the wrappers of schema dlock use; not for applications
CREATE SCHEMA dlock_farm;
COMMENT ON SCHEMA dlock_farm IS 'the lock farm''s routing: partition list and routed calls behind schema dlock';

CREATE TYPE dlock.lease AS (lock_name text, owner_token uuid, fencing_token bigint, lease_until timestamptz);
COMMENT ON TYPE dlock.lease IS 'a lease as the extension returns it';

-- The one place that maps a name to its partition: PL/Proxy's rule for a
-- cluster of N partitions (bitmask mapping), N read from the server's p0..pN-1.
CREATE FUNCTION dlock_farm.partitions(OUT partition integer, OUT connstr text)
RETURNS SETOF record
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.substr(pg_catalog.split_part(o.opt, '=', 1), 2)::integer,
	       pg_catalog.substr(o.opt, pg_catalog.strpos(o.opt, '=') + 1)
	FROM pg_catalog.pg_foreign_server s, pg_catalog.unnest(s.srvoptions) AS o(opt)
	WHERE s.srvname OPERATOR(pg_catalog.=) 'dlock_farm'
	  AND o.opt OPERATOR(pg_catalog.~) '^p[0-9]+='
	ORDER BY 1
$$;
COMMENT ON FUNCTION dlock_farm.partitions() IS 'the farm''s partitions: number and connection string, from foreign server dlock_farm';

-- A NULL name goes to partition 0, whose extension refuses it as it would.
CREATE FUNCTION dlock_farm.hash(lock_name text)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT COALESCE(pg_catalog.hashtext(lock_name), 0)
$$;
COMMENT ON FUNCTION dlock_farm.hash(text) IS 'the hash PL/Proxy routes a name by: hashtext(name), 0 for NULL';

CREATE FUNCTION dlock_farm.partition_number(lock_name text)
RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT dlock_farm.hash(lock_name) OPERATOR(pg_catalog.&)
	       ((SELECT pg_catalog.count(*) FROM dlock_farm.partitions())::integer OPERATOR(pg_catalog.-) 1)
$$;
COMMENT ON FUNCTION dlock_farm.partition_number(text) IS 'the partition that owns a name: hashtext(name) & (N - 1), as PL/Proxy routes it';

CREATE FUNCTION dlock.partition_of(lock_name text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT p.connstr FROM dlock_farm.partitions() p
	WHERE p.partition OPERATOR(pg_catalog.=) dlock_farm.partition_number(lock_name)
$$;
COMMENT ON FUNCTION dlock.partition_of(text) IS 'the connection string of the partition that owns a name: connect there for assert_holds and the fencing trigger';

-- The one partition of a set of names; refused when they fall on more than
-- one (no transaction spans two partitions). NULLs are left to the partition,
-- which refuses them as the extension does; an empty or NULL array goes to 0.
CREATE FUNCTION dlock_farm.partition_of_all(lock_names text[])
RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	first_name text;
	first_part integer;
	name text;
	part integer;
BEGIN
	IF lock_names IS NULL THEN
		RETURN 0;
	END IF;
	FOREACH name IN ARRAY lock_names LOOP
		CONTINUE WHEN name IS NULL;
		part := dlock_farm.partition_number(name);
		IF first_part IS NULL THEN
			first_name := name;
			first_part := part;
		ELSIF part OPERATOR(pg_catalog.<>) first_part THEN
			RAISE EXCEPTION 'lock_names fall on more than one partition of the farm'
				USING ERRCODE = 'feature_not_supported',
				DETAIL = pg_catalog.format('"%s" is on partition %s and "%s" on partition %s; no transaction spans two partitions.',
					first_name, first_part, name, part),
				HINT = 'Take together only names of one partition (dlock.partition_of), or take the names one by one in a fixed order.';
		END IF;
	END LOOP;
	RETURN COALESCE(first_part, 0);
END
$$;
COMMENT ON FUNCTION dlock_farm.partition_of_all(text[]) IS 'the one partition that owns every name of a set; refuses (0A000) a set that spans partitions';

-- Single-name calls: PL/Proxy runs the same function on the owning partition.

CREATE FUNCTION dlock_farm.try_acquire(lock_name text, ttl interval, owner_token uuid, holder text,
	max_hold interval, min_hold interval, lock_delay interval)
RETURNS dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
	SELECT * FROM dlock.try_acquire(lock_name, ttl, owner_token, holder, false, max_hold, min_hold, lock_delay);
$$;
CREATE FUNCTION dlock_farm.acquire(lock_name text, ttl interval, wait interval, owner_token uuid, holder text,
	max_hold interval, min_hold interval, lock_delay interval)
RETURNS dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
	SELECT * FROM dlock.acquire(lock_name, ttl, wait, owner_token, holder, false, max_hold, min_hold, lock_delay);
$$;
COMMENT ON FUNCTION dlock_farm.try_acquire(text, interval, uuid, text, interval, interval, interval) IS 'dlock.try_acquire on the owning partition';
COMMENT ON FUNCTION dlock_farm.acquire(text, interval, interval, uuid, text, interval, interval, interval) IS 'dlock.acquire on the owning partition';

-- A session-bound lease would be bound to the proxy's pooled connection to the
-- partition, which outlives the caller's session: refused, not silently unbound.
CREATE FUNCTION dlock_farm.refuse_session_bound(session_bound boolean)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF session_bound THEN
		RAISE EXCEPTION 'session_bound leases cannot be taken through the farm''s proxy'
			USING ERRCODE = 'feature_not_supported',
			DETAIL = 'The proxy''s connection to the partition outlives the calling session.',
			HINT = 'Connect to the partition that owns the name (dlock.partition_of) for a session-bound lease.';
	ELSIF session_bound IS NULL THEN
		RAISE EXCEPTION 'session_bound must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
END
$$;
COMMENT ON FUNCTION dlock_farm.refuse_session_bound(boolean) IS 'refuses session_bound through the proxy';

CREATE FUNCTION dlock.try_acquire(lock_name text, ttl interval, owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
	session_bound boolean DEFAULT false, max_hold interval DEFAULT NULL, min_hold interval DEFAULT NULL,
	lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock_farm.refuse_session_bound(session_bound);
	RETURN dlock_farm.try_acquire(lock_name, ttl, owner_token, holder, max_hold, min_hold, lock_delay);
END
$$;
CREATE FUNCTION dlock.acquire(lock_name text, ttl interval, wait interval, owner_token uuid DEFAULT NULL,
	holder text DEFAULT NULL, session_bound boolean DEFAULT false, max_hold interval DEFAULT NULL,
	min_hold interval DEFAULT NULL, lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock_farm.refuse_session_bound(session_bound);
	RETURN dlock_farm.acquire(lock_name, ttl, wait, owner_token, holder, max_hold, min_hold, lock_delay);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire(text, interval, uuid, text, boolean, interval, interval, interval) IS 'dlock.try_acquire on the partition that owns the name';
COMMENT ON FUNCTION dlock.acquire(text, interval, interval, uuid, text, boolean, interval, interval, interval) IS 'dlock.acquire on the partition that owns the name';

CREATE FUNCTION dlock.renew(lock_name text, owner_token uuid, ttl interval)
RETURNS timestamptz LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
CREATE FUNCTION dlock.release(lock_name text, owner_token uuid)
RETURNS boolean LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
-- The pin holds only for the partition's own autocommit transaction: for
-- fencing, call assert_holds on the partition itself (docs/farm.md).
CREATE FUNCTION dlock.holds(lock_name text, fencing_token bigint)
RETURNS boolean LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
CREATE FUNCTION dlock.fence(resource text, fencing_token bigint)
RETURNS void LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(resource);
$$;
CREATE FUNCTION dlock.force_release(lock_name text, reason text)
RETURNS boolean LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
CREATE FUNCTION dlock.waiters(lock_name text)
RETURNS integer LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
CREATE FUNCTION dlock.leader(election text, OUT holder text, OUT fencing_token bigint, OUT since timestamptz,
	OUT lease_until timestamptz)
RETURNS record LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(election);
$$;
CREATE FUNCTION dlock.try_acquire_shared(lock_name text, ttl interval, owner_token uuid DEFAULT NULL,
	holder text DEFAULT NULL, max_hold interval DEFAULT NULL, min_hold interval DEFAULT NULL, lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
CREATE FUNCTION dlock.acquire_shared(lock_name text, ttl interval, wait interval, owner_token uuid DEFAULT NULL,
	holder text DEFAULT NULL, max_hold interval DEFAULT NULL, min_hold interval DEFAULT NULL, lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
CREATE FUNCTION dlock.try_acquire_permit(semaphore_name text, permits integer, ttl interval,
	owner_token uuid DEFAULT NULL, holder text DEFAULT NULL, max_hold interval DEFAULT NULL, min_hold interval DEFAULT NULL, lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(semaphore_name);
$$;
CREATE FUNCTION dlock.acquire_permit(semaphore_name text, permits integer, ttl interval, wait interval,
	owner_token uuid DEFAULT NULL, holder text DEFAULT NULL, max_hold interval DEFAULT NULL, min_hold interval DEFAULT NULL, lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(semaphore_name);
$$;
CREATE FUNCTION dlock.resize_semaphore(semaphore_name text, permits integer)
RETURNS integer LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(semaphore_name);
$$;
CREATE FUNCTION dlock.downgrade(lock_name text, owner_token uuid)
RETURNS dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON dlock_farm.hash(lock_name);
$$;
COMMENT ON FUNCTION dlock.renew(text, uuid, interval) IS 'dlock.renew on the partition that owns the name';
COMMENT ON FUNCTION dlock.release(text, uuid) IS 'dlock.release on the partition that owns the name';
COMMENT ON FUNCTION dlock.holds(text, bigint) IS 'dlock.holds on the partition that owns the name; its pin ends with the remote call';
COMMENT ON FUNCTION dlock.fence(text, bigint) IS 'dlock.fence on the partition that owns the resource name';
COMMENT ON FUNCTION dlock.force_release(text, text) IS 'dlock.force_release on the partition that owns the name';
COMMENT ON FUNCTION dlock.waiters(text) IS 'dlock.waiters on the partition that owns the name';
COMMENT ON FUNCTION dlock.leader(text) IS 'dlock.leader on the partition that owns the election';
COMMENT ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval) IS 'dlock.try_acquire_shared on the partition that owns the name';
COMMENT ON FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text, interval, interval, interval) IS 'dlock.acquire_shared on the partition that owns the name';
COMMENT ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval) IS 'dlock.try_acquire_permit on the partition that owns the semaphore';
COMMENT ON FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text, interval, interval, interval) IS 'dlock.acquire_permit on the partition that owns the semaphore';
COMMENT ON FUNCTION dlock.resize_semaphore(text, integer) IS 'dlock.resize_semaphore on the partition that owns the semaphore';
COMMENT ON FUNCTION dlock.downgrade(text, uuid) IS 'dlock.downgrade on the partition that owns the name';

-- Multi-locks: every name of the set on one partition, else refused.

CREATE FUNCTION dlock_farm.try_acquire_all(partition integer, lock_names text[], ttl interval, owner_token uuid,
	holder text, max_hold interval, min_hold interval, lock_delay interval)
RETURNS SETOF dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON partition;
	SELECT * FROM dlock.try_acquire_all(lock_names, ttl, owner_token, holder, false, max_hold, min_hold, lock_delay);
$$;
CREATE FUNCTION dlock_farm.acquire_all(partition integer, lock_names text[], ttl interval, wait interval,
	owner_token uuid, holder text, max_hold interval, min_hold interval, lock_delay interval)
RETURNS SETOF dlock.lease LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON partition;
	SELECT * FROM dlock.acquire_all(lock_names, ttl, wait, owner_token, holder, false, max_hold, min_hold, lock_delay);
$$;
-- Releasing is per name and idempotent, so a set that a reshard spread over
-- partitions is released on each of them (SPLIT sends each its names).
CREATE FUNCTION dlock_farm.release_all(lock_names text[], owner_token uuid)
RETURNS SETOF integer LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	SPLIT lock_names;
	RUN ON dlock_farm.hash(lock_names);
	SELECT dlock.release_all(lock_names, owner_token);
$$;
COMMENT ON FUNCTION dlock_farm.try_acquire_all(integer, text[], interval, uuid, text, interval, interval, interval) IS 'dlock.try_acquire_all on one partition';
COMMENT ON FUNCTION dlock_farm.acquire_all(integer, text[], interval, interval, uuid, text, interval, interval, interval) IS 'dlock.acquire_all on one partition';
COMMENT ON FUNCTION dlock_farm.release_all(text[], uuid) IS 'dlock.release_all on each partition that owns some of the names';

CREATE FUNCTION dlock.try_acquire_all(lock_names text[], ttl interval, owner_token uuid DEFAULT NULL,
	holder text DEFAULT NULL, session_bound boolean DEFAULT false, max_hold interval DEFAULT NULL,
	min_hold interval DEFAULT NULL, lock_delay interval DEFAULT NULL)
RETURNS SETOF dlock.lease
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock_farm.refuse_session_bound(session_bound);
	RETURN QUERY SELECT * FROM dlock_farm.try_acquire_all(dlock_farm.partition_of_all(lock_names), lock_names, ttl,
		owner_token, holder, max_hold, min_hold, lock_delay);
END
$$;
CREATE FUNCTION dlock.acquire_all(lock_names text[], ttl interval, wait interval, owner_token uuid DEFAULT NULL,
	holder text DEFAULT NULL, session_bound boolean DEFAULT false, max_hold interval DEFAULT NULL,
	min_hold interval DEFAULT NULL, lock_delay interval DEFAULT NULL)
RETURNS SETOF dlock.lease
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock_farm.refuse_session_bound(session_bound);
	RETURN QUERY SELECT * FROM dlock_farm.acquire_all(dlock_farm.partition_of_all(lock_names), lock_names, ttl, wait,
		owner_token, holder, max_hold, min_hold, lock_delay);
END
$$;
CREATE FUNCTION dlock.release_all(lock_names text[], owner_token uuid)
RETURNS integer
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT COALESCE(pg_catalog.sum(n), 0)::integer FROM dlock_farm.release_all(lock_names, owner_token) n
$$;
COMMENT ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text, boolean, interval, interval, interval) IS 'dlock.try_acquire_all on the one partition that owns every name; refused (0A000) across partitions';
COMMENT ON FUNCTION dlock.acquire_all(text[], interval, interval, uuid, text, boolean, interval, interval, interval) IS 'dlock.acquire_all on the one partition that owns every name; refused (0A000) across partitions';
COMMENT ON FUNCTION dlock.release_all(text[], uuid) IS 'dlock.release_all on every partition that owns some of the names';

-- dlock.locks gathered from every partition.
CREATE FUNCTION dlock_farm.locks(OUT lock_name text, OUT state text, OUT holder text, OUT fencing_token bigint,
	OUT acquired_at timestamptz, OUT held_for interval, OUT lease_until timestamptz, OUT expires_in interval,
	OUT renewals bigint, OUT acquisitions bigint, OUT takeovers bigint, OUT last_change timestamptz,
	OUT kind text, OUT holders integer, OUT policy_state text, OUT available_at timestamptz,
	OUT session_bound boolean, OUT session_pid integer, OUT hold_limit timestamptz, OUT min_hold_until timestamptz,
	OUT lock_delay interval, OUT waiters integer)
RETURNS SETOF record LANGUAGE plproxy VOLATILE AS $$
	CLUSTER 'dlock_farm';
	RUN ON ALL;
	SELECT * FROM dlock.locks;
$$;
COMMENT ON FUNCTION dlock_farm.locks() IS 'dlock.locks of every partition';
CREATE VIEW dlock.locks AS SELECT * FROM dlock_farm.locks();
COMMENT ON VIEW dlock.locks IS 'dlock.locks of every partition of the farm';

-- The same privileges as the extension's: a pin, a fence's shared state and
-- ending another's lease need a grant.
REVOKE ALL ON FUNCTION dlock.holds(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION dlock.fence(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION dlock.force_release(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION dlock.resize_semaphore(text, integer) FROM PUBLIC;
-- Given a partition number, these would take names on a partition that does
-- not own them: only the refusing wrappers (SECURITY DEFINER) call them.
REVOKE ALL ON FUNCTION dlock_farm.try_acquire_all(integer, text[], interval, uuid, text, interval, interval, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION dlock_farm.acquire_all(integer, text[], interval, interval, uuid, text, interval, interval, interval) FROM PUBLIC;
GRANT USAGE ON SCHEMA dlock, dlock_farm TO PUBLIC;
GRANT SELECT ON dlock.locks TO PUBLIC;
