-- Lease policies (README "Lease policies"): max_hold, min_hold and
-- lock_delay on dlock.try_acquire / dlock.acquire, their bad input, and
-- their state in dlock.locks. Session-bound leases: session-lease.sql and
-- the isolation specs. Counter checks are written "NOT shared_memory OR
-- <check>" so that the file passes unchanged on a server that does not
-- preload pg_dlock (counters stay zero there), while still asserting them
-- when it does.
\set VERBOSITY terse

-- the existing calls keep working: one try_acquire and one acquire, so no
-- positional or named call is ambiguous
SELECT proname, pg_get_function_identity_arguments(oid) AS arguments
  FROM pg_proc WHERE pronamespace = 'dlock'::regnamespace
   AND proname IN ('try_acquire', 'acquire') ORDER BY proname;
SELECT (dlock.try_acquire('policy:positional', '1 minute', '00000000-0000-0000-0000-000000000001', 'regress')).fencing_token IS NOT NULL AS acquired;
SELECT (dlock.acquire('policy:positional', '1 minute', '0', '00000000-0000-0000-0000-000000000001', 'regress')).fencing_token IS NOT NULL AS same_owner;
SELECT dlock.release('policy:positional', '00000000-0000-0000-0000-000000000001');
SELECT policy_state, session_bound, hold_limit, min_hold_until, lock_delay
  FROM dlock.locks WHERE lock_name = 'policy:positional';

-- refused: NULL session_bound (22004)
SELECT dlock.try_acquire('policy:bad', '1 minute', session_bound => NULL);
-- refused: zero or negative durations (22023)
SELECT dlock.try_acquire('policy:bad', '1 minute', max_hold => '0');
SELECT dlock.try_acquire('policy:bad', '1 minute', max_hold => '-1 minute');
SELECT dlock.try_acquire('policy:bad', '1 minute', min_hold => '0');
SELECT dlock.try_acquire('policy:bad', '1 minute', min_hold => '-1 second');
SELECT dlock.try_acquire('policy:bad', '1 minute', lock_delay => '0');
SELECT dlock.acquire('policy:bad', '1 minute', '1 second', lock_delay => '-5 seconds');
-- refused: min_hold above the ttl, max_hold below the ttl
SELECT dlock.try_acquire('policy:bad', '1 minute', min_hold => '61 seconds');
SELECT dlock.try_acquire('policy:bad', '1 minute', max_hold => '59 seconds');
SELECT dlock.acquire('policy:bad', '1 minute', '0', max_hold => '30 seconds');
-- refused: above the server's caps
SELECT dlock.try_acquire('policy:bad', '1 minute', lock_delay => '61 seconds');
SET dlock.max_lock_delay = '5s';
SELECT dlock.try_acquire('policy:bad', '1 minute', lock_delay => '6 seconds');
RESET dlock.max_lock_delay;
SET dlock.max_hold = '10min';
SELECT dlock.try_acquire('policy:bad', '1 minute', max_hold => '11 minutes');
-- refused: the server's max_hold is below the ttl asked for
SELECT dlock.try_acquire('policy:bad', '11 minutes');
RESET dlock.max_hold;
-- nothing was created by the refused calls
SELECT count(*) AS rows_created FROM dlock.distributed_lock WHERE lock_name = 'policy:bad';
-- min_hold equal to the ttl and max_hold equal to the ttl are fine
SELECT (dlock.try_acquire('policy:edge', '1 minute', min_hold => '1 minute', max_hold => '1 minute')).fencing_token IS NOT NULL AS acquired;

CREATE TEMPORARY TABLE counters_before AS SELECT * FROM dlock.stats;

-- max_hold: renewals succeed until the lease has been held that long, then
-- are refused; no renewal extends the lease past acquired_at + max_hold
SELECT (dlock.try_acquire('policy:max-hold', '4 seconds', '00000000-0000-0000-0000-000000000001', max_hold => '4 seconds')).fencing_token AS max_hold_token \gset
SELECT dlock.renew('policy:max-hold', '00000000-0000-0000-0000-000000000001', '4 seconds') IS NOT NULL AS renewed;
SELECT hold_limit = acquired_at + '4 seconds' AS hold_limit_set, policy_state
  FROM dlock.locks WHERE lock_name = 'policy:max-hold';
-- the second renewal arrives with about 40% of its ttl left (25% would be 0.6 s later)
SELECT pg_sleep(2.4);
-- max_hold bounds the whole hold: this renewal asked for 4 s (to about
-- 6.4 s after the grant) and got the lease until its hold_limit
SELECT dlock.renew('policy:max-hold', '00000000-0000-0000-0000-000000000001', '4 seconds') = hold_limit AS renewed_to_hold_limit
  FROM dlock.locks WHERE lock_name = 'policy:max-hold';
