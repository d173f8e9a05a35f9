/* sql_edition/pg_dlock_sql--1.3--1.4.sql -- pg_dlock 1.3 -> 1.4, SQL edition: dlock.durability = fenced is refused */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.4'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * The C extension's 1.4 (sql/pg_dlock--1.3--1.4.sql) added the setting
 * dlock.durability = fenced: grants and renewals that are their
 * transaction's only writes commit without the WAL flush, and a durable
 * token epoch keeps every later token above the grants a crash lost. That
 * needs the library. Without it the setting is a placeholder any session may
 * set (with it preloaded in the cluster, the library's own setting), and this
 * edition ignored it: a session asking for fenced grants silently got durable
 * ones. Now every function that grants or renews refuses under it (0A000),
 * through dlock._check_durability; releases are unaffected.
 * dlock.durability_stats is not defined (sql_edition/missing-functions.txt).
 */

------------------------------------------------------------------------------
-- The refusal, and where the grants check it
------------------------------------------------------------------------------

-- 'fenced' in any case: a placeholder keeps the case it was set in, while
-- the C library's enum setting (where it is preloaded in the cluster)
-- accepts any case and reads back in lower case.
CREATE FUNCTION dlock._check_durability()
RETURNS void LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.lower(pg_catalog.current_setting('dlock.durability', true)) = 'fenced' THEN
		RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
			MESSAGE = 'dlock.durability = fenced needs the C extension pg_dlock',
			DETAIL = 'The SQL edition commits every grant and renewal durably.',
			HINT = 'RESET dlock.durability, or install the C extension pg_dlock.';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION dlock._check_durability() FROM PUBLIC;

-- Checks shared by the acquire functions of the exclusive, shared and
-- permit kinds: the arguments, then the durability asked for.
CREATE OR REPLACE FUNCTION dlock._check_acquire(lock_name text, ttl interval, owner_token uuid, holder text)
RETURNS void LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('lock_name', lock_name);
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
	PERFORM dlock._check_durability();
END
$$;

-- The grants that do not go through dlock._check_acquire: the same
-- definitions as before, with the check after their argument checks.

CREATE OR REPLACE FUNCTION dlock.renew(lock_name text, owner_token uuid, ttl interval)
RETURNS timestamptz LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	h dlock.lock_holder;
	now timestamptz;
	until timestamptz;
BEGIN
	PERFORM dlock._check_name('lock_name', renew.lock_name);
	PERFORM dlock._check_owner(renew.owner_token, true);
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_durability();
	SELECT * INTO r FROM dlock.distributed_lock l
	 WHERE l.lock_name = renew.lock_name AND l.owner_token = renew.owner_token;
	IF FOUND THEN
		IF r.lease_until <= pg_catalog.clock_timestamp() THEN
			PERFORM dlock._audit('renew_refused', renew.lock_name, r.fencing_seq, r.holder, NULL);
			RETURN NULL;
		END IF;
		PERFORM dlock._durable();
		SELECT * INTO r FROM dlock.distributed_lock l
		 WHERE l.lock_name = renew.lock_name AND l.owner_token = renew.owner_token FOR UPDATE;
		now := pg_catalog.clock_timestamp();
		IF NOT FOUND OR r.lease_until <= now OR (r.hold_limit IS NOT NULL AND now >= r.hold_limit) THEN
			PERFORM dlock._audit('renew_refused', renew.lock_name, r.fencing_seq, r.holder, NULL);
			RETURN NULL;
		END IF;
		-- max_hold bounds the whole hold: never past the lease's hold_limit
		UPDATE dlock.distributed_lock l
		   SET lease_until = LEAST(now + dlock._length(ttl), COALESCE(l.hold_limit, 'infinity')),
			   updated_at = now, renewals = l.renewals + 1
		 WHERE l.lock_name = renew.lock_name
		RETURNING l.lease_until INTO until;
		RETURN until;
	END IF;
	-- a shared lease or permit of this owner
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = renew.lock_name AND s.owner_token = renew.owner_token;
	IF NOT FOUND OR h.lease_until <= pg_catalog.clock_timestamp() THEN
		RETURN NULL;
	END IF;
	PERFORM dlock._durable();
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = renew.lock_name AND s.slot = h.slot AND s.owner_token = renew.owner_token FOR UPDATE;
	now := pg_catalog.clock_timestamp();
	IF NOT FOUND OR h.lease_until <= now THEN
		RETURN NULL;
	END IF;
	UPDATE dlock.lock_holder s
	   SET lease_until = now + dlock._length(ttl), updated_at = now, renewals = s.renewals + 1
	 WHERE s.lock_name = renew.lock_name AND s.slot = h.slot
	RETURNING s.lease_until INTO until;
	RETURN until;
END
$$;

CREATE OR REPLACE FUNCTION dlock.try_acquire_all(lock_names text[], ttl interval,
									  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	names text[] := dlock._check_names(lock_names);
BEGIN
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
	PERFORM dlock._check_durability();
	RETURN QUERY SELECT * FROM dlock._try_all(names, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder);
END
$$;

CREATE OR REPLACE FUNCTION dlock.acquire_all(lock_names text[], ttl interval, wait interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	names text[] := dlock._check_names(lock_names);
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	leases dlock.lease[];
BEGIN
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
	PERFORM dlock._check_durability();
	PERFORM dlock._check_wait(wait);
	PERFORM dlock._check_may_wait(names[1], wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		leases := ARRAY(SELECT a FROM dlock._try_all(names, ttl, owner, holder) a);
		IF pg_catalog.cardinality(leases) > 0 THEN
			RETURN QUERY SELECT * FROM pg_catalog.unnest(leases);
			RETURN;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			RAISE EXCEPTION USING ERRCODE = 'lock_not_available',
				MESSAGE = pg_catalog.format('could not acquire all of %s locks within %s ms', pg_catalog.cardinality(names),
											(pg_catalog.date_part('epoch', dlock._length(wait)) * 1000)::bigint);
		END IF;
	END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION dlock.downgrade(lock_name text, owner_token uuid)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	now timestamptz;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_name('lock_name', downgrade.lock_name);
	PERFORM dlock._not_null('owner_token', downgrade.owner_token IS NULL);
	PERFORM dlock._check_durability();
	-- the unlocked look: nothing to downgrade takes no lock
	SELECT * INTO r FROM dlock.distributed_lock l
	 WHERE l.lock_name = downgrade.lock_name AND l.owner_token = downgrade.owner_token;
	IF NOT FOUND OR r.lease_until <= pg_catalog.clock_timestamp() THEN
		RETURN NULL;
	END IF;
	PERFORM dlock._check_downgrade(r);
	-- Decided under locks from here on: a refusal rolls back this
	-- subtransaction, so the caller keeps neither the kind lock nor the row.
	BEGIN
		PERFORM pg_catalog.pg_advisory_xact_lock_shared(dlock._kind_key(downgrade.lock_name));
		SELECT * INTO r FROM dlock.distributed_lock l
		 WHERE l.lock_name = downgrade.lock_name AND l.owner_token = downgrade.owner_token FOR UPDATE;
		now := pg_catalog.clock_timestamp();
		IF NOT FOUND OR r.lease_until <= now THEN
			RAISE SQLSTATE 'PD098';
		END IF;
		PERFORM dlock._check_downgrade(r);
		UPDATE dlock.distributed_lock l
		   SET owner_token = NULL, updated_at = now, exclusive_only = false
		 WHERE l.lock_name = downgrade.lock_name;
		PERFORM dlock._event('downgrade', downgrade.lock_name, r.fencing_seq, r.holder, now);
		PERFORM dlock._audit('downgrade', downgrade.lock_name, r.fencing_seq, r.holder, NULL);
		result := dlock._try_holder('s', downgrade.lock_name, NULL, NULL, downgrade.owner_token, r.holder,
									r.lease_until);
		IF result.owner_token IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'internal_error',
				MESSAGE = pg_catalog.format('pg_dlock: the downgraded lease of lock "%s" was not granted',
											downgrade.lock_name);
		END IF;
		RETURN result;
	EXCEPTION WHEN SQLSTATE 'PD098' THEN
		RETURN NULL;
	END;
END
$$;

-- BEGIN extension owner
-- A trusted extension's update script runs as a superuser too: hand what it
-- created to the extension's owner, as the install script does. (Left out of
-- the psql -f and pg_tle scripts, which run as that role already.)
DO $owner$
DECLARE
	owner pg_catalog.oid;
	obj record;
BEGIN
	SELECT e.extowner INTO owner FROM pg_catalog.pg_extension e
	 WHERE e.extname OPERATOR(pg_catalog.=) 'pg_dlock_sql'::pg_catalog.name;
	FOR obj IN SELECT p.oid::pg_catalog.regprocedure AS name FROM pg_catalog.pg_proc p
				WHERE p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('dlock')::pg_catalog.oid
				  AND p.proowner OPERATOR(pg_catalog.<>) owner
	LOOP
		EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', obj.name, pg_catalog.pg_get_userbyid(owner));
	END LOOP;
	FOR obj IN SELECT c.oid::pg_catalog.regclass AS name FROM pg_catalog.pg_class c
				WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('dlock')::pg_catalog.oid
				  AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v']::pg_catalog."char"[]) AND c.relowner OPERATOR(pg_catalog.<>) owner
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', obj.name, pg_catalog.pg_get_userbyid(owner));
	END LOOP;
END
$owner$;
-- END extension owner
