-- dlock.downgrade: the owner of a live exclusive lease turns it into a
-- shared lease in one step; a lease taken late in a long transaction is
-- timed from the call; the waiters column and the histograms.
\set VERBOSITY terse
\pset null '(null)'

------------------------------------------------------------------------
-- Downgrade: same lease end, a new and higher token, the exclusive token
-- no longer held; other readers may join, writers may not.
------------------------------------------------------------------------
CREATE TEMP TABLE grant_seen AS
SELECT fencing_token AS exclusive_token, lease_until AS exclusive_until
  FROM dlock.try_acquire('dg:report', '1 minute', '00000000-0000-0000-0000-0000000000d1', 'writer-1');
CREATE TEMP TABLE downgraded AS
SELECT * FROM dlock.downgrade('dg:report', '00000000-0000-0000-0000-0000000000d1');
SELECT d.owner_token = '00000000-0000-0000-0000-0000000000d1' AS same_owner,
	   d.fencing_token > g.exclusive_token AS new_token_above_exclusive,
	   d.lease_until = g.exclusive_until AS same_lease_end
  FROM downgraded d, grant_seen g;
-- the exclusive token fails holds(), the shared one passes
SELECT dlock.holds('dg:report', exclusive_token) AS exclusive_token_held FROM grant_seen;
SELECT dlock.holds('dg:report', fencing_token) AS shared_token_held FROM downgraded;
-- the name shows one shared holder, with the writer's holder text
SELECT state, kind, holders FROM dlock.locks WHERE lock_name = 'dg:report';
SELECT kind, holder FROM dlock.lock_holders WHERE lock_name = 'dg:report';
-- no writer gets in; another reader does
SELECT dlock.try_acquire('dg:report', '1 minute', '00000000-0000-0000-0000-0000000000d2') AS writer;
SELECT (dlock.try_acquire_shared('dg:report', '1 minute', '00000000-0000-0000-0000-0000000000d3')).fencing_token IS NOT NULL AS reader_joined;
-- a second downgrade finds no exclusive lease: the owner's shared lease, as it is
SELECT a.fencing_token = d.fencing_token AS again_same_token, a.lease_until = d.lease_until AS again_same_until
  FROM dlock.downgrade('dg:report', '00000000-0000-0000-0000-0000000000d1') a, downgraded d;
-- the downgraded lease renews and releases as a shared lease
SELECT dlock.renew('dg:report', '00000000-0000-0000-0000-0000000000d1', '2 minutes') > now() + interval '1 minute' AS renewed;
SELECT dlock.release('dg:report', '00000000-0000-0000-0000-0000000000d1') AS released;
SELECT dlock.release('dg:report', '00000000-0000-0000-0000-0000000000d3') AS reader_released;
-- with the readers gone, a writer is granted, above every earlier token
SELECT w.fencing_token > d.fencing_token AS writer_token_above
  FROM downgraded d,
	   dlock.try_acquire('dg:report', '1 minute', '00000000-0000-0000-0000-0000000000d2') w;
SELECT dlock.release('dg:report', '00000000-0000-0000-0000-0000000000d2') AS released;

------------------------------------------------------------------------
-- Nothing to downgrade: NULL, and nothing changed
------------------------------------------------------------------------
SELECT (dlock.try_acquire('dg:other', '1 minute', '00000000-0000-0000-0000-0000000000d4')).fencing_token IS NOT NULL AS held;
-- another owner's lease
SELECT dlock.downgrade('dg:other', '00000000-0000-0000-0000-0000000000d5') AS not_the_owner;
SELECT state, kind FROM dlock.locks WHERE lock_name = 'dg:other';
-- an unknown name
SELECT dlock.downgrade('dg:nobody', '00000000-0000-0000-0000-0000000000d4') AS unknown_name;
-- a shared lease cannot be downgraded (nor upgraded): its owner gets it as it is
SELECT fencing_token AS reader_token
  FROM dlock.try_acquire_shared('dg:readers', '1 minute', '00000000-0000-0000-0000-0000000000d6') \gset
