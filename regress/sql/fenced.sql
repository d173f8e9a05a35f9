-- dlock.durability = fenced: grants and renewals that are their
-- transaction's only writes commit without the WAL flush; the token epoch
-- of this server life is marked durably first
\set VERBOSITY terse

-- (this loads the library, whose settings are then known; without
-- shared_preload_libraries the fenced mode is refused and every grant below
-- is durable: the alternative expected output)
CREATE TEMP TABLE commits AS SELECT durable_commits, unflushed_commits FROM dlock.durability_stats();
SHOW dlock.durability;
SET dlock.durability = 'lazy';
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION pg_temp.commits_since() RETURNS TABLE (durable bigint, unflushed bigint)
LANGUAGE sql AS $$
  SELECT s.durable_commits - c.durable_commits, s.unflushed_commits - c.unflushed_commits
    FROM dlock.durability_stats() s, commits c
$$;
CREATE FUNCTION pg_temp.mark() RETURNS void LANGUAGE sql AS $$
  UPDATE commits SET durable_commits = s.durable_commits, unflushed_commits = s.unflushed_commits
    FROM dlock.durability_stats() s
$$;

-- durable, the default: a grant raises synchronous_commit and flushes
SET synchronous_commit = off;
SELECT pg_temp.mark();
BEGIN;
SELECT fencing_token >> 40 AS generation
  FROM dlock.try_acquire('fm-lease', '1 minute', '00000000-0000-0000-0000-0000000000f1');
SHOW synchronous_commit;
COMMIT;
SELECT * FROM pg_temp.commits_since();

-- a release is the transaction's only write: no flush, in either mode
SELECT pg_temp.mark();
SELECT dlock.release('fm-lease', '00000000-0000-0000-0000-0000000000f1');
SELECT * FROM pg_temp.commits_since();

-- the first fenced grant of this server life marks the epoch and flushes;
-- the ones after it do not
SET dlock.durability = fenced;
SELECT pg_temp.mark();
SELECT fencing_token IS NOT NULL AS granted
  FROM dlock.try_acquire('fm-first', '1 minute', '00000000-0000-0000-0000-0000000000f2');
SELECT * FROM pg_temp.commits_since();
SELECT token_epoch, epoch_fenced FROM dlock.durability_stats();
SELECT epoch, fenced FROM dlock.token_epoch ORDER BY epoch DESC, fenced DESC LIMIT 1;
SELECT pg_temp.mark();
BEGIN;
SELECT fencing_token >> 40 AS generation
  FROM dlock.try_acquire('fm-lease', '1 minute', '00000000-0000-0000-0000-0000000000f1');
SHOW synchronous_commit;
COMMIT;
SELECT * FROM pg_temp.commits_since();

-- a renewal
SELECT pg_temp.mark();
SELECT dlock.renew('fm-lease', '00000000-0000-0000-0000-0000000000f1', '1 minute') IS NOT NULL AS renewed;
SELECT * FROM pg_temp.commits_since();

-- shared leases, permits and a multi-lock too; a downgrade commits durably,
-- since a lost one would leave its owner with a lease the server lacks
SELECT pg_temp.mark();
SELECT fencing_token IS NOT NULL AS shared
  FROM dlock.try_acquire_shared('fm-shared', '1 minute', '00000000-0000-0000-0000-0000000000f3');
SELECT fencing_token IS NOT NULL AS permit
  FROM dlock.try_acquire_permit('fm-permits', 2, '1 minute', '00000000-0000-0000-0000-0000000000f3');
SELECT count(*) AS multi
  FROM dlock.try_acquire_all(ARRAY['fm-m1', 'fm-m2'], '1 minute', '00000000-0000-0000-0000-0000000000f3');
SELECT fencing_token IS NOT NULL AS downgraded
  FROM dlock.downgrade('fm-lease', '00000000-0000-0000-0000-0000000000f1');
SELECT * FROM pg_temp.commits_since();

-- with business data in the transaction, the session's own setting
-- decides, and the flush of that data flushes the grant with it
SET synchronous_commit = on;
CREATE TABLE fenced_orders (id int);
SELECT pg_temp.mark();
BEGIN;
INSERT INTO fenced_orders VALUES (1);
SELECT fencing_token IS NOT NULL AS granted
  FROM dlock.try_acquire('fm-business', '1 minute', '00000000-0000-0000-0000-0000000000f4');
COMMIT;
BEGIN;
SELECT dlock.renew('fm-business', '00000000-0000-0000-0000-0000000000f4', '1 minute') IS NOT NULL AS renewed;
INSERT INTO fenced_orders VALUES (2);
COMMIT;
SELECT * FROM pg_temp.commits_since();

-- SET LOCAL chooses it for one transaction
RESET dlock.durability;
SELECT pg_temp.mark();
BEGIN;
SET LOCAL dlock.durability = fenced;
SELECT dlock.renew('fm-business', '00000000-0000-0000-0000-0000000000f4', '1 minute') IS NOT NULL AS renewed;
COMMIT;
SHOW dlock.durability;
SELECT * FROM pg_temp.commits_since();

-- a grant rolled back by a savepoint commits nothing of its own
SET dlock.durability = fenced;
SELECT pg_temp.mark();
BEGIN;
SAVEPOINT s;
SELECT fencing_token IS NOT NULL AS granted
  FROM dlock.try_acquire('fm-rolled-back', '1 minute', '00000000-0000-0000-0000-0000000000f5');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM pg_temp.commits_since();
SELECT count(*) AS rows FROM dlock.locks WHERE lock_name = 'fm-rolled-back';

-- the epoch table: only the extension owner may read or write it
CREATE ROLE dlock_fenced_app;
SET ROLE dlock_fenced_app;
SELECT count(*) FROM dlock.token_epoch;
\echo :LAST_ERROR_SQLSTATE
SET dlock.durability = fenced;
SHOW dlock.durability;
RESET ROLE;
DROP ROLE dlock_fenced_app;

-- and only a superuser may switch the epoch off
CREATE ROLE dlock_fenced_app;
SET ROLE dlock_fenced_app;
SET dlock.test_ignore_epoch = on;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE dlock_fenced_app;

SELECT dlock.release_all(ARRAY['fm-lease', 'fm-first', 'fm-shared', 'fm-permits',
                               'fm-m1', 'fm-m2', 'fm-business'], o)
  FROM (VALUES ('00000000-0000-0000-0000-0000000000f1'::uuid),
               ('00000000-0000-0000-0000-0000000000f2'::uuid),
               ('00000000-0000-0000-0000-0000000000f3'::uuid),
               ('00000000-0000-0000-0000-0000000000f4'::uuid)) AS owners(o);
RESET dlock.durability;
RESET synchronous_commit;
DROP TABLE fenced_orders;
