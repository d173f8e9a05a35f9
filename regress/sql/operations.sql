-- Operations: the locks view, force release with audit, reap,
-- and names that are data, never SQL
\set VERBOSITY terse

------------------------------------------------------------------------
-- The locks view
------------------------------------------------------------------------
-- "counted": three leases, the last two after a takeover and a release
SELECT (dlock.try_acquire('counted', '100 milliseconds', '00000000-0000-0000-0000-000000000001')).fencing_token IS NOT NULL AS acquired;
SELECT pg_sleep(0.2);
SELECT (dlock.try_acquire('counted', '1 minute', '00000000-0000-0000-0000-000000000002')).fencing_token IS NOT NULL AS taken_over;
SELECT dlock.release('counted', '00000000-0000-0000-0000-000000000002') AS released;
SELECT (dlock.try_acquire('counted', '1 minute', '00000000-0000-0000-0000-000000000003')).fencing_token IS NOT NULL AS acquired;
SELECT lock_name, state, holder, renewals, acquisitions, takeovers,
       held_for >= interval '0' AS held_for_known, expires_in > interval '50 seconds' AS expires_later
  FROM dlock.locks WHERE lock_name = 'counted';
SELECT fencing_token AS short_token FROM dlock.try_acquire('short', '100 milliseconds', NULL, 'short holder') \gset
SELECT pg_sleep(0.2);
SELECT lock_name, state, holder, expires_in < interval '0' AS expired_in_the_past
  FROM dlock.locks WHERE lock_name = 'short';
SELECT column_name FROM information_schema.columns
 WHERE table_schema = 'dlock' AND table_name = 'locks' ORDER BY ordinal_position;

------------------------------------------------------------------------
-- Force release and audit
------------------------------------------------------------------------
SELECT fencing_token AS stuck_token FROM dlock.try_acquire('stuck', '1 hour',
       '00000000-0000-0000-0000-0000000000ff', 'batch host 7') \gset
