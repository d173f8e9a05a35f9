-- One rule for every lock kind and every caller: extreme intervals, who may
-- pin a lease, and the lease policies of a name kept from holder kinds.
\set VERBOSITY terse
\pset null '(null)'

------------------------------------------------------------------------
-- Time: a duration whose end is not a finite timestamp is refused (22023)
-- before anything waits or is stored; an ordinary one still works.
------------------------------------------------------------------------
SELECT (dlock.try_acquire('rules:busy', '1 minute', '00000000-0000-0000-0000-0000000000c1')).fencing_token IS NOT NULL AS held;
-- refused: the wait of every kind's acquire ends past the last timestamp
SELECT dlock.acquire('rules:busy', '1 minute', '1000000 years');
SELECT dlock.acquire_shared('rules:busy', '1 minute', '1000000 years');
SELECT dlock.acquire_permit('rules:busy-permits', 1, '1 minute', '1000000 years');
SELECT count(*) FROM dlock.acquire_all(ARRAY['rules:busy'], '1 minute', '1000000 years');
-- refused: a max_hold, min_hold or lock_delay that ends past it
SELECT dlock.try_acquire('rules:max-hold', '1 minute', max_hold => '300000 years');
SELECT dlock.acquire('rules:max-hold', '1 minute', '0', max_hold => '300000 years');
-- nothing was stored by the refusals, and dlock.locks still reads every row
SELECT count(*) AS rows_created FROM dlock.distributed_lock WHERE lock_name = 'rules:max-hold';
SELECT count(*) > 0 AS locks_readable FROM dlock.locks;
-- the longest representable durations that do end are still accepted
SELECT (dlock.try_acquire('rules:max-hold', '1 minute', max_hold => '200000 years')).fencing_token IS NOT NULL AS long_max_hold_accepted;
SELECT hold_limit - acquired_at = interval '200000 years' AS hold_limit_stored FROM dlock.locks WHERE lock_name = 'rules:max-hold';
SELECT dlock.force_release('rules:max-hold', 'regress: the rule book') AS ended;
-- a wait that ends is bounded by it (here: at once, the name is busy)
SELECT dlock.acquire('rules:busy', '1 minute', '10 ms');
SELECT dlock.release('rules:busy', '00000000-0000-0000-0000-0000000000c1') AS released;

------------------------------------------------------------------------
-- Who may pin: a strict enforce_fencing trigger pins as holds() does, so a
-- role that may execute neither holds nor assert_holds may not pin through
-- a trigger on a table of its own.
------------------------------------------------------------------------
CREATE ROLE regress_rules_public;
CREATE ROLE regress_rules_pinner;
GRANT EXECUTE ON FUNCTION dlock.holds(text, bigint) TO regress_rules_pinner;
GRANT CREATE ON SCHEMA public TO regress_rules_public, regress_rules_pinner;
SELECT fencing_token AS victim_token
  FROM dlock.try_acquire('rules:victim', '1 minute', '00000000-0000-0000-0000-0000000000c2') \gset
SET ROLE regress_rules_public;
CREATE TEMPORARY TABLE attack (token bigint, lock_name text);
CREATE TRIGGER pin BEFORE INSERT OR UPDATE OR DELETE ON attack
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token', 'lock_name');
-- refused: a role with nothing beyond PUBLIC pins nobody's lease (42501)
BEGIN;
INSERT INTO attack VALUES (:victim_token, 'rules:victim');
ROLLBACK;
-- refused the same way for a made-up token: the privilege comes first
INSERT INTO attack VALUES (1, 'rules:victim');
RESET ROLE;
-- the victim's renew is not blocked: nothing was pinned
SELECT dlock.renew('rules:victim', '00000000-0000-0000-0000-0000000000c2', '1 minute') IS NOT NULL AS victim_renewed;
-- a role granted holds() may write under the live lease (the trigger pins it)
SET ROLE regress_rules_pinner;
CREATE TEMPORARY TABLE fenced (token bigint, lock_name text);
CREATE TRIGGER pin BEFORE INSERT OR UPDATE OR DELETE ON fenced
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token', 'lock_name');
INSERT INTO fenced VALUES (:victim_token, 'rules:victim');
SELECT count(*) AS fenced_rows FROM fenced;
DROP TABLE fenced;
RESET ROLE;
-- and so may a role granted only assert_holds
GRANT EXECUTE ON FUNCTION dlock.assert_holds(text, bigint) TO regress_rules_public;
SET ROLE regress_rules_public;
INSERT INTO attack VALUES (:victim_token, 'rules:victim');
SELECT count(*) AS attack_rows FROM attack;
DROP TABLE attack;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION dlock.assert_holds(text, bigint) FROM regress_rules_public;
SELECT dlock.release('rules:victim', '00000000-0000-0000-0000-0000000000c2') AS released;
REVOKE CREATE ON SCHEMA public FROM regress_rules_public, regress_rules_pinner;
REVOKE EXECUTE ON FUNCTION dlock.holds(text, bigint) FROM regress_rules_pinner;
DROP ROLE regress_rules_public;
DROP ROLE regress_rules_pinner;

