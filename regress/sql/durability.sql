-- Durability: acquire and renew commit with synchronous_commit >= on;
-- a refused attempt leaves no transaction ID and no row lock behind
\set VERBOSITY terse

-- an acquire raises synchronous_commit for its own transaction only
SET synchronous_commit = off;
BEGIN;
SELECT fencing_token IS NOT NULL AS granted
  FROM dlock.try_acquire('durable', '1 minute', '00000000-0000-0000-0000-0000000000d1');
SHOW synchronous_commit;
COMMIT;
SHOW synchronous_commit;

-- so does a renew
BEGIN;
SELECT dlock.renew('durable', '00000000-0000-0000-0000-0000000000d1', '1 minute') IS NOT NULL AS renewed;
SHOW synchronous_commit;
COMMIT;

-- a stronger setting is kept as it is
BEGIN;
SET LOCAL synchronous_commit = remote_apply;
SELECT dlock.renew('durable', '00000000-0000-0000-0000-0000000000d1', '1 minute') IS NOT NULL AS renewed;
SHOW synchronous_commit;
COMMIT;

-- refused calls change nothing, so they do not raise it either
BEGIN;
SELECT fencing_token IS NULL AS refused
  FROM dlock.try_acquire('durable', '1 minute', '00000000-0000-0000-0000-0000000000d2');
SHOW synchronous_commit;
-- no transaction ID and no lock on any row
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
SELECT count(*) AS tuple_or_xid_locks FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype IN ('tuple', 'transactionid');
SELECT dlock.renew('durable', '00000000-0000-0000-0000-0000000000d2', '1 minute') IS NULL AS renew_refused;
SELECT dlock.release('durable', '00000000-0000-0000-0000-0000000000d2') AS release_refused;
SELECT pg_current_xact_id_if_assigned() IS NULL AS still_no_xid;
COMMIT;
RESET synchronous_commit;

-- a successful acquire does write, in the caller's transaction
BEGIN;
SELECT fencing_token IS NOT NULL AS granted
  FROM dlock.try_acquire('durable-2', '1 minute', '00000000-0000-0000-0000-0000000000d3');
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS has_xid;
COMMIT;

-- refused: PREPARE TRANSACTION after a grant or a renew (0A000). COMMIT
-- PREPARED may run in a session whose synchronous_commit pg_dlock does not
-- control, so the grant could not be made durable; nothing is prepared and
-- the grant never happened.
BEGIN;
SELECT fencing_token IS NOT NULL AS granted
  FROM dlock.try_acquire('durable-2pc', '1 minute', '00000000-0000-0000-0000-0000000000d4');
PREPARE TRANSACTION 'dlock_grant';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'dlock_grant';
SELECT count(*) AS rows FROM dlock.locks WHERE lock_name = 'durable-2pc';
BEGIN;
SELECT dlock.renew('durable-2', '00000000-0000-0000-0000-0000000000d3', '1 minute') IS NOT NULL AS renewed;
PREPARE TRANSACTION 'dlock_renew';
\echo :LAST_ERROR_SQLSTATE
-- a release may be prepared: losing it only delays the next holder
BEGIN;
SELECT dlock.release('durable-2', '00000000-0000-0000-0000-0000000000d3');
PREPARE TRANSACTION 'dlock_release';
COMMIT PREPARED 'dlock_release';
SELECT state FROM dlock.locks WHERE lock_name = 'durable-2';