-- refused: a reason is required (22023, 22004)
SELECT dlock.force_release('stuck', '');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.force_release('stuck', '   ');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.force_release('stuck', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT state FROM dlock.locks WHERE lock_name = 'stuck';
SELECT dlock.force_release('stuck', 'host 7 hung; INC-42');
SELECT dlock.force_release('stuck', 'second try');  -- nothing left to end
SELECT event, lock_name, fencing_token = :stuck_token AS ended_token, holder, role_name, reason
  FROM dlock.audit_log ORDER BY id;
-- the old holder can neither renew nor pass a fence any more
SELECT dlock.renew('stuck', '00000000-0000-0000-0000-0000000000ff', '1 hour');
SELECT fencing_token > :stuck_token AS next_token_higher
  FROM dlock.try_acquire('stuck', '1 minute', '00000000-0000-0000-0000-0000000000fe');
SELECT dlock.holds('stuck', :stuck_token) AS old_holder_holds;

-- dlock.audit = all records every lease event
SET dlock.audit = 'all';
SELECT (dlock.try_acquire('audited', '100 milliseconds', '00000000-0000-0000-0000-0000000000a1', 'first')).fencing_token IS NOT NULL;
SELECT pg_sleep(0.2);
SELECT (dlock.try_acquire('audited', '1 minute', '00000000-0000-0000-0000-0000000000a2', 'second')).fencing_token IS NOT NULL;
SELECT dlock.renew('audited', '00000000-0000-0000-0000-0000000000a1', '1 minute');
SELECT dlock.release('audited', '00000000-0000-0000-0000-0000000000a2');
SELECT event, holder, role_name FROM dlock.audit_log WHERE lock_name = 'audited' ORDER BY id;
SET dlock.audit = 'none';
SELECT (dlock.try_acquire('audited', '1 minute')).fencing_token IS NOT NULL;
SELECT dlock.force_release('audited', 'not recorded with audit = none');
SELECT count(*) AS audited_events FROM dlock.audit_log WHERE lock_name = 'audited';
RESET dlock.audit;

-- purge
SELECT dlock.purge_audit_log('1 hour') AS purged_recent;
SELECT dlock.purge_audit_log('-1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.purge_audit_log('0') >= 1 AS purged_all;
SELECT count(*) FROM dlock.audit_log;

-- purge of fence state: resources that accepted no token for longer than the interval
SELECT dlock.fence('purge:old', 5), dlock.fence('purge:recent', 7);
UPDATE dlock.resource_fence SET updated_at = clock_timestamp() - interval '2 days' WHERE resource = 'purge:old';
SELECT dlock.purge_resource_fence('1 day') AS purged_fences;
SELECT resource, fencing_token FROM dlock.resource_fence WHERE resource LIKE 'purge:%' ORDER BY 1;
-- refused: negative or NULL older_than (22023, 22004)
SELECT dlock.purge_resource_fence('-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.purge_resource_fence(NULL);
\echo :LAST_ERROR_SQLSTATE
-- a purged resource accepts any token again (the README's warning)
SELECT dlock.fence('purge:old', 1);
SELECT dlock.purge_resource_fence('0') >= 2 AS purged_rest;

------------------------------------------------------------------------
-- Reap: idle rows go, tokens never go back, live leases stay
------------------------------------------------------------------------
SELECT (dlock.try_acquire('reap:' || i, '1 minute', '00000000-0000-0000-0000-0000000000c1')).fencing_token IS NOT NULL
  FROM generate_series(1, 5) i;
SELECT dlock.release('reap:' || i, '00000000-0000-0000-0000-0000000000c1') FROM generate_series(1, 4) i;
-- make names 1..4 look idle for two days (reap:5 stays live)
UPDATE dlock.distributed_lock SET lease_until = lease_until - interval '2 days',
       updated_at = updated_at - interval '2 days'
 WHERE lock_name IN ('reap:1', 'reap:2', 'reap:3', 'reap:4', 'reap:5') AND owner_token IS NULL;
SELECT fencing_token AS reaped_token FROM dlock.locks WHERE lock_name = 'reap:1' \gset
SELECT dlock.reap('1 day', 3) AS first_batch;
SELECT dlock.reap('1 day', 3) AS second_batch;
SELECT dlock.reap('1 day', 3) AS nothing_left;
SELECT lock_name, state FROM dlock.locks WHERE lock_name LIKE 'reap:%';
-- a reaped name comes back with a token above every token it had
SELECT fencing_token > :reaped_token AS above_reaped
  FROM dlock.try_acquire('reap:1', '1 minute');
SELECT reaped_max >= :reaped_token AS floor_raised FROM dlock.token_floor;
-- refused: bad arguments
SELECT dlock.reap('1 day', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.reap('-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.reap(NULL);
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------
-- Names are data: stored and shown exactly
------------------------------------------------------------------------
CREATE TEMP TABLE odd_names (name text);
INSERT INTO odd_names VALUES
	('it''s "quoted"'), (E'back\\slash'), ('100%_done'), (E'new\nline'),
	('); DROP TABLE dlock.distributed_lock; --'), (repeat('한', 200));
SELECT count(*) AS granted FROM odd_names
 WHERE (dlock.try_acquire(name, '1 minute', '00000000-0000-0000-0000-0000000000c9')).lock_name = name;
SELECT count(*) AS shown_exactly FROM odd_names o JOIN dlock.locks l ON l.lock_name = o.name WHERE l.state = 'held';
SELECT count(*) AS released FROM odd_names
 WHERE dlock.release(name, '00000000-0000-0000-0000-0000000000c9');
SELECT count(*) AS like_is_not_a_pattern FROM dlock.locks WHERE lock_name = '100%_done' AND state = 'free';
SELECT char_length(lock_name) FROM dlock.locks WHERE lock_name LIKE '한%';
