/* sql_edition/pg_dlock_sql--1.4.2--1.5.sql -- pg_dlock_sql 1.4.2 -> 1.5: one snapshot rule, durable grants, refusals that leave nothing, a kind lock no other role can take, settings that pg_dump keeps, the one token rule */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock_sql UPDATE TO '1.5'" to load this file (or sql_edition/dist/pg_dlock_sql-upgrade.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * What changes (docs/sql-edition.md):
 *  - One snapshot rule. Every grant decides on the latest committed state
 *    of its name, under the name's kind lock. A REPEATABLE READ or
 *    SERIALIZABLE transaction reads its snapshot instead, so a grant there
 *    could decide on a state that was gone (a shared and an exclusive lease
 *    both live with one token): the grants now refuse those isolation
 *    levels (0A000). Renewals, releases and holds() decide on the row they
 *    lock, which PostgreSQL gives them as it is now or refuses (40001).
 *  - Durable grants. A grant raised synchronous_commit for its transaction;
 *    a later SET LOCAL synchronous_commit = off (or an enclosing function's
 *    SET clause) lowered it again, and the grant committed asynchronously.
 *    A deferred constraint trigger now raises it again at commit.
 *  - Refusals leave nothing. A grant that lost the creation of a new name
 *    (or a reap) left its subtransaction with CONTINUE, which kept the
 *    name's kind lock and row locks to the end of the caller's
 *    transaction; it now rolls the subtransaction back, and every grant
 *    decides again on the latest committed state under the kind lock
 *    before it writes anything, so a refusal there takes no transaction ID.
 *    The retry loops are bounded.
 *  - The kind lock's key is no longer computable by other roles: it is
 *    drawn from a random seed that only the extension's owner may read.
 *  - dlock.settings and the sequence dlock.reap_floor are dumped by
 *    pg_dump (pg_extension_config_dump); a restored setting replaces the
 *    default the installation wrote.
 *  - 'infinity' as a wait or max_hold is refused with 22023 on PostgreSQL
 *    17 too (it raised 22003 there).
 *  - The one token rule of the C extension (dlock.next_fencing_token, the
 *    shared vectors in regress/token_rule_vectors.csv): grants at history
 *    positions, the reap floor a token state with its position and
 *    cluster; dlock.after_restore.
 */

-- A grant, renewal or release of an older version running while this
-- script does would take the kind lock under the old key: wait for those
-- in progress, and hold new ones until this update commits.
LOCK TABLE dlock.distributed_lock, dlock.lock_holder, dlock.holder_counter IN SHARE ROW EXCLUSIVE MODE;

------------------------------------------------------------------------------
-- One snapshot rule
------------------------------------------------------------------------------

CREATE FUNCTION dlock._check_isolation()
RETURNS void LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	level text := pg_catalog.current_setting('transaction_isolation');
BEGIN
	IF level IN ('repeatable read', 'serializable') THEN
		RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
			MESSAGE = pg_catalog.format('the SQL edition of pg_dlock cannot grant a lease in a %s transaction',
										pg_catalog.upper(level)),
			DETAIL = 'A grant decides on the latest committed state of its lock, which the snapshot of a REPEATABLE READ or SERIALIZABLE transaction does not show.',
			HINT = 'Acquire in a READ COMMITTED transaction (the default), or use the C extension pg_dlock.';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION dlock._check_isolation() FROM PUBLIC;

