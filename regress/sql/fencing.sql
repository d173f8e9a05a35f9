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

-- monotonic mode (one argument) lets a write that leaves the token alone
-- through, even after the lease of that token ended (README: the two modes)
SELECT dlock.holds('fenced', :new_token) AS lease_of_row_token_live;
SELECT dlock.release('fenced', '00000000-0000-0000-0000-0000000000f2') AS lease_of_row_token_ended;
UPDATE report SET body = 'token untouched' WHERE tenant = 'acme';
SELECT body FROM report;

-- strict mode (token column and lock name column): every write must carry
-- the token of the live lease of the lock the row names
CREATE TABLE acct (
	id int PRIMARY KEY,
	lock_name text NOT NULL,
	balance numeric,
	token bigint
);
CREATE TRIGGER acct_fencing BEFORE INSERT OR UPDATE OR DELETE ON acct
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token', 'lock_name');
SELECT fencing_token AS acct_token, owner_token AS acct_owner
  FROM dlock.try_acquire('acct:1', '1 minute') \gset
INSERT INTO acct VALUES (1, 'acct:1', 100, :acct_token);
UPDATE acct SET balance = 90 WHERE id = 1;
-- the write pinned the lease: the trigger locked its row in this transaction
BEGIN;
UPDATE acct SET balance = 80 WHERE id = 1;
SELECT l.xmax = pg_catalog.xid(pg_catalog.pg_current_xact_id()) AS lease_row_pinned_here
  FROM dlock.distributed_lock l WHERE l.lock_name = 'acct:1';
COMMIT;
-- control: after the commit the pin is gone with the transaction
SELECT l.xmax = pg_catalog.xid(pg_catalog.pg_current_xact_id()) AS lease_row_pinned_here
  FROM dlock.distributed_lock l WHERE l.lock_name = 'acct:1';
SELECT dlock.release('acct:1', :'acct_owner');
-- refused: the lease of the row's token ended (PD002), token column untouched
UPDATE acct SET balance = 0 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM acct WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
-- refused: a token that was never the lock's lease (PD002)
INSERT INTO acct VALUES (2, 'acct:1', 5, :acct_token + 1);
\echo :LAST_ERROR_SQLSTATE
-- refused: a live token of another lock (PD002)
SELECT fencing_token AS other_token FROM dlock.try_acquire('acct:other', '1 minute') \gset
INSERT INTO acct VALUES (3, 'acct:1', 5, :other_token);
\echo :LAST_ERROR_SQLSTATE
-- the next holder writes under its own lease
SELECT fencing_token AS acct_token2 FROM dlock.try_acquire('acct:1', '1 minute') \gset
UPDATE acct SET balance = 0, token = :acct_token2 WHERE id = 1;
SELECT id, balance, token = :acct_token2 AS written_under_new_lease FROM acct;
DELETE FROM acct WHERE id = 1;
SELECT count(*) AS rows_left FROM acct;
-- refused: lowering the token is still refused (PD001) before the lease check
INSERT INTO acct VALUES (4, 'acct:1', 1, :acct_token2);
UPDATE acct SET token = :acct_token WHERE id = 4;
\echo :LAST_ERROR_SQLSTATE
-- refused: a NULL lock name (22004), a missing or non-text lock column (42703, 42804)
INSERT INTO acct VALUES (5, NULL, 1, :acct_token2);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE acct_bad (token bigint, lock_id int);
CREATE TRIGGER no_lock_column BEFORE INSERT ON acct_bad FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token', 'nope');
INSERT INTO acct_bad VALUES (1, 1);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER no_lock_column ON acct_bad;
CREATE TRIGGER int_lock_column BEFORE INSERT ON acct_bad FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token', 'lock_id');
INSERT INTO acct_bad VALUES (1, 1);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE acct_bad, acct;

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
