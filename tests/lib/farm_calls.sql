-- The same calls through the farm's proxy and straight to a database with
-- pg_dlock (tests/suites/50-farm.sh): the outputs must be equal. Tokens are
-- shown without their epoch bits and times as booleans, so that two fresh
-- databases compare; errors by SQLSTATE only.
\set VERBOSITY sqlstate
-- PL/Proxy notes the connection it drops after a remote error
SET client_min_messages = warning;
\pset null '(null)'
\set o1 '''00000000-0000-0000-0000-0000000000a1'''
\set o2 '''00000000-0000-0000-0000-0000000000a2'''
\set o3 '''00000000-0000-0000-0000-0000000000a3'''
-- exclusive leases
SELECT lock_name, owner_token, fencing_token & 1099511627775 AS seq, lease_until > now() AS live
	FROM dlock.try_acquire('eq-x', '30 s', :o1, 'holder-1');
SELECT lock_name, owner_token, fencing_token FROM dlock.try_acquire('eq-x', '30 s', :o2);
SELECT fencing_token & 1099511627775 AS same_seq FROM dlock.try_acquire('eq-x', '30 s', :o1, 'holder-1');
SELECT dlock.renew('eq-x', :o1, '30 s') > now() AS renewed, dlock.renew('eq-x', :o2, '30 s') AS other;
SELECT holder, fencing_token & 1099511627775 AS seq, lease_until > since AS ordered FROM dlock.leader('eq-x');
SELECT dlock.holds('eq-x', (SELECT fencing_token FROM dlock.leader('eq-x'))), dlock.holds('eq-x', 1);
SELECT dlock.waiters('eq-x');
SELECT lock_name FROM dlock.acquire('eq-x', '30 s', '0 s', :o2);
SELECT dlock.release('eq-x', :o2), dlock.release('eq-x', :o1), dlock.release('eq-x', :o1);
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.acquire('eq-x', '30 s', '1 s', :o2);
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.try_acquire('eq-w', '30 s', :o1, max_hold => '1 min');
SELECT dlock.force_release('eq-w', 'test');
-- shared leases and permits
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.try_acquire_shared('eq-s', '30 s', :o1);
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.acquire_shared('eq-s', '30 s', '0 s', :o2);
SELECT lock_name FROM dlock.try_acquire('eq-s', '30 s', :o3);
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.try_acquire_permit('eq-p', 2, '30 s', :o1);
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.acquire_permit('eq-p', 2, '30 s', '0 s', :o2);
SELECT lock_name FROM dlock.try_acquire_permit('eq-p', 2, '30 s', :o3);
SELECT lock_name FROM dlock.try_acquire_permit('eq-p', 3, '30 s', :o3);
SELECT dlock.resize_semaphore('eq-p', 3);
-- the options of 1.6 pass through: a release before min_hold keeps the name taken
SELECT lock_name FROM dlock.try_acquire_shared('eq-so', '30 s', :o1, max_hold => '1 min', min_hold => '1 min', lock_delay => '1 s');
SELECT dlock.release('eq-so', :o1), lock_name FROM dlock.try_acquire('eq-so', '30 s', :o2);
SELECT lock_name FROM dlock.acquire_shared('eq-so2', '30 s', '0 s', :o1, min_hold => '1 min');
SELECT dlock.release('eq-so2', :o1), lock_name FROM dlock.try_acquire('eq-so2', '30 s', :o2);
SELECT lock_name FROM dlock.try_acquire_permit('eq-po', 1, '30 s', :o1, min_hold => '1 min');
SELECT dlock.release('eq-po', :o1), lock_name FROM dlock.try_acquire_permit('eq-po', 1, '30 s', :o2);
SELECT lock_name FROM dlock.acquire_permit('eq-po2', 1, '30 s', '0 s', :o1, lock_delay => '1 min');
SELECT dlock.force_release('eq-po2', 'test'), lock_name FROM dlock.try_acquire_permit('eq-po2', 1, '30 s', :o2);
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.try_acquire('eq-d', '30 s', :o1);
SELECT lock_name, fencing_token & 1099511627775 AS seq FROM dlock.downgrade('eq-d', :o1);
-- multi-locks of one partition
SELECT lock_name, owner_token, fencing_token & 1099511627775 AS seq
	FROM dlock.try_acquire_all(ARRAY['eq-m5', 'eq-m1', 'eq-m4'], '30 s', :o1);
SELECT count(*) FROM dlock.try_acquire_all(ARRAY['eq-m1', 'eq-m4'], '30 s', :o2);
SELECT dlock.release_all(ARRAY['eq-m1', 'eq-m4', 'eq-m5'], :o1);
SELECT count(*) FROM dlock.acquire_all(ARRAY['eq-m1', 'eq-m4'], '30 s', '0 s', :o2);
SELECT count(*) FROM dlock.try_acquire_all(ARRAY['eq-mo1'], '30 s', :o3, max_hold => '1 min', min_hold => '1 min');
SELECT dlock.release_all(ARRAY['eq-mo1'], :o3), lock_name FROM dlock.try_acquire('eq-mo1', '30 s', :o1);
SELECT count(*) FROM dlock.acquire_all(ARRAY['eq-mo2'], '30 s', '0 s', :o3, lock_delay => '1 min');
SELECT dlock.force_release('eq-mo2', 'test'), lock_name FROM dlock.try_acquire('eq-mo2', '30 s', :o1);
-- refusals
SELECT * FROM dlock.try_acquire('eq-x', '-1 s');
SELECT * FROM dlock.try_acquire('', '1 s');
SELECT * FROM dlock.try_acquire(NULL, '1 s');
SELECT * FROM dlock.try_acquire('eq-y', '1 s', '00000000-0000-0000-0000-000000000000');
SELECT * FROM dlock.try_acquire_all(ARRAY['eq-m1', 'eq-m1'], '1 s');
SELECT * FROM dlock.try_acquire_all(ARRAY['eq-m1', NULL], '1 s');
SELECT * FROM dlock.try_acquire_all('{}', '1 s');
SELECT dlock.fence('eq-x', 5), dlock.fence('eq-x', 7);
SELECT dlock.fence('eq-x', 6);