SELECT fencing_token = :reader_token AS shared_lease_as_it_is
  FROM dlock.downgrade('dg:readers', '00000000-0000-0000-0000-0000000000d6');
SELECT dlock.release('dg:readers', '00000000-0000-0000-0000-0000000000d6') AS released;
-- an expired lease is gone: NULL
SELECT (dlock.try_acquire('dg:expired', '10 ms', '00000000-0000-0000-0000-0000000000d7')).fencing_token IS NOT NULL AS held;
SELECT pg_sleep(0.05);
SELECT dlock.downgrade('dg:expired', '00000000-0000-0000-0000-0000000000d7') AS expired;
SELECT dlock.release('dg:other', '00000000-0000-0000-0000-0000000000d4') AS released;
-- arguments
SELECT dlock.downgrade(NULL, '00000000-0000-0000-0000-0000000000d4');
SELECT dlock.downgrade('dg:other', NULL);

------------------------------------------------------------------------
-- A lease policy a shared lease cannot keep: refused (0A000), nothing
-- changed; a lock delay does not stand in the way.
------------------------------------------------------------------------
-- (session_bound needs pg_dlock preloaded: tests/suites/29-contention.sh)
SELECT (dlock.try_acquire('dg:max-hold', '1 minute', '00000000-0000-0000-0000-0000000000e2', max_hold => '5 minutes')).fencing_token IS NOT NULL AS held;
SELECT dlock.downgrade('dg:max-hold', '00000000-0000-0000-0000-0000000000e2');
SELECT (dlock.try_acquire('dg:min-hold', '1 minute', '00000000-0000-0000-0000-0000000000e3', min_hold => '30 seconds')).fencing_token IS NOT NULL AS held;
SELECT dlock.downgrade('dg:min-hold', '00000000-0000-0000-0000-0000000000e3');
SELECT lock_name, state, kind FROM dlock.locks WHERE lock_name IN ('dg:max-hold', 'dg:min-hold') ORDER BY 1;
SELECT (dlock.try_acquire('dg:delay', '1 minute', '00000000-0000-0000-0000-0000000000e4', lock_delay => '1 second')).fencing_token IS NOT NULL AS held;
SELECT (dlock.downgrade('dg:delay', '00000000-0000-0000-0000-0000000000e4')).fencing_token IS NOT NULL AS downgraded_with_lock_delay;
SELECT dlock.release('dg:delay', '00000000-0000-0000-0000-0000000000e4') AS released;
SELECT dlock.force_release(n, 'regress: downgrade') FROM unnest(ARRAY['dg:max-hold', 'dg:min-hold']) n;

------------------------------------------------------------------------
-- Inside a transaction that rolls back, the downgrade leaves nothing:
-- the exclusive lease is back as it was.
------------------------------------------------------------------------
SELECT (dlock.try_acquire('dg:rollback', '1 minute', '00000000-0000-0000-0000-0000000000e5')).fencing_token IS NOT NULL AS held;
BEGIN;
SELECT (dlock.downgrade('dg:rollback', '00000000-0000-0000-0000-0000000000e5')).fencing_token IS NOT NULL AS downgraded;
ROLLBACK;
SELECT state, kind, holders FROM dlock.locks WHERE lock_name = 'dg:rollback';
SELECT dlock.release('dg:rollback', '00000000-0000-0000-0000-0000000000e5') AS released;

------------------------------------------------------------------------
-- A lease taken late in a long transaction is timed from the server clock
-- at the call, not from the transaction's start (now()).
------------------------------------------------------------------------
BEGIN;
SELECT pg_sleep(1.2);
CREATE TEMP TABLE late AS
SELECT * FROM dlock.try_acquire('dg:late', '1 second', '00000000-0000-0000-0000-0000000000e6');
-- still live at the call's clock + 0.5 s although now() + 1 s has passed
SELECT lease_until > now() + interval '1 second' AS timed_from_the_call,
	   lease_until > clock_timestamp() + interval '0.5 seconds' AS live_for_its_ttl
  FROM late;
