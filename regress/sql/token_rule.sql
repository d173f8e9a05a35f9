-- The one token rule: the reap floor is a token state with its history
-- position and cluster; dlock.after_restore moves every token past the
-- lost server's timeline and ends the restored leases; bad arguments.
-- Earlier files leave rows and floors behind: every check is relative.
\set VERBOSITY terse
SELECT system_identifier AS sys FROM pg_control_system() \gset

-- a name without a row takes the floor's next token (nothing's, if no floor)
SELECT dlock.next_fencing_token(NULL, NULL, NULL, 1, :sys) = (1::bigint << 40) + 1 AS nothing;
SELECT coalesce(max(dlock.next_fencing_token(f.reaped_max, f.grant_timeline, f.grant_system, 1, :sys)),
                dlock.next_fencing_token(NULL, NULL, NULL, 1, :sys)) AS expected_first
  FROM dlock.token_floor f \gset
SELECT fencing_token = :expected_first AS first_grant_by_the_rule
  FROM dlock.try_acquire('rule:a', '1 hour', '00000000-0000-0000-0000-00000000000a');
SELECT grant_timeline AS position FROM dlock.distributed_lock WHERE lock_name = 'rule:a';

-- a reap leaves one floor row at the reap's position, in this cluster
SELECT dlock.release('rule:a', '00000000-0000-0000-0000-00000000000a');
SELECT dlock.reap('0 seconds') >= 1 AS reaped;
SELECT count(*) AS floor_rows, bool_and(grant_timeline = 1) AS at_position_1,
       bool_and(grant_system = :sys) AS this_cluster,
       bool_and(reaped_max >= :expected_first) AS above_the_deleted
  FROM dlock.token_floor;
-- the name comes back above its last token, by the floor's next token
SELECT dlock.next_fencing_token(f.reaped_max, f.grant_timeline, f.grant_system, 1, :sys) AS floor_next
  FROM dlock.token_floor f \gset
SELECT fencing_token AS a_token
  FROM dlock.try_acquire('rule:a', '1 hour', '00000000-0000-0000-0000-00000000000a') \gset
SELECT :a_token > :expected_first AS above_its_last, :a_token = :floor_next AS by_the_rule;

-- a reader's token is not issued again to a writer after reap deleted its slot
SELECT fencing_token AS reader_token FROM dlock.try_acquire_shared('rule:reaped-reader', '10 ms') \gset
SELECT pg_sleep(0.05);
SELECT dlock.reap('0 seconds') IS NOT NULL AS reaped;
SELECT fencing_token > :reader_token AS writer_above_reader
  FROM dlock.try_acquire('rule:reaped-reader', '1 hour');

-- the carry-over of DROP EXTENSION (23-token-restore drops and creates the
-- extension): what a reap of every row would leave, at the position a grant
-- has now; refused once the extension has issued anything
SELECT fencing_token >= :a_token AS highest_covers_the_names, history AS position
  FROM dlock.highest_token();
SELECT fencing_token AS carried_token, history AS carried_history FROM dlock.highest_token() \gset
SELECT dlock.carry_over(:carried_token, :carried_history);
SELECT dlock.carry_over(-1, 1);
SELECT dlock.carry_over(1, 0);
SELECT dlock.carry_over(NULL, 1) IS NULL AS strict_carry_over;

-- after_restore: refused arguments change nothing
SELECT dlock.after_restore(0);
SELECT dlock.after_restore(NULL) IS NULL AS strict;
SELECT fencing_token = :a_token AS unchanged, lease_until > clock_timestamp() AS live
  FROM dlock.locks WHERE lock_name = 'rule:a';

-- it ends every lease, of every kind, and moves every token a whole timeline
SELECT fencing_token AS shared_before
  FROM dlock.try_acquire_shared('rule:s', '1 hour', '00000000-0000-0000-0000-00000000000b') \gset
SELECT dlock.after_restore() >= 2 AS moved;
SELECT fencing_token - (:a_token + (16384::bigint << 40)) AS above_by,
       lease_until <= clock_timestamp() AS ended
  FROM dlock.locks WHERE lock_name = 'rule:a';
SELECT fencing_seq - (:shared_before + (16384::bigint << 40)) AS shared_above_by,
       lease_until <= clock_timestamp() AS ended
  FROM dlock.lock_holder WHERE lock_name = 'rule:s' AND owner_token IS NOT NULL;
SELECT dlock.renew('rule:a', '00000000-0000-0000-0000-00000000000a', '1 hour') IS NULL AS old_holder_refused;
SELECT fencing_token > :a_token + (16384::bigint << 40) AS regranted_above
  FROM dlock.try_acquire('rule:a', '1 hour');
SELECT fencing_token > :shared_before + (16384::bigint << 40) AS reader_above
  FROM dlock.try_acquire_shared('rule:s', '1 hour');
-- a new name starts above the moved floor
SELECT fencing_token >= (SELECT max(reaped_max) FROM dlock.token_floor) AS new_name_above,
       fencing_token > (16384::bigint << 40) AS past_the_timeline
  FROM dlock.try_acquire('rule:new', '1 hour');

-- a token that would no longer fit is refused before anything moves
UPDATE dlock.distributed_lock SET fencing_seq = ((1::bigint << 23) - 100) << 40 WHERE lock_name = 'rule:new';
SELECT dlock.after_restore(200);
SELECT fencing_token = ((1::bigint << 23) - 100) << 40 AS not_moved FROM dlock.locks WHERE lock_name = 'rule:new';

-- the rule's own arguments
SELECT dlock.next_fencing_token(1, 1, 1, 0, 1);
SELECT dlock.next_fencing_token(-1, 1, 1, 1, 1);
SELECT dlock.next_fencing_token(1, -1, 1, 1, 1);
SELECT dlock.next_fencing_token(1, 1, 1, NULL, 1);

DELETE FROM dlock.distributed_lock WHERE lock_name LIKE 'rule:%';
DELETE FROM dlock.lock_holder WHERE lock_name LIKE 'rule:%';
DELETE FROM dlock.holder_counter WHERE lock_name LIKE 'rule:%';
