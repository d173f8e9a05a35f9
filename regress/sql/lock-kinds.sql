-- Lock kinds: shared leases, semaphore permits, multi-locks
\set VERBOSITY terse
\pset null '(null)'

------------------------------------------------------------------------
-- Read-write lock
------------------------------------------------------------------------
-- two readers at once, each its own lease and token
SELECT lock_name, owner_token, fencing_token > 0 AS has_token
  FROM dlock.try_acquire_shared('report:2026-09', '1 minute',
                                '00000000-0000-0000-0000-0000000000a1', 'reader-1');
SELECT lock_name, owner_token, fencing_token > 0 AS has_token
  FROM dlock.try_acquire_shared('report:2026-09', '1 minute',
                                '00000000-0000-0000-0000-0000000000a2', 'reader-2');
SELECT count(DISTINCT fencing_token) AS distinct_tokens
  FROM dlock.lock_holders WHERE lock_name = 'report:2026-09';
-- refused: a writer while readers are live (NULL, nothing raised)
SELECT * FROM dlock.try_acquire('report:2026-09', '1 minute',
                                '00000000-0000-0000-0000-0000000000b1', 'writer');
-- the same reader again: same lease, same token
SELECT (SELECT fencing_token FROM dlock.try_acquire_shared('report:2026-09', '1 minute',
                                '00000000-0000-0000-0000-0000000000a1', 'reader-1'))
       = (SELECT fencing_token FROM dlock.lock_holders
           WHERE lock_name = 'report:2026-09' AND holder = 'reader-1') AS same_token;
SELECT count(*) AS live_readers FROM dlock.lock_holders WHERE lock_name = 'report:2026-09';
-- dlock.locks: kind and number of holders
SELECT lock_name, state, kind, holders FROM dlock.locks WHERE lock_name = 'report:2026-09';
-- holds() accepts any live reader's token and pins it; not a made-up one
SELECT bool_and(dlock.holds('report:2026-09', fencing_token)) AS readers_hold
  FROM dlock.lock_holders WHERE lock_name = 'report:2026-09';
SELECT dlock.holds('report:2026-09', 12345) AS made_up_token;
-- renew and release by (name, owner token), as for an exclusive lease
SELECT dlock.renew('report:2026-09', '00000000-0000-0000-0000-0000000000a2', '2 minutes')
       > clock_timestamp() + interval '100 seconds' AS renewed;
SELECT dlock.release('report:2026-09', '00000000-0000-0000-0000-0000000000a1') AS released_1,
       dlock.release('report:2026-09', '00000000-0000-0000-0000-0000000000a1') AS released_again;
SELECT dlock.release('report:2026-09', '00000000-0000-0000-0000-0000000000a2') AS released_2;
SELECT dlock.renew('report:2026-09', '00000000-0000-0000-0000-0000000000a2', '1 minute') AS renew_after_release;
-- the writer now: its token is above every reader's
SELECT fencing_token > (SELECT max(fencing_seq) FROM dlock.lock_holder WHERE lock_name = 'report:2026-09')
       AS writer_above_readers
  FROM dlock.try_acquire('report:2026-09', '1 minute',
                         '00000000-0000-0000-0000-0000000000b1', 'writer');
SELECT lock_name, state, kind, holders FROM dlock.locks WHERE lock_name = 'report:2026-09';
-- refused: a reader while the writer is live
SELECT * FROM dlock.try_acquire_shared('report:2026-09', '1 minute',
                                       '00000000-0000-0000-0000-0000000000a3', 'reader-3');
-- ... also when it waits: 55P03 once the wait runs out
SELECT * FROM dlock.acquire_shared('report:2026-09', '1 minute', '50 milliseconds',
                                   '00000000-0000-0000-0000-0000000000a3', 'reader-3');
SELECT dlock.release('report:2026-09', '00000000-0000-0000-0000-0000000000b1') AS writer_released;
-- a reader after the writer: its token is above the writer's
SELECT fencing_token > (SELECT fencing_seq FROM dlock.distributed_lock WHERE lock_name = 'report:2026-09')
       AS reader_above_writer
  FROM dlock.try_acquire_shared('report:2026-09', '1 minute',
                                '00000000-0000-0000-0000-0000000000a3', 'reader-3');
