-- Privileges: what PUBLIC may do, what needs a grant
\set VERBOSITY terse

CREATE ROLE regress_dlock_app;
CREATE ROLE regress_dlock_admin;
GRANT EXECUTE ON FUNCTION dlock.force_release(text, text) TO regress_dlock_admin;
GRANT SELECT ON dlock.lock_owners TO regress_dlock_admin;
GRANT EXECUTE ON FUNCTION dlock.fence(text, bigint) TO regress_dlock_admin;

SET ROLE regress_dlock_app;
-- an application role takes and manages its own leases
SELECT fencing_token AS app_token FROM dlock.try_acquire('priv', '1 minute',
       '00000000-0000-0000-0000-0000000000a1', 'app') \gset
SELECT dlock.renew('priv', '00000000-0000-0000-0000-0000000000a1', '1 minute') IS NOT NULL AS renewed;
-- refused: pinning a lease needs a grant (42501)
SELECT dlock.holds('priv', :app_token);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION dlock.holds(text, bigint), dlock.assert_holds(text, bigint) TO regress_dlock_app;
SET ROLE regress_dlock_app;
SELECT dlock.holds('priv', :app_token);
SELECT lock_name, state, holder FROM dlock.locks WHERE lock_name = 'priv';
SELECT count(*) >= 0 AS can_read_stats FROM dlock.stats;
-- refused: owner tokens are capabilities (42501)
SELECT owner_token FROM dlock.distributed_lock;
\echo :LAST_ERROR_SQLSTATE
SELECT owner_token FROM dlock.lock_owners;
\echo :LAST_ERROR_SQLSTATE
-- refused: direct writes to the extension's tables (42501)
UPDATE dlock.distributed_lock SET lease_until = lease_until + interval '1 day';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM dlock.distributed_lock;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO dlock.resource_fence VALUES ('r', 1, now());
\echo :LAST_ERROR_SQLSTATE
DELETE FROM dlock.audit_log;
\echo :LAST_ERROR_SQLSTATE
-- refused: administrative functions (42501)
SELECT dlock.force_release('priv', 'I want it');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.purge_audit_log('0');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.purge_resource_fence('0');
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.stats_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.reap();
\echo :LAST_ERROR_SQLSTATE
-- refused: fence state is shared by all roles; writing it needs a grant (42501)
SELECT dlock.fence('priv:resource', 9223372036854775807);
\echo :LAST_ERROR_SQLSTATE
-- refused: settings that weaken safety or auditing (42501)
SET dlock.audit = 'none';
\echo :LAST_ERROR_SQLSTATE
SET dlock.test_ignore_timeline = on;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- the test-only fault injection is not listed with the user settings
SELECT name FROM pg_settings WHERE name LIKE 'dlock.%' AND name LIKE '%test%';

-- the admin role, granted force_release, ends the lease; the audit record
-- names the role and the reason
SET ROLE regress_dlock_admin;
SELECT owner_token FROM dlock.lock_owners WHERE lock_name = 'priv';
SELECT dlock.fence('priv:resource', :app_token);
SELECT dlock.force_release('priv', 'app host lost; ticket 7');
RESET ROLE;
SELECT event, lock_name, fencing_token = :app_token AS token, holder, role_name, reason
  FROM dlock.audit_log WHERE lock_name = 'priv';

-- the lease functions run as the caller (no SECURITY DEFINER), yet an audit
-- record they write is written as the extension owner: the role need not,
-- and cannot, write dlock.audit_log
SET dlock.audit = 'all';
SET ROLE regress_dlock_app;
SELECT dlock.release('audited', (dlock.try_acquire('audited', '1 minute', holder => 'app')).owner_token);
INSERT INTO dlock.audit_log (event, lock_name, role_name) VALUES ('forged', 'audited', 'x');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET dlock.audit;
SELECT event, holder, role_name FROM dlock.audit_log WHERE lock_name = 'audited' ORDER BY id;

-- SECURITY DEFINER functions pin search_path
SELECT p.proname, p.proconfig FROM pg_proc p
 WHERE p.pronamespace = 'dlock'::regnamespace AND p.prosecdef ORDER BY 1;
-- functions revoked from PUBLIC
SELECT p.proname FROM pg_proc p
 WHERE p.pronamespace = 'dlock'::regnamespace
   AND NOT has_function_privilege('regress_dlock_app', p.oid, 'EXECUTE') ORDER BY 1;

DROP OWNED BY regress_dlock_app, regress_dlock_admin;
DROP ROLE regress_dlock_app, regress_dlock_admin;
