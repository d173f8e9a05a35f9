/* sql_edition/pg_dlock_sql--1.5--1.6.sql -- pg_dlock_sql 1.5 -> 1.6: the C extension's 1.6 signatures of the shared, permit and multi-lock acquire functions; a multi-lock's options on every name */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.6'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * What changes (docs/sql-edition.md):
 *  - try_acquire_shared, acquire_shared, try_acquire_permit and
 *    acquire_permit take max_hold, min_hold and lock_delay, and
 *    try_acquire_all and acquire_all take session_bound, max_hold, min_hold
 *    and lock_delay, as named arguments with defaults, as in the C
 *    extension 1.6; so a call written for the C extension is a call of the
 *    same function here.
 *  - A multi-lock's options are checked once, before anything is read or
 *    written, by the rule of try_acquire (dlock._check_policy), and given
 *    to the lease of every name of the set.
 *  - Renewals of every kind are audited ("renew", and "renew_refused"
 *    without token or holder, as in the C extension), and so is the end of
 *    a shared lease or permit that ran out ("expire"), at audit = all.
 *  - A shared lease's or permit's options are checked by the same rule;
 *    policies per holder slot are not offered yet, so a call that asks for
 *    one is refused (0A000) rather than granted without it. The settings
 *    still refuse a ttl above dlock.max_hold for every kind.
 *
 * The functions are replaced, not overloaded (an overload would make every
 * existing call ambiguous); each new one gets the old one's privileges.
 */

------------------------------------------------------------------------------
-- One rule for the options of every kind
------------------------------------------------------------------------------

/*
 * The options of a shared lease or permit: checked as try_acquire's
 * (dlock._check_policy: the same messages and SQLSTATEs, the settings'
 * bounds), then refused when one asks for a policy, which this edition
 * keeps per name only (docs/sql-edition.md).
 */
CREATE FUNCTION dlock._check_holder_policy(ttl interval, max_hold interval, min_hold interval, lock_delay interval)
RETURNS void LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_policy(ttl, false, max_hold, min_hold, lock_delay);
	IF max_hold IS NOT NULL OR min_hold IS NOT NULL OR lock_delay IS NOT NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
			MESSAGE = pg_catalog.format('%s of a shared lease or permit is not available in the SQL edition of pg_dlock',
										CASE WHEN max_hold IS NOT NULL THEN 'max_hold'
											 WHEN min_hold IS NOT NULL THEN 'min_hold' ELSE 'lock_delay' END),
			DETAIL = 'The SQL edition keeps lease policies per name, for exclusive leases and multi-locks only.',
			HINT = 'Use the pg_dlock extension for policies of shared leases and permits.';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION dlock._check_holder_policy(interval, interval, interval, interval) FROM PUBLIC;

-- all or none of a set, each through _try_exclusive with the set's options
DROP FUNCTION dlock._try_all(text[], interval, uuid, text, boolean);
CREATE FUNCTION dlock._try_all(p_names text[], p_ttl interval, p_owner uuid, p_holder text,
								p_max_hold interval, p_min_hold interval, p_lock_delay interval,
								p_polling boolean DEFAULT false)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n text;
	got dlock.lease;
	leases dlock.lease[] := '{}';
BEGIN
	-- a first read-only pass refuses a set with a name held by another owner
	IF EXISTS (SELECT 1 FROM dlock.distributed_lock l
				WHERE l.lock_name = ANY (p_names) AND l.owner_token IS DISTINCT FROM p_owner
				  AND l.owner_token IS NOT NULL AND l.lease_until > pg_catalog.clock_timestamp()) THEN
		RETURN;
	END IF;
	BEGIN
		FOREACH n IN ARRAY p_names LOOP
			got := dlock._try_exclusive(n, p_ttl, p_owner, p_holder, p_max_hold, p_min_hold, p_lock_delay, p_polling);
			IF got.owner_token IS NULL THEN
				RAISE EXCEPTION USING ERRCODE = 'PD099', MESSAGE = 'multi-lock attempt refused';
			END IF;
			leases := leases || got;
		END LOOP;
	EXCEPTION WHEN SQLSTATE 'PD099' THEN
		RETURN;
	END;
	RETURN QUERY SELECT * FROM pg_catalog.unnest(leases);
