/* sql_edition/pg_dlock_sql--1.6--1.7.sql -- pg_dlock_sql 1.6 -> 1.7: lease policies of shared leases and permits, per holder slot, decided by dlock._decide as for an exclusive lease */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.7'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * What changes (docs/sql-edition.md, docs/lease-policies.md "Every kind"):
 *  - max_hold, min_hold and lock_delay of try_acquire_shared,
 *    acquire_shared, try_acquire_permit and acquire_permit are granted, kept
 *    per holder slot in the C extension's four columns of dlock.lock_holder;
 *    the dlock.settings rows max_hold and lock_delay give every kind its
 *    default policy (a ttl above max_hold was refused for every kind before).
 *  - One decision: a slot is judged by dlock._decide, the function that
 *    judges a name's row, wherever a grant, a reap or a writer asks whether
 *    the slot is live or kept from new owners. A slot kept by its min_hold or
 *    lock delay is not reused (a permit stays taken) and keeps writers of the
 *    name out; other readers still come in.
 *  - renew, and the owner's repeated acquire, of a shared lease or permit
 *    end at its hold limit at the latest, and are refused once it is reached.
 *  - A release inside min_hold, and a force release with a lock delay, set
 *    the slot's not_before, as for a name's row.
 *  - reap leaves a name whose slots are kept.
 */

ALTER TABLE dlock.lock_holder
	ADD COLUMN hold_limit timestamptz,
	ADD COLUMN min_hold_until timestamptz,
	ADD COLUMN lock_delay interval,
	ADD COLUMN not_before timestamptz;
COMMENT ON COLUMN dlock.lock_holder.hold_limit IS 'acquired_at + max_hold: renewals of the slot''s lease end there at the latest';
COMMENT ON COLUMN dlock.lock_holder.min_hold_until IS 'acquired_at + min_hold: a release before it keeps the slot (and writers of the name) from new owners until then';
COMMENT ON COLUMN dlock.lock_holder.lock_delay IS 'how long the slot (and writers of the name) stays ungranted after its lease is lost (expired, forced away)';
COMMENT ON COLUMN dlock.lock_holder.not_before IS 'set by a release inside min_hold or a force release with a lock delay: no new owner of the slot, and no writer of the name, before it';

-- the options are checked by dlock._check_policy itself now, and granted
DROP FUNCTION dlock._check_holder_policy(interval, interval, interval, interval);

------------------------------------------------------------------------------
-- The holder grant: a slot decided by dlock._decide
------------------------------------------------------------------------------

/*
 * The holder slots of a name at "now", for a grant of kind p_kind: the live
 * leases of the other kind (live_other), the slots of this kind that are
 * live or kept from new owners by their min_hold or lock delay, as
 * dlock._decide judges them (taken_same: a semaphore's permits in use), and
 * the permits of the live ones (live_permits). Read in the caller's
 * statement's snapshot.
 */
CREATE FUNCTION dlock._holder_counts(p_lock_name text, p_kind "char", p_now timestamptz,
									 OUT live_other bigint, OUT taken_same bigint, OUT live_permits integer)
RETURNS record LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.count(*) FILTER (WHERE h.kind OPERATOR(pg_catalog.<>) p_kind AND h.owner_token IS NOT NULL
												AND h.lease_until OPERATOR(pg_catalog.>) p_now),
		   pg_catalog.count(*) FILTER (WHERE h.kind OPERATOR(pg_catalog.=) p_kind),
		   pg_catalog.max(h.permits) FILTER (WHERE h.kind OPERATOR(pg_catalog.=) p_kind AND h.owner_token IS NOT NULL
												  AND h.lease_until OPERATOR(pg_catalog.>) p_now)
	  FROM dlock.lock_holder h
	 WHERE h.lock_name OPERATOR(pg_catalog.=) p_lock_name
	   AND (dlock._decide(h.owner_token IS NOT NULL, h.lease_until, h.lock_delay, h.not_before, p_now)).available_at IS NOT NULL
$$;
REVOKE ALL ON FUNCTION dlock._holder_counts(text, "char", timestamptz) FROM PUBLIC;

