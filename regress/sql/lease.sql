-- Leases: try_acquire, renew, release, expiry on the server clock, token layout
\set VERBOSITY terse
\pset null '(null)'

-- a free name is granted; the first token is (timeline 1 << 40) | 1
SELECT lock_name, owner_token, fencing_token, fencing_token = (1::bigint << 40) + 1 AS first_token,
       lease_until > clock_timestamp() + interval '50 seconds' AS lease_on_server_clock
  FROM dlock.try_acquire('job:daily-settlement:2026-09-16', '1 minute',
                         '00000000-0000-0000-0000-00000000000a', 'worker-a');

-- refused: another owner while the lease is live (all fields NULL, nothing raised)
SELECT * FROM dlock.try_acquire('job:daily-settlement:2026-09-16', '1 minute',
                                '00000000-0000-0000-0000-00000000000b', 'worker-b');

-- the same owner again: idempotent, same token, lease extended
SELECT fencing_token, fencing_token = (1::bigint << 40) + 1 AS same_token
  FROM dlock.try_acquire('job:daily-settlement:2026-09-16', '2 minutes',
                         '00000000-0000-0000-0000-00000000000a', 'worker-a');
SELECT state, holder, acquisitions, renewals, expires_in > interval '100 seconds' AS extended
  FROM dlock.locks WHERE lock_name = 'job:daily-settlement:2026-09-16';

-- renew by the owner returns the new lease_until on the server clock
SELECT dlock.renew('job:daily-settlement:2026-09-16', '00000000-0000-0000-0000-00000000000a', '30 seconds')
       BETWEEN clock_timestamp() + interval '29 seconds' AND clock_timestamp() + interval '31 seconds' AS renewed;
-- renew by someone else: NULL, and the lease is untouched
SELECT dlock.renew('job:daily-settlement:2026-09-16', '00000000-0000-0000-0000-00000000000b', '30 seconds');
-- release by someone else: false
SELECT dlock.release('job:daily-settlement:2026-09-16', '00000000-0000-0000-0000-00000000000b');
SELECT state FROM dlock.locks WHERE lock_name = 'job:daily-settlement:2026-09-16';
-- release by the owner: true once, then false (idempotent)
SELECT dlock.release('job:daily-settlement:2026-09-16', '00000000-0000-0000-0000-00000000000a');
SELECT dlock.release('job:daily-settlement:2026-09-16', '00000000-0000-0000-0000-00000000000a');
SELECT state FROM dlock.locks WHERE lock_name = 'job:daily-settlement:2026-09-16';
-- renew after release: NULL
SELECT dlock.renew('job:daily-settlement:2026-09-16', '00000000-0000-0000-0000-00000000000a', '30 seconds');

-- after release the next owner gets the next token
SELECT fencing_token - ((1::bigint << 40) + 1) AS tokens_after_first
  FROM dlock.try_acquire('job:daily-settlement:2026-09-16', '1 minute',
                         '00000000-0000-0000-0000-00000000000b', 'worker-b');

-- expiry is judged on the server clock at the moment of the check
SELECT fencing_token AS t1 FROM dlock.try_acquire('expiry', '200 milliseconds',
       '00000000-0000-0000-0000-0000000000a1') \gset
SELECT pg_sleep(0.3);
SELECT state FROM dlock.locks WHERE lock_name = 'expiry';
-- an expired lease cannot be renewed or released by its old owner
SELECT dlock.renew('expiry', '00000000-0000-0000-0000-0000000000a1', '1 minute');
SELECT dlock.release('expiry', '00000000-0000-0000-0000-0000000000a1');
-- another owner takes it over with a higher token
SELECT fencing_token > :t1 AS higher_token
  FROM dlock.try_acquire('expiry', '1 minute', '00000000-0000-0000-0000-0000000000a2');
SELECT takeovers, acquisitions FROM dlock.locks WHERE lock_name = 'expiry';

-- the decision uses clock_timestamp(), not now(): inside one long transaction
-- the lease still expires although now() stays at the transaction start
BEGIN;
SELECT fencing_token AS t2 FROM dlock.try_acquire('long-transaction', '200 milliseconds',
       '00000000-0000-0000-0000-0000000000b1') \gset
SELECT pg_sleep(0.3);
SELECT fencing_token > :t2 AS taken_over_in_same_transaction
  FROM dlock.try_acquire('long-transaction', '1 minute', '00000000-0000-0000-0000-0000000000b2');
COMMIT;

-- a lease taken in a transaction that rolls back never existed
BEGIN;
SELECT fencing_token IS NOT NULL AS granted
  FROM dlock.try_acquire('rolled-back', '1 minute', '00000000-0000-0000-0000-0000000000c1');