END
$$;
REVOKE ALL ON FUNCTION dlock._try_all(text[], interval, uuid, text, interval, interval, interval, boolean) FROM PUBLIC;

------------------------------------------------------------------------------
-- The acquire functions with the options of 1.6
------------------------------------------------------------------------------

-- the old functions stay, renamed, until their privileges are copied
ALTER FUNCTION dlock.try_acquire_shared(text, interval, uuid, text) RENAME TO _old_try_acquire_shared;
ALTER FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text) RENAME TO _old_acquire_shared;
ALTER FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text) RENAME TO _old_try_acquire_permit;
ALTER FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text) RENAME TO _old_acquire_permit;
ALTER FUNCTION dlock.try_acquire_all(text[], interval, uuid, text) RENAME TO _old_try_acquire_all;
ALTER FUNCTION dlock.acquire_all(text[], interval, interval, uuid, text) RENAME TO _old_acquire_all;

CREATE FUNCTION dlock.try_acquire_shared(lock_name text, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
										 max_hold interval DEFAULT NULL,
										 min_hold interval DEFAULT NULL,
										 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	PERFORM dlock._check_holder_policy(ttl, max_hold, min_hold, lock_delay);
	RETURN dlock._try_holder('s', lock_name, NULL, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval) IS
'takes a shared lease unless an exclusive lease is live; NULL otherwise. max_hold, min_hold and lock_delay are refused in the SQL edition (0A000)';

CREATE FUNCTION dlock.acquire_shared(lock_name text, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
									 max_hold interval DEFAULT NULL,
									 min_hold interval DEFAULT NULL,
									 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1ms'
AS $$
DECLARE
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	PERFORM dlock._check_holder_policy(ttl, max_hold, min_hold, lock_delay);
	PERFORM dlock._check_may_wait(lock_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		BEGIN
			result := dlock._try_holder('s', lock_name, NULL, ttl, owner, holder, NULL, true);
		EXCEPTION WHEN lock_not_available THEN
			result := NULL;	-- it met a lock: refused, poll again
		END;
		IF result.owner_token IS NOT NULL THEN
			RETURN result;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			PERFORM dlock._wait_ran_out(lock_name, wait);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text, interval, interval, interval) IS
'like try_acquire_shared, but polls in the server up to "wait"; raises lock_not_available (55P03) when the wait runs out. Same options as try_acquire_shared';

CREATE FUNCTION dlock.try_acquire_permit(semaphore_name text, permits integer, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
										 max_hold interval DEFAULT NULL,
										 min_hold interval DEFAULT NULL,
										 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('semaphore_name', semaphore_name);
	PERFORM dlock._check_permits(permits);
	PERFORM dlock._check_acquire(semaphore_name, ttl, owner_token, holder);
	PERFORM dlock._check_holder_policy(ttl, max_hold, min_hold, lock_delay);
	RETURN dlock._try_holder('p', semaphore_name, permits, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval) IS
'takes one of "permits" permits of the semaphore as its own lease; NULL when all are held. max_hold, min_hold and lock_delay are refused in the SQL edition (0A000)';

CREATE FUNCTION dlock.acquire_permit(semaphore_name text, permits integer, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
									 max_hold interval DEFAULT NULL,
									 min_hold interval DEFAULT NULL,
									 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1ms'
AS $$
DECLARE
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_name('semaphore_name', semaphore_name);
	PERFORM dlock._check_permits(permits);
	PERFORM dlock._check_acquire(semaphore_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	PERFORM dlock._check_holder_policy(ttl, max_hold, min_hold, lock_delay);
	PERFORM dlock._check_may_wait(semaphore_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		BEGIN
			result := dlock._try_holder('p', semaphore_name, permits, ttl, owner, holder, NULL, true);
		EXCEPTION WHEN lock_not_available THEN
			result := NULL;	-- it met a lock: refused, poll again
		END;
		IF result.owner_token IS NOT NULL THEN
			RETURN result;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			PERFORM dlock._wait_ran_out(semaphore_name, wait);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text, interval, interval, interval) IS
'like try_acquire_permit, but polls in the server up to "wait"; raises lock_not_available (55P03) when the wait runs out. Same options as try_acquire_permit';

CREATE FUNCTION dlock.try_acquire_all(lock_names text[], ttl interval,
									  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
									  session_bound boolean DEFAULT false,
									  max_hold interval DEFAULT NULL,
									  min_hold interval DEFAULT NULL,
									  lock_delay interval DEFAULT NULL)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	names text[] := dlock._check_names(lock_names);
	p record;
BEGIN
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
	PERFORM dlock._check_durability();
	p := dlock._check_policy(ttl, session_bound, max_hold, min_hold, lock_delay);
	RETURN QUERY SELECT * FROM dlock._try_all(names, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder,
											  p.eff_max_hold, min_hold, p.eff_lock_delay);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text, boolean, interval, interval, interval) IS
'takes exclusive leases on every name with one owner token, or on none (no rows). The options of try_acquire apply to the lease of every name';

CREATE FUNCTION dlock.acquire_all(lock_names text[], ttl interval, wait interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
								  session_bound boolean DEFAULT false,
								  max_hold interval DEFAULT NULL,
								  min_hold interval DEFAULT NULL,
								  lock_delay interval DEFAULT NULL)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1ms'
AS $$
DECLARE
	names text[] := dlock._check_names(lock_names);
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	p record;
	started timestamptz;
	attempt integer := 0;
	leases dlock.lease[];
BEGIN
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
	PERFORM dlock._check_durability();
	PERFORM dlock._check_wait(wait);
	p := dlock._check_policy(ttl, session_bound, max_hold, min_hold, lock_delay);
	PERFORM dlock._check_may_wait(names[1], wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		BEGIN
			leases := ARRAY(SELECT a FROM dlock._try_all(names, ttl, owner, holder,
														 p.eff_max_hold, min_hold, p.eff_lock_delay, true) a);
		EXCEPTION WHEN lock_not_available THEN
			leases := NULL;	-- it met a lock: refused, poll again
		END;
		IF pg_catalog.cardinality(leases) > 0 THEN
			RETURN QUERY SELECT * FROM pg_catalog.unnest(leases);
			RETURN;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			RAISE EXCEPTION USING ERRCODE = 'lock_not_available',
				MESSAGE = pg_catalog.format('could not acquire all %s locks within %s ms', pg_catalog.cardinality(names),
											(pg_catalog.date_part('epoch', dlock._length(wait)) * 1000)::bigint);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION dlock.acquire_all(text[], interval, interval, uuid, text, boolean, interval, interval, interval) IS
'like try_acquire_all, but polls in the server up to "wait" for all; raises lock_not_available (55P03) and takes none when the wait runs out. Same options as try_acquire_all';

-- each new function gets its old one's privileges; then the old one goes
DO $acl$
DECLARE
	f record;
	g record;
BEGIN
	FOR f IN SELECT o.oid::pg_catalog.regprocedure AS old_fn, n.oid::pg_catalog.regprocedure AS new_fn, o.proacl
			   FROM pg_catalog.pg_proc o
			   JOIN pg_catalog.pg_proc n
				 ON n.pronamespace OPERATOR(pg_catalog.=) o.pronamespace
				AND ('_old_' OPERATOR(pg_catalog.||) n.proname::pg_catalog.text) OPERATOR(pg_catalog.=) o.proname::pg_catalog.text
			  WHERE o.pronamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('dlock')::pg_catalog.oid
				AND o.proname::pg_catalog.text OPERATOR(pg_catalog.~~) '\_old\_%'
	LOOP
		IF f.proacl IS NOT NULL THEN
			IF NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(f.proacl) a
							WHERE a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid) THEN
				EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f.new_fn);
			END IF;
			FOR g IN SELECT DISTINCT a.grantee FROM pg_catalog.aclexplode(f.proacl) a
					  WHERE a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
						AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'::pg_catalog.text
			LOOP
				EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f.new_fn,
										  pg_catalog.pg_get_userbyid(g.grantee));
			END LOOP;
		END IF;
		EXECUTE pg_catalog.format('DROP FUNCTION %s', f.old_fn);
	END LOOP;
END
$acl$;

------------------------------------------------------------------------------
-- Renewals and expiries of every kind are audited
------------------------------------------------------------------------------

/*
 * At audit = all, as in the C extension: an accepted renewal of any kind is
 * a "renew" record with its token and holder, a refused one (no live lease
 * of this owner) a "renew_refused" record without either; a shared lease or
 * permit that ran out is an "expire" record, written once by whatever ends
 * it (the grant that reuses its slot, a writer's grant that ends it).
 */
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
			PERFORM dlock._audit('renew_refused', renew.lock_name, NULL, NULL, NULL);
			RETURN NULL;
		END IF;
		PERFORM dlock._durable();
		SELECT * INTO r FROM dlock.distributed_lock l
		 WHERE l.lock_name = renew.lock_name AND l.owner_token = renew.owner_token FOR UPDATE;
		now := pg_catalog.clock_timestamp();
		IF NOT FOUND OR r.lease_until <= now OR (r.hold_limit IS NOT NULL AND now >= r.hold_limit) THEN
			PERFORM dlock._audit('renew_refused', renew.lock_name, NULL, NULL, NULL);
			RETURN NULL;
		END IF;
		-- max_hold bounds the whole hold: never past the lease's hold_limit
		UPDATE dlock.distributed_lock l
		   SET lease_until = LEAST(now + dlock._length(ttl), COALESCE(l.hold_limit, 'infinity')),
			   updated_at = now, renewals = l.renewals + 1
		 WHERE l.lock_name = renew.lock_name
		RETURNING l.lease_until INTO until;
		PERFORM dlock._audit('renew', renew.lock_name, r.fencing_seq, r.holder, NULL);
		RETURN until;
	END IF;
	-- a shared lease or permit of this owner
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = renew.lock_name AND s.owner_token = renew.owner_token;
	IF NOT FOUND OR h.lease_until <= pg_catalog.clock_timestamp() THEN
		PERFORM dlock._audit('renew_refused', renew.lock_name, NULL, NULL, NULL);
		RETURN NULL;
	END IF;
	PERFORM dlock._durable();
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = renew.lock_name AND s.slot = h.slot AND s.owner_token = renew.owner_token FOR UPDATE;
	now := pg_catalog.clock_timestamp();
	IF NOT FOUND OR h.lease_until <= now THEN
		PERFORM dlock._audit('renew_refused', renew.lock_name, NULL, NULL, NULL);
		RETURN NULL;
	END IF;
	UPDATE dlock.lock_holder s
	   SET lease_until = now + dlock._length(ttl), updated_at = now, renewals = s.renewals + 1
	 WHERE s.lock_name = renew.lock_name AND s.slot = h.slot
	RETURNING s.lease_until INTO until;
	PERFORM dlock._audit('renew', renew.lock_name, h.fencing_seq, h.holder, NULL);
	RETURN until;
END
$$;

-- ends the expired leases of a name (the exclusive row, or its holder
-- slots) before a grant of the other kind; a slot's end is its expiry
CREATE OR REPLACE FUNCTION dlock._end_expired_leases(p_lock_name text, p_now timestamptz, p_exclusive boolean,
										  p_polling boolean)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	ended record;
BEGIN
	IF p_exclusive THEN
		IF p_polling THEN
			PERFORM 1 FROM dlock.distributed_lock l
			  WHERE l.lock_name = p_lock_name AND l.owner_token IS NOT NULL AND l.lease_until <= p_now
			  FOR NO KEY UPDATE NOWAIT;
		END IF;
		UPDATE dlock.distributed_lock l SET owner_token = NULL, updated_at = pg_catalog.clock_timestamp()
		 WHERE l.lock_name = p_lock_name AND l.owner_token IS NOT NULL AND l.lease_until <= p_now;
	ELSE
		IF p_polling THEN
			PERFORM 1 FROM dlock.lock_holder h
			  WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until <= p_now
			  FOR NO KEY UPDATE NOWAIT;
		END IF;
		FOR ended IN
			UPDATE dlock.lock_holder h SET owner_token = NULL, updated_at = pg_catalog.clock_timestamp()
			 WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until <= p_now
			RETURNING h.slot, h.fencing_seq, h.holder
		LOOP
			PERFORM dlock._audit('expire', p_lock_name, ended.fencing_seq, ended.holder, NULL);
		END LOOP;
	END IF;
END
$$;

CREATE OR REPLACE FUNCTION dlock._try_holder(p_kind "char", p_lock_name text, p_permits integer, p_ttl interval,
								  p_owner uuid, p_holder text, p_until timestamptz DEFAULT NULL,
								  p_polling boolean DEFAULT false)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	hc dlock.holder_counter;
	h dlock.lock_holder;
	d record;
	c record;
	now timestamptz;
	token bigint;
	live_other bigint;
	live_same bigint;
	live_permits integer;
	free_slot integer;
	slot_exists boolean;
	until timestamptz;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_isolation();
	FOR attempt IN 1..2 LOOP
		now := pg_catalog.clock_timestamp();
		SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
		IF FOUND THEN
			d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
			IF d.live OR d.available_at IS NOT NULL THEN
				RETURN NULL;
			END IF;
		END IF;
		SELECT pg_catalog.count(*) FILTER (WHERE h2.kind <> p_kind),
			   pg_catalog.count(*) FILTER (WHERE h2.kind = p_kind),
			   pg_catalog.max(h2.permits) FILTER (WHERE h2.kind = p_kind)
		  INTO live_other, live_same, live_permits
		  FROM dlock.lock_holder h2
		 WHERE h2.lock_name = p_lock_name AND h2.owner_token IS NOT NULL AND h2.lease_until > now;
		IF live_other > 0 THEN
			RAISE EXCEPTION USING ERRCODE = 'PD020',
				MESSAGE = pg_catalog.format('lock "%s" is held as %s', p_lock_name,
											CASE WHEN p_kind = 's' THEN 'a semaphore' ELSE 'a shared lock' END),
				DETAIL = 'A name is used as one kind of lock at a time.';
		END IF;
		IF p_kind = 'p' AND live_permits IS NOT NULL AND live_permits <> p_permits THEN
			RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
				MESSAGE = pg_catalog.format('semaphore "%s" has %s permits, not %s', p_lock_name, live_permits, p_permits),
				HINT = 'Use dlock.resize_semaphore to change the number of permits.';
		END IF;
		-- the same owner again: same token, the lease extended
		SELECT * INTO h FROM dlock.lock_holder h2
		 WHERE h2.lock_name = p_lock_name AND h2.owner_token = p_owner AND h2.lease_until > now;
		IF FOUND THEN
			PERFORM dlock._durable();
			UPDATE dlock.lock_holder h2
			   SET lease_until = GREATEST(h2.lease_until, coalesce(p_until, now + dlock._length(p_ttl))), updated_at = now
			 WHERE h2.lock_name = p_lock_name AND h2.slot = h.slot AND h2.owner_token = p_owner
			RETURNING h2.lease_until INTO h.lease_until;
			IF FOUND THEN
				result := ROW(p_lock_name, p_owner, h.fencing_seq, h.lease_until);
				RETURN result;
			END IF;
			CONTINUE;
		END IF;
		IF p_kind = 'p' AND live_same >= p_permits THEN
			RETURN NULL;
		END IF;

		-- Decided under locks from here on: a refusal rolls back this subtransaction,
		-- so that a caller that goes on (acquire's next attempt, a longer
		-- transaction) holds neither the row lock nor the kind lock.
		BEGIN
			PERFORM dlock._durable();
			PERFORM pg_catalog.pg_advisory_xact_lock_shared(dlock._kind_key(p_lock_name));
			-- Decide again on the latest committed state before writing
			-- anything (a refusal here takes no row lock and no transaction
			-- ID): every statement of a READ COMMITTED transaction reads it.
			now := pg_catalog.clock_timestamp();
			SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
			IF FOUND THEN
				d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
				IF d.live OR d.available_at IS NOT NULL THEN
					RAISE SQLSTATE 'PD098';
				END IF;
			END IF;
			SELECT pg_catalog.count(*) FILTER (WHERE h2.kind <> p_kind),
				   pg_catalog.count(*) FILTER (WHERE h2.kind = p_kind),
				   pg_catalog.max(h2.permits) FILTER (WHERE h2.kind = p_kind)
			  INTO live_other, live_same, live_permits
			  FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name AND h2.owner_token IS NOT NULL AND h2.lease_until > now;
			IF live_other > 0 OR (p_kind = 'p' AND live_permits IS NOT NULL AND live_permits <> p_permits) THEN
				RAISE SQLSTATE 'PD097';	-- changed meanwhile: report it as above
			END IF;
			IF p_kind = 'p' AND live_same >= p_permits THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			c := dlock._history();
			INSERT INTO dlock.holder_counter AS k (lock_name, fencing_seq, grant_timeline, grant_system)
			VALUES (p_lock_name, 0, c.history, c.system)
			ON CONFLICT (lock_name) DO NOTHING;
			SELECT * INTO hc FROM dlock.holder_counter k WHERE k.lock_name = p_lock_name FOR UPDATE;
			IF NOT FOUND THEN
				RAISE SQLSTATE 'PD097';	-- reaped meanwhile
			END IF;
			-- decide again under the kind lock and the counter's row lock
			now := pg_catalog.clock_timestamp();
			until := coalesce(p_until, now + dlock._length(p_ttl));
			SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
			IF FOUND THEN
				d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
				IF d.live OR d.available_at IS NOT NULL THEN
					RAISE SQLSTATE 'PD098';
				END IF;
				IF r.owner_token IS NOT NULL THEN
					PERFORM dlock._end_expired_leases(p_lock_name, now, true, p_polling);
				END IF;
			END IF;
			SELECT pg_catalog.count(*) FILTER (WHERE h2.kind <> p_kind),
				   pg_catalog.count(*) FILTER (WHERE h2.kind = p_kind),
				   pg_catalog.max(h2.permits) FILTER (WHERE h2.kind = p_kind)
			  INTO live_other, live_same, live_permits
			  FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name AND h2.owner_token IS NOT NULL AND h2.lease_until > now;
			IF live_other > 0 OR (p_kind = 'p' AND live_permits IS NOT NULL AND live_permits <> p_permits) THEN
				RAISE SQLSTATE 'PD097';	-- changed meanwhile: report it as above
			END IF;
			IF p_kind = 'p' AND live_same >= p_permits THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			-- after the exclusive row, if any, and the counter; a new counter
			-- (a name without holders so far) after the reap floor too
			token := GREATEST(CASE WHEN r.lock_name IS NOT NULL THEN
								   dlock.next_fencing_token(r.fencing_seq, r.grant_timeline, r.grant_system,
															c.history, c.system) END,
							  CASE WHEN hc.fencing_seq > 0 THEN
								   dlock.next_fencing_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system,
															c.history, c.system)
								   ELSE dlock._floor_next(c.history, c.system) END);
			UPDATE dlock.holder_counter k SET fencing_seq = token, grant_timeline = c.history, grant_system = c.system
			 WHERE k.lock_name = p_lock_name;
			-- a free or ended slot that no other transaction has (a grant, a
			-- pin), else a new one; a semaphore's permits are its slots 1 to
			-- "permits", so a permit pinned after its lease ended keeps its slot
			SELECT h2.slot INTO free_slot FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name AND (h2.owner_token IS NULL OR h2.lease_until <= now)
			   AND (p_kind <> 'p' OR h2.slot <= p_permits)
			 ORDER BY h2.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
			slot_exists := FOUND;
			IF NOT slot_exists AND p_kind = 'p' THEN
				IF (SELECT pg_catalog.count(*) FROM dlock.lock_holder h2
					 WHERE h2.lock_name = p_lock_name AND h2.slot <= p_permits) >= p_permits THEN
					RAISE SQLSTATE 'PD098';		-- every permit is live, or pinned by a stale holder
				END IF;
				SELECT s INTO free_slot FROM pg_catalog.generate_series(1, p_permits) s
				 WHERE NOT EXISTS (SELECT 1 FROM dlock.lock_holder h2 WHERE h2.lock_name = p_lock_name AND h2.slot = s)
				 LIMIT 1;
			ELSIF NOT slot_exists THEN
				SELECT coalesce(pg_catalog.max(h2.slot), 0) + 1 INTO free_slot
				  FROM dlock.lock_holder h2 WHERE h2.lock_name = p_lock_name;
			END IF;
			IF slot_exists THEN
				-- a lease that ran out on this slot ends here: its expiry is
				-- settled by this grant, and audited once
				SELECT * INTO h FROM dlock.lock_holder h2 WHERE h2.lock_name = p_lock_name AND h2.slot = free_slot;
				IF h.owner_token IS NOT NULL THEN
					PERFORM dlock._audit('expire', p_lock_name, h.fencing_seq, h.holder, NULL);
				END IF;
				UPDATE dlock.lock_holder h2
				   SET kind = p_kind, permits = CASE WHEN p_kind = 'p' THEN p_permits END, owner_token = p_owner,
					   fencing_seq = token, block_end = token, lease_until = until,
					   holder = p_holder, acquired_at = now, updated_at = now, renewals = 0,
					   grant_timeline = c.history, grant_system = c.system
				 WHERE h2.lock_name = p_lock_name AND h2.slot = free_slot;
			ELSE
				INSERT INTO dlock.lock_holder (lock_name, slot, kind, permits, owner_token, fencing_seq, block_end,
											   lease_until, holder, acquired_at, updated_at, grant_timeline, grant_system)
				VALUES (p_lock_name, free_slot, p_kind, CASE WHEN p_kind = 'p' THEN p_permits END, p_owner, token, token,
						until, p_holder, now, now, c.history, c.system);
			END IF;
			PERFORM dlock._event('acquire', p_lock_name, token, p_holder, until);
			PERFORM dlock._audit('acquire', p_lock_name, token, p_holder, NULL);
			result := ROW(p_lock_name, p_owner, token, until);
			RETURN result;
		EXCEPTION
			WHEN SQLSTATE 'PD098' THEN
				RETURN NULL;
			WHEN SQLSTATE 'PD097' THEN
				NULL;	-- rolled back, locks included: try again
		END;
	END LOOP;
	RETURN NULL;
END
$$;


------------------------------------------------------------------------------
-- The owner of what this step created
------------------------------------------------------------------------------

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
				  AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'S']::pg_catalog."char"[])
				  AND c.relowner OPERATOR(pg_catalog.<>) owner
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', obj.name, pg_catalog.pg_get_userbyid(owner));
	END LOOP;
END
$owner$;
-- END extension owner
