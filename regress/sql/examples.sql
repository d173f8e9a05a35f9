-- The README's three examples, as a user would run them
\set VERBOSITY terse

------------------------------------------------------------------------
-- 1. Inventory reservation: stock 1, two orders
------------------------------------------------------------------------
CREATE TABLE inventory (id int PRIMARY KEY, quantity int NOT NULL CHECK (quantity >= 0));
CREATE TABLE orders (order_id text PRIMARY KEY, item_id int NOT NULL, fencing_token bigint NOT NULL);
INSERT INTO inventory VALUES (1234, 1);

-- order A takes the item lock, and in one transaction checks the lease,
-- takes one from stock and records the order
SELECT fencing_token AS token_a FROM dlock.try_acquire('inventory:item:1234', '30 seconds',
       '00000000-0000-0000-0000-0000000000aa', 'order-A') \gset
BEGIN;
SELECT dlock.assert_holds('inventory:item:1234', :token_a);
UPDATE inventory SET quantity = quantity - 1 WHERE id = 1234 AND quantity > 0;
INSERT INTO orders VALUES ('order-A', 1234, :token_a);
COMMIT;
SELECT dlock.release('inventory:item:1234', '00000000-0000-0000-0000-0000000000aa');

-- order B gets the lock next, but the stock is gone: its UPDATE changes no row
SELECT fencing_token AS token_b FROM dlock.try_acquire('inventory:item:1234', '30 seconds',
       '00000000-0000-0000-0000-0000000000bb', 'order-B') \gset
BEGIN;
SELECT dlock.assert_holds('inventory:item:1234', :token_b);
UPDATE inventory SET quantity = quantity - 1 WHERE id = 1234 AND quantity > 0;
ROLLBACK;  -- the application saw "UPDATE 0" and gives up
SELECT dlock.release('inventory:item:1234', '00000000-0000-0000-0000-0000000000bb');
-- order A retried after an unknown commit: the order id is unique, nothing is taken twice
INSERT INTO orders VALUES ('order-A', 1234, :token_a);
\echo :LAST_ERROR_SQLSTATE
SELECT quantity FROM inventory WHERE id = 1234;
SELECT order_id FROM orders;

------------------------------------------------------------------------
-- 2. Daily settlement batch: one instance wins; a paused one is refused
------------------------------------------------------------------------
CREATE TABLE settlement_run (
	run_date date PRIMARY KEY,
	fencing_token bigint NOT NULL,
	settled_amount numeric NOT NULL
);
CREATE TRIGGER settlement_run_fencing BEFORE INSERT OR UPDATE ON settlement_run
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('fencing_token');

-- instances 1 and 2 wake at once: one wins
SELECT fencing_token AS token_1 FROM dlock.try_acquire('job:settlement:2026-09-16', '200 milliseconds',
       '00000000-0000-0000-0000-000000000001', 'instance-1') \gset
SELECT fencing_token IS NULL AS instance_2_refused FROM dlock.try_acquire('job:settlement:2026-09-16',
       '200 milliseconds', '00000000-0000-0000-0000-000000000002', 'instance-2');
-- instance 1 writes its progress marker, then pauses past its lease
INSERT INTO settlement_run VALUES ('2026-09-16', :token_1, 0);
SELECT pg_sleep(0.3);
-- instance 2 takes over and completes the batch
SELECT fencing_token AS token_2 FROM dlock.try_acquire('job:settlement:2026-09-16', '30 seconds',
       '00000000-0000-0000-0000-000000000002', 'instance-2') \gset
BEGIN;
SELECT dlock.fence('settlement:2026-09-16', :token_2);
UPDATE settlement_run SET fencing_token = :token_2, settled_amount = 1000 WHERE run_date = '2026-09-16';
COMMIT;
-- instance 1 wakes up: its late writes are refused by fence() and by the trigger
SELECT dlock.holds('job:settlement:2026-09-16', :token_1) AS instance_1_still_holds;
SELECT dlock.fence('settlement:2026-09-16', :token_1);
\echo :LAST_ERROR_SQLSTATE
UPDATE settlement_run SET fencing_token = :token_1, settled_amount = 999 WHERE run_date = '2026-09-16';
\echo :LAST_ERROR_SQLSTATE
SELECT run_date, fencing_token = :token_2 AS written_by_instance_2, settled_amount FROM settlement_run;

------------------------------------------------------------------------
-- 3. Report generation: the report row carries the generating token
------------------------------------------------------------------------
CREATE TABLE tenant_report (
	tenant text,
	period text,
	generated_by_token bigint NOT NULL,
	content text NOT NULL,
	PRIMARY KEY (tenant, period)
);
CREATE TRIGGER tenant_report_fencing BEFORE INSERT OR UPDATE ON tenant_report
	FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('generated_by_token');

SELECT fencing_token AS gen_old FROM dlock.try_acquire('report:acme:2026-09', '200 milliseconds',
       '00000000-0000-0000-0000-0000000000e1', 'generator-old') \gset
SELECT pg_sleep(0.3);
SELECT fencing_token AS gen_new FROM dlock.try_acquire('report:acme:2026-09', '30 seconds',
       '00000000-0000-0000-0000-0000000000e2', 'generator-new') \gset
INSERT INTO tenant_report VALUES ('acme', '2026-09', :gen_new, 'fresh report')
	ON CONFLICT (tenant, period) DO UPDATE
	SET generated_by_token = EXCLUDED.generated_by_token, content = EXCLUDED.content;
-- the old generator finishes late: refused
INSERT INTO tenant_report VALUES ('acme', '2026-09', :gen_old, 'stale report')
	ON CONFLICT (tenant, period) DO UPDATE
	SET generated_by_token = EXCLUDED.generated_by_token, content = EXCLUDED.content;
\echo :LAST_ERROR_SQLSTATE
SELECT tenant, period, content FROM tenant_report;

DROP TABLE inventory, orders, settlement_run, tenant_report;
