-- Bad input: each refused call names the argument and has its SQLSTATE;
-- nothing is changed by a refused call
\set VERBOSITY terse

-- refused: NULL arguments (22004)
SELECT dlock.try_acquire(NULL, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.try_acquire('args', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.acquire('args', '1 minute', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.renew('args', NULL, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.renew('args', '00000000-0000-0000-0000-000000000001', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.release(NULL, '00000000-0000-0000-0000-000000000001');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.release('args', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.holds('args', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.fence(NULL, 1);
\echo :LAST_ERROR_SQLSTATE

-- refused: empty and over-long names (22023); 200 characters is the limit
SELECT dlock.try_acquire('', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.try_acquire(repeat('x', 201), '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.try_acquire(repeat('é', 201), '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT (dlock.try_acquire(repeat('é', 200), '1 minute')).fencing_token IS NOT NULL AS two_hundred_accepted;
SELECT dlock.fence('', 1);
\echo :LAST_ERROR_SQLSTATE

-- refused: ttl not positive, or above dlock.max_ttl (22023)
SELECT dlock.try_acquire('args', '0');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.try_acquire('args', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.try_acquire('args', '2 days');
\echo :LAST_ERROR_SQLSTATE
SET dlock.max_ttl = '10s';
SELECT dlock.try_acquire('args', '11 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT (dlock.try_acquire('args', '10 seconds', '00000000-0000-0000-0000-000000000001')).fencing_token IS NOT NULL AS at_limit;
SELECT dlock.renew('args', '00000000-0000-0000-0000-000000000001', '1 minute');
\echo :LAST_ERROR_SQLSTATE
RESET dlock.max_ttl;

-- one rule for a ttl: a month counts 30 days and a day 24 hours, for the
-- max_ttl check and for the lease alike (no calendar arithmetic)
SET dlock.max_ttl = '1d';
SELECT lease_until - clock_timestamp() <= interval '24 hours' AS mixed_sign_ttl_is_one_day,
       lease_until - clock_timestamp() > interval '23 hours' AS and_not_less
  FROM dlock.try_acquire('args:ttl', '1000 mon -29999 days', '00000000-0000-0000-0000-00000000001a');
SELECT renewed - clock_timestamp() <= interval '24 hours' AS mixed_sign_renew_is_one_day
  FROM dlock.renew('args:ttl', '00000000-0000-0000-0000-00000000001a', '100000 mon -2999999 days') renewed;
SELECT lease_until > clock_timestamp() + interval '23 hours' AS positive_ttl_ends_in_the_future
  FROM dlock.try_acquire('args:ttl2', '-1000 mon 30001 days');
-- refused: a mixed-sign ttl of 2 days under the same rule
SELECT dlock.try_acquire('args:ttl3', '1000 mon -29998 days');
\echo :LAST_ERROR_SQLSTATE
SET dlock.max_ttl = '40d';
SELECT lease_until - clock_timestamp() BETWEEN interval '29 days 23:59' AND interval '30 days' AS one_month_is_30_days
  FROM dlock.try_acquire('args:ttl4', '1 mon');
RESET dlock.max_ttl;

-- refused: a holder over 512 characters (22023); 512 is the limit
SELECT dlock.try_acquire('args:big', '1 minute', NULL, repeat('h', 5 * 1024 * 1024));
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.acquire('args', '1 minute', '0', NULL, repeat('é', 513));
\echo :LAST_ERROR_SQLSTATE
SELECT (dlock.try_acquire('args:holder', '1 minute', NULL, repeat('é', 512))).fencing_token IS NOT NULL AS holder_512_accepted;

-- refused: the nil UUID as owner token (22023); two callers would share it
SELECT dlock.try_acquire('args', '1 minute', '00000000-0000-0000-0000-000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.acquire('args', '1 minute', '0', '00000000-0000-0000-0000-000000000000');
\echo :LAST_ERROR_SQLSTATE

-- refused: negative wait (22023)
SELECT dlock.acquire('args', '1 minute', '-1 second');
\echo :LAST_ERROR_SQLSTATE

-- refused: only superusers may change dlock.max_ttl (42501)
CREATE ROLE regress_dlock_args;
SET ROLE regress_dlock_args;
SET dlock.max_ttl = '1 year';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE regress_dlock_args;

-- refused: unknown settings under the reserved prefix
SET dlock.no_such_setting = 1;
\echo :LAST_ERROR_SQLSTATE

-- nothing was left behind by the refused calls
SELECT lock_name, state, acquisitions FROM dlock.locks WHERE lock_name = 'args';
