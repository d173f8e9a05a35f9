/* sql_edition/pg_dlock_sql--1.4.1--1.4.2.sql -- pg_dlock_sql 1.4.1 -> 1.4.2: the C extension's rules where this edition broke them */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.4.2'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * The C extension's tests, run on this edition, and its fault suite found
 * where it broke the rules it shares with the C extension. The SQL API is
 * unchanged; each fix is below, with the functions it replaces.
 *  - A pin outlives its lease's end. dlock.holds() pins a live lease (FOR
 *    SHARE) to the end of the calling transaction, so that the holder's
 *    fenced writes finish before anyone else holds the name. Up to 1.4.1 an
 *    exclusive grant over a pinned shared lease or permit that had ended,
 *    and a shared lease or permit over a pinned exclusive lease that had
 *    ended, were granted at once (a reader and a writer in their fenced
 *    transactions together), and a semaphore replaced a pinned permit's
 *    slot with a new one (a third holder of a semaphore of 2). A grant now
 *    ends the other kind's leases that ended, once their pins are gone
 *    (dlock._end_expired_leases), and a semaphore's permits are its slots 1
 *    to "permits".
 *  - The reap floor as it is now: a REPEATABLE READ transaction whose
 *    snapshot predated a reap issued a reaped token again.
 *  - The next token goes on counting in a new generation, as in the C
 *    extension (it restarted at 1; tokens grew either way).
 *  - holds() that waited for a concurrent change and found the lease gone
 *    kept its row lock to the end of the transaction.
 *  - A bounded wait (acquire and the shared, permit and multi-lock ones)
 *    waited for a pin past its wait; it now polls without lock waits.
 *  - A permit grant that waited for another transaction's creation of the
 *    semaphore did not check the permits again.
 *  - A same-owner retry of try_acquire is counted in renewals; acquire_all's
 *    55P03 message is the C extension's.
 */

------------------------------------------------------------------------------
-- The rule: a pin outlives its lease's end; a grant ends the other kind's ended leases
------------------------------------------------------------------------------

/*
 * A grant calls this under the name's kind lock with the clock reading it
 * decides at, before it decides: the leases of the other kind that had ended
 * by then but were never released (the exclusive lease when p_exclusive,
 * else the shared leases and permits) are ended, as the C extension does.
 * Their row locks are taken first, which waits for the transactions that pin
 * them -- in an attempt of a bounded wait (p_polling) without waiting: a
 * pin refuses the attempt (lock_not_available). Once ended, no
 * step back of the server clock can make such a lease live again beside the
 * new one, and a pin asked for later finds it ended (holds() decides again
 * once it has the row lock). A lease still live at p_now the caller refuses
 * on its own; a refused grant rolls this back with the rest of its
 * subtransaction.
 */
CREATE FUNCTION dlock._end_expired_leases(p_lock_name text, p_now timestamptz, p_exclusive boolean,
										  p_polling boolean)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
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
		UPDATE dlock.lock_holder h SET owner_token = NULL, updated_at = pg_catalog.clock_timestamp()
		 WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until <= p_now;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION dlock._end_expired_leases(text, timestamptz, boolean, boolean) FROM PUBLIC;

------------------------------------------------------------------------------
-- Tokens: the reap floor as it is now, and the next token as in the C extension
------------------------------------------------------------------------------

/*
 * The highest token of every reaped name. dlock.token_floor keeps it with
 * the data (pg_dump, a restore); a transaction whose snapshot predates a
 * reap (REPEATABLE READ, SERIALIZABLE) would read that table as it was and
 * issue a reaped token again. So every change to the table is mirrored in
 * dlock.reap_floor, a sequence, which every snapshot reads as it is now
 * (sequences are not transactional: a reap rolled back leaves it higher,
 * which only skips tokens).
 */
CREATE SEQUENCE dlock.reap_floor MINVALUE 0 START 0;
REVOKE ALL ON dlock.reap_floor FROM PUBLIC;

CREATE FUNCTION dlock._mirror_reap_floor()
RETURNS trigger LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM pg_catalog.setval('dlock.reap_floor',
							  coalesce((SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f), 0), true);
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION dlock._mirror_reap_floor() FROM PUBLIC;
CREATE TRIGGER mirror_reap_floor AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dlock.token_floor
	FOR EACH STATEMENT EXECUTE FUNCTION dlock._mirror_reap_floor();