DROP FUNCTION dlock._try_holder("char", text, integer, interval, uuid, text, timestamptz, boolean);
CREATE FUNCTION dlock._try_holder(p_kind "char", p_lock_name text, p_permits integer, p_ttl interval,
								  p_owner uuid, p_holder text, p_until timestamptz DEFAULT NULL,
								  p_polling boolean DEFAULT false, p_max_hold interval DEFAULT NULL,
								  p_min_hold interval DEFAULT NULL, p_lock_delay interval DEFAULT NULL)
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
	taken_same bigint;
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
		SELECT * INTO live_other, taken_same, live_permits FROM dlock._holder_counts(p_lock_name, p_kind, now);
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
		-- the same owner again: same token, the lease extended, never past
		-- its hold_limit (max_hold bounds the whole hold); refused once there
		SELECT * INTO h FROM dlock.lock_holder h2
		 WHERE h2.lock_name = p_lock_name AND h2.owner_token = p_owner AND h2.lease_until > now;
		IF FOUND THEN
			IF h.hold_limit IS NOT NULL AND now >= h.hold_limit THEN
				RETURN NULL;
			END IF;
			PERFORM dlock._durable();
			UPDATE dlock.lock_holder h2
			   SET lease_until = LEAST(GREATEST(h2.lease_until, coalesce(p_until, now + dlock._length(p_ttl))),
									   coalesce(h2.hold_limit, 'infinity')),
				   updated_at = now
			 WHERE h2.lock_name = p_lock_name AND h2.slot = h.slot AND h2.owner_token = p_owner
			RETURNING h2.lease_until INTO h.lease_until;
			IF FOUND THEN
				result := ROW(p_lock_name, p_owner, h.fencing_seq, h.lease_until);
				RETURN result;
			END IF;
			CONTINUE;
		END IF;
		IF p_kind = 'p' AND taken_same >= p_permits THEN
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
			SELECT * INTO live_other, taken_same, live_permits FROM dlock._holder_counts(p_lock_name, p_kind, now);
			IF live_other > 0 OR (p_kind = 'p' AND live_permits IS NOT NULL AND live_permits <> p_permits) THEN
				RAISE SQLSTATE 'PD097';	-- changed meanwhile: report it as above
			END IF;
			IF p_kind = 'p' AND taken_same >= p_permits THEN
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
			SELECT * INTO live_other, taken_same, live_permits FROM dlock._holder_counts(p_lock_name, p_kind, now);
			IF live_other > 0 OR (p_kind = 'p' AND live_permits IS NOT NULL AND live_permits <> p_permits) THEN
				RAISE SQLSTATE 'PD097';	-- changed meanwhile: report it as above
			END IF;
			IF p_kind = 'p' AND taken_same >= p_permits THEN
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
			-- a slot that dlock._decide finds neither live nor kept by its
			-- policies, and that no other transaction has (a grant, a pin),
			-- else a new one; a semaphore's permits are its slots 1 to
			-- "permits", so a permit pinned after its lease ended keeps its slot
			SELECT h2.slot INTO free_slot FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name
			   AND (dlock._decide(h2.owner_token IS NOT NULL, h2.lease_until, h2.lock_delay, h2.not_before, now)).available_at IS NULL
			   AND (p_kind <> 'p' OR h2.slot <= p_permits)
			 ORDER BY h2.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
			slot_exists := FOUND;
			IF NOT slot_exists AND p_kind = 'p' THEN
				IF (SELECT pg_catalog.count(*) FROM dlock.lock_holder h2
					 WHERE h2.lock_name = p_lock_name AND h2.slot <= p_permits) >= p_permits THEN
					RAISE SQLSTATE 'PD098';		-- every permit is live, kept, or pinned by a stale holder
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
					   grant_timeline = c.history, grant_system = c.system,
					   hold_limit = now + dlock._length(p_max_hold), min_hold_until = now + dlock._length(p_min_hold),
					   lock_delay = p_lock_delay, not_before = NULL
				 WHERE h2.lock_name = p_lock_name AND h2.slot = free_slot;
			ELSE
				INSERT INTO dlock.lock_holder (lock_name, slot, kind, permits, owner_token, fencing_seq, block_end,
											   lease_until, holder, acquired_at, updated_at, grant_timeline, grant_system,
											   hold_limit, min_hold_until, lock_delay)
				VALUES (p_lock_name, free_slot, p_kind, CASE WHEN p_kind = 'p' THEN p_permits END, p_owner, token, token,
						until, p_holder, now, now, c.history, c.system,
						now + dlock._length(p_max_hold), now + dlock._length(p_min_hold), p_lock_delay);
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
REVOKE ALL ON FUNCTION dlock._try_holder("char", text, integer, interval, uuid, text, timestamptz, boolean, interval, interval, interval) FROM PUBLIC;

