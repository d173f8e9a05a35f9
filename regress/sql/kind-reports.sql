-- One report for every kind: audit records of the grants, renewals,
-- releases, expiries and force releases of every kind at dlock.audit = all,
-- and the hold histogram counting every lease end once, where it is
-- settled. The expiry worker watches another database here, so its report
-- is played by its record (dlock.expiry_reported, dlock.holder_expiry_reported),
-- which is what tells whoever settles an expiry later that it was reported.
-- Without preloading the histogram is empty and every count stays 0.
\set VERBOSITY terse
SET dlock.audit = 'all';
CREATE FUNCTION pg_temp.holds(lease_kind text) RETURNS bigint LANGUAGE sql
	AS $$ SELECT coalesce(sum(holds), 0)::bigint FROM dlock.hold_histogram() WHERE kind = lease_kind AND le IS NULL $$;

------------------------------------------------------------------------
-- Renewals of every kind are audited; a refused one too.
------------------------------------------------------------------------
SELECT (dlock.try_acquire('kr:x', '1 minute', '00000000-0000-0000-0000-00000000f001', 'writer')).fencing_token IS NOT NULL AS granted;
SELECT (dlock.try_acquire_shared('kr:s', '1 minute', '00000000-0000-0000-0000-00000000f001', 'reader')).fencing_token IS NOT NULL AS granted;
SELECT (dlock.try_acquire_permit('kr:p', 2, '1 minute', '00000000-0000-0000-0000-00000000f001', 'permit')).fencing_token IS NOT NULL AS granted;
SELECT dlock.renew('kr:x', '00000000-0000-0000-0000-00000000f001', '1 minute') IS NOT NULL AS renewed,
	   dlock.renew('kr:s', '00000000-0000-0000-0000-00000000f001', '1 minute') IS NOT NULL AS renewed,
	   dlock.renew('kr:p', '00000000-0000-0000-0000-00000000f001', '1 minute') IS NOT NULL AS renewed,
	   dlock.renew('kr:p', '00000000-0000-0000-0000-00000000f002', '1 minute') IS NULL AS refused;
-- a repeated acquire is no renewal record
SELECT (dlock.try_acquire_shared('kr:s', '1 minute', '00000000-0000-0000-0000-00000000f001', 'reader')).fencing_token IS NOT NULL AS again;
SELECT pg_temp.holds('exclusive') AS x0, pg_temp.holds('shared') AS s0, pg_temp.holds('permit') AS p0 \gset
SELECT dlock.release('kr:x', '00000000-0000-0000-0000-00000000f001') AS released,
	   dlock.release('kr:s', '00000000-0000-0000-0000-00000000f001') AS released,
	   dlock.force_release('kr:p', 'regress: one report for every kind') AS forced;
-- each end timed once: a release of each kind, a forced permit
SELECT pg_temp.holds('exclusive') - :x0 AS exclusive, pg_temp.holds('shared') - :s0 AS shared,
	   pg_temp.holds('permit') - :p0 AS permit;