SELECT dlock.release('report:2026-09', '00000000-0000-0000-0000-0000000000a3');

-- a reader's expired lease: holds() refuses it, renew refuses it, a writer takes over
SELECT fencing_token AS expiring_token
  FROM dlock.try_acquire_shared('report:expiring', '100 milliseconds',
                                '00000000-0000-0000-0000-0000000000a4') \gset
SELECT pg_sleep(0.2);
SELECT dlock.holds('report:expiring', :expiring_token) AS expired_holds;
SELECT dlock.renew('report:expiring', '00000000-0000-0000-0000-0000000000a4', '1 minute') AS expired_renew;
SELECT fencing_token > :expiring_token AS writer_after_expiry
  FROM dlock.try_acquire('report:expiring', '1 minute', '00000000-0000-0000-0000-0000000000b2');

-- a grant in a transaction that rolls back never existed
BEGIN;
SELECT owner_token FROM dlock.try_acquire_shared('report:rollback', '1 minute',
                                                 '00000000-0000-0000-0000-0000000000a5');
ROLLBACK;
SELECT count(*) AS holders_after_rollback FROM dlock.lock_holders WHERE lock_name = 'report:rollback';
SELECT fencing_token > 0 AS writer_after_rollback
  FROM dlock.try_acquire('report:rollback', '1 minute', '00000000-0000-0000-0000-0000000000b3');

-- a refused attempt takes no transaction ID
BEGIN;
SELECT * FROM dlock.try_acquire_shared('report:rollback', '1 minute');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid_after_refused_shared;
COMMIT;

------------------------------------------------------------------------
-- Counting semaphore
------------------------------------------------------------------------
SELECT lock_name, owner_token, fencing_token > 0 AS has_token
  FROM dlock.try_acquire_permit('export:tenant-42', 2, '1 minute',
                                '00000000-0000-0000-0000-0000000000c1', 'export-1');
SELECT lock_name, owner_token, fencing_token > 0 AS has_token
  FROM dlock.try_acquire_permit('export:tenant-42', 2, '1 minute',
                                '00000000-0000-0000-0000-0000000000c2', 'export-2');
-- refused: both permits held
SELECT * FROM dlock.try_acquire_permit('export:tenant-42', 2, '1 minute',
                                       '00000000-0000-0000-0000-0000000000c3', 'export-3');
SELECT * FROM dlock.acquire_permit('export:tenant-42', 2, '1 minute', '50 milliseconds',
                                   '00000000-0000-0000-0000-0000000000c3', 'export-3');
BEGIN;
SELECT * FROM dlock.try_acquire_permit('export:tenant-42', 2, '1 minute');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid_after_refused_permit;
COMMIT;
-- refused: a permit count that disagrees with the live permits
SELECT * FROM dlock.try_acquire_permit('export:tenant-42', 3, '1 minute');
-- refused: the name used as another kind while it has live permits
SELECT * FROM dlock.try_acquire_shared('export:tenant-42', '1 minute');
-- refused: an exclusive lease while permits are live
SELECT * FROM dlock.try_acquire('export:tenant-42', '1 minute');
SELECT lock_name, kind, permits, holder FROM dlock.lock_holders
 WHERE lock_name = 'export:tenant-42' ORDER BY holder;
SELECT lock_name, state, kind, holders FROM dlock.locks WHERE lock_name = 'export:tenant-42';
-- each permit is its own lease: release one, and one more permit is free
SELECT dlock.release('export:tenant-42', '00000000-0000-0000-0000-0000000000c1') AS released;
SELECT holder FROM dlock.lock_holders WHERE lock_name = 'export:tenant-42';
SELECT owner_token FROM dlock.try_acquire_permit('export:tenant-42', 2, '1 minute',
                                                 '00000000-0000-0000-0000-0000000000c3', 'export-3');
-- resizing is explicit
SELECT dlock.resize_semaphore('export:tenant-42', 3) AS live_permits;
SELECT owner_token FROM dlock.try_acquire_permit('export:tenant-42', 3, '1 minute',
                                                 '00000000-0000-0000-0000-0000000000c4', 'export-4');
