-- The lease functions reach their rows without the executor: updates stay
-- HOT, the cached table OIDs and row locations follow changes to the table
\set VERBOSITY terse

SELECT dlock.release('fast', (dlock.try_acquire('fast', '1 minute')).owner_token);

-- acquire/release cycles are HOT updates (no index entry per update)
BEGIN;
DO $$
BEGIN
	FOR i IN 1..20 LOOP
		IF NOT dlock.release('fast', (dlock.try_acquire('fast', '1 minute')).owner_token) THEN
			RAISE 'cycle % was refused', i;
		END IF;
	END LOOP;
END $$;
SELECT n_tup_upd >= 40 AS updated, n_tup_hot_upd = n_tup_upd AS all_hot
  FROM pg_stat_xact_all_tables WHERE relid = 'dlock.distributed_lock'::regclass;
COMMIT;

-- a table rewrite moves every row: the next calls find them again
SELECT fencing_token & 1099511627775 AS counter FROM dlock.try_acquire('fast', '1 minute', '00000000-0000-0000-0000-0000000000fa');
VACUUM FULL dlock.distributed_lock;
SELECT dlock.renew('fast', '00000000-0000-0000-0000-0000000000fa', '1 minute') IS NOT NULL AS renewed;
SELECT dlock.release('fast', '00000000-0000-0000-0000-0000000000fa') AS released;
SELECT fencing_token & 1099511627775 AS counter FROM dlock.try_acquire('fast', '1 minute', '00000000-0000-0000-0000-0000000000fa');
SELECT dlock.release('fast', '00000000-0000-0000-0000-0000000000fa') AS released;

-- refused: a second index on the lock table would miss entries of updates
-- that are not HOT (55000); dropping it makes the table usable again
CREATE INDEX distributed_lock_extra ON dlock.distributed_lock (lease_until);
SELECT dlock.try_acquire('fast', '1 minute');
\echo :LAST_ERROR_SQLSTATE
DROP INDEX dlock.distributed_lock_extra;
SELECT fencing_token & 1099511627775 AS counter FROM dlock.try_acquire('fast', '1 minute', '00000000-0000-0000-0000-0000000000fb');

-- the token generation moves up whenever the server's timeline differs from
-- the row's grant_timeline: here the row was last granted on timeline 5 (a
-- restore into a new cluster, which runs on timeline 1), so the next grant
-- moves up by the server's timeline, to generation 6
UPDATE dlock.distributed_lock
   SET fencing_seq = (5::bigint << 40) | 7, grant_timeline = 5, owner_token = NULL
 WHERE lock_name = 'fast';
SELECT fencing_token >> 40 AS generation, fencing_token & 1099511627775 AS counter
  FROM dlock.try_acquire('fast', '1 minute', '00000000-0000-0000-0000-0000000000fc');
SELECT grant_timeline FROM dlock.distributed_lock WHERE lock_name = 'fast';
