/* sql_edition/pg_dlock_sql--1.4.1--1.4.2.sql -- pg_dlock_sql 1.4.1 -> 1.4.2: a pin keeps an ended lease's name from every kind */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.4.2'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

/*
 * dlock.holds() and dlock.assert_holds() pin a live lease (FOR SHARE) to the
 * end of the calling transaction, so that the holder's fenced writes finish
 * before anyone else may hold the name. A lease that ends while pinned is
 * still in use until the pin goes. Up to 1.4.1 only an exclusive lease
 * taken over by another exclusive lease waited for that (its row lock); a
 * grant of another kind or another permit did not:
 *   - an exclusive grant over a pinned shared lease or permit that had
 *     ended, and a shared lease or permit over a pinned exclusive lease that
 *     had ended, were granted at once: a reader and a writer in their fenced
 *     transactions together;
 *   - a permit whose slot was pinned after its lease ended was replaced by a
 *     new slot: one holder more than the semaphore's permits.
 * As in the C extension, a grant now waits for the pins of the other kind's
 * ended leases (dlock._await_pins_of_ended), and a semaphore's permits are
 * its slots 1 to "permits", a pinned one staying taken until its pin ends.
 * The SQL API is unchanged.
 */

------------------------------------------------------------------------------
-- The rule: a pinned lease keeps its name until its pin ends
------------------------------------------------------------------------------

/*
 * A grant calls this under the name's kind lock with the clock reading it
 * decides at. The leases of the other kind that had ended by then (the
 * exclusive lease when p_of_exclusive, else the shared leases and permits)
 * are locked, which waits for the transactions that pin them, in a
 * subtransaction that is then rolled back, so the caller keeps no lock. A pin
 * asked for later finds its lease ended (holds() decides again once it has
 * the row lock) and pins nothing; a lease still live at p_now the caller
 * refuses on its own.
 */
CREATE FUNCTION dlock._await_pins_of_ended(p_lock_name text, p_now timestamptz, p_of_exclusive boolean)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF p_of_exclusive THEN
		IF NOT EXISTS (SELECT 1 FROM dlock.distributed_lock l
						WHERE l.lock_name = p_lock_name AND l.owner_token IS NOT NULL AND l.lease_until <= p_now) THEN
			RETURN;
		END IF;
	ELSIF NOT EXISTS (SELECT 1 FROM dlock.lock_holder h
					   WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until <= p_now) THEN
		RETURN;
	END IF;
	BEGIN
		IF p_of_exclusive THEN
			PERFORM 1 FROM dlock.distributed_lock l
			  WHERE l.lock_name = p_lock_name AND l.owner_token IS NOT NULL AND l.lease_until <= p_now
			  FOR NO KEY UPDATE;
		ELSE
			PERFORM 1 FROM dlock.lock_holder h
			  WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until <= p_now
			  FOR NO KEY UPDATE;
		END IF;
		RAISE SQLSTATE 'PD097';
	EXCEPTION WHEN SQLSTATE 'PD097' THEN
		NULL;					-- the row locks were only a wait: give them back
	END;
END
$$;
REVOKE ALL ON FUNCTION dlock._await_pins_of_ended(text, timestamptz, boolean) FROM PUBLIC;

------------------------------------------------------------------------------
-- The grants that call it
------------------------------------------------------------------------------

/*
 * One attempt at an exclusive lease; arguments already checked. Returns the
 * lease, or NULL when refused. Decides on the newest committed row with one
 * clock reading taken after the row lock; a refusal on the first, unlocked
 * read takes no row lock and no transaction ID.
 */