SELECT * FROM dlock.try_acquire_permit('export:tenant-42', 3, '1 minute');
SELECT count(*) AS live, count(DISTINCT fencing_token) AS distinct_tokens
  FROM dlock.lock_holders WHERE lock_name = 'export:tenant-42';
SELECT dlock.assert_holds('export:tenant-42', fencing_token) FROM dlock.lock_holders
 WHERE lock_name = 'export:tenant-42' AND holder = 'export-4';
-- refused: assert_holds with a token that is no live permit
SELECT dlock.assert_holds('export:tenant-42', 1);
-- shrinking ends no permit: nobody is admitted until fewer than the new size are live
SELECT dlock.resize_semaphore('export:tenant-42', 2) AS live_permits;
SELECT * FROM dlock.try_acquire_permit('export:tenant-42', 2, '1 minute');
SELECT count(*) AS live FROM dlock.lock_holders WHERE lock_name = 'export:tenant-42';
SELECT dlock.release('export:tenant-42', '00000000-0000-0000-0000-0000000000c2') AS released,
       dlock.release('export:tenant-42', '00000000-0000-0000-0000-0000000000c3') AS released;
SELECT owner_token FROM dlock.try_acquire_permit('export:tenant-42', 2, '1 minute',
                                                 '00000000-0000-0000-0000-0000000000c5', 'export-5');
SELECT count(*) AS live, max(permits) AS permits FROM dlock.lock_holders WHERE lock_name = 'export:tenant-42';

-- tokens of one semaphore keep growing across many grants (new blocks too),
-- and an exclusive grant in between moves the next permit above it
DO $$
DECLARE
	prev bigint := 0;
	t bigint;
BEGIN
	FOR g IN 1..600 LOOP
		IF g = 300 THEN
			SELECT fencing_token INTO t FROM dlock.try_acquire('sem:churn', '1 minute',
				'00000000-0000-0000-0000-0000000000d2');
			PERFORM dlock.release('sem:churn', '00000000-0000-0000-0000-0000000000d2');
		ELSE
			SELECT fencing_token INTO t FROM dlock.try_acquire_permit('sem:churn', 1, '1 minute',
				'00000000-0000-0000-0000-0000000000d1');
			PERFORM dlock.release('sem:churn', '00000000-0000-0000-0000-0000000000d1');
		END IF;
		IF t IS NULL OR t <= prev THEN
			RAISE EXCEPTION 'grant % got token % after %', g, t, prev;
		END IF;
		prev := t;
	END LOOP;
	RAISE NOTICE '600 grants, tokens growing';
END
$$;

------------------------------------------------------------------------
-- Multi-lock
------------------------------------------------------------------------
SELECT lock_name, owner_token, fencing_token > 0 AS has_token
  FROM dlock.try_acquire_all(ARRAY['item:42', 'item:7'], '1 minute',
                             '00000000-0000-0000-0000-0000000000e1', 'transfer-1');
-- refused as a whole: one name of the set is held (no rows, nothing taken)
SELECT * FROM dlock.try_acquire_all(ARRAY['item:99', 'item:7'], '1 minute',
                                    '00000000-0000-0000-0000-0000000000e2', 'transfer-2');
SELECT lock_name, state FROM dlock.locks WHERE lock_name = 'item:99';
BEGIN;
SELECT * FROM dlock.try_acquire_all(ARRAY['item:99', 'item:7'], '1 minute');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid_after_refused_set;
COMMIT;
-- the same owner again: idempotent
SELECT count(*) AS again FROM dlock.try_acquire_all(ARRAY['item:7', 'item:42'], '1 minute',
                                                   '00000000-0000-0000-0000-0000000000e1');
