-- The generation part of fencing tokens and the server's timeline (this
-- server is on timeline 1). The generation moves whenever the timeline
-- differs from the row's grant_timeline.
\set VERBOSITY terse

SELECT fencing_token AS first_token
  FROM dlock.try_acquire('timeline', '1 minute', '00000000-0000-0000-0000-0000000000e1') \gset
SELECT :first_token >> 40 AS generation;

-- same timeline: the counter goes up, the generation stays
UPDATE dlock.distributed_lock SET owner_token = NULL WHERE lock_name = 'timeline';
SELECT fencing_token - :first_token AS counter_step, fencing_token >> 40 AS generation
  FROM dlock.try_acquire('timeline', '1 minute', '00000000-0000-0000-0000-0000000000e2');

-- a row from another cluster's history (restored or pg_upgraded from a
-- server on timeline 3, generation 3): the generation goes up by this
-- server's timeline ID, and the row now carries timeline 1
UPDATE dlock.distributed_lock
   SET fencing_seq = (3::bigint << 40) | 5, grant_timeline = 3, owner_token = NULL
 WHERE lock_name = 'timeline';
SELECT fencing_token >> 40 AS generation, fencing_token & ((1::bigint << 40) - 1) AS counter
  FROM dlock.try_acquire('timeline', '1 minute', '00000000-0000-0000-0000-0000000000e3');
SELECT grant_timeline FROM dlock.distributed_lock WHERE lock_name = 'timeline';

-- the same row state reached on timeline 2 (a promoted standby that missed
-- the grant above) would give generation 3 + 2 = 5: above 4. As this server
-- is on timeline 1, timeline 0 stands in for the earlier one: one generation
-- up per timeline switch
UPDATE dlock.distributed_lock
   SET fencing_seq = (4::bigint << 40) | 6, grant_timeline = 0, owner_token = NULL
 WHERE lock_name = 'timeline';
SELECT fencing_token >> 40 AS generation, fencing_token & ((1::bigint << 40) - 1) AS counter
  FROM dlock.try_acquire('timeline', '1 minute', '00000000-0000-0000-0000-0000000000e4');
SELECT grant_timeline FROM dlock.distributed_lock WHERE lock_name = 'timeline';

DELETE FROM dlock.distributed_lock WHERE lock_name = 'timeline';