SELECT lease_until = hold_limit AS lease_ends_at_hold_limit FROM dlock.locks WHERE lock_name = 'policy:max-hold';
-- past max_hold (4 s after the grant): the lease is over
SELECT pg_sleep(1.8);
SELECT dlock.renew('policy:max-hold', '00000000-0000-0000-0000-000000000001', '4 seconds') AS refused_renewal;
SELECT state, policy_state FROM dlock.locks WHERE lock_name = 'policy:max-hold';
SELECT dlock.holds('policy:max-hold', :max_hold_token) AS still_holds;
SELECT (SELECT NOT shared_memory FROM dlock.stats) OR
       s.renewals_refused_max_hold - b.renewals_refused_max_hold = 1 AS max_hold_refusals_counted,
       (SELECT NOT shared_memory FROM dlock.stats) OR
       s.renewals_left_50 - b.renewals_left_50 = 1 AND s.renewals_left_25 - b.renewals_left_25 = 1
         AS renewal_lateness_counted
  FROM dlock.stats s, counters_before b;
SELECT dlock.release('policy:max-hold', '00000000-0000-0000-0000-000000000001');
-- a renewal asking for far more than max_hold ends at the hold_limit too
SELECT (dlock.try_acquire('policy:max-hold-long', '2 seconds', '00000000-0000-0000-0000-000000000001', max_hold => '3 seconds')).fencing_token IS NOT NULL AS acquired;
SELECT dlock.renew('policy:max-hold-long', '00000000-0000-0000-0000-000000000001', '1 hour') = hold_limit AS long_renewal_capped,
       hold_limit - acquired_at AS max_hold
  FROM dlock.locks WHERE lock_name = 'policy:max-hold-long';
-- so does the same owner's repeated acquire
SELECT (dlock.try_acquire('policy:max-hold-long', '1 hour', '00000000-0000-0000-0000-000000000001')).lease_until = hold_limit AS reacquire_capped
  FROM dlock.locks WHERE lock_name = 'policy:max-hold-long';
SELECT dlock.release('policy:max-hold-long', '00000000-0000-0000-0000-000000000001');

-- min_hold: a release before it keeps the name from new owners until then;
-- the holder is done (holds is false), and the next token is higher
SELECT (dlock.try_acquire('policy:min-hold', '1 minute', '00000000-0000-0000-0000-000000000001', min_hold => '1 second')).fencing_token AS min_hold_token \gset
SELECT dlock.release('policy:min-hold', '00000000-0000-0000-0000-000000000001') AS released;
SELECT dlock.holds('policy:min-hold', :min_hold_token) AS holds_after_release;
SELECT dlock.try_acquire('policy:min-hold', '1 minute', '00000000-0000-0000-0000-000000000002') IS NULL AS refused_during_min_hold;
SELECT dlock.try_acquire('policy:min-hold', '1 minute', '00000000-0000-0000-0000-000000000001') IS NULL AS refused_to_the_same_owner;
SELECT state, policy_state, available_at = min_hold_until AS available_at_min_hold
  FROM dlock.locks WHERE lock_name = 'policy:min-hold';
-- a waiter gets it once the minimum hold has passed
SELECT fencing_token > :min_hold_token AS higher_token,
       clock_timestamp() >= (SELECT min_hold_until FROM dlock.locks WHERE lock_name = 'policy:min-hold') AS not_before_min_hold
  FROM dlock.acquire('policy:min-hold', '1 minute', '10 seconds', '00000000-0000-0000-0000-000000000002');
SELECT dlock.release('policy:min-hold', '00000000-0000-0000-0000-000000000002');
-- a release after the minimum hold frees the name at once
SELECT (dlock.try_acquire('policy:min-hold-past', '1 minute', '00000000-0000-0000-0000-000000000001', min_hold => '100 milliseconds')).fencing_token IS NOT NULL AS acquired;
SELECT pg_sleep(0.15);
SELECT dlock.release('policy:min-hold-past', '00000000-0000-0000-0000-000000000001');
SELECT (dlock.try_acquire('policy:min-hold-past', '1 minute', '00000000-0000-0000-0000-000000000002')).fencing_token IS NOT NULL AS acquired_at_once;

-- lock_delay: an expired lease keeps the name ungranted for the delay
SELECT (dlock.try_acquire('policy:delay', '200 milliseconds', '00000000-0000-0000-0000-000000000001', lock_delay => '1 second')).fencing_token AS delay_token \gset
SELECT pg_sleep(0.3);
SELECT dlock.try_acquire('policy:delay', '1 minute', '00000000-0000-0000-0000-000000000002') IS NULL AS refused_during_delay;
SELECT state, policy_state, available_at = lease_until + lock_delay AS available_after_delay
  FROM dlock.locks WHERE lock_name = 'policy:delay';