SELECT dlock.holds('dg:late', fencing_token) AS held FROM late;
SELECT acquired_at > now() + interval '1 second' AS acquired_at_is_the_call FROM dlock.locks WHERE lock_name = 'dg:late';
COMMIT;
SELECT dlock.release('dg:late', '00000000-0000-0000-0000-0000000000e6') AS released;
-- the same for a shared lease
BEGIN;
SELECT pg_sleep(1.2);
SELECT lease_until > now() + interval '1 second' AS shared_timed_from_the_call
  FROM dlock.try_acquire_shared('dg:late-shared', '1 second', '00000000-0000-0000-0000-0000000000e7');
COMMIT;
SELECT dlock.release('dg:late-shared', '00000000-0000-0000-0000-0000000000e7') AS released;

------------------------------------------------------------------------
-- A retry by the owner that did not learn the outcome: the shared lease
-- its downgrade gave it, as it is; nobody else's, nothing after a release
------------------------------------------------------------------------
SELECT fencing_token AS retry_exclusive
  FROM dlock.try_acquire('dg:retry', '1 minute', '00000000-0000-0000-0000-0000000000e8') \gset
SELECT fencing_token AS retry_shared, lease_until AS retry_until
  FROM dlock.downgrade('dg:retry', '00000000-0000-0000-0000-0000000000e8') \gset
SELECT :retry_shared > :retry_exclusive AS shared_above;
SELECT fencing_token = :retry_shared AS same_token, lease_until = :'retry_until' AS same_lease_until
  FROM dlock.downgrade('dg:retry', '00000000-0000-0000-0000-0000000000e8');
SELECT count(*) AS one_shared_lease FROM dlock.lock_holders WHERE lock_name = 'dg:retry';
SELECT dlock.downgrade('dg:retry', '00000000-0000-0000-0000-0000000000e9') IS NULL AS another_owner_refused;
SELECT dlock.release('dg:retry', '00000000-0000-0000-0000-0000000000e8') AS released;
SELECT dlock.downgrade('dg:retry', '00000000-0000-0000-0000-0000000000e8') IS NULL AS nothing_after_release;

------------------------------------------------------------------------
-- Waiters: nobody waits here (NULL when pg_dlock is not preloaded)
------------------------------------------------------------------------
SELECT dlock.waiters('dg:report') IS NOT DISTINCT FROM
	   CASE WHEN (SELECT shared_memory FROM dlock.stats) THEN 0 END AS no_waiters;
SELECT waiters IS NOT DISTINCT FROM
	   CASE WHEN (SELECT shared_memory FROM dlock.stats) THEN 0 END AS locks_column
  FROM dlock.locks WHERE lock_name = 'dg:report';
SELECT dlock.waiters(NULL);

-- the histograms: 16 buckets for each of three kinds, the last one +Inf
-- (NULL); no rows when pg_dlock is not preloaded
SELECT count(*) = CASE WHEN (SELECT shared_memory FROM dlock.stats) THEN 48 ELSE 0 END AS wait_buckets,
	   count(*) FILTER (WHERE le IS NULL) = CASE WHEN (SELECT shared_memory FROM dlock.stats) THEN 3 ELSE 0 END AS wait_inf
  FROM dlock.wait_histogram();
SELECT count(*) = CASE WHEN (SELECT shared_memory FROM dlock.stats) THEN 48 ELSE 0 END AS hold_buckets,
	   count(DISTINCT kind) = CASE WHEN (SELECT shared_memory FROM dlock.stats) THEN 3 ELSE 0 END AS hold_kinds
  FROM dlock.hold_histogram();

-- operations.sql reads the whole audit log
DELETE FROM dlock.audit_log WHERE lock_name LIKE 'dg:%';
