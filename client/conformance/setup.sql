-- Run once per database before the conformance scenarios (idempotent; runners
-- run it themselves). The ledger is the business table the scenarios' fenced
-- writes insert into; the role has no grant on the fencing functions.
CREATE TABLE IF NOT EXISTS public.dlock_conformance_ledger (
	ns text NOT NULL,
	writer text NOT NULL,
	fencing_token bigint NOT NULL,
	written_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'regress_dlock_conformance') THEN
		CREATE ROLE regress_dlock_conformance NOLOGIN;
	END IF;
END
$$;
GRANT SELECT, INSERT ON public.dlock_conformance_ledger TO regress_dlock_conformance;