SELECT fencing_token > :delay_token AS higher_token,
       clock_timestamp() >= (SELECT lease_until + lock_delay FROM dlock.distributed_lock WHERE lock_name = 'policy:delay') AS not_before_delay
  FROM dlock.acquire('policy:delay', '1 minute', '10 seconds', '00000000-0000-0000-0000-000000000002');
SELECT (SELECT NOT shared_memory FROM dlock.stats) OR
       s.expirations - b.expirations = 1 AS expiration_counted
  FROM dlock.stats s, counters_before b;
-- a release is not a loss: no delay
SELECT dlock.release('policy:delay', '00000000-0000-0000-0000-000000000002');
SELECT (dlock.try_acquire('policy:delay', '1 minute', '00000000-0000-0000-0000-000000000003', lock_delay => '30 seconds')).fencing_token IS NOT NULL AS acquired_after_release;
-- a force release is: the delay runs from it
SELECT dlock.force_release('policy:delay', 'regress: lock delay after a force release');
SELECT dlock.try_acquire('policy:delay', '1 minute', '00000000-0000-0000-0000-000000000004') IS NULL AS refused_after_force;
SELECT policy_state, available_at > clock_timestamp() + '25 seconds' AS delayed_about_30s
  FROM dlock.locks WHERE lock_name = 'policy:delay';

-- the server-wide default delay applies to leases granted while it is set
SET dlock.lock_delay = '30s';
SELECT (dlock.try_acquire('policy:default-delay', '1 minute')).fencing_token IS NOT NULL AS acquired;
RESET dlock.lock_delay;
SELECT lock_delay FROM dlock.locks WHERE lock_name = 'policy:default-delay';
SET dlock.max_hold = '1h';
SELECT (dlock.try_acquire('policy:default-max-hold', '1 minute')).fencing_token IS NOT NULL AS acquired;
RESET dlock.max_hold;
SELECT hold_limit - acquired_at AS max_hold FROM dlock.locks WHERE lock_name = 'policy:default-max-hold';

-- the longest current hold is reported
SELECT longest_hold >= '1 second' AS longest_hold_reported FROM dlock.stats;

-- reap: a row whose name is not yet available to a new owner is not idle,
-- however long ago its lease ended. Each row below ended two days ago;
-- policy:reap-min-hold was released inside its min_hold (held from new
-- owners for another hour), policy:reap-delay was lost with a lock delay
-- still running for a day; policy:reap-plain, the control, has neither.
SELECT (dlock.try_acquire('policy:reap-' || n, '1 minute', '00000000-0000-0000-0000-000000000001')).fencing_token IS NOT NULL AS acquired
  FROM unnest(ARRAY['min-hold', 'delay', 'plain']) n;
UPDATE dlock.distributed_lock
   SET owner_token = NULL, lease_until = clock_timestamp() - interval '2 days', updated_at = clock_timestamp() - interval '2 days',
       min_hold_until = now() + interval '1 hour', not_before = now() + interval '1 hour'
 WHERE lock_name = 'policy:reap-min-hold';
UPDATE dlock.distributed_lock
   SET lease_until = clock_timestamp() - interval '2 days', updated_at = clock_timestamp() - interval '2 days', lock_delay = '3 days'
 WHERE lock_name = 'policy:reap-delay';
UPDATE dlock.distributed_lock
   SET owner_token = NULL, lease_until = clock_timestamp() - interval '2 days', updated_at = clock_timestamp() - interval '2 days'
 WHERE lock_name = 'policy:reap-plain';
SELECT lock_name, policy_state FROM dlock.locks WHERE lock_name LIKE 'policy:reap-%' ORDER BY lock_name;
SELECT dlock.reap('1 day') AS reaped;
SELECT lock_name FROM dlock.distributed_lock WHERE lock_name LIKE 'policy:reap-%' ORDER BY lock_name;
SELECT dlock.try_acquire('policy:reap-' || n, '1 minute', '00000000-0000-0000-0000-000000000002') IS NULL AS still_refused
  FROM unnest(ARRAY['min-hold', 'delay']) n;
-- once available, they are idle like any other row
UPDATE dlock.distributed_lock SET not_before = clock_timestamp() - interval '1 day' WHERE lock_name = 'policy:reap-min-hold';
UPDATE dlock.distributed_lock SET lock_delay = '1 day' WHERE lock_name = 'policy:reap-delay';
SELECT dlock.reap('1 day') AS reaped_when_available;
SELECT count(*) AS left_over FROM dlock.distributed_lock WHERE lock_name LIKE 'policy:reap-%';

DELETE FROM dlock.distributed_lock WHERE lock_name LIKE 'policy:%';
