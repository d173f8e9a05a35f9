-- The extension's schema cannot be taken over: a role with
-- CREATE on the database pre-creates schema "dlock", or renames it and puts
-- look-alike tables with a trigger in its place. Runs in a database of its own.
\set VERBOSITY terse
\set regress_db :DBNAME
CREATE ROLE regress_dlock_attacker;
CREATE DATABASE regress_dlock_schema;
\c regress_dlock_schema
\set VERBOSITY terse
GRANT CREATE ON DATABASE regress_dlock_schema TO regress_dlock_attacker;

-- the attacker creates the schema before the extension is installed
SET ROLE regress_dlock_attacker;
CREATE SCHEMA dlock;
RESET ROLE;
-- refused: installing into a schema another role owns (42501); nothing is left
CREATE EXTENSION pg_dlock;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'pg_dlock';
SELECT count(*) AS objects_in_attackers_schema FROM pg_class WHERE relnamespace = 'dlock'::regnamespace;

-- version 1.0 had no such check: install it there, as a superuser would have
CREATE EXTENSION pg_dlock VERSION '1.0';
-- refused: updating that installation (42501)
ALTER EXTENSION pg_dlock UPDATE;
\echo :LAST_ERROR_SQLSTATE

-- the rename attack: the real schema moves away, a look-alike takes its name
SET ROLE regress_dlock_attacker;
ALTER SCHEMA dlock RENAME TO dlock_real;
CREATE SCHEMA dlock;
CREATE TABLE dlock.distributed_lock (
	lock_name text PRIMARY KEY, owner_token uuid, fencing_seq bigint, lease_until timestamptz,
	updated_at timestamptz, acquired_at timestamptz, holder text, renewals bigint,
	acquisitions bigint, takeovers bigint, taken_over boolean, grant_timeline integer);
CREATE TABLE dlock.token_floor (reaped_max bigint, reaped_at timestamptz);
CREATE TABLE dlock.resource_fence (resource text PRIMARY KEY, fencing_token bigint, updated_at timestamptz);
CREATE FUNCTION dlock.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	ALTER ROLE regress_dlock_attacker SUPERUSER;
	RETURN NEW;
END $$;
CREATE TRIGGER escalate BEFORE INSERT OR UPDATE ON dlock.distributed_lock
	FOR EACH ROW EXECUTE FUNCTION dlock.escalate();
CREATE TRIGGER escalate BEFORE INSERT OR UPDATE ON dlock.resource_fence
	FOR EACH ROW EXECUTE FUNCTION dlock.escalate();
-- the lease functions find their tables by OID, never by the name "dlock":
-- they keep working on the extension's own rows (the look-alike stays empty
-- and its trigger never fires)
SELECT (dlock_real.try_acquire('attack', '1 minute')).fencing_token AS granted_from_own_table;
SELECT dlock_real.renew('attack', gen_random_uuid(), '1 minute') AS renewed_by_stranger;
SELECT dlock_real.holds('attack', 1) AS holds_wrong_token;
RESET ROLE;
-- refused: the SECURITY DEFINER functions' statements do not follow the name "dlock" (55000)
SELECT dlock_real.fence('attack', 1);
\echo :LAST_ERROR_SQLSTATE
-- the trigger never ran as a superuser
SELECT rolsuper AS attacker_is_superuser FROM pg_roles WHERE rolname = 'regress_dlock_attacker';
SELECT count(*) AS rows_in_look_alike FROM dlock.distributed_lock;

-- control: with the name back on the extension's schema, the functions work
DROP SCHEMA dlock CASCADE;
ALTER SCHEMA dlock_real RENAME TO dlock;
SELECT (dlock.try_acquire('attack-control', '1 minute')).fencing_token AS works_again;

\c :regress_db
DROP DATABASE regress_dlock_schema;
DROP ROLE regress_dlock_attacker;
