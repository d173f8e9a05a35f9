/* sql_edition/pg_dlock_sql--1.2.sql -- pg_dlock 1.2, SQL edition: leases, fencing, lock kinds, operations */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pg_dlock_sql" to load this file (or sql_edition/dist/pg_dlock_sql-install.sql with psql -f). \quit

-- Nothing below depends on the caller's search_path: every object is
-- schema-qualified, and operators, types and functions are found in
-- pg_catalog only (an extension script may run as a superuser).
SET LOCAL search_path = pg_catalog, pg_temp;

/*
 * The SQL edition of pg_dlock: the same schema, function signatures, views,
 * SQLSTATEs and privileges as the C extension (sql/pg_dlock--*.sql) for what
 * it offers, in PL/pgSQL only, for servers the library cannot be built or
 * loaded on (managed services, other major versions). docs/sql-edition.md
 * lists what it does not offer and what it does instead.
 *
 * Privilege model (as the C extension's, README "Privileges"):
 *   - the tables belong to the installing role (the extension owner); nobody
 *     else may read or write them;
 *   - every function that touches them is SECURITY DEFINER with
 *     search_path = pg_catalog, pg_temp and schema-qualified names;
 *   - the lease functions are executable by PUBLIC; holds, assert_holds,
 *     fence and the administrative functions need a grant.
 *
 * Settings: the C extension's dlock.* settings are superuser-only GUCs. An
 * SQL script cannot define such a GUC (a placeholder could be SET by any
 * session), so this edition keeps them in dlock.settings, which only the
 * extension owner may change.
 */

------------------------------------------------------------------------------
-- Refuse to share the schema: pg_dlock (the C extension) and this edition
-- cannot be installed in one database, and the SECURITY DEFINER functions
-- must not live in a schema another role controls. CREATE EXTENSION creates
-- schema dlock from the control file before this script runs, so the check
-- is that the schema is empty and owned by the installing role (or by a
-- superuser), not that it is absent.
------------------------------------------------------------------------------
DO $check_install$
DECLARE
	schema_oid pg_catalog.oid;
	schema_owner pg_catalog.name;
	owner_is_superuser boolean;
	objects bigint;
	installer pg_catalog.name;
	others_create boolean;
BEGIN
	-- Every operator, cast and name below is pg_catalog's, written so: this
	-- block runs as a superuser when the extension is trusted, in a schema
	-- the installing role may already own (PostgreSQL's "Security
	-- Considerations for Extensions").
	IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension
				WHERE extname OPERATOR(pg_catalog.=) 'pg_dlock'::pg_catalog.name) THEN
		RAISE EXCEPTION USING
			ERRCODE = 'duplicate_object',
			MESSAGE = 'extension "pg_dlock" is already installed in this database',
			DETAIL = 'pg_dlock_sql is the SQL edition of pg_dlock; both use schema dlock and cannot be installed in one database.',
			HINT = 'Use the installed pg_dlock, or drop it first (DROP EXTENSION pg_dlock) after moving its lock state.';
	END IF;
	SELECT n.oid, r.rolname, r.rolsuper INTO schema_oid, schema_owner, owner_is_superuser
	  FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
	 WHERE n.nspname OPERATOR(pg_catalog.=) 'dlock'::pg_catalog.name;
	IF schema_oid IS NULL THEN
		RETURN;
	END IF;
	-- Any object of any kind in the schema refuses it: relations, functions
	-- and aggregates, types, operators, operator classes and families,
	-- collations, conversions, text search objects, extended statistics,
	-- constraints, another extension, default privileges for it.
	SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class WHERE relnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc WHERE pronamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_type WHERE typnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_operator WHERE oprnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_opclass WHERE opcnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_opfamily WHERE opfnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_collation WHERE collnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_conversion WHERE connamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_ts_config WHERE cfgnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_ts_dict WHERE dictnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_ts_parser WHERE prsnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_ts_template WHERE tmplnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_statistic_ext WHERE stxnamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_constraint WHERE connamespace OPERATOR(pg_catalog.=) schema_oid)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_extension WHERE extnamespace OPERATOR(pg_catalog.=) schema_oid
										AND extname OPERATOR(pg_catalog.<>) 'pg_dlock_sql'::pg_catalog.name)
		 OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM pg_catalog.pg_default_acl WHERE defaclnamespace OPERATOR(pg_catalog.=) schema_oid)
	  INTO objects;
	IF objects OPERATOR(pg_catalog.>) 0::bigint THEN
		RAISE EXCEPTION USING
			ERRCODE = 'duplicate_schema',
			MESSAGE = 'schema dlock already contains objects',
			DETAIL = 'pg_dlock_sql installs into schema dlock and must own everything in it; another pg_dlock installation or other objects are there.',
			HINT = 'Drop what is in schema dlock (or the other installation) first, after checking what it contains.';
	END IF;
	-- The installing role: the owner of the extension being created into
	-- this schema (a trusted extension's script runs as a superuser), else
	-- the role running this script (psql -f).
	SELECT r.rolname INTO installer FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) e.extowner
	 WHERE e.extnamespace OPERATOR(pg_catalog.=) schema_oid;
	installer := coalesce(installer, CURRENT_USER);
	IF schema_owner OPERATOR(pg_catalog.<>) installer AND NOT owner_is_superuser THEN
		RAISE EXCEPTION USING
			ERRCODE = 'insufficient_privilege',
			MESSAGE = pg_catalog.format('schema dlock is owned by role %I, not by the installing role %I',
										schema_owner, installer),
			DETAIL = 'pg_dlock''s functions run with the extension owner''s rights and must not live in a schema another role controls.',
			HINT = 'Drop schema dlock or make the installing role its owner after checking what it contains.';
	END IF;
	-- Nobody but its owner may create objects in it (they could appear
	-- beside the extension's while this script runs).
	SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
					WHERE n.oid OPERATOR(pg_catalog.=) schema_oid
					  AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text
					  AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner)
	  INTO others_create;
	IF others_create THEN
		RAISE EXCEPTION USING
			ERRCODE = 'insufficient_privilege',
			MESSAGE = 'other roles may create objects in schema dlock',
			DETAIL = 'pg_dlock''s functions run with the extension owner''s rights and must not live in a schema another role controls.',
			HINT = 'Revoke CREATE on schema dlock from every role but its owner, or drop the schema.';
	END IF;
END
$check_install$;

-- Everyone may use the schema; what they may do in it is granted per object.
GRANT USAGE ON SCHEMA dlock TO PUBLIC;

CREATE TYPE dlock.lease AS (
	lock_name text,
	owner_token uuid,
	fencing_token bigint,
	lease_until timestamptz
);
COMMENT ON TYPE dlock.lease IS 'a lease granted by dlock.try_acquire or dlock.acquire';

------------------------------------------------------------------------------
-- Tables: the C extension's columns, so that pg_dump output and queries of
-- the tables' owner read the same.
------------------------------------------------------------------------------

