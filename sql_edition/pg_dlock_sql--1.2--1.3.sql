/* sql_edition/pg_dlock_sql--1.2--1.3.sql -- pg_dlock 1.2 -> 1.3, SQL edition: downgrade, waiters, histograms */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.3'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * What the C extension's 1.3 (sql/pg_dlock--1.2--1.3.sql) added, with the
 * same signatures, return types, SQLSTATEs and privileges:
 *   - dlock.downgrade: the owner's live exclusive lease becomes a shared
 *     lease in one transaction (the exclusive side ends as in release, the
 *     shared side is granted by dlock._try_holder, the grant every shared
 *     lease goes through);
 *   - dlock.waiters and the waiters column of dlock.locks: NULL, as in the
 *     C extension without shared memory (this edition's waiters poll and
 *     are queued nowhere, so there is nothing to count);
 *   - dlock.wait_histogram and dlock.hold_histogram: no rows, as in the C
 *     extension without shared memory.
 */

------------------------------------------------------------------------------
-- Holder grants: an explicit lease end, for dlock.downgrade
------------------------------------------------------------------------------

DROP FUNCTION dlock._try_holder("char", text, integer, interval, uuid, text);

/*
 * One attempt at a holder lease of kind 's' (shared) or 'p' (a permit of a
 * semaphore of "permits"). Holder grants of a name take its kind lock in
 * share mode, exclusive grants in exclusive mode, so a reader and a writer
 * never both win; the name's holder_counter row serializes the holders'
 * tokens and the permit count. p_until, when given, is the lease's end
 * instead of now + p_ttl (dlock.downgrade: the end of the exclusive lease
 * it replaces).
 */
CREATE FUNCTION dlock._try_holder(p_kind "char", p_lock_name text, p_permits integer, p_ttl interval,
								  p_owner uuid, p_holder text, p_until timestamptz DEFAULT NULL)
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
	until timestamptz;
	result dlock.lease;
BEGIN
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
			c := dlock._cluster();
			INSERT INTO dlock.holder_counter AS k (lock_name, fencing_seq, grant_timeline, grant_system)
			VALUES (p_lock_name, 0, c.timeline, c.system)
			ON CONFLICT (lock_name) DO NOTHING;
			SELECT * INTO hc FROM dlock.holder_counter k WHERE k.lock_name = p_lock_name FOR UPDATE;
			IF NOT FOUND THEN
				CONTINUE;			-- reaped meanwhile
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
			END IF;
			SELECT pg_catalog.count(*) FILTER (WHERE h2.kind <> p_kind),
				   pg_catalog.count(*) FILTER (WHERE h2.kind = p_kind)
			  INTO live_other, live_same
			  FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name AND h2.owner_token IS NOT NULL AND h2.lease_until > now;
			IF live_other > 0 THEN
				CONTINUE;				-- changed kind meanwhile: report it as above
			END IF;
			IF p_kind = 'p' AND live_same >= p_permits THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			IF hc.fencing_seq = 0 THEN
				token := dlock._next_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.timeline, c.system,
										   (SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f));
			ELSIF r.fencing_seq > hc.fencing_seq THEN
				token := dlock._next_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.timeline, c.system, NULL);
			ELSE
				token := dlock._next_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system, c.timeline, c.system, NULL);
			END IF;
			UPDATE dlock.holder_counter k SET fencing_seq = token, grant_timeline = c.timeline, grant_system = c.system
			 WHERE k.lock_name = p_lock_name;
			-- a free or expired slot, else a new one
			SELECT h2.slot INTO free_slot FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name AND (h2.owner_token IS NULL OR h2.lease_until <= now)
			 ORDER BY h2.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
			IF FOUND THEN
				UPDATE dlock.lock_holder h2
				   SET kind = p_kind, permits = CASE WHEN p_kind = 'p' THEN p_permits END, owner_token = p_owner,
					   fencing_seq = token, block_end = token, lease_until = until,
					   holder = p_holder, acquired_at = now, updated_at = now, renewals = 0,
					   grant_timeline = c.timeline, grant_system = c.system
				 WHERE h2.lock_name = p_lock_name AND h2.slot = free_slot;
			ELSE
				INSERT INTO dlock.lock_holder (lock_name, slot, kind, permits, owner_token, fencing_seq, block_end,
											   lease_until, holder, acquired_at, updated_at, grant_timeline, grant_system)
				SELECT p_lock_name, coalesce(pg_catalog.max(h2.slot), 0) + 1, p_kind,
					   CASE WHEN p_kind = 'p' THEN p_permits END, p_owner, token, token,
					   until, p_holder, now, now, c.timeline, c.system
				  FROM dlock.lock_holder h2 WHERE h2.lock_name = p_lock_name;
			END IF;
			PERFORM dlock._event('acquire', p_lock_name, token, p_holder, until);
			PERFORM dlock._audit('acquire', p_lock_name, token, p_holder, NULL);
			result := ROW(p_lock_name, p_owner, token, until);
			RETURN result;
		EXCEPTION WHEN SQLSTATE 'PD098' THEN
			RETURN NULL;
		END;
	END LOOP;
	RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION dlock._try_holder("char", text, integer, interval, uuid, text, timestamptz) FROM PUBLIC;

