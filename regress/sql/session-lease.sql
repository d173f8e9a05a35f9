-- Session-bound leases (README "Lease policies"): the lease also ends when
-- the session that took it ends. The holder is a second session opened with
-- dblink, so this file can end it. Without shared_preload_libraries =
-- 'pg_dlock' session-bound leases are refused (expected/session-lease_1.out);
-- "preloaded" makes sure a preloaded server never passes with that output.
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
SELECT current_setting('shared_preload_libraries') ~ 'pg_dlock' AS preloaded \gset
SELECT :'preloaded'::boolean AS preloaded;
\if :preloaded
\else
-- refused: session-bound leases need the shared memory of preloading
SELECT dlock.try_acquire('session:refused', '1 minute', session_bound => true);
SELECT count(*) AS rows_created FROM dlock.distributed_lock WHERE lock_name = 'session:refused';
DROP EXTENSION dblink;
\quit
\endif

-- wait (up to 30 s) until no backend has process ID pid
CREATE FUNCTION pg_temp.wait_gone(pid integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..3000 LOOP
		PERFORM pg_stat_clear_snapshot();	-- else the first reading is kept to the end of the call
		IF NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = wait_gone.pid) THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN false;
END
$$;
SELECT format('host=%s port=%s dbname=%s user=%s',
			  coalesce(host(inet_server_addr()), split_part(current_setting('unix_socket_directories'), ',', 1)),
			  current_setting('port'), current_database(), current_user) AS conninfo \gset
CREATE TEMPORARY TABLE counters_before AS SELECT * FROM dlock.stats;

-- a session-bound lease in another session: held while that session lives
SELECT dblink_connect('holder', :'conninfo');
SELECT pid AS holder_pid FROM dblink('holder', 'SELECT pg_backend_pid()') AS t(pid integer) \gset
SELECT token AS bound_token FROM dblink('holder',
	$$SELECT fencing_token FROM dlock.try_acquire('session:bound', '1 hour', '00000000-0000-0000-0000-000000000001', session_bound => true)$$)
	AS t(token bigint) \gset
SELECT state, policy_state, session_bound, session_pid = :holder_pid AS holder_pid_shown
  FROM dlock.locks WHERE lock_name = 'session:bound';
SELECT dlock.try_acquire('session:bound', '1 minute', '00000000-0000-0000-0000-000000000002') IS NULL AS refused_while_session_lives;
SELECT dlock.holds('session:bound', :bound_token) AS holds_while_session_lives;
-- the owner may renew from any session; the lease stays bound to the first
SELECT dlock.renew('session:bound', '00000000-0000-0000-0000-000000000001', '1 hour') IS NOT NULL AS renewed;
SELECT session_pid = :holder_pid AS still_bound FROM dlock.locks WHERE lock_name = 'session:bound';

-- the session ends: the lease is gone at once, long before lease_until
SELECT dblink_disconnect('holder');
SELECT pg_temp.wait_gone(:holder_pid) AS holder_gone;
SELECT state, policy_state, lease_until > clock_timestamp() + '50 minutes' AS ttl_not_over
  FROM dlock.locks WHERE lock_name = 'session:bound';
SELECT dlock.holds('session:bound', :bound_token) AS holds_after_session_end;
SELECT dlock.renew('session:bound', '00000000-0000-0000-0000-000000000001', '1 hour') IS NULL AS renew_refused;
SELECT dlock.release('session:bound', '00000000-0000-0000-0000-000000000001') AS release_refused;
SELECT fencing_token > :bound_token AS higher_token
  FROM dlock.try_acquire('session:bound', '1 minute', '00000000-0000-0000-0000-000000000002');
SELECT state, session_bound FROM dlock.locks WHERE lock_name = 'session:bound';
SELECT s.session_ends - b.session_ends AS session_ends_counted,
       s.expirations - b.expirations AS expirations_counted
  FROM dlock.stats s, counters_before b;

-- with a lock delay, the name stays ungranted for the delay after the end
SELECT dblink_connect('holder', :'conninfo');
SELECT pid AS holder_pid FROM dblink('holder', 'SELECT pg_backend_pid()') AS t(pid integer) \gset
SELECT * FROM dblink('holder',
	$$SELECT fencing_token IS NOT NULL FROM dlock.try_acquire('session:delay', '1 hour', session_bound => true, lock_delay => '1 second')$$)
	AS t(acquired boolean);
SELECT dblink_disconnect('holder');
SELECT pg_temp.wait_gone(:holder_pid) AS holder_gone;
SELECT dlock.try_acquire('session:delay', '1 minute') IS NULL AS refused_during_delay;
SELECT policy_state FROM dlock.locks WHERE lock_name = 'session:delay';
SELECT (dlock.acquire('session:delay', '1 minute', '10 seconds')).fencing_token IS NOT NULL AS acquired_after_delay;

-- a session-bound lease of this session: usable like any lease
SELECT (dlock.try_acquire('session:own', '1 minute', '00000000-0000-0000-0000-000000000003', session_bound => true)).fencing_token AS own_token \gset
SELECT dlock.holds('session:own', :own_token) AS holds_own;
SELECT dlock.renew('session:own', '00000000-0000-0000-0000-000000000003', '1 minute') IS NOT NULL AS renewed_own;
SELECT dlock.release('session:own', '00000000-0000-0000-0000-000000000003') AS released_own;

-- refused: a repeated acquire may not make a plain lease session-bound
-- (55000); the lease stays as it was granted
SELECT (dlock.try_acquire('session:plain', '1 minute', '00000000-0000-0000-0000-000000000004')).fencing_token AS plain_token \gset
SELECT dlock.try_acquire('session:plain', '1 minute', '00000000-0000-0000-0000-000000000004', session_bound => true);
SELECT session_bound, fencing_token = :plain_token AS same_lease FROM dlock.locks WHERE lock_name = 'session:plain';
-- asking again without session_bound is the plain retry
SELECT fencing_token = :plain_token AS same_token
  FROM dlock.try_acquire('session:plain', '1 minute', '00000000-0000-0000-0000-000000000004');

-- force_release of a session-bound lease whose session already ended: it
-- was not live, so nothing is ended and nothing is audited
SELECT dblink_connect('holder', :'conninfo');
SELECT pid AS holder_pid FROM dblink('holder', 'SELECT pg_backend_pid()') AS t(pid integer) \gset
SELECT * FROM dblink('holder',
	$$SELECT fencing_token IS NOT NULL FROM dlock.try_acquire('session:forced', '1 hour', session_bound => true)$$)
	AS t(acquired boolean);
SELECT dblink_disconnect('holder');
SELECT pg_temp.wait_gone(:holder_pid) AS holder_gone;
SELECT dlock.force_release('session:forced', 'regress: the session already ended') AS forced;
SELECT count(*) AS audit_records FROM dlock.audit_log WHERE lock_name = 'session:forced';
-- the control: a live session-bound lease is forced away and audited
SELECT (dlock.try_acquire('session:forced-live', '1 hour', session_bound => true)).fencing_token IS NOT NULL AS acquired;
SELECT dlock.force_release('session:forced-live', 'regress: a live session-bound lease') AS forced;
SELECT count(*) AS audit_records FROM dlock.audit_log WHERE lock_name = 'session:forced-live';
DELETE FROM dlock.audit_log WHERE lock_name LIKE 'session:%';

DELETE FROM dlock.distributed_lock WHERE lock_name LIKE 'session:%';
DROP EXTENSION dblink;