-- acquire_all with a wait that runs out: 55P03, and none taken
SELECT * FROM dlock.acquire_all(ARRAY['item:100', 'item:7'], '1 minute', '50 milliseconds');
SELECT count(*) AS item_100_rows FROM dlock.locks WHERE lock_name = 'item:100' AND state = 'held';
SELECT dlock.release_all(ARRAY['item:7', 'item:42'], '00000000-0000-0000-0000-0000000000e1') AS released;
SELECT count(*) AS waited FROM dlock.acquire_all(ARRAY['item:7', 'item:42'], '1 minute', '1 second',
                                                '00000000-0000-0000-0000-0000000000e2');
SELECT dlock.release_all(ARRAY['item:42', 'item:7'], '00000000-0000-0000-0000-0000000000e2') AS released;
-- a set is granted by dlock.try_acquire, dlock.acquire and released by
-- dlock.release, as the caller: who may not run those may not take or end a set
CREATE ROLE regress_kinds_sets;
BEGIN;
REVOKE EXECUTE ON FUNCTION dlock.try_acquire(text, interval, uuid, text, boolean, interval, interval, interval),
                           dlock.acquire(text, interval, interval, uuid, text, boolean, interval, interval, interval),
                           dlock.release(text, uuid) FROM PUBLIC;
SET LOCAL ROLE regress_kinds_sets;
SAVEPOINT refused;
SELECT count(*) FROM dlock.try_acquire_all(ARRAY['item:200'], '1 minute');
ROLLBACK TO refused;
SELECT count(*) FROM dlock.acquire_all(ARRAY['item:200'], '1 minute', '1 second');
ROLLBACK TO refused;
SELECT dlock.release_all(ARRAY['item:200'], '00000000-0000-0000-0000-0000000000e3');
ROLLBACK;
-- with the privileges back, the same role takes and ends a set
SET ROLE regress_kinds_sets;
SELECT count(*) AS taken FROM dlock.try_acquire_all(ARRAY['item:200', 'item:201'], '1 minute',
                                                   '00000000-0000-0000-0000-0000000000e3');
SELECT dlock.release_all(ARRAY['item:201', 'item:200'], '00000000-0000-0000-0000-0000000000e3') AS released;
RESET ROLE;
DROP ROLE regress_kinds_sets;

------------------------------------------------------------------------
-- Force release of shared leases and permits
------------------------------------------------------------------------
-- two hung readers: force_release ends both, an audit record each, their
-- tokens are no longer held nor renewable, and a writer gets the name at
-- once with a token above theirs
SELECT count(*) AS readers
  FROM generate_series(1, 2) i,
       dlock.try_acquire_shared('forced:report', '1 minute',
                                ('00000000-0000-0000-0000-0000000000f' || i)::uuid, 'reader-' || i) r
 WHERE r.fencing_token IS NOT NULL;
SELECT array_agg(fencing_token) AS reader_tokens FROM dlock.lock_holders
 WHERE lock_name = 'forced:report' \gset
SELECT dlock.force_release('forced:report', 'regress: readers hung') AS forced;
SELECT count(*) AS live_readers FROM dlock.lock_holders WHERE lock_name = 'forced:report';
SELECT bool_or(dlock.holds('forced:report', t)) AS any_reader_held
  FROM unnest(:'reader_tokens'::bigint[]) t;
SELECT dlock.renew('forced:report', '00000000-0000-0000-0000-0000000000f1', '1 minute') IS NULL AS renew_refused;
SELECT event, holder, fencing_token = ANY (:'reader_tokens'::bigint[]) AS reader_token, reason
  FROM dlock.audit_log WHERE lock_name = 'forced:report' ORDER BY holder;
SELECT fencing_token > ALL (:'reader_tokens'::bigint[]) AS writer_above_readers
  FROM dlock.try_acquire('forced:report', '1 minute', '00000000-0000-0000-0000-0000000000f9');
SELECT dlock.release('forced:report', '00000000-0000-0000-0000-0000000000f9') AS released;
-- nothing live: nothing to end, nothing recorded
SELECT dlock.force_release('forced:report', 'regress: nothing held') AS forced_again;
SELECT count(*) AS audit_records FROM dlock.audit_log WHERE lock_name = 'forced:report';
-- a semaphore's permits, all of them; the freed permits are granted again
SELECT count(*) AS permits
  FROM generate_series(1, 2) i,
       dlock.try_acquire_permit('forced:export', 2, '1 minute',
                                ('00000000-0000-0000-0000-0000000000e' || i)::uuid, 'export-' || i) p
 WHERE p.fencing_token IS NOT NULL;
