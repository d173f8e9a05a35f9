// Promises of the TypeScript client beyond the conformance scenarios.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";

import pg from "pg";

import { ConnectError, InvalidArgumentError, LeaseLostError, Locks, StaleTokenError, VERSION, assertHolds, connectionConfig, fence } from "../src/index.js";
import { environment } from "./conformance.js";

const env = environment();
const fresh = (p: string) => `node-test/${p}/${randomBytes(4).toString("hex")}`;
let admin: pg.Client;
let locks: Locks;

before(async () => {
  admin = new pg.Client(connectionConfig(env.adminDsn));
  await admin.connect();
  locks = new Locks(env.dsn);
});
after(async () => {
  await locks.close();
  await admin.end();
});

async function state(name: string): Promise<{ state: string; renewals: string }> {
  const res = await admin.query("SELECT state, renewals::text FROM dlock.locks WHERE lock_name = $1", [name]);
  return res.rows[0];
}

test("keep-alive keeps a lease across several ttls", async () => {
  const name = fresh("keep");
  const lease = await locks.tryAcquire(name, { ttl: 600 });
  assert.ok(lease);
  await delay(1800);
  assert.ok(lease.valid && !lease.lost);
  const s = await state(name);
  assert.equal(s.state, "held");
  assert.ok(Number(s.renewals) >= 3, `renewals ${s.renewals}`);
  assert.equal(await lease.release(), "done");
});

test("without keep-alive the same wait ends the lease (control)", async () => {
  const name = fresh("nokeep");
  const lease = await locks.tryAcquire(name, { ttl: 600, keepAlive: false });
  assert.ok(lease);
  await delay(1000);
  assert.equal(lease.valid, false);
  assert.deepEqual(await state(name), { state: "expired", renewals: "0" });
});

test("using: the signal aborts on loss, onLost runs, and the call rejects with LeaseLostError", async () => {
  const name = fresh("using");
  const reasons: (string | undefined)[] = [];
  let reachedEnd = false;
  const started = performance.now();
  await assert.rejects(
    locks.using(name, { ttl: 900, onLost: (l) => reasons.push(l.lossReason) }, async (_lease, signal) => {
      await admin.query("SELECT dlock.force_release($1, 'node test')", [name]);
      await delay(5000, undefined, { signal });
      reachedEnd = true;
    }),
    LeaseLostError,
  );
  assert.equal(reachedEnd, false);
  assert.ok(performance.now() - started < 3000);
  assert.deepEqual(reasons, ["refused"]);
});

test("using releases the lease at its end and returns the body's value", async () => {
  const name = fresh("using-release");
  const value = await locks.using(name, { ttl: 5000 }, async (lease) => lease.fencingToken);
  assert.equal(typeof value, "bigint");
  assert.equal((await state(name)).state, "free");
});

test("waitLost honours its timeout while renewals go on", async () => {
  const lease = await locks.tryAcquire(fresh("wait-lost"), { ttl: 600 });
  assert.ok(lease);
  const started = performance.now();
  assert.equal(await lease.waitLost(500), false);
  const took = performance.now() - started;
  assert.ok(took >= 450 && took < 1500, `took ${took}`);
  await lease.release();
});

test("never renews after release; a second release is refused", async () => {
  const name = fresh("after-release");
  const lease = await locks.tryAcquire(name, { ttl: 300 });
  assert.ok(lease);
  assert.equal(await lease.release(), "done");
  const before = await state(name);
  await delay(500);
  assert.deepEqual(await state(name), before);
  assert.equal(before.state, "free");
  assert.equal(await lease.release(), "refused");
});

test("nothing sent is a connection error", async () => {
  const broken = new Locks({ connection: "host=127.0.0.1 port=1 connect_timeout=1" });
  await assert.rejects(broken.tryAcquire(fresh("connect"), { ttl: 1000 }), ConnectError);
  await broken.close();
});

test("fencing on a pg.Pool client in the caller's transaction", async () => {
  const name = fresh("pool-fence");
  const lease = await locks.tryAcquire(name, { ttl: 5000, keepAlive: false });
  assert.ok(lease);
  const pool = new pg.Pool(connectionConfig(env.dsn));
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await assertHolds(client, lease);
    await fence(client, name, lease);
    await client.query("COMMIT");
    await client.query("BEGIN");
    await assert.rejects(fence(client, name, lease.fencingToken - 1n), StaleTokenError);
    await client.query("ROLLBACK");
  } finally {
    client.release();
    await pool.end();
  }
  await lease.release();
});

test("bad options are refused", () => {
  assert.throws(() => new Locks({ pooling: "session" as never }), InvalidArgumentError);
});

test("connectionConfig reads libpq keyword strings and URIs", () => {
  assert.deepEqual(connectionConfig("host=db port=6432 dbname=app user='a b'"), {
    host: "db",
    port: 6432,
    database: "app",
    user: "a b",
  });
  assert.deepEqual(connectionConfig("postgres://u@h/d"), { connectionString: "postgres://u@h/d" });
});

test("the package carries the project's version", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.version, VERSION);
});