------------------------------------------------------------------------------
-- The exclusive grant: writers stay out of slots kept by their policies
------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dlock._try_exclusive(p_lock_name text, p_ttl interval, p_owner uuid, p_holder text,
												p_max_hold interval, p_min_hold interval, p_lock_delay interval,
												p_polling boolean DEFAULT false)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	d record;
	c record;
	hc dlock.holder_counter;
	now timestamptz;
	token bigint;
	result dlock.lease;
	is_takeover boolean;
BEGIN
	PERFORM dlock._check_isolation();
	-- bounded: another try only after a concurrent creation or reap of the row
	FOR attempt IN 1..3 LOOP
		-- the unlocked look: refuse without writing anything
		SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
		now := pg_catalog.clock_timestamp();
		IF FOUND THEN
			d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
			IF d.live AND r.owner_token IS DISTINCT FROM p_owner THEN
				RETURN NULL;
			END IF;
			IF d.live AND r.hold_limit IS NOT NULL AND now >= r.hold_limit THEN
				RETURN NULL;		-- the same owner's retry after max_hold
			END IF;
			IF NOT d.live AND d.available_at IS NOT NULL THEN
				RETURN NULL;		-- min_hold or lock_delay keeps the name
			END IF;
		END IF;
		IF EXISTS (SELECT 1 FROM dlock.lock_holder h
					WHERE h.lock_name = p_lock_name
					  AND (dlock._decide(h.owner_token IS NOT NULL, h.lease_until, h.lock_delay, h.not_before, now)).available_at IS NOT NULL) THEN
			RETURN NULL;			-- shared leases or permits are live, or kept by their policies
		END IF;

		-- Decided under locks from here on: a refusal rolls back this subtransaction,
		-- so that a caller that goes on (acquire's next attempt, a longer
		-- transaction) holds neither the row lock nor the kind lock.
		BEGIN
			PERFORM dlock._durable();
			-- readers and writers of one name decide one at a time
			PERFORM pg_catalog.pg_advisory_xact_lock(dlock._kind_key(p_lock_name));
			-- Decide again on the latest committed state, before writing
			-- anything (a refusal here takes no row lock and no transaction
			-- ID): every statement of a READ COMMITTED transaction reads it,
			-- and exclusive grants create and change the row under this lock.
			now := pg_catalog.clock_timestamp();
			SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
			IF FOUND THEN
				d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
				IF (d.live AND (r.owner_token IS DISTINCT FROM p_owner
								OR (r.hold_limit IS NOT NULL AND now >= r.hold_limit)))
				   OR (NOT d.live AND d.available_at IS NOT NULL) THEN
					RAISE SQLSTATE 'PD098';
				END IF;
			END IF;
			-- shared leases and permits: live ones, and slots their min_hold or
			-- lock delay keeps (dlock._decide, as for the row), refuse; ended ones
			-- are ended once their pins are gone, all judged at one clock reading
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name
					  AND (dlock._decide(h.owner_token IS NOT NULL, h.lease_until, h.lock_delay, h.not_before, now)).available_at IS NOT NULL) THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			PERFORM dlock._end_expired_leases(p_lock_name, now, false, p_polling);
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name
					  AND (dlock._decide(h.owner_token IS NOT NULL, h.lease_until, h.lock_delay, h.not_before, now)).available_at IS NOT NULL) THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			c := dlock._history();
			SELECT * INTO hc FROM dlock.holder_counter h WHERE h.lock_name = p_lock_name;

			IF r.lock_name IS NULL THEN
				-- a name without a row: after its holders' counter, if any, and the reap floor
				token := GREATEST(CASE WHEN hc.fencing_seq > 0 THEN
									   dlock.next_fencing_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system,
																c.history, c.system) END,
								  dlock._floor_next(c.history, c.system));
				now := pg_catalog.clock_timestamp();
				INSERT INTO dlock.distributed_lock AS l
					(lock_name, owner_token, fencing_seq, lease_until, updated_at, acquired_at, holder,
					 acquisitions, grant_timeline, grant_system, hold_limit, min_hold_until, lock_delay)
				VALUES (p_lock_name, p_owner, token, now + dlock._length(p_ttl), now, now, p_holder,
						1, c.history, c.system, now + dlock._length(p_max_hold),
						now + dlock._length(p_min_hold), p_lock_delay)
				ON CONFLICT (lock_name) DO NOTHING;
				IF NOT FOUND THEN
					RAISE SQLSTATE 'PD097';	-- created concurrently: decide on its row
				END IF;
				PERFORM dlock._event('acquire', p_lock_name, token, p_holder, now + dlock._length(p_ttl));
				PERFORM dlock._audit('acquire', p_lock_name, token, p_holder, NULL);
				result := ROW(p_lock_name, p_owner, token, now + dlock._length(p_ttl));
				RETURN result;
			END IF;

			-- the row exists: lock it (waiting for a grant, release or pin in
			-- progress), then decide again on its newest version
			SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name FOR UPDATE;
			IF NOT FOUND THEN
				RAISE SQLSTATE 'PD097';	-- reaped meanwhile
			END IF;
			now := pg_catalog.clock_timestamp();
			d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
			IF d.live THEN
				IF r.owner_token IS DISTINCT FROM p_owner
				   OR (r.hold_limit IS NOT NULL AND now >= r.hold_limit) THEN
					RAISE SQLSTATE 'PD098';
				END IF;
				-- the same owner again: same token, the lease extended, never
				-- past its hold_limit (max_hold bounds the whole hold)
				UPDATE dlock.distributed_lock l
				   SET lease_until = LEAST(GREATEST(l.lease_until, now + dlock._length(p_ttl)),
										   COALESCE(l.hold_limit, 'infinity')), updated_at = now,
					   renewals = l.renewals + 1
				 WHERE l.lock_name = p_lock_name
				RETURNING l.lease_until INTO r.lease_until;
				result := ROW(p_lock_name, p_owner, r.fencing_seq, r.lease_until);
				RETURN result;
			END IF;
			IF d.available_at IS NOT NULL THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			is_takeover := d.expired;
			token := GREATEST(dlock.next_fencing_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.history, c.system),
							  CASE WHEN hc.fencing_seq > 0 THEN
								   dlock.next_fencing_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system,
															c.history, c.system) END);
			UPDATE dlock.distributed_lock l
			   SET owner_token = p_owner, fencing_seq = token, lease_until = now + dlock._length(p_ttl),
				   updated_at = now, acquired_at = now, holder = p_holder, renewals = 0,
				   acquisitions = l.acquisitions + 1,
				   takeovers = l.takeovers + CASE WHEN is_takeover THEN 1 ELSE 0 END,
				   taken_over = is_takeover, grant_timeline = c.history, grant_system = c.system,
				   exclusive_only = false, session_pid = NULL, session_id = NULL,
				   hold_limit = now + dlock._length(p_max_hold),
				   min_hold_until = now + dlock._length(p_min_hold),
				   lock_delay = p_lock_delay, not_before = NULL
			 WHERE l.lock_name = p_lock_name;
			PERFORM dlock._event(CASE WHEN is_takeover THEN 'takeover' ELSE 'acquire' END,
								 p_lock_name, token, p_holder, now + dlock._length(p_ttl));
			PERFORM dlock._audit(CASE WHEN is_takeover THEN 'takeover' ELSE 'acquire' END,
								 p_lock_name, token, p_holder, NULL);
			result := ROW(p_lock_name, p_owner, token, now + dlock._length(p_ttl));
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
-- The shared and permit acquire functions grant their policies
------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dlock.try_acquire_shared(lock_name text, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
										 max_hold interval DEFAULT NULL,
										 min_hold interval DEFAULT NULL,
										 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p record;
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	p := dlock._check_policy(ttl, false, max_hold, min_hold, lock_delay);
	RETURN dlock._try_holder('s', lock_name, NULL, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder, NULL, false,
							 p.eff_max_hold, min_hold, p.eff_lock_delay);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval) IS