-- The sequence starts at the floor as it is now. The table belongs to the
-- extension's owner, who could have changed its columns: read it as that
-- owner (this function is handed to it below and run after the hand-over),
-- never with the rights this script may run with (a superuser's).
CREATE FUNCTION dlock._start_reap_floor()
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM pg_catalog.setval('dlock.reap_floor',
							  coalesce((SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f), 0), true);
END
$$;
REVOKE ALL ON FUNCTION dlock._start_reap_floor() FROM PUBLIC;

-- the floor a grant of a new name must issue above: as it is now
CREATE FUNCTION dlock._reap_floor()
RETURNS bigint LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT NULLIF(GREATEST((SELECT f.last_value FROM dlock.reap_floor f),
						   (SELECT pg_catalog.max(t.reaped_max) FROM dlock.token_floor t)), 0)
$$;
REVOKE ALL ON FUNCTION dlock._reap_floor() FROM PUBLIC;



/*
 * The next token (token.c dlock_next_token, dlock_first_token): one more on
 * the same timeline of the same cluster; a generation up by the timelines
 * crossed on a later timeline of it, by the whole timeline on another
 * cluster or an earlier timeline, the counter going on in both. A name's
 * first token (prev NULL) is above floor: the next of it when floor is of
 * this generation or later, else the counter after floor's in this one.
 */
CREATE OR REPLACE FUNCTION dlock._next_token(prev bigint, prev_timeline integer, prev_system bigint,
								  timeline integer, system bigint, floor bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	counter_mask constant bigint := (1::bigint << 40) - 1;
	same_history boolean;
	token bigint;
BEGIN
	IF prev IS NULL THEN
		IF floor IS NOT NULL AND (floor >> 40) >= timeline THEN
			token := floor + 1;
		ELSE
			token := (timeline::bigint << 40) | ((coalesce(floor, 0) & counter_mask) + 1);
		END IF;
	ELSE
		same_history := prev_system IS NOT DISTINCT FROM system AND timeline >= prev_timeline;
		IF same_history AND timeline = prev_timeline THEN
			token := prev + 1;
		ELSE
			token := (((prev >> 40) + CASE WHEN same_history THEN timeline - prev_timeline ELSE timeline END) << 40)
					 | ((prev & counter_mask) + 1);
		END IF;
	END IF;
	IF floor IS NOT NULL AND token <= floor THEN
		token := floor + 1;
	END IF;
	RETURN token;
END
$$;

------------------------------------------------------------------------------
-- holds(): a pin that fails keeps no lock
------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dlock._holds(p_lock_name text, p_token bigint)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM dlock.distributed_lock l
				WHERE l.lock_name = p_lock_name AND l.fencing_seq = p_token
				  AND l.owner_token IS NOT NULL AND l.lease_until > pg_catalog.clock_timestamp()) THEN
		-- decide again on the version locked, after any wait for it; a lease
		-- that ended meanwhile is not pinned: its subtransaction gives the
		-- row lock back
		BEGIN
			PERFORM 1 FROM dlock.distributed_lock l
			  WHERE l.lock_name = p_lock_name AND l.fencing_seq = p_token AND l.owner_token IS NOT NULL
			  FOR SHARE;
			IF EXISTS (SELECT 1 FROM dlock.distributed_lock l
						WHERE l.lock_name = p_lock_name AND l.fencing_seq = p_token
						  AND l.owner_token IS NOT NULL AND l.lease_until > pg_catalog.clock_timestamp()) THEN
				RETURN true;
			END IF;
			RAISE SQLSTATE 'PD096';
		EXCEPTION WHEN SQLSTATE 'PD096' THEN
			RETURN false;
		END;
	END IF;
	IF EXISTS (SELECT 1 FROM dlock.lock_holder h
				WHERE h.lock_name = p_lock_name AND h.fencing_seq = p_token
				  AND h.owner_token IS NOT NULL AND h.lease_until > pg_catalog.clock_timestamp()) THEN
		BEGIN
			PERFORM 1 FROM dlock.lock_holder h
			  WHERE h.lock_name = p_lock_name AND h.fencing_seq = p_token AND h.owner_token IS NOT NULL
			  FOR SHARE;
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name AND h.fencing_seq = p_token
						  AND h.owner_token IS NOT NULL AND h.lease_until > pg_catalog.clock_timestamp()) THEN
				RETURN true;
			END IF;
			RAISE SQLSTATE 'PD096';
		EXCEPTION WHEN SQLSTATE 'PD096' THEN
			RETURN false;
		END;
	END IF;
	RETURN false;
END
$$;

------------------------------------------------------------------------------
-- Bounded waits: no lock waited for past the wait
------------------------------------------------------------------------------

/*
 * A bounded wait polls: acquire, acquire_shared, acquire_permit and
 * acquire_all run with lock_timeout = 1ms (their SET clause, undone when
 * they return) and attempt with p_polling, so no attempt waits for a
 * lock -- another grant's row lock, the kind lock, for more than a
 * millisecond; a pin on a lease that ended, not at all
 * (dlock._end_expired_leases) -- and a lock held past the wait cannot
 * carry the call past it (the C extension's waits skip pinned leases the
 * same way). An attempt that meets such a lock counts as refused, and the
 * loop sleeps and tries again.
 */

