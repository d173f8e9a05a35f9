-- Lease policies of every kind: max_hold, min_hold and lock_delay of shared
-- leases and permits (per holder slot), the settings dlock.max_hold and
-- dlock.lock_delay for every kind, and a multi-lock's options on every name.
\set VERBOSITY terse
\pset null '(null)'

------------------------------------------------------------------------
-- dlock.max_hold bounds every kind: a ttl above it is refused (22023)
-- before anything is written, and a lease within it gets it as its max_hold.
------------------------------------------------------------------------
SET dlock.max_hold = '10s';
-- refused: a ttl above dlock.max_hold, for every kind
SELECT dlock.try_acquire('kp:setting', '1 hour');
SELECT dlock.try_acquire_shared('kp:setting', '1 hour');
SELECT dlock.acquire_shared('kp:setting', '1 hour', '0');
SELECT dlock.try_acquire_permit('kp:setting-sem', 2, '1 hour');
SELECT dlock.acquire_permit('kp:setting-sem', 2, '1 hour', '0');
SELECT count(*) FROM dlock.try_acquire_all(ARRAY['kp:setting-a', 'kp:setting-b'], '1 hour');
-- refused: a max_hold above dlock.max_hold
SELECT dlock.try_acquire_shared('kp:setting', '1 s', max_hold => '1 minute');
SELECT dlock.try_acquire_permit('kp:setting-sem', 2, '1 s', max_hold => '1 minute');
-- the refusals left nothing
SELECT count(*) AS slots FROM dlock.lock_holder WHERE lock_name LIKE 'kp:setting%';
SELECT count(*) AS rows FROM dlock.distributed_lock WHERE lock_name LIKE 'kp:setting%';
-- within it: each lease of each kind keeps dlock.max_hold as its hold limit
SELECT (dlock.try_acquire_shared('kp:setting', '5 s')).fencing_token IS NOT NULL AS shared_granted;
SELECT (dlock.try_acquire_permit('kp:setting-sem', 2, '5 s')).fencing_token IS NOT NULL AS permit_granted;
SELECT lock_name, hold_limit - acquired_at AS max_hold FROM dlock.lock_holder
 WHERE lock_name LIKE 'kp:setting%' ORDER BY lock_name;
RESET dlock.max_hold;

-- dlock.lock_delay is the default delay of every kind's lease
SET dlock.lock_delay = '2s';
SELECT (dlock.try_acquire_shared('kp:setting-delay', '5 s')).fencing_token IS NOT NULL AS shared_granted;
SELECT (dlock.try_acquire_permit('kp:setting-delay-sem', 1, '5 s', lock_delay => '3 s')).fencing_token IS NOT NULL AS permit_granted;
SELECT lock_name, lock_delay FROM dlock.lock_holder
 WHERE lock_name LIKE 'kp:setting-delay%' ORDER BY lock_name;
RESET dlock.lock_delay;

------------------------------------------------------------------------
-- Bad input: every option of every holder kind, refused before anything
-- changed, with the exclusive lease's messages.
------------------------------------------------------------------------
-- refused: zero and negative durations
SELECT dlock.try_acquire_shared('kp:bad', '10 s', max_hold => '0');
SELECT dlock.try_acquire_shared('kp:bad', '10 s', min_hold => '-1 s');
SELECT dlock.try_acquire_permit('kp:bad', 2, '10 s', lock_delay => '0');
-- refused: min_hold above the ttl, max_hold below it
SELECT dlock.try_acquire_shared('kp:bad', '10 s', min_hold => '11 s');
SELECT dlock.try_acquire_permit('kp:bad', 2, '10 s', max_hold => '9 s');
SELECT dlock.acquire_permit('kp:bad', 2, '10 s', '0', min_hold => '1 minute');
-- refused: lock_delay above dlock.max_lock_delay
SELECT dlock.try_acquire_shared('kp:bad', '10 s', lock_delay => '2 minutes');
-- refused: a max_hold that ends past the last timestamp
SELECT dlock.try_acquire_permit('kp:bad', 2, '10 s', max_hold => '300000 years');
-- the longest that ends is accepted
SELECT (dlock.try_acquire_shared('kp:long', '10 s', max_hold => '200000 years')).fencing_token IS NOT NULL AS long_max_hold;
SELECT hold_limit - acquired_at = interval '200000 years' AS stored FROM dlock.lock_holder WHERE lock_name = 'kp:long';
SELECT count(*) AS slots_of_refusals FROM dlock.lock_holder WHERE lock_name = 'kp:bad';

