-- A counterexample found by the protocol model (model/, README "How pg_dlock
-- is tested"), replayed on one server. spin's trail for the 1.0 generation
-- rule (model/check.sh, control RULE_GREATER):
--   1. a standby is promoted: timeline 2; a lease of the name is granted there
--      (grant_timeline = 2);
--   2. pg_upgrade, or a restore into a new cluster: timeline 1 again;
--   3. a lease is granted on timeline 1;
--   4. an asynchronous failover promotes a standby that missed step 3:
--      timeline 2, the row as after step 1;
--   5. the next grant there issued the token of step 3 a second time.
-- Step 3 is where it goes wrong: a grant on a timeline different from the
-- row's grant_timeline must move the token to a new generation, also when the
-- server's timeline is the lower one. Steps 1 and 2 are simulated by writing
-- the row as the restore leaves it.
\set VERBOSITY terse

SELECT fencing_token IS NOT NULL AS granted FROM dlock.try_acquire('model-trail', '1 minute',
       '00000000-0000-0000-0000-0000000000e1');
SELECT dlock.release('model-trail', '00000000-0000-0000-0000-0000000000e1');

-- the row as restored: last granted on timeline 2 of the old cluster,
-- generation 2, counter 5
UPDATE dlock.distributed_lock
   SET fencing_seq = (2::bigint << 40) + 5, grant_timeline = 2
 WHERE lock_name = 'model-trail';

-- step 3 on this server (timeline 1): a new generation, and above the row
SELECT fencing_token >> 40 > 2 AS new_generation,
       fencing_token > (2::bigint << 40) + 5 AS above_the_restored_token
  FROM dlock.try_acquire('model-trail', '1 minute', '00000000-0000-0000-0000-0000000000e2');
SELECT grant_timeline FROM dlock.distributed_lock WHERE lock_name = 'model-trail';

-- a same-owner retry on the same timeline keeps the token
SELECT (SELECT fencing_seq FROM dlock.distributed_lock WHERE lock_name = 'model-trail') =
       fencing_token AS same_token
  FROM dlock.try_acquire('model-trail', '1 minute', '00000000-0000-0000-0000-0000000000e2');

SELECT dlock.release('model-trail', '00000000-0000-0000-0000-0000000000e2');
DELETE FROM dlock.distributed_lock WHERE lock_name = 'model-trail';
