-- Counters (dlock.stats) move as documented. They live in shared memory:
-- without shared_preload_libraries = 'pg_dlock' they stay zero and
-- shared_memory is false (expected/stats_1.out); "preloaded" makes sure a
-- preloaded server never passes with that output.
\set VERBOSITY terse

SELECT current_setting('shared_preload_libraries') ~ 'pg_dlock' AS preloaded;
SELECT shared_memory FROM dlock.stats;
SELECT dlock.stats_reset();
SELECT (dlock.try_acquire('stats:counted', '1 minute', '00000000-0000-0000-0000-000000000001')).fencing_token IS NOT NULL AS acquired;
SELECT (dlock.try_acquire('stats:counted', '1 minute', '00000000-0000-0000-0000-000000000002')).fencing_token IS NULL AS busy;
SELECT (dlock.try_acquire('stats:counted', '1 minute', '00000000-0000-0000-0000-000000000002')).fencing_token IS NULL AS busy;
SELECT dlock.renew('stats:counted', '00000000-0000-0000-0000-000000000001', '1 minute') IS NOT NULL AS renewed;
SELECT dlock.renew('stats:counted', '00000000-0000-0000-0000-000000000002', '1 minute') IS NULL AS renew_refused;
SELECT dlock.release('stats:counted', '00000000-0000-0000-0000-000000000002') AS release_refused;
SELECT dlock.release('stats:counted', '00000000-0000-0000-0000-000000000001') AS released;
SELECT dlock.holds('stats:counted', 1) AS holds_refused;
SELECT acquisitions, busy, takeovers, renewals, renewals_refused, releases, releases_refused,
       force_releases, holds_rejections, fence_rejections, waits, wait_timeouts
  FROM dlock.stats;
-- a takeover, and a wait that times out
SELECT (dlock.try_acquire('stats:counted', '100 milliseconds', '00000000-0000-0000-0000-000000000001')).fencing_token IS NOT NULL AS acquired;
SELECT pg_sleep(0.2);
SELECT (dlock.try_acquire('stats:counted', '1 minute', '00000000-0000-0000-0000-000000000002')).fencing_token IS NOT NULL AS taken_over;
SELECT dlock.acquire('stats:counted', '1 minute', '100 milliseconds', '00000000-0000-0000-0000-000000000003');
SELECT acquisitions, busy, takeovers, waits, wait_timeouts, wait_seconds >= 0.1 AS waited FROM dlock.stats;
SELECT (dlock.try_acquire('stats:force', '1 minute')).fencing_token IS NOT NULL AS acquired;
SELECT dlock.force_release('stats:force', 'regress: counted');
SELECT force_releases FROM dlock.stats;
