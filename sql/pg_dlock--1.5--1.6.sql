/* pg_dlock 1.5 -> 1.6 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.6'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- Lease policies for every kind (docs/lease-policies.md). A holder slot
-- keeps the policies its shared lease or permit was granted with, in
-- columns of the same names and meaning as dlock.distributed_lock's, so
-- that one decision (dlock.lease_policy_state) reads either. Slots written
-- before 1.6 have none: NULL is "no policy".

ALTER TABLE dlock.lock_holder
	ADD COLUMN hold_limit timestamptz,
	ADD COLUMN min_hold_until timestamptz,
	ADD COLUMN lock_delay interval,
	ADD COLUMN not_before timestamptz;
COMMENT ON COLUMN dlock.lock_holder.hold_limit IS 'acquired_at + max_hold: renewals of the slot''s lease end there at the latest';
COMMENT ON COLUMN dlock.lock_holder.min_hold_until IS 'acquired_at + min_hold: a release before it keeps the slot (and writers of the name) from new owners until then';
COMMENT ON COLUMN dlock.lock_holder.lock_delay IS 'how long the slot (and writers of the name) stays ungranted after its lease is lost (expired, forced away)';
COMMENT ON COLUMN dlock.lock_holder.not_before IS 'set by a release inside min_hold or a force release with a lock delay: no new owner of the slot, and no writer of the name, before it';

-- The shared, permit and multi-lock acquire functions get the policy options
-- as named arguments with defaults, as try_acquire and acquire did in 1.2.
-- Adding them as overloads would make every existing call ambiguous, so the
-- functions are replaced; their grants are carried over.
CREATE FUNCTION dlock.policy_acl_save(fn regprocedure)
RETURNS aclitem[] LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT proacl FROM pg_catalog.pg_proc WHERE oid = fn $$;

CREATE FUNCTION dlock.policy_acl_restore(fn regprocedure, acl aclitem[])
RETURNS void LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	grantee oid;
BEGIN
	IF acl IS NULL THEN
		RETURN;				-- default privileges: EXECUTE to PUBLIC, as created
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(acl) a WHERE a.grantee OPERATOR(pg_catalog.=) 0) THEN
		EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
	END IF;
	FOR grantee IN SELECT DISTINCT a.grantee FROM pg_catalog.aclexplode(acl) a
					WHERE a.grantee OPERATOR(pg_catalog.<>) 0
					  AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', fn,
								  pg_catalog.pg_get_userbyid(grantee));
	END LOOP;
END
$$;

CREATE TEMPORARY TABLE pg_temp.policy_saved_acl AS
	SELECT dlock.policy_acl_save('dlock.try_acquire_shared(text, interval, uuid, text)') AS try_shared_acl,
		   dlock.policy_acl_save('dlock.acquire_shared(text, interval, interval, uuid, text)') AS shared_acl,
		   dlock.policy_acl_save('dlock.try_acquire_permit(text, integer, interval, uuid, text)') AS try_permit_acl,
		   dlock.policy_acl_save('dlock.acquire_permit(text, integer, interval, interval, uuid, text)') AS permit_acl,
		   dlock.policy_acl_save('dlock.try_acquire_all(text[], interval, uuid, text)') AS try_all_acl,
		   dlock.policy_acl_save('dlock.acquire_all(text[], interval, interval, uuid, text)') AS all_acl;

DROP FUNCTION dlock.try_acquire_shared(text, interval, uuid, text);
DROP FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text);
DROP FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text);
DROP FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text);
DROP FUNCTION dlock.try_acquire_all(text[], interval, uuid, text);
DROP FUNCTION dlock.acquire_all(text[], interval, interval, uuid, text);

CREATE FUNCTION dlock.try_acquire_shared(lock_name text, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
										 max_hold interval DEFAULT NULL,
										 min_hold interval DEFAULT NULL,
										 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire_shared'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval) IS
'takes a shared lease unless an exclusive lease is live or an exclusive acquirer waits; NULL otherwise. Options, per shared lease: max_hold (renewals end there), min_hold (a release before it keeps writers out until then), lock_delay (no writer for that long after the lease is lost)';

CREATE FUNCTION dlock.acquire_shared(lock_name text, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
									 max_hold interval DEFAULT NULL,
									 min_hold interval DEFAULT NULL,
									 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire_shared'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text, interval, interval, interval) IS
'like try_acquire_shared, but waits up to "wait" in the name''s queue; raises lock_not_available (55P03) when the wait runs out. Same options as try_acquire_shared';

CREATE FUNCTION dlock.try_acquire_permit(semaphore_name text, permits integer, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
										 max_hold interval DEFAULT NULL,
										 min_hold interval DEFAULT NULL,
										 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire_permit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval) IS
'takes one of "permits" permits of the semaphore as its own lease; NULL when all are held. Options, per permit: max_hold (renewals end there), min_hold (a release before it keeps the permit taken until then), lock_delay (the permit stays taken for that long after its lease is lost)';

CREATE FUNCTION dlock.acquire_permit(semaphore_name text, permits integer, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
									 max_hold interval DEFAULT NULL,
									 min_hold interval DEFAULT NULL,
									 lock_delay interval DEFAULT NULL)
RETURNS dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire_permit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text, interval, interval, interval) IS
'like try_acquire_permit, but waits up to "wait" in the name''s queue; raises lock_not_available (55P03) when the wait runs out. Same options as try_acquire_permit';

CREATE FUNCTION dlock.try_acquire_all(lock_names text[], ttl interval,
									  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
									  session_bound boolean DEFAULT false,
									  max_hold interval DEFAULT NULL,
									  min_hold interval DEFAULT NULL,
									  lock_delay interval DEFAULT NULL)
RETURNS SETOF dlock.lease
AS 'MODULE_PATHNAME', 'dlock_try_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 4;
COMMENT ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text, boolean, interval, interval, interval) IS
'takes exclusive leases on every name with one owner token, or on none (no rows). The options of try_acquire apply to the lease of every name';

CREATE FUNCTION dlock.acquire_all(lock_names text[], ttl interval, wait interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
								  session_bound boolean DEFAULT false,
								  max_hold interval DEFAULT NULL,
								  min_hold interval DEFAULT NULL,
								  lock_delay interval DEFAULT NULL)
RETURNS SETOF dlock.lease
AS 'MODULE_PATHNAME', 'dlock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 4;
COMMENT ON FUNCTION dlock.acquire_all(text[], interval, interval, uuid, text, boolean, interval, interval, interval) IS
'like try_acquire_all, but waits up to "wait" in all; raises lock_not_available (55P03) and takes none when the wait runs out. Same options as try_acquire_all';

SELECT dlock.policy_acl_restore('dlock.try_acquire_shared(text, interval, uuid, text, interval, interval, interval)',
								try_shared_acl),
	   dlock.policy_acl_restore('dlock.acquire_shared(text, interval, interval, uuid, text, interval, interval, interval)',
								shared_acl),
	   dlock.policy_acl_restore('dlock.try_acquire_permit(text, integer, interval, uuid, text, interval, interval, interval)',
								try_permit_acl),
	   dlock.policy_acl_restore('dlock.acquire_permit(text, integer, interval, interval, uuid, text, interval, interval, interval)',
								permit_acl),
	   dlock.policy_acl_restore('dlock.try_acquire_all(text[], interval, uuid, text, boolean, interval, interval, interval)',
								try_all_acl),
	   dlock.policy_acl_restore('dlock.acquire_all(text[], interval, interval, uuid, text, boolean, interval, interval, interval)',
								all_acl)
  FROM pg_temp.policy_saved_acl;
DROP TABLE pg_temp.policy_saved_acl;
DROP FUNCTION dlock.policy_acl_save(regprocedure);
DROP FUNCTION dlock.policy_acl_restore(regprocedure, aclitem[]);