CREATE TABLE dlock.distributed_lock (
	lock_name text PRIMARY KEY
		CONSTRAINT lock_name_length CHECK (pg_catalog.char_length(lock_name) BETWEEN 1 AND 200),
	owner_token uuid,
	fencing_seq bigint NOT NULL,
	lease_until timestamptz,
	updated_at timestamptz NOT NULL,
	acquired_at timestamptz,
	holder text,
	renewals bigint NOT NULL DEFAULT 0,
	acquisitions bigint NOT NULL DEFAULT 0,
	takeovers bigint NOT NULL DEFAULT 0,
	taken_over boolean NOT NULL DEFAULT false,
	grant_timeline integer NOT NULL,
	grant_system bigint NOT NULL DEFAULT 0,
	exclusive_only boolean NOT NULL DEFAULT false,
	session_pid integer,
	session_id bigint,
	hold_limit timestamptz,
	min_hold_until timestamptz,
	lock_delay interval,
	not_before timestamptz
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.distributed_lock IS 'lock state: one row per lock name; owner_token is NULL when the lock is free';
COMMENT ON COLUMN dlock.distributed_lock.fencing_seq IS 'fencing token of the current or last holder: (generation << 40) | per-name counter';
COMMENT ON COLUMN dlock.distributed_lock.grant_timeline IS 'server timeline ID at the last grant; a higher one moves the token to a new generation';
COMMENT ON COLUMN dlock.distributed_lock.grant_system IS 'identifier of the history (cluster, or installation when the system identifier cannot be read) of the last grant; another one moves the token up by the whole timeline';
COMMENT ON COLUMN dlock.distributed_lock.exclusive_only IS 'kept for the C extension''s layout; the SQL edition always checks for shared leases and permits';

CREATE TABLE dlock.token_floor (
	reaped_max bigint NOT NULL,
	reaped_at timestamptz NOT NULL
);
COMMENT ON TABLE dlock.token_floor IS 'highest fencing token among reaped lock rows';

CREATE TABLE dlock.resource_fence (
	resource text PRIMARY KEY
		CONSTRAINT resource_length CHECK (pg_catalog.char_length(resource) BETWEEN 1 AND 200),
	fencing_token bigint NOT NULL,
	updated_at timestamptz NOT NULL
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.resource_fence IS 'highest fencing token accepted per resource by dlock.fence';

CREATE TABLE dlock.audit_log (
	id bigserial PRIMARY KEY,
	logged_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	event text NOT NULL,
	lock_name text NOT NULL,
	fencing_token bigint,
	holder text,
	role_name name NOT NULL,
	reason text
);
CREATE INDEX audit_log_logged_at ON dlock.audit_log (logged_at);
COMMENT ON TABLE dlock.audit_log IS 'force releases, and with audit = all every lease event';

CREATE TABLE dlock.lock_holder (
	lock_name text NOT NULL,
	slot integer NOT NULL,
	kind "char" NOT NULL,
	permits integer,
	owner_token uuid,
	fencing_seq bigint NOT NULL,
	block_end bigint NOT NULL,
	lease_until timestamptz,
	holder text,
	acquired_at timestamptz,
	updated_at timestamptz NOT NULL,
	renewals bigint NOT NULL DEFAULT 0,
	grant_timeline integer NOT NULL,
	grant_system bigint NOT NULL,
	PRIMARY KEY (lock_name, slot)
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.lock_holder IS 'shared leases and semaphore permits: one row per slot of a lock name; owner_token is NULL when the slot is free';

CREATE TABLE dlock.holder_counter (
	lock_name text PRIMARY KEY,
	fencing_seq bigint NOT NULL,
	grant_timeline integer NOT NULL,
	grant_system bigint NOT NULL
) WITH (fillfactor = 50);
COMMENT ON TABLE dlock.holder_counter IS 'highest fencing token issued to the holder slots of each lock name';

/*
 * The history this installation belongs to: a random number drawn by the
 * install script. pg_dump does not carry it (its data is not marked for
 * dump), so a database restored elsewhere draws a new one, and its lock rows
 * read as coming from another history; a physical standby has the same row.
 * Used as grant_system when pg_control_system() cannot be called.
 */
CREATE TABLE dlock.installation (
	history bigint NOT NULL,
	installed_at timestamptz NOT NULL
);
COMMENT ON TABLE dlock.installation IS 'random identifier of this installation''s history (not dumped: a restore draws a new one)';
INSERT INTO dlock.installation
	SELECT ('x' || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 1, 15))::bit(60)::bigint,
		   pg_catalog.clock_timestamp();

-- The settings that are superuser-only GUCs in the C extension.
CREATE TABLE dlock.settings (
	name text PRIMARY KEY,
	value text,
	description text NOT NULL
);
COMMENT ON TABLE dlock.settings IS 'the SQL edition''s settings (the C extension''s dlock.* settings): readable by all, changed only by the extension owner';
INSERT INTO dlock.settings VALUES
	('max_ttl', '1 day', 'Longest ttl that acquire and renew accept.'),
	('audit', 'force', 'What dlock.audit_log records: none, force or all.'),
	('events', 'off', 'Send a notification on dlock_events for every grant, takeover, release and force release.'),
	('max_hold', NULL, 'Default max_hold of new leases and the largest a call may ask for (NULL: off).'),
	('lock_delay', NULL, 'Default lock_delay of new leases (NULL: off).'),
	('max_lock_delay', '1 minute', 'Largest lock_delay a call may ask for.');

SELECT pg_catalog.pg_extension_config_dump('dlock.distributed_lock', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.token_floor', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.resource_fence', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.audit_log', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.audit_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.lock_holder', '');
SELECT pg_catalog.pg_extension_config_dump('dlock.holder_counter', '');

-- Owner tokens are capabilities and the rows are the lock state: only the
-- functions below change them.
REVOKE ALL ON dlock.distributed_lock, dlock.token_floor, dlock.resource_fence,
	dlock.audit_log, dlock.lock_holder, dlock.holder_counter, dlock.installation
	FROM PUBLIC;
REVOKE ALL ON dlock.settings FROM PUBLIC;
GRANT SELECT ON dlock.settings TO PUBLIC;

------------------------------------------------------------------------------
-- Internal helpers (names start with an underscore; not for applications)
------------------------------------------------------------------------------

-- A required argument: 22004 when NULL.
CREATE FUNCTION dlock._not_null(arg_name text, is_null boolean)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF is_null THEN
		RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
			MESSAGE = pg_catalog.format('%s must not be null', arg_name);
	END IF;
END
$$;

-- A lock, semaphore or resource name: not NULL, 1 to 200 characters.
CREATE FUNCTION dlock._check_name(arg_name text, value text)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._not_null(arg_name, value IS NULL);
	IF value = '' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = pg_catalog.format('%s must not be empty', arg_name);
	END IF;
	IF pg_catalog.char_length(value) > 200 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = pg_catalog.format('%s is too long', arg_name),
			DETAIL = pg_catalog.format('A name has at most 200 characters; this one has %s.', pg_catalog.char_length(value));
	END IF;
END
$$;

-- The setting of dlock.settings (NULL when unset).
CREATE FUNCTION dlock._setting(setting_name text)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT s.value FROM dlock.settings s WHERE s.name = setting_name $$;

/*
 * An interval as one length of time, as PostgreSQL compares intervals: a
 * month is 30 days and a day 24 hours. The result has only a time part, so
 * adding it to a timestamp adds exactly that many microseconds (no calendar
 * or daylight-saving arithmetic).
 */
CREATE FUNCTION dlock._length(i interval)
RETURNS interval LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	months bigint := pg_catalog.date_part('year', i)::bigint * 12 + pg_catalog.date_part('month', i)::bigint;
	days bigint := pg_catalog.date_part('day', i)::bigint;
	rest interval := i - pg_catalog.make_interval(months => months::integer, days => days::integer);
BEGIN
	RETURN (months * 30 + days) * interval '24 hours' + rest;
END
$$;

-- A ttl: not NULL, positive, at most max_ttl (and max_hold when set).
CREATE FUNCTION dlock._check_ttl(ttl interval)
RETURNS void LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._not_null('ttl', ttl IS NULL);
	IF ttl <= interval '0' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'ttl must be positive';
	END IF;
	IF ttl > dlock._setting('max_ttl')::interval THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'ttl exceeds dlock.max_ttl',
			DETAIL = pg_catalog.format('The longest ttl allowed is %s.', dlock._setting('max_ttl'));
	END IF;
END
$$;

CREATE FUNCTION dlock._check_holder(holder text)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.char_length(holder) > 512 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'holder is too long',
			DETAIL = 'A holder description has at most 512 characters.';
	END IF;
END
$$;

CREATE FUNCTION dlock._check_owner(owner_token uuid, required boolean)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF required THEN
		PERFORM dlock._not_null('owner_token', owner_token IS NULL);
	END IF;
	IF owner_token = '00000000-0000-0000-0000-000000000000'::uuid THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = 'owner_token must not be the nil UUID',
			HINT = 'Pass NULL to have the server generate an owner token.';
	END IF;
END
$$;

-- A duration whose end, counted from now, is past the last timestamp
-- PostgreSQL represents is refused (22023), as in the C extension.
CREATE FUNCTION dlock._check_end(value interval, arg_name text)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM pg_catalog.clock_timestamp() + dlock._length(value);
EXCEPTION WHEN datetime_field_overflow OR interval_field_overflow THEN
	RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
		MESSAGE = pg_catalog.format('%s is too long', arg_name),
		DETAIL = pg_catalog.format('The %s given was "%s"; counted from now it ends past the last timestamp PostgreSQL can represent.',
								   arg_name, value);
END
$$;

CREATE FUNCTION dlock._check_wait(wait interval, arg_name text DEFAULT 'wait')
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._not_null(arg_name, wait IS NULL);
	IF wait < interval '0' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = pg_catalog.format('%s must not be negative', arg_name);
	END IF;
	IF arg_name = 'wait' THEN
		PERFORM dlock._check_end(wait, arg_name);
	END IF;
END
$$;

/*
 * The server's timeline and the identifier of its history. The timeline is
 * the one WAL is written on now (pg_walfile_name of the current position:
 * executable by every role, and right at once after a promotion, unlike the
 * last checkpoint's). The history is the cluster's system identifier when
 * pg_control_system() may be called (PUBLIC may, by default), else this
 * installation's random number (dlock.installation).
 */
CREATE FUNCTION dlock._cluster(OUT timeline integer, OUT system bigint)
RETURNS record LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.pg_is_in_recovery() THEN
		RAISE EXCEPTION USING ERRCODE = 'read_only_sql_transaction',
			MESSAGE = 'cannot grant a lease during recovery',
			HINT = 'Acquire leases on the primary server.';
	END IF;
	timeline := ('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::integer;
	IF pg_catalog.has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') THEN
		SELECT c.system_identifier INTO system FROM pg_catalog.pg_control_system() c;
	ELSE
		SELECT i.history INTO system FROM dlock.installation i;
	END IF;
END
$$;

/*
 * The token after prev (the name's highest token so far), last granted on
 * timeline prev_timeline of history prev_system, for a grant on timeline
 * timeline of history system. README "Fencing tokens": on a later timeline
 * of the same history the generation moves up by the number of timeline
 * switches; a row from another history (or from a timeline later than the
 * server's, which only a restore or pg_upgrade can produce) moves up by the
 * whole timeline ID. floor is the reap floor, for a new name.
 */
CREATE FUNCTION dlock._next_token(prev bigint, prev_timeline integer, prev_system bigint,
								  timeline integer, system bigint, floor bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	generation bigint;
	counter bigint;
	token bigint;
BEGIN
	IF prev IS NULL THEN
		token := (timeline::bigint << 40) | 1;
	ELSE
		generation := prev >> 40;
		counter := prev & ((1::bigint << 40) - 1);
		IF prev_system IS DISTINCT FROM system OR timeline < prev_timeline THEN
			token := ((generation + timeline) << 40) | 1;
		ELSIF timeline > prev_timeline THEN
			token := ((generation + timeline - prev_timeline) << 40) | 1;
		ELSE
			token := (generation << 40) | (counter + 1);
		END IF;
	END IF;
	IF floor IS NOT NULL AND token <= floor THEN
		token := floor + 1;
	END IF;
	RETURN token;
END
$$;

/*
 * The lease functions' decision on a lease row at now (lease_policy.c
 * dlock_policy_decide): live, and from when a new owner may have the name
 * (NULL: now). Session-bound leases do not exist in this edition.
 */
CREATE FUNCTION dlock._decide(has_owner boolean, lease_until timestamptz, lock_delay interval,
							  not_before timestamptz, now timestamptz,
							  OUT live boolean, OUT expired boolean, OUT available_at timestamptz)
RETURNS record LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	live := false;
	expired := false;
	IF coalesce(has_owner, false) THEN
		live := lease_until > now;
		expired := NOT live;
		available_at := lease_until + coalesce(dlock._length(lock_delay), interval '0');
	ELSE
		available_at := not_before;
	END IF;
	IF available_at <= now AND NOT live THEN
		available_at := NULL;
	END IF;
END
$$;

-- Send a lock event after commit (NOTIFY is transactional) when events are on.
CREATE FUNCTION dlock._event(event text, lock_name text, token bigint, holder text, lease_until timestamptz)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	clipped text := holder;
BEGIN
	-- On when dlock.settings says so, which only the owner can change; a
	-- dlock.events setting (ALTER DATABASE ... SET, as for the C extension)
	-- can turn them on too, never off: any session may set a placeholder.
	IF coalesce(dlock._setting('events'), 'off') NOT IN ('on', 'true', '1', 'yes')
	   AND coalesce(pg_catalog.current_setting('dlock.events', true), 'off') NOT IN ('on', 'true', '1', 'yes') THEN
		RETURN;
	END IF;
	WHILE pg_catalog.octet_length(clipped) > 1024 LOOP
		clipped := pg_catalog.left(clipped, -1);
	END LOOP;
	PERFORM pg_catalog.pg_notify('dlock_events',
		'{"event":"' || event || '"'
		|| ',"lock_name":' || pg_catalog.to_json(lock_name)::text
		|| ',"fencing_token":' || token::text
		|| ',"holder":' || coalesce(pg_catalog.to_json(clipped)::text, 'null')
		|| ',"lease_until":' || pg_catalog.to_json(lease_until)::text || '}');
END
$$;

-- The role that called (SET ROLE included), not the functions' owner.
CREATE FUNCTION dlock._caller()
RETURNS name LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN SESSION_USER
				ELSE pg_catalog.current_setting('role')::name END
$$;

-- An audit record: force releases always (unless audit = none), the other
-- events with audit = all.
CREATE FUNCTION dlock._audit(event text, lock_name text, token bigint, holder text, reason text)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	level text := coalesce(dlock._setting('audit'), 'force');
BEGIN
	IF level = 'none' OR (level = 'force' AND event <> 'force_release') THEN
		RETURN;
	END IF;
	INSERT INTO dlock.audit_log (event, lock_name, fencing_token, holder, role_name, reason)
	VALUES (event, lock_name, token, holder, dlock._caller(), reason);
END
$$;

-- Acquire and renew are durable before they return: at least
-- synchronous_commit = on for the rest of this transaction.
CREATE FUNCTION dlock._durable()
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.current_setting('synchronous_commit') IN ('off', 'local', 'remote_write', 'false', 'no', '0') THEN
		PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
	END IF;
END
$$;

-- The key of a name's kind lock (transaction-level advisory lock, in a class
-- of its own): shared by holder grants, exclusive for exclusive grants.
CREATE FUNCTION dlock._kind_key(lock_name text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (pg_catalog.hashtext('pg_dlock kind lock')::bigint << 32) | (pg_catalog.hashtext(lock_name)::bigint & 4294967295) $$;

-- Validate the policy options; returns the effective max_hold and lock_delay.
CREATE FUNCTION dlock._check_policy(ttl interval, session_bound boolean, max_hold interval,
									min_hold interval, lock_delay interval,
									OUT eff_max_hold interval, OUT eff_lock_delay interval)
RETURNS record LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	cap_hold interval := dlock._setting('max_hold')::interval;
	cap_delay interval := dlock._setting('max_lock_delay')::interval;
BEGIN
	PERFORM dlock._not_null('session_bound', session_bound IS NULL);
	IF session_bound THEN
		RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
			MESSAGE = 'session-bound leases are not available in the SQL edition of pg_dlock',
			DETAIL = 'A lease that ends with its session needs the pg_dlock library in shared_preload_libraries.',
			HINT = 'Use a short ttl kept alive by renewals instead.';
	END IF;
	IF max_hold IS NOT NULL AND max_hold <= interval '0' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'max_hold must be positive';
	END IF;
	IF max_hold IS NOT NULL THEN
		PERFORM dlock._check_end(max_hold, 'max_hold');
	END IF;
	IF min_hold IS NOT NULL AND min_hold <= interval '0' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'min_hold must be positive';
	END IF;
	IF lock_delay IS NOT NULL AND lock_delay <= interval '0' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'lock_delay must be positive';
	END IF;
	IF cap_hold IS NOT NULL AND cap_hold > interval '0' THEN
		IF max_hold > cap_hold THEN
			RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'max_hold exceeds dlock.max_hold';
		END IF;
		IF ttl > cap_hold THEN
			RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'ttl exceeds dlock.max_hold';
		END IF;
	END IF;
	eff_max_hold := coalesce(max_hold, CASE WHEN cap_hold > interval '0' THEN cap_hold END);
	IF eff_max_hold < ttl THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'max_hold must not be less than the ttl';
	END IF;
	IF min_hold > ttl THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'min_hold must not exceed the ttl';
	END IF;
	IF lock_delay > coalesce(cap_delay, interval '0') THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'lock_delay exceeds dlock.max_lock_delay';
	END IF;
	eff_lock_delay := coalesce(lock_delay, CASE WHEN dlock._setting('lock_delay')::interval > interval '0'
												THEN dlock._setting('lock_delay')::interval END);
END
$$;

/*
 * One attempt at an exclusive lease; arguments already checked. Returns the
 * lease, or NULL when refused. Decides on the newest committed row with one
 * clock reading taken after the row lock; a refusal on the first, unlocked
 * read takes no row lock and no transaction ID.
 */
CREATE FUNCTION dlock._try_exclusive(p_lock_name text, p_ttl interval, p_owner uuid, p_holder text,
									 p_max_hold interval, p_min_hold interval, p_lock_delay interval)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	d record;
	c record;
	hc dlock.holder_counter;
	now timestamptz;
	token bigint;
	result dlock.lease;
	is_takeover boolean;
BEGIN
	LOOP
		-- the unlocked look: refuse without writing anything
		SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
		now := pg_catalog.clock_timestamp();
		IF FOUND THEN
			d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
			IF d.live AND r.owner_token IS DISTINCT FROM p_owner THEN
				RETURN NULL;
			END IF;
			IF d.live AND r.hold_limit IS NOT NULL AND now >= r.hold_limit THEN
				RETURN NULL;		-- the same owner's retry after max_hold
			END IF;
			IF NOT d.live AND d.available_at IS NOT NULL THEN
				RETURN NULL;		-- min_hold or lock_delay keeps the name
			END IF;
		END IF;
		IF EXISTS (SELECT 1 FROM dlock.lock_holder h
					WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
			RETURN NULL;			-- shared leases or permits are live
		END IF;

		-- Decided under locks from here on: a refusal rolls back this subtransaction,
		-- so that a caller that goes on (acquire's next attempt, a longer
		-- transaction) holds neither the row lock nor the kind lock.
		BEGIN
			PERFORM dlock._durable();
			-- readers and writers of one name decide one at a time
			PERFORM pg_catalog.pg_advisory_xact_lock(dlock._kind_key(p_lock_name));
			c := dlock._cluster();
			SELECT * INTO hc FROM dlock.holder_counter h WHERE h.lock_name = p_lock_name;

			IF r.lock_name IS NULL THEN
				token := dlock._next_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system,
										   c.timeline, c.system,
										   (SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f));
				now := pg_catalog.clock_timestamp();
				IF EXISTS (SELECT 1 FROM dlock.lock_holder h
							WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
					RAISE SQLSTATE 'PD098';
				END IF;
				INSERT INTO dlock.distributed_lock AS l
					(lock_name, owner_token, fencing_seq, lease_until, updated_at, acquired_at, holder,
					 acquisitions, grant_timeline, grant_system, hold_limit, min_hold_until, lock_delay)
				VALUES (p_lock_name, p_owner, token, now + dlock._length(p_ttl), now, now, p_holder,
						1, c.timeline, c.system, now + dlock._length(p_max_hold),
						now + dlock._length(p_min_hold), p_lock_delay)
				ON CONFLICT (lock_name) DO NOTHING;
				IF NOT FOUND THEN
					CONTINUE;			-- created concurrently: decide on its row
				END IF;
				PERFORM dlock._event('acquire', p_lock_name, token, p_holder, now + dlock._length(p_ttl));
				PERFORM dlock._audit('acquire', p_lock_name, token, p_holder, NULL);
				result := ROW(p_lock_name, p_owner, token, now + dlock._length(p_ttl));
				RETURN result;
			END IF;

			-- the row exists: lock it (waiting for a grant, release or pin in
			-- progress), then decide again on its newest version
			SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name FOR UPDATE;
			IF NOT FOUND THEN
				CONTINUE;				-- reaped meanwhile
			END IF;
			now := pg_catalog.clock_timestamp();
			d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
			IF d.live THEN
				IF r.owner_token IS DISTINCT FROM p_owner
				   OR (r.hold_limit IS NOT NULL AND now >= r.hold_limit) THEN
					RAISE SQLSTATE 'PD098';
				END IF;
				-- the same owner again: same token, the lease extended, never
				-- past its hold_limit (max_hold bounds the whole hold)
				UPDATE dlock.distributed_lock l
				   SET lease_until = LEAST(GREATEST(l.lease_until, now + dlock._length(p_ttl)),
										   COALESCE(l.hold_limit, 'infinity')), updated_at = now
				 WHERE l.lock_name = p_lock_name
				RETURNING l.lease_until INTO r.lease_until;
				result := ROW(p_lock_name, p_owner, r.fencing_seq, r.lease_until);
				RETURN result;
			END IF;
			IF d.available_at IS NOT NULL THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			IF EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now) THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			is_takeover := d.expired;
			IF hc.fencing_seq > r.fencing_seq THEN
				token := dlock._next_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system, c.timeline, c.system, NULL);
			ELSE
				token := dlock._next_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.timeline, c.system, NULL);
			END IF;
			UPDATE dlock.distributed_lock l
			   SET owner_token = p_owner, fencing_seq = token, lease_until = now + dlock._length(p_ttl),
				   updated_at = now, acquired_at = now, holder = p_holder, renewals = 0,
				   acquisitions = l.acquisitions + 1,
				   takeovers = l.takeovers + CASE WHEN is_takeover THEN 1 ELSE 0 END,
				   taken_over = is_takeover, grant_timeline = c.timeline, grant_system = c.system,
				   exclusive_only = false, session_pid = NULL, session_id = NULL,
				   hold_limit = now + dlock._length(p_max_hold),
				   min_hold_until = now + dlock._length(p_min_hold),
				   lock_delay = p_lock_delay, not_before = NULL
			 WHERE l.lock_name = p_lock_name;
			PERFORM dlock._event(CASE WHEN is_takeover THEN 'takeover' ELSE 'acquire' END,
								 p_lock_name, token, p_holder, now + dlock._length(p_ttl));
			PERFORM dlock._audit(CASE WHEN is_takeover THEN 'takeover' ELSE 'acquire' END,
								 p_lock_name, token, p_holder, NULL);
			result := ROW(p_lock_name, p_owner, token, now + dlock._length(p_ttl));
			RETURN result;
		EXCEPTION WHEN SQLSTATE 'PD098' THEN
			RETURN NULL;
		END;
	END LOOP;
END
$$;

-- Checks shared by try_acquire and acquire.
CREATE FUNCTION dlock._check_acquire(lock_name text, ttl interval, owner_token uuid, holder text)
RETURNS void LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('lock_name', lock_name);
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
END
$$;

-- Before waiting: not in a snapshot that would never show the release.
CREATE FUNCTION dlock._check_may_wait(lock_name text, wait interval)
RETURNS void LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF wait > interval '0' AND pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_transaction_state',
			MESSAGE = pg_catalog.format('cannot wait for lock "%s" in a REPEATABLE READ or SERIALIZABLE transaction', lock_name),
			HINT = 'Use try_acquire, or wait in a READ COMMITTED transaction.';
	END IF;
END
$$;

/*
 * Sleep before the next attempt of a wait that began at started and may last
 * wait: jittered exponential back-off from 1 ms to 100 ms, never past the
 * end of the wait. Returns false when the wait has run out.
 */
CREATE FUNCTION dlock._backoff(started timestamptz, wait interval, attempt integer)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	left_s double precision := pg_catalog.date_part('epoch', started + dlock._length(wait) - pg_catalog.clock_timestamp());
	pause double precision;
BEGIN
	IF left_s <= 0 THEN
		RETURN false;
	END IF;
	pause := LEAST(0.1, 0.001 * (2 ^ LEAST(attempt, 7))) * (0.5 + pg_catalog.random());
	PERFORM pg_catalog.pg_sleep(LEAST(pause, left_s));
	RETURN true;
END
$$;

CREATE FUNCTION dlock._wait_ran_out(lock_name text, wait interval)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RAISE EXCEPTION USING ERRCODE = 'lock_not_available',
		MESSAGE = pg_catalog.format('could not acquire lock "%s" within %s ms', lock_name,
									(pg_catalog.date_part('epoch', dlock._length(wait)) * 1000)::bigint);
END
$$;

------------------------------------------------------------------------------
-- Leases
------------------------------------------------------------------------------

CREATE FUNCTION dlock.try_acquire(lock_name text, ttl interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
								  session_bound boolean DEFAULT false,
								  max_hold interval DEFAULT NULL,
								  min_hold interval DEFAULT NULL,
								  lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p record;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	p := dlock._check_policy(ttl, session_bound, max_hold, min_hold, lock_delay);
	result := dlock._try_exclusive(lock_name, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder,
								   p.eff_max_hold, min_hold, p.eff_lock_delay);
	RETURN result;
END
$$;
COMMENT ON FUNCTION dlock.try_acquire(text, interval, uuid, text, boolean, interval, interval, interval) IS
'takes the lock if it is free or its lease ended; NULL when another owner holds a live lease. Options: max_hold (renewals refused after it), min_hold (a release before it keeps the lock from others until then), lock_delay (no new owner for that long after the lease is lost); session_bound is refused in the SQL edition';

CREATE FUNCTION dlock.acquire(lock_name text, ttl interval, wait interval,
							  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL,
							  session_bound boolean DEFAULT false,
							  max_hold interval DEFAULT NULL,
							  min_hold interval DEFAULT NULL,
							  lock_delay interval DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p record;
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	p := dlock._check_policy(ttl, session_bound, max_hold, min_hold, lock_delay);
	PERFORM dlock._check_may_wait(lock_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		result := dlock._try_exclusive(lock_name, ttl, owner, holder, p.eff_max_hold, min_hold, p.eff_lock_delay);
		IF result.owner_token IS NOT NULL THEN
			RETURN result;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			PERFORM dlock._wait_ran_out(lock_name, wait);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION dlock.acquire(text, interval, interval, uuid, text, boolean, interval, interval, interval) IS
'like try_acquire, but polls in the server up to "wait" for the lock (jittered back-off, no order among waiters); raises lock_not_available (55P03) when the wait runs out. Same options as try_acquire';

CREATE FUNCTION dlock.renew(lock_name text, owner_token uuid, ttl interval)
RETURNS timestamptz LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	h dlock.lock_holder;
	now timestamptz;
	until timestamptz;
BEGIN
	PERFORM dlock._check_name('lock_name', renew.lock_name);
	PERFORM dlock._check_owner(renew.owner_token, true);
	PERFORM dlock._check_ttl(ttl);
	SELECT * INTO r FROM dlock.distributed_lock l
	 WHERE l.lock_name = renew.lock_name AND l.owner_token = renew.owner_token;
	IF FOUND THEN
		IF r.lease_until <= pg_catalog.clock_timestamp() THEN
			PERFORM dlock._audit('renew_refused', renew.lock_name, r.fencing_seq, r.holder, NULL);
			RETURN NULL;
		END IF;
		PERFORM dlock._durable();
		SELECT * INTO r FROM dlock.distributed_lock l
		 WHERE l.lock_name = renew.lock_name AND l.owner_token = renew.owner_token FOR UPDATE;
		now := pg_catalog.clock_timestamp();
		IF NOT FOUND OR r.lease_until <= now OR (r.hold_limit IS NOT NULL AND now >= r.hold_limit) THEN
			PERFORM dlock._audit('renew_refused', renew.lock_name, r.fencing_seq, r.holder, NULL);
			RETURN NULL;
		END IF;
		-- max_hold bounds the whole hold: never past the lease's hold_limit
		UPDATE dlock.distributed_lock l
		   SET lease_until = LEAST(now + dlock._length(ttl), COALESCE(l.hold_limit, 'infinity')),
			   updated_at = now, renewals = l.renewals + 1
		 WHERE l.lock_name = renew.lock_name
		RETURNING l.lease_until INTO until;
		RETURN until;
	END IF;
	-- a shared lease or permit of this owner
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = renew.lock_name AND s.owner_token = renew.owner_token;
	IF NOT FOUND OR h.lease_until <= pg_catalog.clock_timestamp() THEN
		RETURN NULL;
	END IF;
	PERFORM dlock._durable();
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = renew.lock_name AND s.slot = h.slot AND s.owner_token = renew.owner_token FOR UPDATE;
	now := pg_catalog.clock_timestamp();
	IF NOT FOUND OR h.lease_until <= now THEN
		RETURN NULL;
	END IF;
	UPDATE dlock.lock_holder s
	   SET lease_until = now + dlock._length(ttl), updated_at = now, renewals = s.renewals + 1
	 WHERE s.lock_name = renew.lock_name AND s.slot = h.slot
	RETURNING s.lease_until INTO until;
	RETURN until;
END
$$;
COMMENT ON FUNCTION dlock.renew(text, uuid, interval) IS
'extends a live lease of this owner and returns the new lease_until; NULL when the owner holds no live lease';

CREATE FUNCTION dlock.release(lock_name text, owner_token uuid)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	h dlock.lock_holder;
	now timestamptz;
BEGIN
	PERFORM dlock._check_name('lock_name', release.lock_name);
	PERFORM dlock._check_owner(release.owner_token, true);
	SELECT * INTO r FROM dlock.distributed_lock l
	 WHERE l.lock_name = release.lock_name AND l.owner_token = release.owner_token;
	IF FOUND THEN
		IF r.lease_until <= pg_catalog.clock_timestamp() THEN
			RETURN false;
		END IF;
		SELECT * INTO r FROM dlock.distributed_lock l
		 WHERE l.lock_name = release.lock_name AND l.owner_token = release.owner_token FOR UPDATE;
		now := pg_catalog.clock_timestamp();
		IF NOT FOUND OR r.lease_until <= now THEN
			RETURN false;
		END IF;
		UPDATE dlock.distributed_lock l
		   SET owner_token = NULL, lease_until = now, updated_at = now,
			   not_before = CASE WHEN l.min_hold_until > now THEN l.min_hold_until END
		 WHERE l.lock_name = release.lock_name;
		PERFORM dlock._event('release', release.lock_name, r.fencing_seq, r.holder, now);
		PERFORM dlock._audit('release', release.lock_name, r.fencing_seq, r.holder, NULL);
		RETURN true;
	END IF;
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = release.lock_name AND s.owner_token = release.owner_token;
	IF NOT FOUND OR h.lease_until <= pg_catalog.clock_timestamp() THEN
		RETURN false;
	END IF;
	SELECT * INTO h FROM dlock.lock_holder s
	 WHERE s.lock_name = release.lock_name AND s.slot = h.slot AND s.owner_token = release.owner_token FOR UPDATE;
	now := pg_catalog.clock_timestamp();
	IF NOT FOUND OR h.lease_until <= now THEN
		RETURN false;
	END IF;
	UPDATE dlock.lock_holder s SET owner_token = NULL, lease_until = now, updated_at = now
	 WHERE s.lock_name = release.lock_name AND s.slot = h.slot;
	PERFORM dlock._event('release', release.lock_name, h.fencing_seq, h.holder, now);
	PERFORM dlock._audit('release', release.lock_name, h.fencing_seq, h.holder, NULL);
	RETURN true;
END
$$;
COMMENT ON FUNCTION dlock.release(text, uuid) IS
'ends a live lease of this owner; true when this call ended it';

------------------------------------------------------------------------------
-- Fencing
------------------------------------------------------------------------------

/*
 * Is token the live lease of the lock (exclusive, or a shared lease or
 * permit)? When it is, the row is locked FOR SHARE to the end of the
 * transaction: a takeover, force release or release must wait for it.
 */
CREATE FUNCTION dlock._holds(p_lock_name text, p_token bigint)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM dlock.distributed_lock l
				WHERE l.lock_name = p_lock_name AND l.fencing_seq = p_token
				  AND l.owner_token IS NOT NULL AND l.lease_until > pg_catalog.clock_timestamp()) THEN
		PERFORM 1 FROM dlock.distributed_lock l
		  WHERE l.lock_name = p_lock_name AND l.fencing_seq = p_token AND l.owner_token IS NOT NULL
		  FOR SHARE;
		-- decide again on the version locked, after any wait for it
		RETURN EXISTS (SELECT 1 FROM dlock.distributed_lock l
						WHERE l.lock_name = p_lock_name AND l.fencing_seq = p_token
						  AND l.owner_token IS NOT NULL AND l.lease_until > pg_catalog.clock_timestamp());
	END IF;
	IF EXISTS (SELECT 1 FROM dlock.lock_holder h
				WHERE h.lock_name = p_lock_name AND h.fencing_seq = p_token
				  AND h.owner_token IS NOT NULL AND h.lease_until > pg_catalog.clock_timestamp()) THEN
		PERFORM 1 FROM dlock.lock_holder h
		  WHERE h.lock_name = p_lock_name AND h.fencing_seq = p_token AND h.owner_token IS NOT NULL
		  FOR SHARE;
		RETURN EXISTS (SELECT 1 FROM dlock.lock_holder h
						WHERE h.lock_name = p_lock_name AND h.fencing_seq = p_token
						  AND h.owner_token IS NOT NULL AND h.lease_until > pg_catalog.clock_timestamp());
	END IF;
	RETURN false;
END
$$;

CREATE FUNCTION dlock.holds(lock_name text, fencing_token bigint)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('lock_name', lock_name);
	PERFORM dlock._not_null('fencing_token', fencing_token IS NULL);
	RETURN dlock._holds(lock_name, fencing_token);
END
$$;
COMMENT ON FUNCTION dlock.holds(text, bigint) IS
'true when the token is the live lease of the lock; then pins the lease until the end of the calling transaction';
-- A pin stalls the lease's holder and any takeover: grant it to the roles
-- that write fenced data.
REVOKE ALL ON FUNCTION dlock.holds(text, bigint) FROM PUBLIC;

CREATE FUNCTION dlock.assert_holds(lock_name text, fencing_token bigint)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('lock_name', lock_name);
	PERFORM dlock._not_null('fencing_token', fencing_token IS NULL);
	IF NOT dlock._holds(lock_name, fencing_token) THEN
		RAISE EXCEPTION USING ERRCODE = 'PD002',
			MESSAGE = pg_catalog.format('lock "%s" is not held with fencing token %s', lock_name, fencing_token),
			DETAIL = 'The token is not the live lease of the lock: it expired, was released or taken over, or was never granted.';
	END IF;
END
$$;
COMMENT ON FUNCTION dlock.assert_holds(text, bigint) IS
'like holds, but raises lock_not_held (PD002) when the token is not the live lease';
REVOKE ALL ON FUNCTION dlock.assert_holds(text, bigint) FROM PUBLIC;

CREATE FUNCTION dlock.fence(resource text, fencing_token bigint)
RETURNS void LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	accepted bigint;
	highest bigint;
BEGIN
	PERFORM dlock._check_name('resource', resource);
	PERFORM dlock._not_null('fencing_token', fencing_token IS NULL);
	INSERT INTO dlock.resource_fence AS f (resource, fencing_token, updated_at)
	VALUES (fence.resource, fence.fencing_token, pg_catalog.clock_timestamp())
	ON CONFLICT ON CONSTRAINT resource_fence_pkey DO UPDATE
	   SET fencing_token = EXCLUDED.fencing_token, updated_at = EXCLUDED.updated_at
	 WHERE f.fencing_token <= EXCLUDED.fencing_token
	RETURNING f.fencing_token INTO accepted;
	IF accepted IS NULL THEN
		SELECT f.fencing_token INTO highest FROM dlock.resource_fence f WHERE f.resource = fence.resource;
		RAISE EXCEPTION USING ERRCODE = 'PD001',
			MESSAGE = pg_catalog.format('stale fencing token for resource "%s"', resource),
			DETAIL = pg_catalog.format('Token %s is below %s, the highest token the resource has accepted.',
									   fencing_token, highest);
	END IF;
END
$$;
COMMENT ON FUNCTION dlock.fence(text, bigint) IS
'accepts a token at or above the highest accepted for the resource and records it; raises stale_fencing_token (PD001) for a lower one';
-- Fence state is shared by every role and accepts any token: grant it to
-- the roles that write the fenced resources.
REVOKE ALL ON FUNCTION dlock.fence(text, bigint) FROM PUBLIC;

-- Runs as the role that writes the table: strict mode pins a lease as
-- holds() does, so that role must be one that may pin (EXECUTE on
-- dlock.holds or dlock.assert_holds, revoked from PUBLIC).
CREATE FUNCTION dlock.enforce_fencing()
RETURNS trigger LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	pinned boolean;
	token_column text;
	name_column text;
	token_type regtype;
	name_type regtype;
	rel text := pg_catalog.quote_ident(TG_TABLE_NAME);
	new_token bigint;
	old_token bigint;
	row_name text;
	checked jsonb;
BEGIN
	IF TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' THEN
		RAISE EXCEPTION USING ERRCODE = 'trigger_protocol_violated',
			MESSAGE = pg_catalog.format('trigger "%s" on relation "%s" must be a BEFORE ... FOR EACH ROW trigger', TG_NAME, TG_TABLE_NAME);
	END IF;
	IF TG_NARGS NOT IN (1, 2) THEN
		RAISE EXCEPTION USING ERRCODE = 'trigger_protocol_violated',
			MESSAGE = pg_catalog.format('trigger "%s" on relation "%s" must name the fencing token column, and optionally a lock name column, as its arguments', TG_NAME, TG_TABLE_NAME);
	END IF;
	token_column := TG_ARGV[0];
	IF TG_NARGS = 2 THEN
		name_column := TG_ARGV[1];
	END IF;
	IF TG_OP = 'DELETE' AND name_column IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'trigger_protocol_violated',
			MESSAGE = pg_catalog.format('trigger "%s" on relation "%s" fires on DELETE, which needs a lock name column (strict mode)', TG_NAME, TG_TABLE_NAME);
	END IF;
	SELECT a.atttypid::regtype INTO token_type FROM pg_catalog.pg_attribute a
	 WHERE a.attrelid = TG_RELID AND a.attname = token_column AND a.attnum > 0 AND NOT a.attisdropped;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = 'undefined_column',
			MESSAGE = pg_catalog.format('column "%s" of relation "%s" does not exist', token_column, TG_TABLE_NAME);
	END IF;
	IF token_type <> 'bigint'::regtype THEN
		RAISE EXCEPTION USING ERRCODE = 'datatype_mismatch',
			MESSAGE = pg_catalog.format('fencing token column "%s" of relation "%s" must be of type bigint', token_column, TG_TABLE_NAME);
	END IF;
	IF name_column IS NOT NULL THEN
		SELECT a.atttypid::regtype INTO name_type FROM pg_catalog.pg_attribute a
		 WHERE a.attrelid = TG_RELID AND a.attname = name_column AND a.attnum > 0 AND NOT a.attisdropped;
		IF NOT FOUND THEN
			RAISE EXCEPTION USING ERRCODE = 'undefined_column',
				MESSAGE = pg_catalog.format('column "%s" of relation "%s" does not exist', name_column, TG_TABLE_NAME);
		END IF;
		IF name_type <> 'text'::regtype THEN
			RAISE EXCEPTION USING ERRCODE = 'datatype_mismatch',
				MESSAGE = pg_catalog.format('lock name column "%s" of relation "%s" must be of type text', name_column, TG_TABLE_NAME);
		END IF;
	END IF;

	IF TG_OP <> 'DELETE' THEN
		new_token := (pg_catalog.to_jsonb(NEW) ->> token_column)::bigint;
		IF new_token IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
				MESSAGE = pg_catalog.format('fencing token column "%s" of relation "%s" must not be null', token_column, TG_TABLE_NAME);
		END IF;
		IF TG_OP = 'UPDATE' THEN
			old_token := (pg_catalog.to_jsonb(OLD) ->> token_column)::bigint;
			IF new_token < old_token THEN
				RAISE EXCEPTION USING ERRCODE = 'PD001',
					MESSAGE = pg_catalog.format('stale fencing token for a row of relation "%s"', TG_TABLE_NAME),
					DETAIL = pg_catalog.format('Token %s is below %s, the row''s token.', new_token, old_token);
			END IF;
		END IF;
	END IF;
	IF name_column IS NOT NULL THEN
		checked := pg_catalog.to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
		row_name := checked ->> name_column;
		new_token := (checked ->> token_column)::bigint;
		IF row_name IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
				MESSAGE = pg_catalog.format('lock name column "%s" of relation "%s" must not be null', name_column, TG_TABLE_NAME);
		END IF;
		IF new_token IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
				MESSAGE = pg_catalog.format('fencing token column "%s" of relation "%s" must not be null',
											token_column, TG_TABLE_NAME);
		END IF;
		IF pg_catalog.has_function_privilege('dlock.holds(text, bigint)', 'EXECUTE') THEN
			pinned := dlock.holds(row_name, new_token);
		ELSIF pg_catalog.has_function_privilege('dlock.assert_holds(text, bigint)', 'EXECUTE') THEN
			BEGIN
				PERFORM dlock.assert_holds(row_name, new_token);
				pinned := true;
			EXCEPTION WHEN SQLSTATE 'PD002' THEN
				pinned := false;
			END;
		ELSE
			RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
				MESSAGE = pg_catalog.format('permission denied to pin lock "%s"', row_name),
				HINT = 'Grant EXECUTE on dlock.holds(text, bigint) to the role that writes the fenced table.';
		END IF;
		IF NOT pinned THEN
			RAISE EXCEPTION USING ERRCODE = 'PD002',
				MESSAGE = pg_catalog.format('lock "%s" is not held with fencing token %s for a row of relation "%s"',
											row_name, new_token, TG_TABLE_NAME);
		END IF;
	END IF;
	IF TG_OP = 'DELETE' THEN
		RETURN OLD;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION dlock.enforce_fencing() IS
'row trigger. Arguments (token_column): BEFORE INSERT OR UPDATE, refuses a NULL token and any update that lowers it. (token_column, lock_name_column): also BEFORE DELETE, and the row''s token must be the live lease of the lock the row names (checked and pinned like holds)';

------------------------------------------------------------------------------
-- Lock kinds: shared leases, semaphore permits, multi-lock
------------------------------------------------------------------------------

/*
 * One attempt at a holder lease of kind 's' (shared) or 'p' (a permit of a
 * semaphore of "permits"). Holder grants of a name take its kind lock in
 * share mode, exclusive grants in exclusive mode, so a reader and a writer
 * never both win; the name's holder_counter row serializes the holders'
 * tokens and the permit count.
 */
CREATE FUNCTION dlock._try_holder(p_kind "char", p_lock_name text, p_permits integer, p_ttl interval,
								  p_owner uuid, p_holder text)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	hc dlock.holder_counter;
	h dlock.lock_holder;
	d record;
	c record;
	now timestamptz;
	token bigint;
	live_other bigint;
	live_same bigint;
	live_permits integer;
	free_slot integer;
	result dlock.lease;
BEGIN
	FOR attempt IN 1..2 LOOP
		now := pg_catalog.clock_timestamp();
		SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
		IF FOUND THEN
			d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
			IF d.live OR d.available_at IS NOT NULL THEN
				RETURN NULL;
			END IF;
		END IF;
		SELECT pg_catalog.count(*) FILTER (WHERE h2.kind <> p_kind),
			   pg_catalog.count(*) FILTER (WHERE h2.kind = p_kind),
			   pg_catalog.max(h2.permits) FILTER (WHERE h2.kind = p_kind)
		  INTO live_other, live_same, live_permits
		  FROM dlock.lock_holder h2
		 WHERE h2.lock_name = p_lock_name AND h2.owner_token IS NOT NULL AND h2.lease_until > now;
		IF live_other > 0 THEN
			RAISE EXCEPTION USING ERRCODE = 'PD020',
				MESSAGE = pg_catalog.format('lock "%s" is held as %s', p_lock_name,
											CASE WHEN p_kind = 's' THEN 'a semaphore' ELSE 'a shared lock' END),
				DETAIL = 'A name is used as one kind of lock at a time.';
		END IF;
		IF p_kind = 'p' AND live_permits IS NOT NULL AND live_permits <> p_permits THEN
			RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
				MESSAGE = pg_catalog.format('semaphore "%s" has %s permits, not %s', p_lock_name, live_permits, p_permits),
				HINT = 'Use dlock.resize_semaphore to change the number of permits.';
		END IF;
		-- the same owner again: same token, the lease extended
		SELECT * INTO h FROM dlock.lock_holder h2
		 WHERE h2.lock_name = p_lock_name AND h2.owner_token = p_owner AND h2.lease_until > now;
		IF FOUND THEN
			PERFORM dlock._durable();
			UPDATE dlock.lock_holder h2
			   SET lease_until = GREATEST(h2.lease_until, now + dlock._length(p_ttl)), updated_at = now
			 WHERE h2.lock_name = p_lock_name AND h2.slot = h.slot AND h2.owner_token = p_owner
			RETURNING h2.lease_until INTO h.lease_until;
			IF FOUND THEN
				result := ROW(p_lock_name, p_owner, h.fencing_seq, h.lease_until);
				RETURN result;
			END IF;
			CONTINUE;
		END IF;
		IF p_kind = 'p' AND live_same >= p_permits THEN
			RETURN NULL;
		END IF;

		-- Decided under locks from here on: a refusal rolls back this subtransaction,
		-- so that a caller that goes on (acquire's next attempt, a longer
		-- transaction) holds neither the row lock nor the kind lock.
		BEGIN
			PERFORM dlock._durable();
			PERFORM pg_catalog.pg_advisory_xact_lock_shared(dlock._kind_key(p_lock_name));
			c := dlock._cluster();
			INSERT INTO dlock.holder_counter AS k (lock_name, fencing_seq, grant_timeline, grant_system)
			VALUES (p_lock_name, 0, c.timeline, c.system)
			ON CONFLICT (lock_name) DO NOTHING;
			SELECT * INTO hc FROM dlock.holder_counter k WHERE k.lock_name = p_lock_name FOR UPDATE;
			IF NOT FOUND THEN
				CONTINUE;			-- reaped meanwhile
			END IF;
			-- decide again under the kind lock and the counter's row lock
			now := pg_catalog.clock_timestamp();
			SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = p_lock_name;
			IF FOUND THEN
				d := dlock._decide(r.owner_token IS NOT NULL, r.lease_until, r.lock_delay, r.not_before, now);
				IF d.live OR d.available_at IS NOT NULL THEN
					RAISE SQLSTATE 'PD098';
				END IF;
			END IF;
			SELECT pg_catalog.count(*) FILTER (WHERE h2.kind <> p_kind),
				   pg_catalog.count(*) FILTER (WHERE h2.kind = p_kind)
			  INTO live_other, live_same
			  FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name AND h2.owner_token IS NOT NULL AND h2.lease_until > now;
			IF live_other > 0 THEN
				CONTINUE;				-- changed kind meanwhile: report it as above
			END IF;
			IF p_kind = 'p' AND live_same >= p_permits THEN
				RAISE SQLSTATE 'PD098';
			END IF;
			IF hc.fencing_seq = 0 THEN
				token := dlock._next_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.timeline, c.system,
										   (SELECT pg_catalog.max(f.reaped_max) FROM dlock.token_floor f));
			ELSIF r.fencing_seq > hc.fencing_seq THEN
				token := dlock._next_token(r.fencing_seq, r.grant_timeline, r.grant_system, c.timeline, c.system, NULL);
			ELSE
				token := dlock._next_token(hc.fencing_seq, hc.grant_timeline, hc.grant_system, c.timeline, c.system, NULL);
			END IF;
			UPDATE dlock.holder_counter k SET fencing_seq = token, grant_timeline = c.timeline, grant_system = c.system
			 WHERE k.lock_name = p_lock_name;
			-- a free or expired slot, else a new one
			SELECT h2.slot INTO free_slot FROM dlock.lock_holder h2
			 WHERE h2.lock_name = p_lock_name AND (h2.owner_token IS NULL OR h2.lease_until <= now)
			 ORDER BY h2.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
			IF FOUND THEN
				UPDATE dlock.lock_holder h2
				   SET kind = p_kind, permits = CASE WHEN p_kind = 'p' THEN p_permits END, owner_token = p_owner,
					   fencing_seq = token, block_end = token, lease_until = now + dlock._length(p_ttl),
					   holder = p_holder, acquired_at = now, updated_at = now, renewals = 0,
					   grant_timeline = c.timeline, grant_system = c.system
				 WHERE h2.lock_name = p_lock_name AND h2.slot = free_slot;
			ELSE
				INSERT INTO dlock.lock_holder (lock_name, slot, kind, permits, owner_token, fencing_seq, block_end,
											   lease_until, holder, acquired_at, updated_at, grant_timeline, grant_system)
				SELECT p_lock_name, coalesce(pg_catalog.max(h2.slot), 0) + 1, p_kind,
					   CASE WHEN p_kind = 'p' THEN p_permits END, p_owner, token, token,
					   now + dlock._length(p_ttl), p_holder, now, now, c.timeline, c.system
				  FROM dlock.lock_holder h2 WHERE h2.lock_name = p_lock_name;
			END IF;
			PERFORM dlock._event('acquire', p_lock_name, token, p_holder, now + dlock._length(p_ttl));
			PERFORM dlock._audit('acquire', p_lock_name, token, p_holder, NULL);
			result := ROW(p_lock_name, p_owner, token, now + dlock._length(p_ttl));
			RETURN result;
		EXCEPTION WHEN SQLSTATE 'PD098' THEN
			RETURN NULL;
		END;
	END LOOP;
	RETURN NULL;
END
$$;

CREATE FUNCTION dlock._check_permits(permits integer)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._not_null('permits', permits IS NULL);
	IF permits < 1 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'permits must be at least 1';
	END IF;
END
$$;

CREATE FUNCTION dlock.try_acquire_shared(lock_name text, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	RETURN dlock._try_holder('s', lock_name, NULL, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_shared(text, interval, uuid, text) IS
'takes a shared lease unless an exclusive lease is live; NULL otherwise';

CREATE FUNCTION dlock.acquire_shared(lock_name text, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_acquire(lock_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	PERFORM dlock._check_may_wait(lock_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		result := dlock._try_holder('s', lock_name, NULL, ttl, owner, holder);
		IF result.owner_token IS NOT NULL THEN
			RETURN result;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			PERFORM dlock._wait_ran_out(lock_name, wait);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION dlock.acquire_shared(text, interval, interval, uuid, text) IS
'like try_acquire_shared, but polls in the server up to "wait"; raises lock_not_available (55P03) when the wait runs out';

CREATE FUNCTION dlock.try_acquire_permit(semaphore_name text, permits integer, ttl interval,
										 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('semaphore_name', semaphore_name);
	PERFORM dlock._check_permits(permits);
	PERFORM dlock._check_acquire(semaphore_name, ttl, owner_token, holder);
	RETURN dlock._try_holder('p', semaphore_name, permits, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_permit(text, integer, interval, uuid, text) IS
'takes one of "permits" permits of the semaphore as its own lease; NULL when all are held';

CREATE FUNCTION dlock.acquire_permit(semaphore_name text, permits integer, ttl interval, wait interval,
									 owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	result dlock.lease;
BEGIN
	PERFORM dlock._check_name('semaphore_name', semaphore_name);
	PERFORM dlock._check_permits(permits);
	PERFORM dlock._check_acquire(semaphore_name, ttl, owner_token, holder);
	PERFORM dlock._check_wait(wait);
	PERFORM dlock._check_may_wait(semaphore_name, wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		result := dlock._try_holder('p', semaphore_name, permits, ttl, owner, holder);
		IF result.owner_token IS NOT NULL THEN
			RETURN result;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			PERFORM dlock._wait_ran_out(semaphore_name, wait);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION dlock.acquire_permit(text, integer, interval, interval, uuid, text) IS
'like try_acquire_permit, but polls in the server up to "wait"; raises lock_not_available (55P03) when the wait runs out';

CREATE FUNCTION dlock.resize_semaphore(semaphore_name text, permits integer)
RETURNS integer LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	live integer;
BEGIN
	PERFORM dlock._check_name('semaphore_name', semaphore_name);
	PERFORM dlock._check_permits(permits);
	PERFORM pg_catalog.pg_advisory_xact_lock(dlock._kind_key(semaphore_name));
	PERFORM 1 FROM dlock.holder_counter k WHERE k.lock_name = semaphore_name FOR UPDATE;
	UPDATE dlock.lock_holder h SET permits = resize_semaphore.permits
	 WHERE h.lock_name = semaphore_name AND h.kind = 'p';
	SELECT pg_catalog.count(*) INTO live FROM dlock.lock_holder h
	 WHERE h.lock_name = semaphore_name AND h.kind = 'p' AND h.owner_token IS NOT NULL
	   AND h.lease_until > pg_catalog.clock_timestamp();
	RETURN live;
END
$$;
COMMENT ON FUNCTION dlock.resize_semaphore(text, integer) IS
'changes the number of permits of a semaphore; returns how many permits are live';
REVOKE ALL ON FUNCTION dlock.resize_semaphore(text, integer) FROM PUBLIC;

-- The names of a multi-lock: checked, sorted (byte order).
CREATE FUNCTION dlock._check_names(lock_names text[])
RETURNS text[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n text;
	dup text;
BEGIN
	PERFORM dlock._not_null('lock_names', lock_names IS NULL);
	IF pg_catalog.array_ndims(lock_names) IS NULL OR pg_catalog.cardinality(lock_names) = 0 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'lock_names must not be empty';
	END IF;
	IF pg_catalog.array_ndims(lock_names) > 1 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'lock_names must be a one-dimensional array';
	END IF;
	FOREACH n IN ARRAY lock_names LOOP
		IF n IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'lock_names must not contain null';
		END IF;
		IF n = '' THEN
			RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'lock_names must not contain an empty name';
		END IF;
		PERFORM dlock._check_name('lock_name', n);
	END LOOP;
	SELECT u INTO dup FROM pg_catalog.unnest(lock_names) u GROUP BY u HAVING pg_catalog.count(*) > 1 LIMIT 1;
	IF dup IS NOT NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
			MESSAGE = pg_catalog.format('lock_names contains "%s" more than once', dup);
	END IF;
	RETURN ARRAY(SELECT u FROM pg_catalog.unnest(lock_names) u ORDER BY u COLLATE "C");
END
$$;

-- One attempt at all the names, in sorted order, in a subtransaction
-- rolled back when one cannot be had.
CREATE FUNCTION dlock._try_all(p_names text[], p_ttl interval, p_owner uuid, p_holder text)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n text;
	got dlock.lease;
	leases dlock.lease[] := '{}';
BEGIN
	-- a first read-only pass refuses a set with a name held by another owner
	IF EXISTS (SELECT 1 FROM dlock.distributed_lock l
				WHERE l.lock_name = ANY (p_names) AND l.owner_token IS DISTINCT FROM p_owner
				  AND l.owner_token IS NOT NULL AND l.lease_until > pg_catalog.clock_timestamp()) THEN
		RETURN;
	END IF;
	BEGIN
		FOREACH n IN ARRAY p_names LOOP
			got := dlock._try_exclusive(n, p_ttl, p_owner, p_holder, NULL, NULL, NULL);
			IF got.owner_token IS NULL THEN
				RAISE EXCEPTION USING ERRCODE = 'PD099', MESSAGE = 'multi-lock attempt refused';
			END IF;
			leases := leases || got;
		END LOOP;
	EXCEPTION WHEN SQLSTATE 'PD099' THEN
		RETURN;
	END;
	RETURN QUERY SELECT * FROM pg_catalog.unnest(leases);
END
$$;

CREATE FUNCTION dlock.try_acquire_all(lock_names text[], ttl interval,
									  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	names text[] := dlock._check_names(lock_names);
BEGIN
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
	RETURN QUERY SELECT * FROM dlock._try_all(names, ttl, coalesce(owner_token, pg_catalog.gen_random_uuid()), holder);
END
$$;
COMMENT ON FUNCTION dlock.try_acquire_all(text[], interval, uuid, text) IS
'takes exclusive leases on every name with one owner token, or on none (no rows)';

CREATE FUNCTION dlock.acquire_all(lock_names text[], ttl interval, wait interval,
								  owner_token uuid DEFAULT NULL, holder text DEFAULT NULL)
RETURNS SETOF dlock.lease LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 4
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	names text[] := dlock._check_names(lock_names);
	owner uuid := coalesce(owner_token, pg_catalog.gen_random_uuid());
	started timestamptz;
	attempt integer := 0;
	leases dlock.lease[];
BEGIN
	PERFORM dlock._check_ttl(ttl);
	PERFORM dlock._check_owner(owner_token, false);
	PERFORM dlock._check_holder(holder);
	PERFORM dlock._check_wait(wait);
	PERFORM dlock._check_may_wait(names[1], wait);
	started := pg_catalog.clock_timestamp();
	LOOP
		leases := ARRAY(SELECT a FROM dlock._try_all(names, ttl, owner, holder) a);
		IF pg_catalog.cardinality(leases) > 0 THEN
			RETURN QUERY SELECT * FROM pg_catalog.unnest(leases);
			RETURN;
		END IF;
		attempt := attempt + 1;
		IF NOT dlock._backoff(started, wait, attempt) THEN
			RAISE EXCEPTION USING ERRCODE = 'lock_not_available',
				MESSAGE = pg_catalog.format('could not acquire all of %s locks within %s ms', pg_catalog.cardinality(names),
											(pg_catalog.date_part('epoch', dlock._length(wait)) * 1000)::bigint);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION dlock.acquire_all(text[], interval, interval, uuid, text) IS
'like try_acquire_all, but polls up to "wait" for all; raises lock_not_available (55P03) and takes none when the wait runs out';

CREATE FUNCTION dlock.release_all(lock_names text[], owner_token uuid)
RETURNS integer LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	names text[] := dlock._check_names(lock_names);
	n text;
	ended integer := 0;
BEGIN
	PERFORM dlock._check_owner(owner_token, true);
	FOREACH n IN ARRAY names LOOP
		IF dlock.release(n, owner_token) THEN
			ended := ended + 1;
		END IF;
	END LOOP;
	RETURN ended;
END
$$;
COMMENT ON FUNCTION dlock.release_all(text[], uuid) IS
'releases the leases of this owner on the names; returns how many it ended';

------------------------------------------------------------------------------
-- Operations
------------------------------------------------------------------------------

CREATE FUNCTION dlock.force_release(lock_name text, reason text)
RETURNS boolean LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r dlock.distributed_lock;
	h dlock.lock_holder;
	now timestamptz;
	ended boolean := false;
BEGIN
	PERFORM dlock._check_name('lock_name', force_release.lock_name);
	PERFORM dlock._not_null('reason', reason IS NULL);
	IF pg_catalog.btrim(reason) = '' THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'reason must not be empty';
	END IF;
	SELECT * INTO r FROM dlock.distributed_lock l WHERE l.lock_name = force_release.lock_name FOR UPDATE;
	now := pg_catalog.clock_timestamp();
	IF FOUND AND r.owner_token IS NOT NULL AND r.lease_until > now THEN
		UPDATE dlock.distributed_lock l
		   SET owner_token = NULL, lease_until = now, updated_at = now,
			   not_before = CASE WHEN l.lock_delay IS NOT NULL THEN now + dlock._length(l.lock_delay) END
		 WHERE l.lock_name = force_release.lock_name;
		PERFORM dlock._audit('force_release', force_release.lock_name, r.fencing_seq, r.holder, reason);
		PERFORM dlock._event('force_release', force_release.lock_name, r.fencing_seq, r.holder, now);
		ended := true;
	END IF;
	FOR h IN SELECT * FROM dlock.lock_holder s
			  WHERE s.lock_name = force_release.lock_name AND s.owner_token IS NOT NULL
				AND s.lease_until > pg_catalog.clock_timestamp()
			  ORDER BY s.slot FOR UPDATE
	LOOP
		now := pg_catalog.clock_timestamp();
		UPDATE dlock.lock_holder s SET owner_token = NULL, lease_until = now, updated_at = now
		 WHERE s.lock_name = h.lock_name AND s.slot = h.slot;
		PERFORM dlock._audit('force_release', h.lock_name, h.fencing_seq, h.holder, reason);
		PERFORM dlock._event('force_release', h.lock_name, h.fencing_seq, h.holder, now);
		ended := true;
	END LOOP;
	RETURN ended;
END
$$;
COMMENT ON FUNCTION dlock.force_release(text, text) IS
'ends the current lease whoever holds it (or every live shared lease or permit of the name), and records the reason in dlock.audit_log';
-- Ending someone else's lease is an administrative act: grant it explicitly.
REVOKE ALL ON FUNCTION dlock.force_release(text, text) FROM PUBLIC;

CREATE FUNCTION dlock.reap(idle_for interval DEFAULT '1 day', max_rows integer DEFAULT 10000)
RETURNS bigint LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	now timestamptz := pg_catalog.clock_timestamp();
	highest bigint;
	removed bigint;
	names text[];
BEGIN
	PERFORM dlock._check_wait(idle_for, 'idle_for');
	PERFORM dlock._not_null('max_rows', max_rows IS NULL);
	IF max_rows < 1 THEN
		RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'max_rows must be positive';
	END IF;
	-- one reaper at a time; the floor row is created on first use
	LOCK TABLE dlock.token_floor IN SHARE ROW EXCLUSIVE MODE;
	WITH victims AS (
		SELECT l.lock_name FROM dlock.distributed_lock l
		 WHERE coalesce(CASE WHEN l.owner_token IS NULL THEN l.updated_at ELSE l.lease_until END, l.updated_at)
			   < now - dlock._length(idle_for)
		   AND (l.owner_token IS NULL OR l.lease_until <= now)
		   AND (dlock._decide(l.owner_token IS NOT NULL, l.lease_until, l.lock_delay, l.not_before, now)).available_at IS NULL
		   AND NOT EXISTS (SELECT 1 FROM dlock.lock_holder h
							WHERE h.lock_name = l.lock_name AND h.owner_token IS NOT NULL AND h.lease_until > now)
		   -- not while a grant of any kind decides on the name
		   AND pg_catalog.pg_try_advisory_xact_lock(dlock._kind_key(l.lock_name))
		 ORDER BY l.updated_at
		 LIMIT max_rows
		   FOR UPDATE SKIP LOCKED),
	gone AS (
		DELETE FROM dlock.distributed_lock l USING victims v WHERE l.lock_name = v.lock_name
		RETURNING l.lock_name, l.fencing_seq)
	SELECT pg_catalog.count(*), pg_catalog.max(g.fencing_seq), pg_catalog.array_agg(g.lock_name)
	  INTO removed, highest, names
	  FROM gone g;
	-- the holders' counters and slots of the reaped names go too, below the floor
	SELECT GREATEST(highest, pg_catalog.max(k.fencing_seq)) INTO highest
	  FROM dlock.holder_counter k WHERE k.lock_name = ANY (names);
	DELETE FROM dlock.lock_holder h WHERE h.lock_name = ANY (names);
	DELETE FROM dlock.holder_counter k WHERE k.lock_name = ANY (names);
	IF highest IS NOT NULL THEN
		IF EXISTS (SELECT 1 FROM dlock.token_floor) THEN
			UPDATE dlock.token_floor SET reaped_max = GREATEST(reaped_max, highest), reaped_at = now;
		ELSE
			INSERT INTO dlock.token_floor VALUES (highest, now);
		END IF;
	END IF;
	RETURN removed;
END
$$;
COMMENT ON FUNCTION dlock.reap(interval, integer) IS
'removes rows of locks free or expired for longer than idle_for, at most max_rows; returns how many';
REVOKE ALL ON FUNCTION dlock.reap(interval, integer) FROM PUBLIC;

CREATE FUNCTION dlock.purge_audit_log(older_than interval)
RETURNS bigint LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	removed bigint;
BEGIN
	PERFORM dlock._check_wait(older_than, 'older_than');
	DELETE FROM dlock.audit_log a WHERE a.logged_at < pg_catalog.clock_timestamp() - dlock._length(older_than);
	GET DIAGNOSTICS removed = ROW_COUNT;
	RETURN removed;
END
$$;
COMMENT ON FUNCTION dlock.purge_audit_log(interval) IS
'deletes audit records older than the interval; returns how many';
REVOKE ALL ON FUNCTION dlock.purge_audit_log(interval) FROM PUBLIC;

CREATE FUNCTION dlock.purge_resource_fence(older_than interval)
RETURNS bigint LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	removed bigint;
BEGIN
	PERFORM dlock._check_wait(older_than, 'older_than');
	DELETE FROM dlock.resource_fence f WHERE f.updated_at < pg_catalog.clock_timestamp() - dlock._length(older_than);
	GET DIAGNOSTICS removed = ROW_COUNT;
	RETURN removed;
END
$$;
COMMENT ON FUNCTION dlock.purge_resource_fence(interval) IS
'deletes the fence state of resources that accepted no token for longer than the interval; returns how many';
REVOKE ALL ON FUNCTION dlock.purge_resource_fence(interval) FROM PUBLIC;

CREATE FUNCTION dlock.leader(election text,
							 OUT holder text, OUT fencing_token bigint,
							 OUT since timestamptz, OUT lease_until timestamptz)
RETURNS record LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM dlock._check_name('election', election);
	SELECT l.holder, l.fencing_seq, l.acquired_at, l.lease_until
	  INTO holder, fencing_token, since, lease_until
	  FROM dlock.distributed_lock l
	 WHERE l.lock_name = election AND l.owner_token IS NOT NULL
	   AND l.lease_until > pg_catalog.clock_timestamp();
END
$$;
COMMENT ON FUNCTION dlock.leader(text) IS
'the live lease of the election''s lock: holder, fencing token, since when and until when; NULL when nobody leads';

------------------------------------------------------------------------------
-- Statistics: no shared memory in this edition, so the counters are zero
-- (as the C extension's without shared_preload_libraries); the lease counts
-- are computed from the tables.
------------------------------------------------------------------------------

CREATE FUNCTION dlock.stats_counters(
	OUT shared_memory boolean,
	OUT acquisitions bigint, OUT busy bigint, OUT takeovers bigint,
	OUT renewals bigint, OUT renewals_refused bigint,
	OUT releases bigint, OUT releases_refused bigint,
	OUT force_releases bigint, OUT fence_rejections bigint, OUT holds_rejections bigint,
	OUT waits bigint, OUT wait_timeouts bigint, OUT wait_seconds double precision,
	OUT events_sent bigint, OUT events_dropped bigint,
	OUT stats_reset timestamptz)
RETURNS record LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT false, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
			 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::double precision,
			 0::bigint, 0::bigint, NULL::timestamptz $$;
COMMENT ON FUNCTION dlock.stats_counters() IS
'server-wide counters: always zero in the SQL edition (no shared memory), shared_memory = false';

CREATE FUNCTION dlock.stats_reset()
RETURNS void LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT $$;
COMMENT ON FUNCTION dlock.stats_reset() IS 'sets the counters of dlock.stats to zero (they always are in the SQL edition)';
REVOKE ALL ON FUNCTION dlock.stats_reset() FROM PUBLIC;

CREATE FUNCTION dlock.kind_stats(OUT kind text, OUT acquisitions bigint, OUT busy bigint)
RETURNS SETOF record LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT k, 0::bigint, 0::bigint FROM pg_catalog.unnest(ARRAY['exclusive', 'shared', 'permit', 'multi']) k $$;
COMMENT ON FUNCTION dlock.kind_stats() IS
'grants and refusals per lock kind: always zero in the SQL edition (no shared memory)';

CREATE FUNCTION dlock.policy_counters(
	OUT expirations bigint, OUT session_ends bigint,
	OUT renewals_refused_max_hold bigint,
	OUT renewals_left_50 bigint, OUT renewals_left_25 bigint,
	OUT renewals_left_10 bigint, OUT renewals_left_0 bigint)
RETURNS record LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint $$;
COMMENT ON FUNCTION dlock.policy_counters() IS
'lease policy counters: always zero in the SQL edition (no shared memory)';

CREATE FUNCTION dlock.lease_policy_state(has_owner boolean, lease_until timestamptz,
										 session_id bigint, hold_limit timestamptz,
										 min_hold_until timestamptz, lock_delay interval,
										 not_before timestamptz,
										 OUT live boolean, OUT policy_state text,
										 OUT available_at timestamptz)
RETURNS record LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	now timestamptz := pg_catalog.clock_timestamp();
	d record := dlock._decide(has_owner, lease_until, lock_delay, not_before, now);
BEGIN
	live := d.live;
	available_at := d.available_at;
	IF d.live THEN
		policy_state := CASE WHEN hold_limit IS NOT NULL AND now >= hold_limit
							 THEN 'held, renewals refused (max_hold)' ELSE 'held' END;
	ELSIF d.expired THEN
		policy_state := CASE WHEN d.available_at > now THEN 'expired, delayed (lock_delay)' ELSE 'expired' END;
	ELSIF d.available_at > now THEN
		policy_state := CASE WHEN not_before = min_hold_until THEN 'released, held until min_hold'
							 ELSE 'forced, delayed (lock_delay)' END;
	ELSE
		policy_state := 'free';
	END IF;
END
$$;
COMMENT ON FUNCTION dlock.lease_policy_state(boolean, timestamptz, bigint, timestamptz, timestamptz, interval, timestamptz) IS
'the lease functions'' decision on a lease row now: live, its policy state, and when a new owner may be granted the name (NULL: now)';

------------------------------------------------------------------------------
-- Views: the C extension's definitions, one text for both editions:
-- sql_edition/build.sh copies each CREATE VIEW from sql/pg_dlock--*.sql into
-- its region below (change a view there, then run it). The comments of
-- dlock.stats and dlock.stats_by_kind differ from the C extension's on
-- purpose: they say that the counters are zero here. The privileges are the
-- C extension's (tests/suites/16-sql-edition.sh compares both).
------------------------------------------------------------------------------

-- BEGIN view dlock.stats as in pg_dlock 1.2 (copied from sql/ by sql_edition/build.sh: edit it there)
CREATE OR REPLACE VIEW dlock.stats AS
	SELECT c.*,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock l,
				   LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
													l.session_id, l.hold_limit, l.min_hold_until,
													l.lock_delay, l.not_before) p
			 WHERE p.live) AS live_leases,
		   (SELECT pg_catalog.count(*) FROM dlock.distributed_lock) AS lock_rows,
		   p.*,
		   (SELECT pg_catalog.max(pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) l.acquired_at)
			  FROM dlock.distributed_lock l,
				   LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
													l.session_id, l.hold_limit, l.min_hold_until,
													l.lock_delay, l.not_before) s
			 WHERE s.live) AS longest_hold,
		   k.shared_acquisitions, k.shared_busy,
		   k.permit_acquisitions, k.permit_busy,
		   k.multi_acquisitions, k.multi_busy
	  FROM dlock.stats_counters() c, dlock.policy_counters() p,
		   -- the lock kinds' counters, one column per kind and counter
		   LATERAL (SELECT pg_catalog.max(ks.acquisitions) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'shared') AS shared_acquisitions,
						   pg_catalog.max(ks.busy) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'shared') AS shared_busy,
						   pg_catalog.max(ks.acquisitions) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'permit') AS permit_acquisitions,
						   pg_catalog.max(ks.busy) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'permit') AS permit_busy,
						   pg_catalog.max(ks.acquisitions) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'multi') AS multi_acquisitions,
						   pg_catalog.max(ks.busy) FILTER (WHERE ks.kind OPERATOR(pg_catalog.=) 'multi') AS multi_busy
					  FROM dlock.kind_stats() ks) k;
-- END view dlock.stats
COMMENT ON VIEW dlock.stats IS 'pg_dlock counters (zero in the SQL edition) and current lease counts';
GRANT SELECT ON dlock.stats TO PUBLIC;

-- BEGIN view dlock.stats_by_kind as in pg_dlock 1.2 (copied from sql/ by sql_edition/build.sh: edit it there)
CREATE VIEW dlock.stats_by_kind AS
	SELECT s.kind, s.acquisitions, s.busy,
		   CASE s.kind
			 WHEN 'exclusive' THEN (SELECT pg_catalog.count(*) FROM dlock.distributed_lock l
									 WHERE l.owner_token IS NOT NULL
									   AND l.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())
			 WHEN 'multi' THEN NULL
			 ELSE (SELECT pg_catalog.count(*) FROM dlock.lock_holder h
					WHERE h.kind OPERATOR(pg_catalog.=) pg_catalog.left(s.kind, 1)::pg_catalog."char" AND h.owner_token IS NOT NULL
					  AND h.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp())
		   END AS live_leases
	  FROM dlock.kind_stats() s;
-- END view dlock.stats_by_kind
COMMENT ON VIEW dlock.stats_by_kind IS 'pg_dlock counters (zero in the SQL edition) and live leases per lock kind';
GRANT SELECT ON dlock.stats_by_kind TO PUBLIC;

-- BEGIN view dlock.locks as in pg_dlock 1.2 (copied from sql/ by sql_edition/build.sh: edit it there)
CREATE OR REPLACE VIEW dlock.locks AS
	SELECT l.lock_name,
		   CASE WHEN l.owner_token IS NOT NULL AND p.live THEN 'held'
				WHEN h.live OPERATOR(pg_catalog.>) 0 THEN 'held'
				WHEN l.owner_token IS NULL THEN 'free'
				ELSE 'expired' END AS state,
		   l.holder,
		   l.fencing_seq AS fencing_token,
		   l.acquired_at,
		   CASE WHEN l.owner_token IS NOT NULL THEN n.now OPERATOR(pg_catalog.-) l.acquired_at END AS held_for,
		   l.lease_until,
		   CASE WHEN l.owner_token IS NOT NULL THEN l.lease_until OPERATOR(pg_catalog.-) n.now END AS expires_in,
		   l.renewals,
		   l.acquisitions,
		   l.takeovers,
		   l.updated_at AS last_change,
		   CASE WHEN h.live OPERATOR(pg_catalog.>) 0 THEN h.kind ELSE 'exclusive' END AS kind,
		   CASE WHEN l.owner_token IS NOT NULL AND p.live THEN 1
				ELSE COALESCE(h.live, 0) END::integer AS holders,
		   p.policy_state,
		   p.available_at,
		   l.session_id IS NOT NULL AS session_bound,
		   l.session_pid,
		   l.hold_limit,
		   l.min_hold_until,
		   l.lock_delay
	  FROM dlock.distributed_lock l
		   CROSS JOIN LATERAL (SELECT pg_catalog.clock_timestamp() AS now) n
		   CROSS JOIN LATERAL dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until,
													   l.session_id, l.hold_limit, l.min_hold_until,
													   l.lock_delay, l.not_before) p
		   LEFT JOIN LATERAL (
			 SELECT pg_catalog.count(*) FILTER (WHERE hh.owner_token IS NOT NULL
												   AND hh.lease_until OPERATOR(pg_catalog.>) n.now) AS live,
					CASE pg_catalog.max(hh.kind::pg_catalog.text) FILTER (WHERE hh.owner_token IS NOT NULL
																   AND hh.lease_until OPERATOR(pg_catalog.>) n.now)
					  WHEN 's' THEN 'shared' ELSE 'semaphore' END AS kind
			   FROM dlock.lock_holder hh WHERE hh.lock_name OPERATOR(pg_catalog.=) l.lock_name) h ON true
	UNION ALL
	SELECT c.lock_name,
		   CASE WHEN h.live OPERATOR(pg_catalog.>) 0 THEN 'held' ELSE 'free' END,
		   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		   h.last_change,
		   h.kind,
		   h.live::integer,
		   NULL, NULL, NULL, NULL, NULL, NULL, NULL
	  FROM dlock.holder_counter c
		   CROSS JOIN LATERAL (SELECT pg_catalog.clock_timestamp() AS now) n
		   CROSS JOIN LATERAL (
			 SELECT pg_catalog.count(*) FILTER (WHERE hh.owner_token IS NOT NULL
												   AND hh.lease_until OPERATOR(pg_catalog.>) n.now) AS live,
					CASE pg_catalog.max(hh.kind::pg_catalog.text) WHEN 's' THEN 'shared' ELSE 'semaphore' END AS kind,
					pg_catalog.max(hh.updated_at) AS last_change
			   FROM dlock.lock_holder hh WHERE hh.lock_name OPERATOR(pg_catalog.=) c.lock_name) h
	 WHERE NOT EXISTS (SELECT 1 FROM dlock.distributed_lock l WHERE l.lock_name OPERATOR(pg_catalog.=) c.lock_name);
-- END view dlock.locks
COMMENT ON VIEW dlock.locks IS 'one row per lock name with its state on the server clock, its kind, number of live holders and lease policy state; never shows owner tokens';
GRANT SELECT ON dlock.locks TO PUBLIC;

-- BEGIN view dlock.lock_owners as in pg_dlock 1.2 (copied from sql/ by sql_edition/build.sh: edit it there)
CREATE VIEW dlock.lock_owners AS
	SELECT l.lock_name, l.owner_token, l.fencing_seq AS fencing_token, l.lease_until
	  FROM dlock.distributed_lock l
	 WHERE l.owner_token IS NOT NULL;
-- END view dlock.lock_owners
COMMENT ON VIEW dlock.lock_owners IS 'owner tokens of current and expired leases: capabilities, readable only with a grant';
REVOKE ALL ON dlock.lock_owners FROM PUBLIC;

-- BEGIN view dlock.lock_holders as in pg_dlock 1.2 (copied from sql/ by sql_edition/build.sh: edit it there)
CREATE VIEW dlock.lock_holders AS
	SELECT l.lock_name, 'exclusive'::pg_catalog.text AS kind, NULL::integer AS permits, l.holder,
		   l.fencing_seq AS fencing_token, l.acquired_at, l.lease_until
	  FROM dlock.distributed_lock l
	 WHERE l.owner_token IS NOT NULL AND l.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
	UNION ALL
	SELECT h.lock_name, CASE h.kind WHEN 's' THEN 'shared' ELSE 'permit' END, h.permits, h.holder,
		   h.fencing_seq, h.acquired_at, h.lease_until
	  FROM dlock.lock_holder h
	 WHERE h.owner_token IS NOT NULL AND h.lease_until OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
-- END view dlock.lock_holders
COMMENT ON VIEW dlock.lock_holders IS 'one row per live lease of any kind; never shows owner tokens';
GRANT SELECT ON dlock.lock_holders TO PUBLIC;

------------------------------------------------------------------------------
-- Internal functions are not for applications: only the public functions
-- (SECURITY DEFINER, run as the owner) call them.
------------------------------------------------------------------------------
DO $revoke_internal$
DECLARE
	f pg_catalog.regprocedure;
BEGIN
	FOR f IN SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
			  WHERE p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('dlock')::pg_catalog.oid
				AND pg_catalog.left(p.proname::pg_catalog.text, 1) OPERATOR(pg_catalog.=) '_'
	LOOP
		EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
	END LOOP;
END
$revoke_internal$;
-- Pure helpers of dlock.lease_policy_state, which the views call as the
-- querying role.
GRANT EXECUTE ON FUNCTION dlock._decide(boolean, timestamptz, interval, timestamptz, timestamptz),
	dlock._length(interval) TO PUBLIC;

-- BEGIN extension owner
-- A trusted extension's script runs as a superuser: hand every object to
-- the role that ran CREATE EXTENSION, so the SECURITY DEFINER functions run
-- with its rights. (Left out of the psql -f and pg_tle scripts, which run as
-- that role already.)
DO $owner$
DECLARE
	obj record;
BEGIN
	EXECUTE 'ALTER SCHEMA dlock OWNER TO @extowner@';
	FOR obj IN SELECT c.oid::pg_catalog.regclass AS name FROM pg_catalog.pg_class c
				WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('dlock')::pg_catalog.oid
				  AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v']::pg_catalog."char"[])
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO @extowner@', obj.name);
	END LOOP;
	FOR obj IN SELECT p.oid::pg_catalog.regprocedure AS name FROM pg_catalog.pg_proc p
				WHERE p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('dlock')::pg_catalog.oid
	LOOP
		EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO @extowner@', obj.name);
	END LOOP;
	EXECUTE 'ALTER TYPE dlock.lease OWNER TO @extowner@';
END
$owner$;
-- END extension owner