------------------------------------------------------------------------------
-- The one token rule (the C extension's extension/token.c dlock_token_rule)
------------------------------------------------------------------------------

/*
 * The next token after a state (prev, prev_history, prev_system) -- a lock
 * row's last grant, a holder counter, or the reap floor; NULL prev is
 * nothing -- granted at history position "history" by cluster "system".
 * One more, and a generation up whenever the position differs: by the
 * positions crossed when the state is of the same cluster at the same or
 * an earlier position, else (another cluster, unknown history 0, a later
 * position than now) by the whole position. The counter carries into the
 * generation; a generation that no longer fits a bigint is refused (54000).
 * A history position is (timeline - 1) * 16384 + epoch + 1; this edition
 * has no epochs (epoch 0). regress/token_rule_vectors.csv holds the cases
 * both editions are checked against.
 */
CREATE FUNCTION dlock.next_fencing_token(prev bigint, prev_history integer, prev_system bigint,
										 history integer, system bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	counter_bits constant integer := 40;
	max_generation constant bigint := (1::bigint << (63 - 40)) - 1;
	p bigint := coalesce(prev, 0);
	p_history integer := CASE WHEN prev IS NULL THEN 0 ELSE coalesce(prev_history, 0) END;
	p_system bigint := CASE WHEN prev IS NULL THEN 0 ELSE coalesce(prev_system, 0) END;
	generation bigint;
	counter bigint;
BEGIN
	IF history IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'history must not be null';
	END IF;
	IF system IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'system must not be null';
	END IF;
	IF p < 0 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'prev must not be negative';
	END IF;
	IF p_history < 0 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'prev_history must not be negative';
	END IF;
	IF history < 1 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'history must be positive';
	END IF;
	generation := (p >> counter_bits)
		+ CASE WHEN p_system <> 0 AND p_system = system AND history >= p_history
			   THEN history - p_history ELSE history END;
	counter := (p & ((1::bigint << counter_bits) - 1)) + 1;
	generation := generation + (counter >> counter_bits);
	counter := counter & ((1::bigint << counter_bits) - 1);
	IF generation > max_generation THEN
		RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded',
			MESSAGE = 'fencing tokens of this lock are exhausted',
			DETAIL = pg_catalog.format('The token''s generation would be %s; at most %s fit in a bigint.',
									   generation, max_generation);
	END IF;
	RETURN (generation << counter_bits) + counter;
END
$$;
COMMENT ON FUNCTION dlock.next_fencing_token(bigint, integer, bigint, integer, bigint) IS
'the token rule of every grant of every kind: the next token after the state (prev, prev_history, prev_system) -- a lock row, a holder counter, the reap floor; NULL prev: nothing -- granted at history position history by cluster system';

/*
 * The history position of a grant now, and the cluster: the timeline WAL
 * is written on now (pg_walfile_name of the current position: executable
 * by every role, and right at once after a promotion), as a position
 * (timeline - 1) * 16384 + 1 (no epochs here); the cluster's system
 * identifier when pg_control_system() may be called (PUBLIC may, by
 * default), else this installation's random number (dlock.installation).
 * Rows of 1.4.2 and before hold the timeline itself, the same position on
 * timeline 1; on a later timeline it reads as an earlier position, which
 * only moves the next token further up.
 */
CREATE FUNCTION dlock._history(OUT history integer, OUT system bigint)
RETURNS record LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	timeline integer;
BEGIN
	IF pg_catalog.pg_is_in_recovery() THEN
		RAISE EXCEPTION USING ERRCODE = 'read_only_sql_transaction',
			MESSAGE = 'cannot grant a lease during recovery',
			HINT = 'Acquire leases on the primary server.';
	END IF;
	timeline := ('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::integer;
	history := (timeline - 1) * 16384 + 1;
	IF pg_catalog.has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') THEN
		SELECT c.system_identifier INTO system FROM pg_catalog.pg_control_system() c;
	ELSE
		SELECT i.history INTO system FROM dlock.installation i;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION dlock._history() FROM PUBLIC;

/*
 * The reap floor is a token state like a lock row's: the token left by a
 * reap (at or above every token of the rows it removed) with the history
 * position and cluster of the reap, so that the first token of a name
 * follows every later timeline. Rows without them (written before 1.5, or
 * by hand) are of unknown history: the next token after them moves up by
 * the whole position.
 */
ALTER TABLE dlock.token_floor
	ADD COLUMN grant_timeline integer CHECK (grant_timeline >= 0),
	ADD COLUMN grant_system bigint;
COMMENT ON TABLE dlock.token_floor IS
'the token state left by dlock.reap for the lock rows it removed: a name without a row takes the next token after it, by the rule of dlock.next_fencing_token';

-- the first token of a name without a row: after every floor row (nothing's, without one)
CREATE FUNCTION dlock._floor_next(history integer, system bigint)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT coalesce(pg_catalog.max(dlock.next_fencing_token(f.reaped_max, f.grant_timeline, f.grant_system,
															 history, system)),
					dlock.next_fencing_token(NULL, NULL, NULL, history, system))
	  FROM dlock.token_floor f
$$;
REVOKE ALL ON FUNCTION dlock._floor_next(integer, bigint) FROM PUBLIC;

-- The functions of the rule before 1.5 (grants now call the ones above).
DROP FUNCTION dlock._next_token(bigint, integer, bigint, integer, bigint, bigint);
DROP FUNCTION dlock._reap_floor();
DROP FUNCTION dlock._cluster();

-- reap: the floor it leaves is a token state
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
		   AND NOT EXISTS (SELECT 1 FROM dlock.lock_holder h
							WHERE h.lock_name = l.lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now)
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
-- A restore that cannot hand a token out again
------------------------------------------------------------------------------

/*
 * After restoring anything but the latest state (a base backup or an older
 * dump of this cluster, whose system identifier and timelines go on as
 * before): ends every lease of the restored state now and moves every
 * token of every name, every holder counter and the reap floor up by
 * lost_timelines whole timelines of history positions (16384 generations
 * each), so that no token that a lost server life issued after the backup
 * is handed out again. An empty floor is made the state of nothing first,
 * so that it moves too. Returns the number of lock rows and holder slots
 * moved. Run it before applications use the restored server: a grant
 * that decided before it and writes after it keeps its old token.
 */
CREATE FUNCTION dlock.after_restore(lost_timelines integer DEFAULT 1)
RETURNS bigint LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	max_generation constant bigint := (1::bigint << (63 - 40)) - 1;
	generations bigint;
	highest bigint;
	shift bigint;
	now timestamptz;
	rows_moved bigint;
	slots_moved bigint;
BEGIN
	IF lost_timelines < 1 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'lost_timelines must be at least 1';
	END IF;
	IF pg_catalog.pg_is_in_recovery() THEN
		RAISE EXCEPTION USING ERRCODE = 'read_only_sql_transaction',
			MESSAGE = 'dlock.after_restore cannot run during recovery',
			HINT = 'Run it on the restored server once it accepts writes.';
	END IF;
	-- grants write these tables with ROW EXCLUSIVE: kept out until the move commits
	LOCK TABLE dlock.distributed_lock, dlock.lock_holder, dlock.holder_counter, dlock.token_floor IN EXCLUSIVE MODE;
	SELECT coalesce(pg_catalog.max(m.t), 0) INTO highest FROM (
		SELECT pg_catalog.max(l.fencing_seq) FROM dlock.distributed_lock l
		UNION ALL SELECT pg_catalog.max(h.block_end) FROM dlock.lock_holder h
		UNION ALL SELECT pg_catalog.max(c.fencing_seq) FROM dlock.holder_counter c
		UNION ALL SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f) m(t);
	generations := lost_timelines::bigint * 16384;
	IF (highest >> 40) + generations > max_generation THEN
		RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded',
			MESSAGE = 'fencing tokens of this lock are exhausted',
			DETAIL = pg_catalog.format('The token''s generation would be %s; at most %s fit in a bigint.',
									   (highest >> 40) + generations, max_generation);
	END IF;
	shift := generations << 40;
	now := pg_catalog.clock_timestamp();
	INSERT INTO dlock.token_floor (reaped_max, reaped_at, grant_timeline, grant_system)
	SELECT 0, now, 0, 0 WHERE NOT EXISTS (SELECT FROM dlock.token_floor);
	UPDATE dlock.distributed_lock l
	   SET fencing_seq = l.fencing_seq + shift,
		   lease_until = CASE WHEN l.owner_token IS NOT NULL AND l.lease_until > now THEN now ELSE l.lease_until END;
	GET DIAGNOSTICS rows_moved = ROW_COUNT;
	UPDATE dlock.lock_holder h
	   SET fencing_seq = h.fencing_seq + shift, block_end = h.block_end + shift,
		   lease_until = CASE WHEN h.owner_token IS NOT NULL AND h.lease_until > now THEN now ELSE h.lease_until END;
	GET DIAGNOSTICS slots_moved = ROW_COUNT;
	UPDATE dlock.holder_counter c SET fencing_seq = c.fencing_seq + shift;
	UPDATE dlock.token_floor f SET reaped_max = f.reaped_max + shift;
	RETURN rows_moved + slots_moved;
END
$$;
COMMENT ON FUNCTION dlock.after_restore(integer) IS
'after restoring anything but the latest state: ends every lease of the restored state and moves every token of every name, and the reap floor, above every history position of lost_timelines timelines, so that no token any lost server life issued after the backup is handed out again; returns the number of lock rows and holder slots moved';
REVOKE ALL ON FUNCTION dlock.after_restore(integer) FROM PUBLIC;

-- Carrying tokens over DROP EXTENSION: what a reap of every row would leave,
-- read before the drop, becomes the new extension's floor.
CREATE FUNCTION dlock.highest_token(OUT fencing_token bigint, OUT history integer)
RETURNS record LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
BEGIN
	c := dlock._history();
	SELECT pg_catalog.max(dlock.next_fencing_token(m.t, m.h, m.s, c.history, c.system)) - 1
	  INTO highest_token.fencing_token
	  FROM (SELECT l.fencing_seq, l.grant_timeline, l.grant_system FROM dlock.distributed_lock l
			UNION ALL SELECT h.block_end, h.grant_timeline, h.grant_system FROM dlock.lock_holder h
			UNION ALL SELECT k.fencing_seq, k.grant_timeline, k.grant_system FROM dlock.holder_counter k
			UNION ALL SELECT f.reaped_max, f.grant_timeline, f.grant_system FROM dlock.token_floor f
			UNION ALL SELECT NULL, NULL, NULL) m(t, h, s);
	highest_token.history := c.history;
END
$$;
COMMENT ON FUNCTION dlock.highest_token() IS
'read before DROP EXTENSION, for dlock.carry_over: the token state whose next token, at the history position a grant would have now, is above every token this database issued or reserved (lock rows, holder slots and counters, the reap floor), and that position';
REVOKE ALL ON FUNCTION dlock.highest_token() FROM PUBLIC;

CREATE FUNCTION dlock.carry_over(fencing_token bigint, history integer)
RETURNS void LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c record;
BEGIN
	IF carry_over.fencing_token < 0 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'fencing_token must not be negative';
	END IF;
	IF carry_over.history < 1 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'history must be positive';
	END IF;
	IF pg_catalog.pg_is_in_recovery() THEN
		RAISE EXCEPTION USING ERRCODE = 'read_only_sql_transaction',
			MESSAGE = 'dlock.carry_over cannot run during recovery';
	END IF;
	IF EXISTS (SELECT FROM dlock.distributed_lock) OR EXISTS (SELECT FROM dlock.lock_holder)
	   OR EXISTS (SELECT FROM dlock.holder_counter) OR EXISTS (SELECT FROM dlock.token_floor) THEN
		RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
			MESSAGE = 'dlock.carry_over needs an extension that has issued no token yet',
			HINT = 'Run it right after CREATE EXTENSION, before any grant.';
	END IF;
	c := dlock._history();
	INSERT INTO dlock.token_floor (reaped_max, reaped_at, grant_timeline, grant_system)
	VALUES (carry_over.fencing_token, pg_catalog.clock_timestamp(), carry_over.history, c.system);
END
$$;
COMMENT ON FUNCTION dlock.carry_over(bigint, integer) IS
'right after DROP EXTENSION and CREATE EXTENSION, with what dlock.highest_token() gave before the drop: the reap floor becomes that state, as if every row had been reaped';
REVOKE ALL ON FUNCTION dlock.carry_over(bigint, integer) FROM PUBLIC;

------------------------------------------------------------------------------
-- A kind lock no other role can take
------------------------------------------------------------------------------

/*
 * The kind lock is a transaction-level advisory lock, which any role may
 * take on any key. Up to 1.4.2 its key was computed from the name alone
 * (documented), so any role could hold a name's key and stall its grants.
 * The key is now hashtextextended(name, seed) with a random 64-bit seed
 * drawn here, which only the extension's owner may read. (pg_locks shows
 * the keys of the advisory locks held at that moment to every role: see
 * docs/sql-edition.md for that bound.) Not dumped: a restored database
 * draws its own seed.
 */
CREATE TABLE dlock.kind_lock_seed (
	seed bigint NOT NULL
);
COMMENT ON TABLE dlock.kind_lock_seed IS 'random seed of the kind locks'' advisory lock keys (read by the extension owner only; not dumped)';
REVOKE ALL ON dlock.kind_lock_seed FROM PUBLIC;
INSERT INTO dlock.kind_lock_seed
	SELECT ('x' || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 1, 16))::bit(64)::bigint;

CREATE OR REPLACE FUNCTION dlock._kind_key(lock_name text)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.hashtextextended(lock_name, (SELECT s.seed FROM dlock.kind_lock_seed s)) $$;

------------------------------------------------------------------------------
-- Durable grants: synchronous_commit raised again at commit
------------------------------------------------------------------------------

/*
 * dlock._durable() raises synchronous_commit for the rest of the granting
 * transaction; a later SET LOCAL, set_config or a function's SET clause
 * could lower it again before the commit. This trigger runs at commit
 * (deferred), before the commit record is written, for every row that a
 * grant or renewal left with an owner, and raises it again. A caller that
 * makes the constraint immediate (SET CONSTRAINTS ... IMMEDIATE) and then
 * lowers synchronous_commit opts out (docs/sql-edition.md).
 */
CREATE FUNCTION dlock._durable_at_commit()
RETURNS trigger LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._durable();
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION dlock._durable_at_commit() FROM PUBLIC;
CREATE CONSTRAINT TRIGGER durable_at_commit AFTER INSERT OR UPDATE ON dlock.distributed_lock
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.owner_token IS NOT NULL)
	EXECUTE FUNCTION dlock._durable_at_commit();
CREATE CONSTRAINT TRIGGER durable_at_commit AFTER INSERT OR UPDATE ON dlock.lock_holder
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.owner_token IS NOT NULL)
	EXECUTE FUNCTION dlock._durable_at_commit();

------------------------------------------------------------------------------
-- Settings and the reap floor's sequence are dumped
------------------------------------------------------------------------------

/*
 * pg_dump dumps the rows of dlock.settings; CREATE EXTENSION in the
 * restored database has written the defaults already, so a restored row
 * replaces the default of its name instead of colliding with it.
 */
CREATE FUNCTION dlock._settings_restore()
RETURNS trigger LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	UPDATE dlock.settings s SET value = NEW.value WHERE s.name = NEW.name;
	IF FOUND THEN
		RETURN NULL;
	END IF;
	RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION dlock._settings_restore() FROM PUBLIC;
CREATE TRIGGER settings_restore BEFORE INSERT ON dlock.settings
	FOR EACH ROW EXECUTE FUNCTION dlock._settings_restore();
SELECT pg_catalog.pg_extension_config_dump('dlock.settings', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.reap_floor', '');

------------------------------------------------------------------------------
-- 'infinity' is too long on every version
------------------------------------------------------------------------------

-- A duration whose end, counted from now, is past the last timestamp
-- PostgreSQL represents is refused (22023), as in the C extension;
-- PostgreSQL 17 represents an infinite interval, which is such a duration.
CREATE OR REPLACE FUNCTION dlock._check_end(value interval, arg_name text)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT pg_catalog.isfinite(value) THEN
		RAISE SQLSTATE 'PD095';
	END IF;
	PERFORM pg_catalog.clock_timestamp() + dlock._length(value);
EXCEPTION WHEN datetime_field_overflow OR interval_field_overflow OR numeric_value_out_of_range
		  OR SQLSTATE 'PD095' THEN
	RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
		MESSAGE = pg_catalog.format('%s is too long', arg_name),
		DETAIL = pg_catalog.format('The %s given was "%s"; counted from now it ends past the last timestamp PostgreSQL can represent.',
								   arg_name, value);
END
$$;

-- A wait, idle_for or older_than: not NULL, not negative; a wait must end
-- before the last timestamp, and none may be infinite (reap and the purges
-- count it back from now: 22003 on PostgreSQL 17 before 1.5).
CREATE OR REPLACE FUNCTION dlock._check_wait(wait interval, arg_name text DEFAULT 'wait')
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._not_null(arg_name, wait IS NULL);
	IF wait < interval '0' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = pg_catalog.format('%s must not be negative', arg_name);
	END IF;
	IF arg_name = 'wait' OR NOT pg_catalog.isfinite(wait) THEN
		PERFORM dlock._check_end(wait, arg_name);
	END IF;
END
$$;

------------------------------------------------------------------------------
-- The grants: latest committed state, nothing left by a refusal
------------------------------------------------------------------------------

/*
 * One attempt at an exclusive lease; arguments already checked. Returns the
 * lease, or NULL when refused. Decides on the latest committed row with one
 * clock reading; a refusal on the first, unlocked read or on the second one
 * under the kind lock takes no row lock and no transaction ID, and a
 * refusal after that rolls its subtransaction back (row and kind locks).
 */
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
			-- shared leases and permits: live ones refuse, ended ones are
			-- ended once their pins are gone, both judged at one clock reading
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			PERFORM dlock._end_expired_leases(p_lock_name, now, false, p_polling);
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
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

-- A downgrade retried by its owner after an unknown outcome: the shared
-- lease that the downgrade gave it, as it is (NULL if none)
CREATE FUNCTION dlock._downgraded_lease(p_lock_name text, p_owner uuid)
RETURNS dlock.lease LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT ROW(h.lock_name, h.owner_token, h.fencing_seq, h.lease_until)::dlock.lease
	  FROM dlock.lock_holder h
	 WHERE h.lock_name OPERATOR(pg_catalog.=) p_lock_name
	   AND h.owner_token OPERATOR(pg_catalog.=) p_owner
	   AND h.kind OPERATOR(pg_catalog.=) 's'::pg_catalog."char"
	   AND h.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
	 ORDER BY h.fencing_seq DESC LIMIT 1
$$;
REVOKE ALL ON FUNCTION dlock._downgraded_lease(text, uuid) FROM PUBLIC;

-- downgrade: refused where the grant it makes would be
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
	PERFORM dlock._check_isolation();
	-- the unlocked look: nothing to downgrade takes no lock
	SELECT * INTO r FROM dlock.distributed_lock l
	 WHERE l.lock_name = downgrade.lock_name AND l.owner_token = downgrade.owner_token;
	IF NOT FOUND OR r.lease_until <= pg_catalog.clock_timestamp() THEN
		RETURN dlock._downgraded_lease(downgrade.lock_name, downgrade.owner_token);
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
		RETURN dlock._downgraded_lease(downgrade.lock_name, downgrade.owner_token);
	END;
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
