// Runs the conformance scenarios of client/conformance with the TypeScript
// client. The format is described in client/conformance/README.md.
// runScenario returns passed, failed (with the step and the reason) or skipped
// (with the reason); it never throws for a scenario's failure.
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import pg from "pg";

import {
  BusyError,
  ConnectError,
  InvalidArgumentError,
  Lease,
  LeaseLostError,
  Locks,
  NotHeldError,
  PermissionDeniedError,
  ServerError,
  StaleTokenError,
  UnknownOutcomeError,
  assertHolds,
  connectionConfig,
  fence,
  type LocksOptions,
} from "../src/index.js";
import { mapError } from "../src/errors.js";

const here = dirname(fileURLToPath(import.meta.url));
// build-test/test -> client/typescript -> client
const clientDir = resolve(here, "..", "..", "..");
export const CONFORMANCE_DIR = join(clientDir, "conformance");
const SKIP_FILE = join(clientDir, "typescript", "test", "conformance-skip.json");

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
type Scenario = { name: string; steps: Json[]; cleanup?: Json[]; clients?: Record<string, Json>; sessions?: Record<string, Json>; requires?: string[] };
type StepResult = { result: Record<string, unknown>; error: unknown; elapsed: number };

const ERROR_NAMES: [new (...args: never[]) => Error, string][] = [
  [StaleTokenError, "stale_token"],
  [NotHeldError, "not_held"],
  [BusyError, "busy"],
  [InvalidArgumentError, "invalid_argument"],
  [PermissionDeniedError, "permission"],
  [UnknownOutcomeError, "unknown_outcome"],
  [ConnectError, "connection"],
  [LeaseLostError, "lease_lost"],
  [ServerError, "server"],
];