------------------------------------------------------------------------
-- Expiries settled by whoever ends the expired lease, when the worker has
-- not reported them: timed once, and audited (a takeover is its own
-- record; a slot's expiry is an "expire" record).
------------------------------------------------------------------------
SELECT (dlock.try_acquire('kr:x-lost', '100 ms', '00000000-0000-0000-0000-00000000f003', 'lost writer')).fencing_token IS NOT NULL AS granted;
SELECT (dlock.try_acquire_shared('kr:s-lost', '100 ms', '00000000-0000-0000-0000-00000000f003', 'lost reader')).fencing_token IS NOT NULL AS granted;
SELECT (dlock.try_acquire_permit('kr:p-lost', 1, '100 ms', '00000000-0000-0000-0000-00000000f003', 'lost permit')).fencing_token IS NOT NULL AS granted;
SELECT (dlock.try_acquire_shared('kr:s-writer', '100 ms', '00000000-0000-0000-0000-00000000f003', 'reader before a writer')).fencing_token IS NOT NULL AS granted;
SELECT pg_sleep(0.2);
SELECT pg_temp.holds('exclusive') AS x0, pg_temp.holds('shared') AS s0, pg_temp.holds('permit') AS p0 \gset
-- a takeover, a reader and a permit on the expired slots, a writer freeing an expired reader's slot
SELECT (dlock.try_acquire('kr:x-lost', '1 minute', '00000000-0000-0000-0000-00000000f004')).fencing_token IS NOT NULL AS taken_over;
SELECT (dlock.try_acquire_shared('kr:s-lost', '1 minute', '00000000-0000-0000-0000-00000000f004')).fencing_token IS NOT NULL AS slot_reused;
SELECT (dlock.try_acquire_permit('kr:p-lost', 1, '1 minute', '00000000-0000-0000-0000-00000000f004')).fencing_token IS NOT NULL AS slot_reused;
SELECT (dlock.try_acquire('kr:s-writer', '1 minute', '00000000-0000-0000-0000-00000000f004')).fencing_token IS NOT NULL AS writer_granted;
SELECT pg_temp.holds('exclusive') - :x0 AS exclusive, pg_temp.holds('shared') - :s0 AS shared,
	   pg_temp.holds('permit') - :p0 AS permit;

------------------------------------------------------------------------
-- Expiries the worker reported first: not timed again, and its record is
-- gone once the lease is ended.
------------------------------------------------------------------------
SELECT (dlock.try_acquire('kr:x-reported', '100 ms', '00000000-0000-0000-0000-00000000f005')).fencing_token AS x_token \gset
SELECT (dlock.try_acquire_shared('kr:s-reported', '100 ms', '00000000-0000-0000-0000-00000000f005')).fencing_token AS s_token \gset
SELECT (dlock.try_acquire_permit('kr:p-reported', 1, '100 ms', '00000000-0000-0000-0000-00000000f005')).fencing_token AS p_token \gset
SELECT pg_sleep(0.2);
-- the worker's records of its reports, as it writes them
INSERT INTO dlock.expiry_reported (lock_name, fencing_token) VALUES ('kr:x-reported', :x_token);
INSERT INTO dlock.holder_expiry_reported (lock_name, slot, fencing_token)
	SELECT lock_name, slot, fencing_seq FROM dlock.lock_holder WHERE lock_name IN ('kr:s-reported', 'kr:p-reported');
SELECT pg_temp.holds('exclusive') AS x0, pg_temp.holds('shared') AS s0, pg_temp.holds('permit') AS p0 \gset
SELECT (dlock.try_acquire('kr:x-reported', '1 minute', '00000000-0000-0000-0000-00000000f006')).fencing_token IS NOT NULL AS taken_over;
SELECT (dlock.try_acquire_shared('kr:s-reported', '1 minute', '00000000-0000-0000-0000-00000000f006')).fencing_token IS NOT NULL AS slot_reused;
SELECT (dlock.try_acquire_permit('kr:p-reported', 1, '1 minute', '00000000-0000-0000-0000-00000000f006')).fencing_token IS NOT NULL AS slot_reused;
SELECT pg_temp.holds('exclusive') - :x0 AS exclusive, pg_temp.holds('shared') - :s0 AS shared,
	   pg_temp.holds('permit') - :p0 AS permit;
SELECT (SELECT count(*) FROM dlock.expiry_reported WHERE lock_name LIKE 'kr:%')
	 + (SELECT count(*) FROM dlock.holder_expiry_reported WHERE lock_name LIKE 'kr:%') AS records_left;

------------------------------------------------------------------------
-- The audit log: every grant, renewal, release, expiry and force release
-- of every kind, in order.
------------------------------------------------------------------------
SELECT event, lock_name, holder, fencing_token IS NOT NULL AS with_token
  FROM dlock.audit_log WHERE lock_name LIKE 'kr:%' ORDER BY id;

-- leave nothing for later files
SELECT dlock.release(lock_name, '00000000-0000-0000-0000-00000000f004') FROM unnest(ARRAY['kr:x-lost', 'kr:s-lost', 'kr:p-lost', 'kr:s-writer']) lock_name;
SELECT dlock.release(lock_name, '00000000-0000-0000-0000-00000000f006') FROM unnest(ARRAY['kr:x-reported', 'kr:s-reported', 'kr:p-reported']) lock_name;
DELETE FROM dlock.audit_log WHERE lock_name LIKE 'kr:%';
RESET dlock.audit;