------------------------------------------------------------------------------
-- Downgrade: an exclusive lease becomes a shared lease in one step
------------------------------------------------------------------------------

/*
 * The owner of the exclusive lease r asks to turn it into a shared lease
 * (lease_policy.c dlock_policy_check_downgrade). Shared leases carry no
 * policy, so a lease whose policy would be lost is refused (0A000) rather
 * than silently weakened: session_bound (the shared lease would outlive the
 * session; this edition grants none), max_hold (renewals would no longer be
 * capped) and min_hold (readers would get in before it ends). A lock delay
 * only applies when a lease is lost, which a downgrade is not.
 */
CREATE FUNCTION dlock._check_downgrade(r dlock.distributed_lock)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	policy text;
BEGIN
	policy := CASE WHEN r.session_id IS NOT NULL THEN 'session_bound'
				   WHEN r.hold_limit IS NOT NULL THEN 'max_hold'
				   WHEN r.min_hold_until IS NOT NULL THEN 'min_hold' END;
	IF policy IS NOT NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
			MESSAGE = pg_catalog.format('cannot downgrade the lease of lock "%s": it was granted with %s',
										r.lock_name, policy),
			DETAIL = 'Shared leases carry no lease policy; the downgrade would drop it.',
			HINT = 'Release the lease and acquire a shared lease instead.';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION dlock._check_downgrade(dlock.distributed_lock) FROM PUBLIC;

/*
 * In one transaction: the name's kind lock in share mode (as a reader's
 * grant takes it, before the name's row), the exclusive lease's row locked
 * and decided again, the exclusive lease ended like a release but handed to
 * nobody (lease_until kept: the shared lease's end), then a shared lease
 * for the same owner until that lease_until through dlock._try_holder, with
 * a token above the exclusive one. An exclusive grant takes the kind lock in
 * exclusive mode and checks for live holders under it, so until the commit
 * it waits, and after it sees the shared lease: no writer in between.
 * Readers polling for the name are granted on their next attempt.
 */
CREATE FUNCTION dlock.downgrade(lock_name text, owner_token uuid)
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
COMMENT ON FUNCTION dlock.downgrade(text, uuid) IS
'turns the owner''s live exclusive lease into a shared lease until the same lease_until, with a new, higher fencing token; no writer can get in between; NULL when the owner holds no live exclusive lease';

------------------------------------------------------------------------------
-- Contention: no shared memory in this edition
------------------------------------------------------------------------------

-- Waiters poll (dlock._backoff) and are queued nowhere: nothing to count,
-- NULL as in the C extension without shared memory.
CREATE FUNCTION dlock.waiters(lock_name text)
RETURNS integer LANGUAGE plpgsql VOLATILE PARALLEL RESTRICTED
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('lock_name', lock_name);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION dlock.waiters(text) IS
'sessions waiting for the name in dlock.acquire or a kind''s acquire function, now: always NULL in the SQL edition (waiters poll and are queued nowhere), as in the C extension without shared memory';

CREATE FUNCTION dlock.wait_histogram(OUT kind text, OUT le interval, OUT waits bigint)
RETURNS SETOF record LANGUAGE sql VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$ SELECT NULL::text, NULL::interval, NULL::bigint WHERE false $$;
COMMENT ON FUNCTION dlock.wait_histogram() IS
'per lease kind, acquire calls that waited and were granted within le: no rows in the SQL edition (no shared memory), as in the C extension without shared memory';

CREATE FUNCTION dlock.hold_histogram(OUT kind text, OUT le interval, OUT holds bigint)
RETURNS SETOF record LANGUAGE sql VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$ SELECT NULL::text, NULL::interval, NULL::bigint WHERE false $$;
COMMENT ON FUNCTION dlock.hold_histogram() IS
'per lease kind, leases that ended within le of their grant: no rows in the SQL edition (no shared memory), as in the C extension without shared memory';

-- The C extension's definition, the waiters column last, copied by
-- sql_edition/build.sh (change it in sql/). Its comment differs on purpose:
-- the waiters column is NULL here.
-- BEGIN view dlock.locks as in pg_dlock 1.3 (copied from sql/ by sql_edition/build.sh: edit it there)
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
-- END view dlock.locks
COMMENT ON VIEW dlock.locks IS 'one row per lock name with its state on the server clock, its kind, number of live holders, lease policy state and waiting sessions (NULL in the SQL edition); never shows owner tokens';

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