const RESULT_KEYS: Record<string, string[]> = {
  try_acquire: ["granted", "fencing_token", "owner_token"],
  acquire: ["granted", "fencing_token", "owner_token"],
  renew: ["outcome"],
  release: ["outcome"],
  lease_state: ["valid", "lost", "time_left_ms", "on_lost_called"],
  wait_lost: ["lost"],
  body: [],
  body_started: [],
  fenced_write: ["committed"],
  sql: ["rows", "value"],
  new_owner: [],
  sleep: [],
  mark: [],
};
const REFERENCE = /^\$([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$/;
const COMPARATORS = new Set(["eq", "ne", "gt", "ge", "lt", "le"]);

class StepFailed extends Error {}

export interface Environment {
  dsn: string;
  adminDsn: string;
  pool2Dsn: string;
  pooler: string;
}

export function environment(): Environment {
  const dsn = process.env.DLOCK_CONFORMANCE_DSN ?? "";
  return {
    dsn,
    adminDsn: process.env.DLOCK_CONFORMANCE_ADMIN_DSN ?? dsn,
    pool2Dsn: process.env.DLOCK_CONFORMANCE_POOL2_DSN ?? "",
    pooler: process.env.DLOCK_CONFORMANCE_POOLER ?? "",
  };
}

function dsnNamed(env: Environment, name: string): string {
  if (name === "default") return env.dsn;
  if (name === "admin") return env.adminDsn;
  if (name === "pool2") {
    if (!env.pool2Dsn) throw new StepFailed("dsn pool2 asked for, but DLOCK_CONFORMANCE_POOL2_DSN is not set");
    return env.pool2Dsn;
  }
  throw new StepFailed(`unknown dsn ${name}`);
}

async function connect(dsn: string): Promise<pg.Client> {
  const client = new pg.Client(connectionConfig(dsn));
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

export async function setup(env: Environment): Promise<void> {
  const admin = await connect(env.adminDsn);
  try {
    await admin.query(readFileSync(join(CONFORMANCE_DIR, "setup.sql"), "utf8"));
  } finally {
    await admin.end();
  }
}

export async function capabilities(env: Environment): Promise<Set<string>> {
  const caps = new Set<string>([env.pooler ? "transaction_pooler" : "direct"]);
  const admin = await connect(env.adminDsn);
  try {
    const res = await admin.query("SELECT dlock.waiters('x') IS NOT NULL AS q");
    if (res.rows[0]?.q === true) caps.add("wait_queue");
  } finally {
    await admin.end();
  }
  return caps;
}

export function errorName(e: unknown): string | undefined {
  for (const [cls, name] of ERROR_NAMES) if (e instanceof cls) return name;
  return undefined;
}

function integerLike(v: unknown): bigint | undefined {
  if (typeof v === "bigint") return v;
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  return undefined;
}

export function valuesEqual(got: unknown, want: unknown): boolean {
  if (typeof got === "boolean" || typeof want === "boolean" || got === null || want === null) return got === want;
  const g = integerLike(got);
  const w = integerLike(want);
  if (g !== undefined && w !== undefined && (typeof got !== "string" || typeof want !== "string")) return g === w;
  return got === want;
}

function order(got: unknown, want: unknown): number | undefined {
  const g = integerLike(got);
  const w = integerLike(want);
  if (g !== undefined && w !== undefined) return g < w ? -1 : g > w ? 1 : 0;
  if (typeof got === "number" || typeof want === "number" || typeof got === "bigint" || typeof want === "bigint") {
    const gn = Number(got);
    const wn = Number(want);
    if (Number.isNaN(gn) || Number.isNaN(wn)) return undefined;
    return gn < wn ? -1 : gn > wn ? 1 : 0;
  }
  return undefined;
}

class Body {
  started = false;
  token: bigint | undefined;
  waiters: (() => void)[] = [];
  start(token: bigint): void {
    this.token = token;
    this.started = true;
    for (const w of this.waiters.splice(0)) w();
  }
}

interface Pending {
  step: Json;
  started: number;
  promise: Promise<StepResult>;
}

export class ScenarioRun {
  readonly ns: string;
  readonly vars = new Map<string, unknown>();
  readonly marks = new Map<string, number>();
  readonly clients = new Map<string, Locks>();
  readonly sessions = new Map<string, pg.Client>();
  readonly fenceConns = new Map<string, pg.Client>();
  readonly leases: Lease[] = [];
  readonly onLostCalled = new Map<Lease, boolean>();
  readonly bodies = new Map<string, Body>();
  readonly pending = new Map<string, Pending>();
  admin: pg.Client | undefined;

  constructor(
    readonly scenario: Scenario,
    readonly env: Environment,
  ) {
    this.ns = `conf/typescript/${randomBytes(4).toString("hex")}/${scenario.name}/`;
  }

  resolve(value: unknown): unknown {
    if (typeof value !== "string") return value;
    const m = REFERENCE.exec(value);
    if (!m) return value.split("${ns}").join(this.ns);
    const [, name, attr] = m as unknown as [string, string, string | undefined];
    if (!this.vars.has(name)) throw new StepFailed(`unknown variable $${name}`);
    const obj = this.vars.get(name);
    if (obj instanceof Lease) {
      if (attr === undefined) return obj;
      if (attr === "fencing_token") return obj.fencingToken;
      if (attr === "owner_token") return obj.ownerToken;
      if (attr === "name") return obj.name;
      throw new StepFailed(`variable $${name} has no field ${attr}`);
    }
    if (obj !== null && typeof obj === "object") {
      const rec = obj as Record<string, unknown>;
      const key = attr ?? "_";
      if (!(key in rec)) throw new StepFailed(`variable $${name} has no field ${key}`);
      return rec[key];
    }
    if (attr !== undefined) throw new StepFailed(`variable $${name} has no field ${attr}`);
    return obj;
  }

  lockName(value: Json): string {
    if (value !== null && typeof value === "object") {
      if (!("exact" in value)) throw new StepFailed(`a name object needs exact: ${JSON.stringify(value)}`);
      return String(value.exact).repeat(Number(value.repeat ?? 1));
    }
    return this.ns + String(value);
  }

  compare(what: string, got: unknown, want: Json): void {
    if (want !== null && typeof want === "object" && !Array.isArray(want)) {
      const keys = Object.keys(want);
      if (keys.length > 0 && keys.every((k) => COMPARATORS.has(k))) {
        for (const op of keys) {
          const w = this.resolve(want[op]);
          const o = order(got, w);
          const ok =
            op === "eq"
              ? valuesEqual(got, w)
              : op === "ne"
                ? !valuesEqual(got, w)
                : o !== undefined &&
                  ((op === "gt" && o > 0) || (op === "ge" && o >= 0) || (op === "lt" && o < 0) || (op === "le" && o <= 0));
          if (!ok) throw new StepFailed(`${what}: got ${String(got)}, expected ${op} ${String(w)}`);
        }
        return;
      }
    }
    if (Array.isArray(want)) {
      if (!Array.isArray(got) || got.length !== want.length) {
        throw new StepFailed(`${what}: got ${show(got)}, expected ${show(want)}`);
      }
      want.forEach((w, i) => this.compare(`${what}[${i}]`, got[i], w));
      return;
    }
    const w = this.resolve(want);
    if (!valuesEqual(got, w)) throw new StepFailed(`${what}: got ${show(got)}, expected ${show(w)}`);
  }

  check(step: Json, op: string, r: StepResult): void {
    const expect: Record<string, Json> = step.expect ?? {};
    for (const key of Object.keys(expect)) {
      if (!(RESULT_KEYS[op] ?? []).includes(key) && key !== "error" && key !== "elapsed_ms") {
        throw new StepFailed(`unknown expectation key ${key} for op ${op}`);
      }
    }
    if ("error" in expect) {
      if (r.error === undefined) throw new StepFailed(`expected error ${expect.error}, but it succeeded with ${show(r.result)}`);
      const name = errorName(r.error);
      if (name !== expect.error) throw new StepFailed(`expected error ${expect.error}, got ${name}: ${String(r.error)}`);
    } else if (r.error !== undefined) {
      throw new StepFailed(`raised ${errorName(r.error)}: ${String(r.error)}`);
    }
    for (const [key, want] of Object.entries(expect)) {
      if (key === "error") continue;
      if (key === "elapsed_ms") {
        this.compare(key, r.elapsed, want);
        continue;
      }
      if (!(key in r.result)) throw new StepFailed(`no ${key} in the result ${show(r.result)}`);
      this.compare(key, r.result[key], want);
    }
  }

  clientOptions(name: string): LocksOptions {
    const spec: Json = this.scenario.clients?.[name] ?? {};
    const unknown = Object.keys(spec).filter((k) => !["dsn", "pooling", "wait_mode", "call_timeout_ms", "poll_interval_ms"].includes(k));
    if (unknown.length) throw new StepFailed(`unknown client options ${unknown.join(", ")}`);
    const opts: LocksOptions = { connection: dsnNamed(this.env, spec.dsn ?? "default") };
    if (spec.pooling !== undefined) opts.pooling = spec.pooling;
    if (spec.wait_mode !== undefined) opts.waitMode = spec.wait_mode;
    if (spec.call_timeout_ms !== undefined) opts.callTimeout = spec.call_timeout_ms;
    if (spec.poll_interval_ms !== undefined) opts.pollInterval = spec.poll_interval_ms;
    return opts;
  }

  client(name: string): Locks {
    const c = this.clients.get(name);
    if (!c) throw new StepFailed(`unknown client ${name}`);
    return c;
  }

  async session(name: string | undefined): Promise<pg.Client> {
    if (name === undefined) return this.admin as pg.Client;
    let s = this.sessions.get(name);
    if (!s) {
      const spec = this.scenario.sessions?.[name];
      if (spec === undefined) throw new StepFailed(`unknown session ${name}`);
      s = await connect(dsnNamed(this.env, spec.dsn ?? "admin"));
      this.sessions.set(name, s);
    }
    return s;
  }

  track(lease: Lease): Lease {
    this.leases.push(lease);
    this.onLostCalled.set(lease, false);
    lease.onLost(() => this.onLostCalled.set(lease, true));
    return lease;
  }

  leaseVar(step: Json): Lease {
    const l = this.vars.get(step.lease);
    if (!(l instanceof Lease)) throw new StepFailed(`no lease ${step.lease}`);
    return l;
  }

  async opAcquire(step: Json, op: string): Promise<Record<string, unknown>> {
    const locks = this.client(step.client);
    const name = this.lockName(step.name);
    const base = {
      ttl: step.ttl_ms as number,
      keepAlive: (step.keep_alive ?? true) as boolean,
      ...(step.owner !== undefined ? { ownerToken: String(this.resolve(step.owner)) } : {}),
    };
    const lease =
      op === "try_acquire" ? await locks.tryAcquire(name, base) : await locks.acquire(name, { ...base, wait: step.wait_ms });
    if (lease === null) return { granted: false };
    this.track(lease);
    if (step.as !== undefined) this.vars.set(step.as, lease);
    return { granted: true, fencing_token: lease.fencingToken, owner_token: lease.ownerToken };
  }

  // The scoped form: the body waits (up to max_ms) until the library's signal says the lease is lost.
  async opBody(step: Json): Promise<StepResult> {
    const started = performance.now();
    const body = this.bodies.get(step.as) ?? new Body();
    this.bodies.set(step.as, body);
    const locks = this.client(step.client);
    try {
      await locks.using(this.lockName(step.name), { ttl: step.ttl_ms, wait: step.wait_ms ?? 0 }, async (lease, signal) => {
        this.track(lease);
        body.start(lease.fencingToken);
        await delay(step.max_ms, undefined, { signal }).catch(() => undefined);
      });
    } catch (e) {
      return { result: {}, error: e, elapsed: performance.now() - started };
    }
    return { result: {}, error: undefined, elapsed: performance.now() - started };
  }

  async opBodyStarted(step: Json): Promise<Record<string, unknown>> {
    const body = this.bodies.get(step.body);
    if (!body) throw new StepFailed(`no body ${step.body}`);
    if (!body.started) {
      let timer: NodeJS.Timeout | undefined;
      const started = await Promise.race([
        new Promise<boolean>((r) => body.waiters.push(() => r(true))),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(false), step.within_ms))),
        (this.pending.get(step.body)?.promise ?? new Promise<never>(() => undefined)).then((res) => {
          throw new StepFailed(`the body ended before it started: ${String(res.error)}`);
        }),
      ]);
      clearTimeout(timer);
      if (!started) throw new StepFailed("the body did not start in time");
    }
    this.vars.set(step.body, { fencing_token: body.token, _: body.token });
    return {};
  }

  async opFencedWrite(step: Json): Promise<Record<string, unknown>> {
    let conn = this.fenceConns.get(step.client);
    if (!conn) {
      conn = await connect(String(this.clientOptions(step.client).connection));
      this.fenceConns.set(step.client, conn);
    }
    const token = BigInt(String(this.resolve(step.token)));
    await conn.query("BEGIN");
    try {
      if (step.role !== undefined) await conn.query(`SET LOCAL ROLE ${conn.escapeIdentifier(step.role)}`);
      if (step.lock !== undefined) await assertHolds(conn, this.lockName(step.lock), token);
      await fence(conn, this.lockName(step.resource), token);
      await conn.query("INSERT INTO public.dlock_conformance_ledger (ns, writer, fencing_token) VALUES ($1, $2, $3)", [
        this.ns,
        step.writer,
        token.toString(),
      ]);
      await conn.query("COMMIT");
    } catch (e) {
      await conn.query("ROLLBACK").catch(() => undefined);
      throw e;
    }
    return { committed: true };
  }

  async opSql(step: Json): Promise<Record<string, unknown>> {
    const conn = await this.session(step.session);
    const params = ((step.params ?? []) as Json[]).map((p) => {
      const v = this.resolve(p);
      return typeof v === "bigint" ? v.toString() : v;
    });
    const until: string | undefined = step.until;
    if (until !== undefined && until !== "rows" && until !== "true") throw new StepFailed(`unknown until ${until}`);
    const deadline = performance.now() + (step.within_ms ?? 0);
    let rows: unknown[][];
    let fields: string[];
    for (;;) {
      let res: pg.QueryArrayResult;
      try {
        res = await conn.query({ text: step.query, values: params, rowMode: "array" });
      } catch (e) {
        throw mapError(e, "sql");
      }
      rows = res.rows ?? [];
      fields = (res.fields ?? []).map((f) => f.name);
      const done =
        until === undefined || (until === "rows" && rows.length > 0) || (until === "true" && rows[0]?.[0] === true);
      if (done) break;
      if (performance.now() >= deadline) {
        throw new StepFailed(`${step.query} did not return ${until} within ${step.within_ms ?? 0} ms`);
      }
      await delay(50);
    }
    if (step.as !== undefined) {
      const saved: Record<string, unknown> = { _: rows[0]?.[0] ?? null };
      fields.forEach((f, i) => (saved[f] = rows[0]?.[i] ?? null));
      this.vars.set(step.as, saved);
    }
    return { rows, value: rows[0]?.[0] ?? null };
  }

  async execute(step: Json): Promise<StepResult> {
    const op: string = step.op;
    const started = performance.now();
    let result: Record<string, unknown> = {};
    try {
      switch (op) {
        case "try_acquire":
        case "acquire":
          result = await this.opAcquire(step, op);
          break;
        case "renew":
          result = { outcome: await this.leaseVar(step).renew(step.ttl_ms) };
          break;
        case "release":
          result = { outcome: await this.leaseVar(step).release() };
          break;
        case "lease_state": {
          const l = this.leaseVar(step);
          result = { valid: l.valid, lost: l.lost, time_left_ms: l.timeLeft(), on_lost_called: this.onLostCalled.get(l) ?? false };
          break;
        }
        case "wait_lost":
          result = { lost: await this.leaseVar(step).waitLost(step.within_ms) };
          break;
        case "body":
          return await this.opBody(step);
        case "body_started":
          result = await this.opBodyStarted(step);
          break;
        case "fenced_write":
          result = await this.opFencedWrite(step);
          break;
        case "sql":
          result = await this.opSql(step);
          break;
        case "new_owner":
          this.vars.set(step.as, randomUUID());
          break;
        case "sleep":
          await delay(step.ms);
          break;
        case "mark":
          this.marks.set(step.as, performance.now());
          break;
        default:
          throw new StepFailed(`unknown op ${op}`);
      }
    } catch (e) {
      if (e instanceof StepFailed) throw e;
      return { result: {}, error: e, elapsed: performance.now() - started };
    }
    return { result, error: undefined, elapsed: performance.now() - started };
  }

  async step(step: Json): Promise<void> {
    const op: string = step.op;
    if (!(op in RESULT_KEYS) && op !== "await") throw new StepFailed(`unknown op ${op}`);
    if (op === "await") {
      const pending = this.pending.get(step.handle);
      if (!pending) throw new StepFailed(`no async step or body ${step.handle}`);
      this.pending.delete(step.handle);
      const r = await pending.promise;
      const since = step.since !== undefined ? (this.marks.get(step.since) as number) : pending.started;
      this.check(step, pending.step.op, { ...r, elapsed: performance.now() - since });
      return;
    }
    if (step.async !== undefined || op === "body") {
      const handle: string = step.async ?? step.as;
      const promise = this.execute(step).catch((e: unknown) => ({ result: {}, error: e, elapsed: 0 }));
      this.pending.set(handle, { step, started: performance.now(), promise });
      return;
    }
    const r = await this.execute(step);
    if (op === "wait_lost" && step.since !== undefined) r.elapsed = performance.now() - (this.marks.get(step.since) as number);
    this.check(step, op, r);
  }

  async run(): Promise<void> {
    this.admin = await connect(this.env.adminDsn);
    for (const name of Object.keys(this.scenario.clients ?? {})) this.clients.set(name, new Locks(this.clientOptions(name)));
    for (const [i, step] of this.scenario.steps.entries()) {
      try {
        await this.step(step);
      } catch (e) {
        if (e instanceof StepFailed) throw new StepFailed(`step ${i + 1} (${step.op}): ${e.message}`);
        throw e;
      }
    }
  }

  async cleanup(): Promise<void> {
    for (const step of this.scenario.cleanup ?? []) await this.opSql(step).catch(() => undefined);
    await Promise.all(this.leases.map((l) => l.release().catch(() => undefined)));
    await Promise.all([...this.pending.values()].map((p) => p.promise.catch(() => undefined)));
    await Promise.all([...this.clients.values()].map((c) => c.close().catch(() => undefined)));
    for (const c of [...this.sessions.values(), ...this.fenceConns.values(), this.admin]) await c?.end().catch(() => undefined);
  }
}

