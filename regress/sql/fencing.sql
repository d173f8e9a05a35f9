-- Fencing: holds, assert_holds, fence and the enforce_fencing trigger
\set VERBOSITY default

SELECT fencing_token AS old_token FROM dlock.try_acquire('fenced', '200 milliseconds',
       '00000000-0000-0000-0000-0000000000f1') \gset
SELECT dlock.holds('fenced', :old_token) AS holds_live_token;
SELECT dlock.holds('fenced', :old_token + 1) AS holds_other_token;
SELECT dlock.holds('never-acquired', 1) AS holds_unknown_lock;
SELECT dlock.assert_holds('fenced', :old_token);

-- the lease expires and another owner takes over
SELECT pg_sleep(0.3);
SELECT dlock.holds('fenced', :old_token) AS holds_after_expiry;
SELECT fencing_token AS new_token FROM dlock.try_acquire('fenced', '1 minute',
       '00000000-0000-0000-0000-0000000000f2') \gset

-- refused: the old token is not the live lease (PD002)
SELECT dlock.assert_holds('fenced', :old_token);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.assert_holds('never-acquired', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT dlock.assert_holds('fenced', :new_token);

-- fence: the resource keeps the highest token it accepted
SELECT dlock.fence('file:report.csv', :old_token);
SELECT dlock.fence('file:report.csv', :new_token);
SELECT dlock.fence('file:report.csv', :new_token);  -- equal is accepted
-- refused: a lower token (PD001)
SELECT dlock.fence('file:report.csv', :old_token);
\echo :LAST_ERROR_SQLSTATE
-- a refused fence changes nothing
SELECT fencing_token = :new_token AS kept_highest FROM dlock.resource_fence WHERE resource = 'file:report.csv';

-- enforce_fencing on a business table
CREATE TABLE report (
	tenant text,
	period text,
	body text,
	token bigint,
	PRIMARY KEY (tenant, period)
);
CREATE TRIGGER report_fencing BEFORE INSERT OR UPDATE ON report
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token');

INSERT INTO report VALUES ('acme', '2026-09', 'draft', :old_token);
UPDATE report SET body = 'final', token = :new_token;
UPDATE report SET body = 'final again', token = :new_token;  -- equal is accepted
-- refused: lowering the token (PD001)
UPDATE report SET body = 'late write', token = :old_token;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO report VALUES ('acme', '2026-09', 'late upsert', :old_token)
	ON CONFLICT (tenant, period) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token;
\echo :LAST_ERROR_SQLSTATE
-- refused: a NULL token (22004)
INSERT INTO report VALUES ('acme', '2026-10', 'no token', NULL);
\echo :LAST_ERROR_SQLSTATE
UPDATE report SET token = NULL;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM report;

-- refused: misdeclared triggers
CREATE TABLE report_bad (token bigint, other text);
CREATE TRIGGER no_arg BEFORE INSERT ON report_bad FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing();
INSERT INTO report_bad VALUES (1, 'x');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER no_arg ON report_bad;
CREATE TRIGGER wrong_column BEFORE INSERT ON report_bad FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('nope');
INSERT INTO report_bad VALUES (1, 'x');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER wrong_column ON report_bad;
CREATE TRIGGER wrong_type BEFORE INSERT ON report_bad FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('other');
INSERT INTO report_bad VALUES (1, 'x');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER wrong_type ON report_bad;
CREATE TRIGGER after_trigger AFTER INSERT ON report_bad FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token');
INSERT INTO report_bad VALUES (1, 'x');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE report_bad;
SELECT dlock.enforce_fencing();
\echo :LAST_ERROR_SQLSTATE

DROP TABLE report;