------------------------------------------------------------------------
-- Lease policies of a name keep every kind out: a reader or a permit is
-- not granted while an exclusive lease's min_hold or lock delay keeps the
-- name from new owners.
------------------------------------------------------------------------
-- a release inside min_hold
SELECT (dlock.try_acquire('rules:min-hold', '1 minute', '00000000-0000-0000-0000-0000000000c3', min_hold => '1 minute')).fencing_token IS NOT NULL AS held;
SELECT dlock.release('rules:min-hold', '00000000-0000-0000-0000-0000000000c3') AS released_early;
SELECT * FROM dlock.try_acquire_shared('rules:min-hold', '1 minute');
SELECT * FROM dlock.try_acquire_permit('rules:min-hold', 2, '1 minute');
SELECT policy_state FROM dlock.locks WHERE lock_name = 'rules:min-hold';
-- a waiting reader is bounded by its wait and refused, not granted
SELECT dlock.acquire_shared('rules:min-hold', '1 minute', '50 ms');
-- an expiry with a lock delay
SELECT (dlock.try_acquire('rules:delay', '1 second', '00000000-0000-0000-0000-0000000000c4', lock_delay => '1 minute')).fencing_token IS NOT NULL AS held;
SELECT pg_sleep(1.2);
SELECT * FROM dlock.try_acquire_shared('rules:delay', '1 minute');
SELECT * FROM dlock.try_acquire_permit('rules:delay', 2, '1 minute');
SELECT policy_state FROM dlock.locks WHERE lock_name = 'rules:delay';
-- a force release with a lock delay
SELECT (dlock.try_acquire('rules:forced', '1 minute', '00000000-0000-0000-0000-0000000000c5', lock_delay => '1 minute')).fencing_token IS NOT NULL AS held;
SELECT dlock.force_release('rules:forced', 'regress: the rule book') AS forced;
SELECT * FROM dlock.try_acquire_shared('rules:forced', '1 minute');
SELECT * FROM dlock.try_acquire_permit('rules:forced', 2, '1 minute');
SELECT policy_state FROM dlock.locks WHERE lock_name = 'rules:forced';
-- the control: a plain release leaves the name to readers at once
SELECT (dlock.try_acquire('rules:plain', '1 minute', '00000000-0000-0000-0000-0000000000c6')).fencing_token IS NOT NULL AS held;
SELECT dlock.release('rules:plain', '00000000-0000-0000-0000-0000000000c6') AS released;
SELECT (dlock.try_acquire_shared('rules:plain', '1 minute', '00000000-0000-0000-0000-0000000000c7')).fencing_token IS NOT NULL AS reader_granted;
SELECT dlock.release('rules:plain', '00000000-0000-0000-0000-0000000000c7') AS released;
DELETE FROM dlock.audit_log WHERE lock_name IN ('rules:forced', 'rules:max-hold');

------------------------------------------------------------------------
-- Strict fencing: a row without a token names no lease, so it is not
-- deleted either (22004)
------------------------------------------------------------------------
CREATE TEMPORARY TABLE strict_rows (token bigint, lock_name text);
INSERT INTO strict_rows VALUES (NULL, 'rules:strict');
CREATE TRIGGER strict BEFORE INSERT OR UPDATE OR DELETE ON strict_rows
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token', 'lock_name');
DELETE FROM strict_rows;
SELECT count(*) AS rows_kept FROM strict_rows;
DROP TABLE strict_rows;

------------------------------------------------------------------------
-- Cleanup reaches every kind: dlock.reap deletes idle holder slots, and a
-- reader coming back later still gets a token above every earlier one.
------------------------------------------------------------------------
SELECT count(*) AS readers FROM (
	SELECT dlock.try_acquire_shared('rules:reap-slots', '1 minute', ('00000000-0000-0000-0000-0000000001' || n)::uuid)
	  FROM generate_series(10, 12) n) r;
SELECT max(fencing_token) AS old_max FROM dlock.lock_holders WHERE lock_name = 'rules:reap-slots' \gset
SELECT bool_and(dlock.release('rules:reap-slots', ('00000000-0000-0000-0000-0000000001' || n)::uuid)) AS released
  FROM generate_series(10, 11) n;
-- two slots ended two days ago; the third is still live
UPDATE dlock.lock_holder SET lease_until = clock_timestamp() - interval '2 days', updated_at = clock_timestamp() - interval '2 days'
 WHERE lock_name = 'rules:reap-slots' AND owner_token IS NULL;
SELECT dlock.reap('1 day') >= 2 AS reaped;
SELECT count(*) AS slots_left, count(owner_token) AS live_slots FROM dlock.lock_holder WHERE lock_name = 'rules:reap-slots';
SELECT fencing_token > :old_max AS new_reader_token_higher
  FROM dlock.try_acquire_shared('rules:reap-slots', '1 minute', '00000000-0000-0000-0000-000000000113');