ROLLBACK;
SELECT count(*) AS rows_left FROM dlock.locks WHERE lock_name = 'rolled-back';
SELECT fencing_token = (1::bigint << 40) + 1 AS first_token_again
  FROM dlock.try_acquire('rolled-back', '1 minute', '00000000-0000-0000-0000-0000000000c2');

-- the server generates an owner token when none is given
SELECT owner_token IS NOT NULL AS generated FROM dlock.try_acquire('generated-owner', '1 minute');
-- generated owner tokens are version-4 UUIDs, each different, also across the
-- batches of random bytes they are drawn from and between sessions
CREATE TABLE generated_tokens AS
SELECT pg_backend_pid() AS pid, l.owner_token
  FROM generate_series(1, 300) AS i,
       LATERAL dlock.try_acquire('generated-' || i, '1 minute') AS l;
\c
\set VERBOSITY terse
\pset null '(null)'
INSERT INTO generated_tokens
SELECT pg_backend_pid(), l.owner_token
  FROM generate_series(1, 300) AS i,
       LATERAL dlock.try_acquire('generated-other-' || i, '1 minute') AS l;
SELECT count(DISTINCT pid) AS sessions, count(*) AS tokens,
       count(DISTINCT owner_token) AS distinct_tokens,
       count(*) FILTER (WHERE substr(owner_token::text, 15, 1) = '4'
                          AND substr(owner_token::text, 20, 1) IN ('8', '9', 'a', 'b')) AS version_4,
       count(*) FILTER (WHERE owner_token::text LIKE '%0000-0000-0000%') AS zeroed
  FROM generated_tokens;
DROP TABLE generated_tokens;
SELECT count(*) AS released
  FROM dlock.distributed_lock d
 CROSS JOIN LATERAL dlock.release(d.lock_name, d.owner_token) AS r
 WHERE d.lock_name LIKE 'generated-%' AND r;

-- token layout: timeline in bits 62..40, counter in bits 39..0
SELECT lock_name, fencing_token >> 40 AS timeline, fencing_token & ((1::bigint << 40) - 1) AS counter
  FROM dlock.locks WHERE lock_name IN ('job:daily-settlement:2026-09-16', 'expiry') ORDER BY 1;

-- tokens keep their timeline part: a row that carries a higher timeline
-- (restored from a server that had failed over) continues above it
UPDATE dlock.distributed_lock SET fencing_seq = (3::bigint << 40) + 7, owner_token = NULL
 WHERE lock_name = 'expiry';
SELECT fencing_token >> 40 AS timeline, fencing_token & ((1::bigint << 40) - 1) AS counter
  FROM dlock.try_acquire('expiry', '1 minute', '00000000-0000-0000-0000-0000000000a3');
-- a row last granted on an earlier timeline moves up one generation per
-- timeline switch since (as on a promoted standby; timeline 0 stands in for
-- the old primary's here, since this server is on timeline 1)
UPDATE dlock.distributed_lock SET grant_timeline = 0, owner_token = NULL WHERE lock_name = 'expiry';
SELECT fencing_token >> 40 AS generation, fencing_token & ((1::bigint << 40) - 1) AS counter
  FROM dlock.try_acquire('expiry', '1 minute', '00000000-0000-0000-0000-0000000000a4');
SELECT grant_timeline FROM dlock.distributed_lock WHERE lock_name = 'expiry';
-- a retry by the same owner keeps its token and does not move the generation
SELECT fencing_token >> 40 AS generation, fencing_token & ((1::bigint << 40) - 1) AS counter
  FROM dlock.try_acquire('expiry', '1 minute', '00000000-0000-0000-0000-0000000000a4');

-- dlock.acquire waits in the server until the lease expires, then takes over
SELECT fencing_token AS t3 FROM dlock.try_acquire('wait-for-expiry', '300 milliseconds',
       '00000000-0000-0000-0000-0000000000d1') \gset
SELECT fencing_token > :t3 AS acquired_after_wait
  FROM dlock.acquire('wait-for-expiry', '1 minute', '5 seconds', '00000000-0000-0000-0000-0000000000d2');
-- refused: the wait runs out while another owner holds the lease (55P03)
SELECT * FROM dlock.acquire('wait-for-expiry', '1 minute', '200 milliseconds',
                            '00000000-0000-0000-0000-0000000000d3');
\echo :LAST_ERROR_SQLSTATE
-- a zero wait is a single attempt
SELECT * FROM dlock.acquire('wait-for-expiry', '1 minute', '0', '00000000-0000-0000-0000-0000000000d3');
\echo :LAST_ERROR_SQLSTATE
-- statement_timeout interrupts a wait (57014)
SET statement_timeout = '200ms';
SELECT * FROM dlock.acquire('wait-for-expiry', '1 minute', '1 minute', '00000000-0000-0000-0000-0000000000d3');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
-- refused: waiting inside a REPEATABLE READ transaction would never see a release
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM dlock.acquire('wait-for-expiry', '1 minute', '1 second');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