CREATE OR REPLACE FUNCTION dlock.acquire(lock_name text, ttl interval, wait interval,
							  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
							  session_bound boolean DEFAULT false,
							  max_hold interval DEFAULT NULL,
							  min_hold interval DEFAULT NULL,
							  lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1ms'
AS $$
DECLARE
	p record;
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	p := dlock._check_policy(ttl, session_bound, max_hold, min_hold, lock_delay);
	PERFORM dlock._check_may_wait(lock_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		BEGIN
			result := dlock._try_exclusive(lock_name, ttl, owner, holder, p.eff_max_hold, min_hold, p.eff_lock_delay, true);
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
COMMENT ON FUNCTION dlock.acquire(text, interval, interval, uuid, text, boolean, interval, interval, interval) IS
'like try_acquire, but polls in the server up to "wait" for the lock (jittered back-off, no order among waiters); raises lock_not_available (55P03) when the wait runs out. Same options as try_acquire';

CREATE OR REPLACE FUNCTION dlock.acquire_shared(lock_name text, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
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
COMMENT ON FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text) IS
'like try_acquire_shared, but polls in the server up to "wait"; raises lock_not_available (55P03) when the wait runs out';

CREATE OR REPLACE FUNCTION dlock.acquire_permit(semaphore_name text, permits integer, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
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
COMMENT ON FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text) IS
'like try_acquire_permit, but polls in the server up to "wait"; raises lock_not_available (55P03) when the wait runs out';

CREATE OR REPLACE FUNCTION dlock.acquire_all(lock_names text[], ttl interval, wait interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1ms'
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
		BEGIN
			leases := ARRAY(SELECT a FROM dlock._try_all(names, ttl, owner, holder, true) a);
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

------------------------------------------------------------------------------
-- The grants that call it
------------------------------------------------------------------------------

/*
 * One attempt at an exclusive lease; arguments already checked. Returns the
 * lease, or NULL when refused. Decides on the newest committed row with one
 * clock reading taken after the row lock; a refusal on the first, unlocked
 * read takes no row lock and no transaction ID.
 */
DROP FUNCTION dlock._try_exclusive(text, interval, uuid, text, interval, interval, interval);
CREATE FUNCTION dlock._try_exclusive(p_lock_name text, p_ttl interval, p_owner uuid, p_holder text,
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
			-- shared leases and permits: live ones refuse, ended ones are
			-- ended once their pins are gone, both judged at one clock reading
			now := pg_catalog.clock_timestamp();
			PERFORM dlock._end_expired_leases(p_lock_name, now, false, p_polling);
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			c := dlock._cluster();
			SELECT * INTO hc FROM dlock.holder_counter h WHERE h.lock_name = p_lock_name;

			IF r.lock_name IS NULL THEN
				token := dlock._next_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system,
										   c.timeline, c.system,
										   dlock._reap_floor());
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
REVOKE ALL ON FUNCTION dlock._try_exclusive(text, interval, uuid, text, interval, interval, interval, boolean) FROM PUBLIC;

/*
 * One attempt at a holder lease of kind 's' (shared) or 'p' (a permit of a
 * semaphore of "permits"). Holder grants of a name take its kind lock in
 * share mode, exclusive grants in exclusive mode, so a reader and a writer
 * never both win; the name's holder_counter row serializes the holders'
 * tokens and the permit count. p_until, when given, is the lease's end
 * instead of now + p_ttl (dlock.downgrade: the end of the exclusive lease
 * it replaces).
 */
DROP FUNCTION dlock._try_holder("char", text, integer, interval, uuid, text, timestamptz);
CREATE FUNCTION dlock._try_holder(p_kind "char", p_lock_name text, p_permits integer, p_ttl interval,
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
				CONTINUE;				-- changed meanwhile: report it as above
			END IF;
			IF p_kind = 'p' AND live_same >= p_permits THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			IF hc.fencing_seq = 0 THEN
				token := dlock._next_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.timeline, c.system,
										   dlock._reap_floor());
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
REVOKE ALL ON FUNCTION dlock._try_holder("char", text, integer, interval, uuid, text, timestamptz, boolean) FROM PUBLIC;

-- all or none of a set, each through _try_exclusive
DROP FUNCTION dlock._try_all(text[], interval, uuid, text);
CREATE FUNCTION dlock._try_all(p_names text[], p_ttl interval, p_owner uuid, p_holder text,
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
			got := dlock._try_exclusive(n, p_ttl, p_owner, p_holder, NULL, NULL, NULL, p_polling);
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
REVOKE ALL ON FUNCTION dlock._try_all(text[], interval, uuid, text, boolean) FROM PUBLIC;

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
				  AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'S']::pg_catalog."char"[]) AND c.relowner OPERATOR(pg_catalog.<>) owner
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', obj.name, pg_catalog.pg_get_userbyid(owner));
	END LOOP;
END
$owner$;
-- END extension owner

-- as the extension's owner (the function is its own now)
DO $start_reap_floor$
BEGIN
	PERFORM dlock._start_reap_floor();
END
$start_reap_floor$;
DROP FUNCTION dlock._start_reap_floor();
