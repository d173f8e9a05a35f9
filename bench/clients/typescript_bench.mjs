// Case 1 (uncontended) for the TypeScript client: try_acquire + release pairs
// on distinct names, at 1 and 8 clients (concurrent async loops in one Node.js
// process, each with its own client and connections), beside node-postgres's
// own two statements (dlock.try_acquire and dlock.release, named prepared
// statements) as the floor the client is measured against. Prints TSV rows in
// bench/run.sh's format: case, system, clients, metric, value.
//
//   node bench/clients/typescript_bench.mjs [--pg "dbname=bench"] [--duration 2] [--clients 1,8]
// Run from anywhere: pg and pg-dlock come from client/typescript (npm ci, npm run build).
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { dirname, join } from "node:path";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "client", "typescript");
const require = createRequire(join(pkg, "package.json"));
const pg = require("pg");
const { Locks, connectionConfig } = await import(pathToFileURL(join(pkg, "dist", "index.js")).href);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const dsn = opt("--pg", "");
const duration = Number(opt("--duration", "2")) * 1000;
const clientCounts = opt("--clients", "1,8").split(",").map(Number);

async function clientWorker(stop, prefix, acq) {
  const locks = new Locks(dsn);
  let n = 0;
  while (performance.now() < stop) {
    const name = `${prefix}/${n++}`;
    const t0 = performance.now();
    const lease = await locks.tryAcquire(name, { ttl: 30000, keepAlive: false });
    acq.push((performance.now() - t0) * 1000);
    await lease.release();
  }
  await locks.close();
  return n;
}

async function driverWorker(stop, prefix, acq) {
  const c = new pg.Client(connectionConfig(dsn));
  await c.connect();
  let n = 0;
  while (performance.now() < stop) {
    const name = `${prefix}/${n++}`;
    const t0 = performance.now();
    const r = await c.query({
      name: "acq",
      text: "SELECT owner_token FROM dlock.try_acquire($1, $2::interval, $3::uuid)",
      values: [name, "30 seconds", randomUUID()],
    });
    acq.push((performance.now() - t0) * 1000);
    await c.query({ name: "rel", text: "SELECT dlock.release($1, $2)", values: [name, r.rows[0].owner_token] });
  }
  await c.end();
  return n;
}

async function run(system, worker, clients) {
  await worker(performance.now() + 300, `bench-${system}-warm-${randomUUID().slice(0, 8)}`, []);
  const prefix = `bench-${system}-${randomUUID().slice(0, 8)}`;
  const acq = [];
  const start = performance.now();
  const stop = start + duration;
  const counts = await Promise.all(Array.from({ length: clients }, (_, i) => worker(stop, `${prefix}/${i}`, acq)));
  const elapsed = (performance.now() - start) / 1000;
  acq.sort((a, b) => a - b);
  const p50 = acq.length ? acq[Math.floor(acq.length / 2)] : NaN;
  const total = counts.reduce((a, b) => a + b, 0);
  console.log(`uncontended\t${system}\t${clients}\tpairs_per_s\t${(total / elapsed).toPrecision(6)}`);
  console.log(`uncontended\t${system}\t${clients}\tacq_p50_us\t${p50.toPrecision(6)}`);
}

for (const clients of clientCounts) {
  await run("typescript-pg-sql", driverWorker, clients);
  await run("typescript-client", clientWorker, clients);
}