------------------------------------------------------------------------
-- A reap leaves a slot that its min_hold or lock delay still keeps from
-- new owners (it would give the permit back early); a released slot
-- without policy, idle as long, goes (the control).
------------------------------------------------------------------------
SELECT (dlock.try_acquire_permit('kp:reap-min', 1, '10 s', '00000000-0000-0000-0000-00000000e00c', min_hold => '10 s')).fencing_token IS NOT NULL AS granted;
SELECT (dlock.try_acquire_permit('kp:reap-delay', 1, '10 s', lock_delay => '10 s')).fencing_token IS NOT NULL AS granted;
SELECT (dlock.try_acquire_permit('kp:reap-plain', 1, '10 s', '00000000-0000-0000-0000-00000000e00d')).fencing_token IS NOT NULL AS granted;
SELECT dlock.release('kp:reap-min', '00000000-0000-0000-0000-00000000e00c') AS released,
	   dlock.release('kp:reap-plain', '00000000-0000-0000-0000-00000000e00d') AS released;
-- all three look idle for two days; the delayed one was lost then, with a delay of three
UPDATE dlock.lock_holder
   SET updated_at = updated_at - interval '2 days', lease_until = lease_until - interval '2 days',
	   lock_delay = CASE WHEN lock_name = 'kp:reap-delay' THEN interval '3 days' ELSE lock_delay END
 WHERE lock_name IN ('kp:reap-min', 'kp:reap-delay', 'kp:reap-plain');
SELECT dlock.reap('1 day') >= 1 AS reaped;
SELECT lock_name FROM dlock.lock_holder WHERE lock_name LIKE 'kp:reap-%' ORDER BY lock_name;
-- the slots made to look idle go, so no later reap finds them
DELETE FROM dlock.lock_holder WHERE lock_name LIKE 'kp:reap-%';

------------------------------------------------------------------------
-- A multi-lock's options apply to every name of the set; a refused option
-- takes none of the set.
------------------------------------------------------------------------
SELECT count(*) AS granted FROM dlock.try_acquire_all(ARRAY['kp:set-a', 'kp:set-b'], '10 s', '00000000-0000-0000-0000-00000000e00b',
													 max_hold => '20 s', min_hold => '1 s', lock_delay => '3 s');
SELECT lock_name, hold_limit - acquired_at AS max_hold, min_hold_until - acquired_at AS min_hold, lock_delay
  FROM dlock.distributed_lock WHERE lock_name LIKE 'kp:set-%' ORDER BY lock_name;
SELECT dlock.release_all(ARRAY['kp:set-a', 'kp:set-b'], '00000000-0000-0000-0000-00000000e00b') AS released;
SELECT dlock.try_acquire('kp:set-b', '10 s') IS NULL AS min_hold_kept_b;
-- refused: an option that does not fit, a NULL session_bound
SELECT count(*) FROM dlock.try_acquire_all(ARRAY['kp:set-c', 'kp:set-d'], '10 s', min_hold => '1 minute');
SELECT count(*) FROM dlock.acquire_all(ARRAY['kp:set-c', 'kp:set-d'], '10 s', '0', max_hold => '1 s');
SELECT count(*) FROM dlock.try_acquire_all(ARRAY['kp:set-c', 'kp:set-d'], '10 s', session_bound => NULL);
SELECT count(*) AS rows_of_refusals FROM dlock.distributed_lock WHERE lock_name IN ('kp:set-c', 'kp:set-d');
------------------------------------------------------------------------
-- Over time, all at once (one wait of 0.6 s, one of 2.7 s):
--  max_hold: a renewal of a shared lease or permit ends at its hold limit
--    at the latest; once there, renewals are refused (NULL);
--  min_hold: a release before it ends the lease but keeps its slot from
--    new owners until then: a permit stays taken, and a shared lease keeps
--    writers out (other readers still come in); a release after it keeps
--    nothing;
--  lock_delay: a shared lease or permit lost (expired, forced away) keeps
--    its slot from new owners, and writers out, for the delay; a release
--    does not delay.
------------------------------------------------------------------------
SELECT (dlock.try_acquire_shared('kp:hold', '2 s', '00000000-0000-0000-0000-00000000e001', max_hold => '3 s')).fencing_token IS NOT NULL AS shared_granted;
SELECT (dlock.try_acquire_permit('kp:hold-sem', 3, '2 s', '00000000-0000-0000-0000-00000000e002', max_hold => '3 s')).fencing_token IS NOT NULL AS permit_granted;
SELECT dlock.renew('kp:hold', '00000000-0000-0000-0000-00000000e001', '1 hour') = hold_limit AS shared_capped
  FROM dlock.lock_holder WHERE lock_name = 'kp:hold';
SELECT dlock.renew('kp:hold-sem', '00000000-0000-0000-0000-00000000e002', '1 hour') = hold_limit AS permit_capped
  FROM dlock.lock_holder WHERE lock_name = 'kp:hold-sem';
-- the owner's repeated acquire is a renewal: capped too
SELECT lease_until = (SELECT hold_limit FROM dlock.lock_holder WHERE lock_name = 'kp:hold') AS repeat_capped
  FROM dlock.try_acquire_shared('kp:hold', '1 hour', '00000000-0000-0000-0000-00000000e001');