SELECT dlock.force_release('forced:export', 'regress: exports hung') AS forced;
SELECT count(*) AS live_permits FROM dlock.lock_holders WHERE lock_name = 'forced:export';
SELECT owner_token FROM dlock.try_acquire_permit('forced:export', 2, '1 minute',
                                                 '00000000-0000-0000-0000-0000000000e3', 'export-3');
SELECT dlock.release('forced:export', '00000000-0000-0000-0000-0000000000e3') AS released;
-- operations.sql reads the whole audit log
DELETE FROM dlock.audit_log WHERE lock_name LIKE 'forced:%';

------------------------------------------------------------------------
-- Bad input
------------------------------------------------------------------------
-- refused: NULL arguments (22004)
SELECT dlock.try_acquire_shared(NULL, '1 minute');
SELECT dlock.try_acquire_shared('x', NULL);
SELECT dlock.acquire_shared('x', '1 minute', NULL);
SELECT dlock.try_acquire_permit('x', NULL, '1 minute');
SELECT dlock.try_acquire_permit(NULL, 1, '1 minute');
SELECT dlock.try_acquire_all(NULL, '1 minute');
SELECT dlock.try_acquire_all(ARRAY['a', NULL], '1 minute');
SELECT dlock.release_all(ARRAY['a'], NULL);
SELECT dlock.resize_semaphore('x', NULL);
-- refused: invalid values (22023)
SELECT dlock.try_acquire_shared('', '1 minute');
SELECT dlock.try_acquire_shared(repeat('x', 201), '1 minute');
SELECT dlock.try_acquire_shared('x', '0 seconds');
SELECT dlock.try_acquire_shared('x', '-1 second');
SELECT dlock.acquire_shared('x', '1 minute', '-1 second');
SELECT dlock.try_acquire_permit('x', 0, '1 minute');
SELECT dlock.try_acquire_permit('x', -3, '1 minute');
SELECT dlock.acquire_permit('x', 1, '1 minute', '-1 second');
SELECT dlock.resize_semaphore('x', 0);
SELECT dlock.try_acquire_all('{}', '1 minute');
SELECT dlock.try_acquire_all(ARRAY['a', 'b', 'a'], '1 minute');
SELECT dlock.try_acquire_all(ARRAY['a', ''], '1 minute');
SELECT dlock.try_acquire_all(ARRAY[['a', 'b'], ['c', 'd']], '1 minute');
SELECT dlock.acquire_all(ARRAY['a'], '1 minute', '-1 second');
-- nothing was created by the refused calls
SELECT count(*) AS rows_for_x FROM dlock.locks WHERE lock_name IN ('x', 'a', 'b', 'c', 'd');

------------------------------------------------------------------------
-- Visibility
------------------------------------------------------------------------
-- (without preloading the counters stay zero: then only the rows are checked)
SELECT kind, NOT s.shm OR acquisitions > 0 AS granted, NOT s.shm OR busy > 0 AS refused
  FROM dlock.stats_by_kind, (SELECT shared_memory AS shm FROM dlock.stats) s ORDER BY kind;
-- dlock.stats carries the same per-kind counters as columns
SELECT k.kind, k.acquisitions = CASE k.kind WHEN 'shared' THEN s.shared_acquisitions
                                            WHEN 'permit' THEN s.permit_acquisitions
                                            WHEN 'multi' THEN s.multi_acquisitions END AS same_acquisitions,
       k.busy = CASE k.kind WHEN 'shared' THEN s.shared_busy
                            WHEN 'permit' THEN s.permit_busy
                            WHEN 'multi' THEN s.multi_busy END AS same_busy
  FROM dlock.stats_by_kind k, dlock.stats s WHERE k.kind <> 'exclusive' ORDER BY k.kind;
SELECT column_name FROM information_schema.columns
 WHERE table_schema = 'dlock' AND table_name = 'lock_holders' ORDER BY ordinal_position;