SELECT bool_and(dlock.release('rules:reap-slots', ('00000000-0000-0000-0000-0000000001' || n)::uuid)) AS released
  FROM generate_series(12, 13) n;

------------------------------------------------------------------------
-- Reporting reaches every kind: at dlock.audit = all, a shared lease and a
-- permit are audited when granted and released, as an exclusive lease is.
------------------------------------------------------------------------
SET dlock.audit = 'all';
SELECT (dlock.try_acquire_shared('rules:audit-shared', '1 minute', '00000000-0000-0000-0000-0000000000d8', 'reader')).fencing_token AS shared_token \gset
SELECT dlock.release('rules:audit-shared', '00000000-0000-0000-0000-0000000000d8') AS released;
SELECT (dlock.try_acquire_permit('rules:audit-permit', 1, '1 minute', '00000000-0000-0000-0000-0000000000d9', 'worker')).fencing_token AS permit_token \gset
SELECT dlock.release('rules:audit-permit', '00000000-0000-0000-0000-0000000000d9') AS released;
SELECT (dlock.try_acquire('rules:audit-exclusive', '1 minute', '00000000-0000-0000-0000-0000000000da', 'writer')).fencing_token IS NOT NULL AS held;
SELECT dlock.release('rules:audit-exclusive', '00000000-0000-0000-0000-0000000000da') AS released;
RESET dlock.audit;
SELECT lock_name, event, holder,
       fencing_token = CASE lock_name WHEN 'rules:audit-shared' THEN :shared_token
                                      WHEN 'rules:audit-permit' THEN :permit_token
                                      ELSE fencing_token END AS token_recorded
  FROM dlock.audit_log WHERE lock_name LIKE 'rules:audit-%' ORDER BY id;
DELETE FROM dlock.audit_log WHERE lock_name LIKE 'rules:audit-%';

------------------------------------------------------------------------
-- Tokens across kinds and cleanup: a reader's slot keeps a block of tokens;
-- a writer's token goes above it; once the name's row is reaped, the next
-- reader's token is still above the writer's (the block is not reused).
------------------------------------------------------------------------
SELECT (dlock.try_acquire_shared('rules:reap-block', '1 minute', '00000000-0000-0000-0000-0000000000e1')).fencing_token AS reader_token \gset
SELECT dlock.release('rules:reap-block', '00000000-0000-0000-0000-0000000000e1') AS released;
SELECT (dlock.try_acquire('rules:reap-block', '1 minute', '00000000-0000-0000-0000-0000000000e2')).fencing_token AS writer_token \gset
SELECT :writer_token > :reader_token AS writer_above_reader;
SELECT dlock.release('rules:reap-block', '00000000-0000-0000-0000-0000000000e2') AS released;
UPDATE dlock.distributed_lock SET lease_until = clock_timestamp() - interval '2 days', updated_at = clock_timestamp() - interval '2 days'
 WHERE lock_name = 'rules:reap-block';
SELECT dlock.reap('1 day') >= 1 AS reaped;
SELECT count(*) AS name_rows, (SELECT count(*) FROM dlock.lock_holder WHERE lock_name = 'rules:reap-block') AS slots
  FROM dlock.distributed_lock WHERE lock_name = 'rules:reap-block';
SELECT fencing_token > :writer_token AS next_reader_above_writer
  FROM dlock.try_acquire_shared('rules:reap-block', '1 minute', '00000000-0000-0000-0000-0000000000e3');
SELECT dlock.release('rules:reap-block', '00000000-0000-0000-0000-0000000000e3') AS released;

------------------------------------------------------------------------
-- A reader granted after an exclusive lease expired ends that lease, so
-- nothing (not even the server clock stepping back) can make it live again
-- beside the reader; its old holder can neither renew nor pass holds().
------------------------------------------------------------------------
SELECT (dlock.try_acquire('rules:expired-writer', '1 second', '00000000-0000-0000-0000-0000000000e4')).fencing_token AS old_writer_token \gset
SELECT pg_sleep(1.2);
SELECT (dlock.try_acquire_shared('rules:expired-writer', '1 minute', '00000000-0000-0000-0000-0000000000e5')).fencing_token > :old_writer_token AS reader_above_old_writer;
SELECT owner_token IS NULL AS expired_lease_ended FROM dlock.distributed_lock WHERE lock_name = 'rules:expired-writer';
SELECT dlock.renew('rules:expired-writer', '00000000-0000-0000-0000-0000000000e4', '1 minute') IS NULL AS old_writer_renew_refused;
SELECT dlock.holds('rules:expired-writer', :old_writer_token) AS old_writer_holds;
SELECT dlock.release('rules:expired-writer', '00000000-0000-0000-0000-0000000000e5') AS released;