SELECT (dlock.try_acquire_shared('kp:min', '10 s', '00000000-0000-0000-0000-00000000e003', min_hold => '2 s')).fencing_token IS NOT NULL AS shared_granted;
SELECT (dlock.try_acquire_permit('kp:min-sem', 1, '10 s', '00000000-0000-0000-0000-00000000e004', min_hold => '2 s')).fencing_token IS NOT NULL AS permit_granted;
SELECT (dlock.try_acquire_shared('kp:min-late', '10 s', '00000000-0000-0000-0000-00000000e008', min_hold => '100 ms')).fencing_token IS NOT NULL AS shared_granted;
SELECT dlock.release('kp:min', '00000000-0000-0000-0000-00000000e003') AS released,
	   dlock.release('kp:min-sem', '00000000-0000-0000-0000-00000000e004') AS released;
SELECT bool_or(dlock.holds('kp:min', fencing_seq)) AS still_holds FROM dlock.lock_holder WHERE lock_name = 'kp:min';
SELECT dlock.try_acquire('kp:min', '10 s') IS NULL AS writer_kept_out;
SELECT dlock.try_acquire_permit('kp:min-sem', 1, '10 s') IS NULL AS permit_still_taken;
SELECT dlock.try_acquire_permit('kp:min-sem', 1, '10 s', '00000000-0000-0000-0000-00000000e004') IS NULL AS same_owner_too;
SELECT dlock.try_acquire('kp:min-sem', '10 s') IS NULL AS semaphore_writer_kept_out;
SELECT (dlock.try_acquire_shared('kp:min', '10 s', '00000000-0000-0000-0000-00000000e005')).fencing_token IS NOT NULL AS reader_comes_in;
SELECT dlock.release('kp:min', '00000000-0000-0000-0000-00000000e005') AS released;

SELECT (dlock.try_acquire_shared('kp:delay', '500 ms', lock_delay => '2 s')).fencing_token IS NOT NULL AS shared_granted;
SELECT (dlock.try_acquire_permit('kp:delay-sem', 1, '500 ms', lock_delay => '2 s')).fencing_token IS NOT NULL AS permit_granted;
SELECT (dlock.try_acquire_permit('kp:forced-sem', 1, '1 minute', lock_delay => '2 s')).fencing_token IS NOT NULL AS permit_granted;
SELECT (dlock.try_acquire_shared('kp:released', '1 minute', '00000000-0000-0000-0000-00000000e009', lock_delay => '1 minute')).fencing_token IS NOT NULL AS shared_granted;
SELECT dlock.force_release('kp:forced-sem', 'regress: a forced permit starts its delay') AS forced;
SELECT dlock.release('kp:released', '00000000-0000-0000-0000-00000000e009') AS released;
SELECT (dlock.try_acquire('kp:released', '10 s')).fencing_token IS NOT NULL AS release_does_not_delay;

SELECT pg_sleep(0.6);
SELECT dlock.try_acquire('kp:delay', '10 s') IS NULL AS writer_delayed;
SELECT dlock.try_acquire_permit('kp:delay-sem', 1, '10 s') IS NULL AS permit_delayed;
SELECT dlock.try_acquire_permit('kp:forced-sem', 1, '10 s') IS NULL AS forced_permit_delayed;
SELECT (dlock.try_acquire_shared('kp:delay', '10 s', '00000000-0000-0000-0000-00000000e00a')).fencing_token IS NOT NULL AS reader_comes_in;
SELECT dlock.release('kp:delay', '00000000-0000-0000-0000-00000000e00a') AS released;
SELECT dlock.release('kp:min-late', '00000000-0000-0000-0000-00000000e008') AS released_after_min_hold;
SELECT (dlock.try_acquire('kp:min-late', '10 s')).fencing_token IS NOT NULL AS writer_at_once;

SELECT pg_sleep(2.7);
SELECT (dlock.try_acquire_permit('kp:min-sem', 1, '10 s', '00000000-0000-0000-0000-00000000e006')).fencing_token IS NOT NULL AS permit_after_min_hold;
SELECT (dlock.try_acquire('kp:min', '10 s', '00000000-0000-0000-0000-00000000e007')).fencing_token IS NOT NULL AS writer_after_min_hold;
SELECT (dlock.try_acquire_permit('kp:delay-sem', 1, '10 s')).fencing_token IS NOT NULL AS permit_after_delay;
SELECT (dlock.try_acquire_permit('kp:forced-sem', 1, '10 s')).fencing_token IS NOT NULL AS forced_permit_after_delay;
SELECT (dlock.try_acquire('kp:delay', '10 s')).fencing_token IS NOT NULL AS writer_after_delay;
SELECT dlock.renew('kp:hold', '00000000-0000-0000-0000-00000000e001', '1 s') AS shared_after_hold;
SELECT dlock.renew('kp:hold-sem', '00000000-0000-0000-0000-00000000e002', '1 s') AS permit_after_hold;

-- the force release's audit record goes, so later files see only their own
DELETE FROM dlock.audit_log WHERE lock_name LIKE 'kp:%';