function show(v: unknown): string {
  return JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x));
}

export function load(path: string): Scenario {
  const s = JSON.parse(readFileSync(path, "utf8"));
  if (s.format !== 1) throw new Error(`${path}: format ${s.format} is not 1`);
  return s as Scenario;
}

export function scenarioFiles(dir: "scenarios" | "negative"): string[] {
  const d = join(CONFORMANCE_DIR, dir);
  return readdirSync(d)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => join(d, f));
}

export function skips(): Record<string, string> {
  return existsSync(SKIP_FILE) ? JSON.parse(readFileSync(SKIP_FILE, "utf8")) : {};
}

export interface Result {
  name: string;
  status: "passed" | "failed" | "skipped";
  detail: string;
}

export async function runScenario(
  scenario: Scenario,
  env: Environment,
  caps: Set<string>,
  skip: Record<string, string> = {},
): Promise<Result> {
  const name = scenario.name;
  if (name in skip) return { name, status: "skipped", detail: `skipped by the TypeScript client: ${skip[name]}` };
  const missing = (scenario.requires ?? []).filter((r) => !caps.has(r));
  if (missing.length) return { name, status: "skipped", detail: `requires ${missing.join(", ")}` };
  const run = new ScenarioRun(scenario, env);
  try {
    await run.run();
    return { name, status: "passed", detail: "" };
  } catch (e) {
    return { name, status: "failed", detail: e instanceof StepFailed ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e) };
  } finally {
    await run.cleanup();
  }
}