'takes a shared lease unless an exclusive lease is live; NULL otherwise. max_hold, min_hold and lock_delay are kept by its holder slot';

CREATE OR REPLACE FUNCTION dlock.acquire_shared(lock_name text, ttl interval, wait interval,
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
	p record;
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	p := dlock._check_policy(ttl, false, max_hold, min_hold, lock_delay);
	PERFORM dlock._check_may_wait(lock_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		BEGIN
			result := dlock._try_holder('s', lock_name, NULL, ttl, owner, holder, NULL, true,
									   p.eff_max_hold, min_hold, p.eff_lock_delay);
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

CREATE OR REPLACE FUNCTION dlock.try_acquire_permit(semaphore_name text, permits integer, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
										 max_hold interval DEFAULT NULL,
										 min_hold interval DEFAULT NULL,
										 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p record;
BEGIN
	PERFORM dlock._check_name('semaphore_name', semaphore_name);
	PERFORM dlock._check_permits(permits);
	PERFORM dlock._check_acquire(semaphore_name, ttl, owner_token, holder);
	p := dlock._check_policy(ttl, false, max_hold, min_hold, lock_delay);
	RETURN dlock._try_holder('p', semaphore_name, permits, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder, NULL, false,
							 p.eff_max_hold, min_hold, p.eff_lock_delay);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval) IS
'takes one of "permits" permits of the semaphore as its own lease; NULL when all are held. max_hold, min_hold and lock_delay are kept by its holder slot';

CREATE OR REPLACE FUNCTION dlock.acquire_permit(semaphore_name text, permits integer, ttl interval, wait interval,
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
	p record;
BEGIN
	PERFORM dlock._check_name('semaphore_name', semaphore_name);
	PERFORM dlock._check_permits(permits);
	PERFORM dlock._check_acquire(semaphore_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	p := dlock._check_policy(ttl, false, max_hold, min_hold, lock_delay);
	PERFORM dlock._check_may_wait(semaphore_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		BEGIN
			result := dlock._try_holder('p', semaphore_name, permits, ttl, owner, holder, NULL, true,
									   p.eff_max_hold, min_hold, p.eff_lock_delay);
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
COMMENT ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval) IS
'takes a shared lease unless an exclusive lease is live; NULL otherwise. max_hold, min_hold and lock_delay are kept by its holder slot';
COMMENT ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval) IS
'takes one of "permits" permits of the semaphore as its own lease; NULL when all are held. max_hold, min_hold and lock_delay are kept by its holder slot';

------------------------------------------------------------------------------
-- Renewals capped, releases and force releases keeping a slot, reap leaving it
------------------------------------------------------------------------------

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
	IF NOT FOUND OR h.lease_until <= now OR (h.hold_limit IS NOT NULL AND now >= h.hold_limit) THEN
		PERFORM dlock._audit('renew_refused', renew.lock_name, NULL, NULL, NULL);
		RETURN NULL;
	END IF;
	-- as for the row: never past the slot's hold_limit
	UPDATE dlock.lock_holder s
	   SET lease_until = LEAST(now + dlock._length(ttl), COALESCE(s.hold_limit, 'infinity')),
		   updated_at = now, renewals = s.renewals + 1
	 WHERE s.lock_name = renew.lock_name AND s.slot = h.slot
	RETURNING s.lease_until INTO until;
	PERFORM dlock._audit('renew', renew.lock_name, h.fencing_seq, h.holder, NULL);
	RETURN until;
END
$$;

CREATE OR REPLACE FUNCTION dlock.release(lock_name text, owner_token uuid)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	h dlock.lock_holder;
	now timestamptz;
BEGIN
	PERFORM dlock._check_name('lock_name', release.lock_name);
	PERFORM dlock._check_owner(release.owner_token, true);
	SELECT * INTO r FROM dlock.distributed_lock l
	 WHERE l.lock_name = release.lock_name AND l.owner_token = release.owner_token;
	IF FOUND THEN
		IF r.lease_until <= pg_catalog.clock_timestamp() THEN
			RETURN false;
		END IF;
		SELECT * INTO r FROM dlock.distributed_lock l
		 WHERE l.lock_name = release.lock_name AND l.owner_token = release.owner_token FOR UPDATE;
		now := pg_catalog.clock_timestamp();
		IF NOT FOUND OR r.lease_until <= now THEN
			RETURN false;
		END IF;
		UPDATE dlock.distributed_lock l
		   SET owner_token = NULL, lease_until = now, updated_at = now,
			   not_before = CASE WHEN l.min_hold_until > now THEN l.min_hold_until END
		 WHERE l.lock_name = release.lock_name;
		PERFORM dlock._event('release', release.lock_name, r.fencing_seq, r.holder, now);
		PERFORM dlock._audit('release', release.lock_name, r.fencing_seq, r.holder, NULL);
		RETURN true;
	END IF;
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = release.lock_name AND s.owner_token = release.owner_token;
	IF NOT FOUND OR h.lease_until <= pg_catalog.clock_timestamp() THEN
		RETURN false;
	END IF;
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = release.lock_name AND s.slot = h.slot AND s.owner_token = release.owner_token FOR UPDATE;
	now := pg_catalog.clock_timestamp();
	IF NOT FOUND OR h.lease_until <= now THEN
		RETURN false;
	END IF;
	-- inside min_hold the slot stays kept from new owners, as the row does
	UPDATE dlock.lock_holder s
	   SET owner_token = NULL, lease_until = now, updated_at = now,
		   not_before = CASE WHEN s.min_hold_until > now THEN s.min_hold_until END
	 WHERE s.lock_name = release.lock_name AND s.slot = h.slot;
	PERFORM dlock._event('release', release.lock_name, h.fencing_seq, h.holder, now);
	PERFORM dlock._audit('release', release.lock_name, h.fencing_seq, h.holder, NULL);
	RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION dlock.force_release(lock_name text, reason text)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	h dlock.lock_holder;
	now timestamptz;
	ended boolean := false;
BEGIN
	PERFORM dlock._check_name('lock_name', force_release.lock_name);
	PERFORM dlock._not_null('reason', reason IS NULL);
	IF pg_catalog.btrim(reason) = '' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'reason must not be empty';
	END IF;
	SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = force_release.lock_name FOR UPDATE;
	now := pg_catalog.clock_timestamp();
	IF FOUND AND r.owner_token IS NOT NULL AND r.lease_until > now THEN
		UPDATE dlock.distributed_lock l
		   SET owner_token = NULL, lease_until = now, updated_at = now,
			   not_before = CASE WHEN l.lock_delay IS NOT NULL THEN now + dlock._length(l.lock_delay) END
		 WHERE l.lock_name = force_release.lock_name;
		PERFORM dlock._audit('force_release', force_release.lock_name, r.fencing_seq, r.holder, reason);
		PERFORM dlock._event('force_release', force_release.lock_name, r.fencing_seq, r.holder, now);
		ended := true;
	END IF;
	FOR h IN SELECT * FROM dlock.lock_holder s
			  WHERE s.lock_name = force_release.lock_name AND s.owner_token IS NOT NULL
				AND s.lease_until > pg_catalog.clock_timestamp()
			  ORDER BY s.slot FOR UPDATE
	LOOP
		now := pg_catalog.clock_timestamp();
		-- a forced slot starts its lock delay, as the row does
		UPDATE dlock.lock_holder s
		   SET owner_token = NULL, lease_until = now, updated_at = now,
			   not_before = CASE WHEN s.lock_delay IS NOT NULL THEN now + dlock._length(s.lock_delay) END
		 WHERE s.lock_name = h.lock_name AND s.slot = h.slot;
		PERFORM dlock._audit('force_release', h.lock_name, h.fencing_seq, h.holder, reason);
		PERFORM dlock._event('force_release', h.lock_name, h.fencing_seq, h.holder, now);
		ended := true;
	END LOOP;
	RETURN ended;
END
$$;

CREATE OR REPLACE FUNCTION dlock.reap(idle_for interval DEFAULT '1 day', max_rows integer DEFAULT 10000)
RETURNS bigint LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	now timestamptz := pg_catalog.clock_timestamp();
	best bigint;
	c record;
	removed bigint;
	names text[];
BEGIN
	PERFORM dlock._check_wait(idle_for, 'idle_for');
	PERFORM dlock._not_null('max_rows', max_rows IS NULL);
	IF max_rows < 1 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'max_rows must be positive';
	END IF;
	-- one reaper at a time
	LOCK TABLE dlock.token_floor IN SHARE ROW EXCLUSIVE MODE;
	c := dlock._history();
	WITH victims AS (
		SELECT l.lock_name FROM dlock.distributed_lock l
		 WHERE coalesce(CASE WHEN l.owner_token IS NULL THEN l.updated_at ELSE l.lease_until END, l.updated_at)
			   < now - dlock._length(idle_for)
		   AND (l.owner_token IS NULL OR l.lease_until <= now)
		   AND (dlock._decide(l.owner_token IS NOT NULL, l.lease_until, l.lock_delay, l.not_before, now)).available_at IS NULL
		   -- nor while a slot is live or kept by its min_hold or lock delay
		   AND NOT EXISTS (SELECT 1 FROM dlock.lock_holder h
							WHERE h.lock_name = l.lock_name
							  AND (dlock._decide(h.owner_token IS NOT NULL, h.lease_until, h.lock_delay, h.not_before, now)).available_at IS NOT NULL)
		   -- not while a grant of any kind decides on the name
		   AND pg_catalog.pg_try_advisory_xact_lock(dlock._kind_key(l.lock_name))
		 ORDER BY l.updated_at
		 LIMIT max_rows
		   FOR UPDATE SKIP LOCKED),
	gone AS (
		DELETE FROM dlock.distributed_lock l USING victims v WHERE l.lock_name = v.lock_name
		RETURNING l.lock_name, l.fencing_seq, l.grant_timeline, l.grant_system)
	SELECT pg_catalog.count(*),
		   pg_catalog.max(dlock.next_fencing_token(g.fencing_seq, g.grant_timeline, g.grant_system, c.history, c.system)),
		   pg_catalog.array_agg(g.lock_name)
	  INTO removed, best, names
	  FROM gone g;
	IF removed = 0 THEN
		RETURN 0;
	END IF;
	-- the holders' counters and slots of the reaped names go too, under the floor
	SELECT GREATEST(best, pg_catalog.max(dlock.next_fencing_token(k.fencing_seq, k.grant_timeline, k.grant_system,
																   c.history, c.system)))
	  INTO best
	  FROM dlock.holder_counter k WHERE k.lock_name = ANY (names) AND k.fencing_seq > 0;
	DELETE FROM dlock.lock_holder h WHERE h.lock_name = ANY (names);
	DELETE FROM dlock.holder_counter k WHERE k.lock_name = ANY (names);
	-- The floor becomes the state whose next token, here and at every later
	-- position of this cluster, is the best that any removed row or the old
	-- floor would have given (as the C extension's reap leaves it).
	best := GREATEST(best, dlock._floor_next(c.history, c.system));
	DELETE FROM dlock.token_floor;
	INSERT INTO dlock.token_floor (reaped_max, reaped_at, grant_timeline, grant_system)
	VALUES (best - 1, now, c.history, c.system);
	RETURN removed;
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