CREATE OR REPLACE FUNCTION dlock._try_exclusive(p_lock_name text, p_ttl interval, p_owner uuid, p_holder text,
									 p_max_hold interval, p_min_hold interval, p_lock_delay interval)
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
	LOOP
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
					WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
			RETURN NULL;			-- shared leases or permits are live
		END IF;

		-- Decided under locks from here on: a refusal rolls back this subtransaction,
		-- so that a caller that goes on (acquire's next attempt, a longer
		-- transaction) holds neither the row lock nor the kind lock.
		BEGIN
			PERFORM dlock._durable();
			-- readers and writers of one name decide one at a time
			PERFORM pg_catalog.pg_advisory_xact_lock(dlock._kind_key(p_lock_name));
			-- shared leases and permits: live ones refuse, pinned ended ones
			-- are waited for, both judged at one clock reading
			now := pg_catalog.clock_timestamp();
			PERFORM dlock._await_pins_of_ended(p_lock_name, now, false);
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			c := dlock._cluster();
			SELECT * INTO hc FROM dlock.holder_counter h WHERE h.lock_name = p_lock_name;

			IF r.lock_name IS NULL THEN
				token := dlock._next_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system,
										   c.timeline, c.system,
										   (SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f));
				now := pg_catalog.clock_timestamp();
				INSERT INTO dlock.distributed_lock AS l
					(lock_name, owner_token, fencing_seq, lease_until, updated_at, acquired_at, holder,
					 acquisitions, grant_timeline, grant_system, hold_limit, min_hold_until, lock_delay)
				VALUES (p_lock_name, p_owner, token, now + dlock._length(p_ttl), now, now, p_holder,
						1, c.timeline, c.system, now + dlock._length(p_max_hold),
						now + dlock._length(p_min_hold), p_lock_delay)
				ON CONFLICT (lock_name) DO NOTHING;
				IF NOT FOUND THEN
					CONTINUE;			-- created concurrently: decide on its row
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
				CONTINUE;				-- reaped meanwhile
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
										   COALESCE(l.hold_limit, 'infinity')), updated_at = now
				 WHERE l.lock_name = p_lock_name
				RETURNING l.lease_until INTO r.lease_until;
				result := ROW(p_lock_name, p_owner, r.fencing_seq, r.lease_until);
				RETURN result;
			END IF;
			IF d.available_at IS NOT NULL THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			is_takeover := d.expired;
			IF hc.fencing_seq > r.fencing_seq THEN
				token := dlock._next_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system, c.timeline, c.system, NULL);
			ELSE
				token := dlock._next_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.timeline, c.system, NULL);
			END IF;
			UPDATE dlock.distributed_lock l
			   SET owner_token = p_owner, fencing_seq = token, lease_until = now + dlock._length(p_ttl),
				   updated_at = now, acquired_at = now, holder = p_holder, renewals = 0,
				   acquisitions = l.acquisitions + 1,
				   takeovers = l.takeovers + CASE WHEN is_takeover THEN 1 ELSE 0 END,
				   taken_over = is_takeover, grant_timeline = c.timeline, grant_system = c.system,
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
		EXCEPTION WHEN SQLSTATE 'PD098' THEN
			RETURN NULL;
		END;
	END LOOP;
END
$$;

/*
 * One attempt at a holder lease of kind 's' (shared) or 'p' (a permit of a
 * semaphore of "permits"). Holder grants of a name take its kind lock in
 * share mode, exclusive grants in exclusive mode, so a reader and a writer
 * never both win; the name's holder_counter row serializes the holders'
 * tokens and the permit count. p_until, when given, is the lease's end
 * instead of now + p_ttl (dlock.downgrade: the end of the exclusive lease
 * it replaces).
 */
CREATE OR REPLACE FUNCTION dlock._try_holder(p_kind "char", p_lock_name text, p_permits integer, p_ttl interval,
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
	slot_exists boolean;
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
				IF r.owner_token IS NOT NULL THEN
					PERFORM dlock._await_pins_of_ended(p_lock_name, now, true);
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
				UPDATE dlock.lock_holder h2
				   SET kind = p_kind, permits = CASE WHEN p_kind = 'p' THEN p_permits END, owner_token = p_owner,
					   fencing_seq = token, block_end = token, lease_until = until,
					   holder = p_holder, acquired_at = now, updated_at = now, renewals = 0,
					   grant_timeline = c.timeline, grant_system = c.system
				 WHERE h2.lock_name = p_lock_name AND h2.slot = free_slot;
			ELSE
				INSERT INTO dlock.lock_holder (lock_name, slot, kind, permits, owner_token, fencing_seq, block_end,
											   lease_until, holder, acquired_at, updated_at, grant_timeline, grant_system)
				VALUES (p_lock_name, free_slot, p_kind, CASE WHEN p_kind = 'p' THEN p_permits END, p_owner, token, token,
						until, p_holder, now, now, c.timeline, c.system);
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

-- BEGIN extension owner
-- A trusted extension's update script runs as a superuser too: hand what it
-- created to the extension's owner, as the install script does. (Left out of
-- the psql -f and pg_tle scripts, which run as that role already.)
DO $owner$
DECLARE
	owner oid;
	obj record;
BEGIN
	SELECT e.extowner INTO owner FROM pg_catalog.pg_extension e WHERE e.extname = 'pg_dlock_sql';
	FOR obj IN SELECT p.oid::regprocedure AS name FROM pg_catalog.pg_proc p
				WHERE p.pronamespace = 'dlock'::regnamespace AND p.proowner <> owner
	LOOP
		EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', obj.name, pg_catalog.pg_get_userbyid(owner));
	END LOOP;
	FOR obj IN SELECT c.oid::regclass AS name FROM pg_catalog.pg_class c
				WHERE c.relnamespace = 'dlock'::regnamespace AND c.relkind IN ('r', 'v') AND c.relowner <> owner
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', obj.name, pg_catalog.pg_get_userbyid(owner));
	END LOOP;
END
$owner$;
-- END extension owner
