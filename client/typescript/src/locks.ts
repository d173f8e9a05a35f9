// Locks (the client), Lease, and the keep-alive that renews leases and notices their loss.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { performance } from "node:perf_hooks";

import pg from "pg";

import {
  BusyError,
  ConnectError,
  DlockError,
  InvalidArgumentError,
  LeaseLostError,
  UnknownOutcomeError,
  isUnknown,
  mapError,
} from "./errors.js";
import { ACQUIRE, RELEASE, RENEW, Session, TRY_ACQUIRE, connectionConfig, type Pooling } from "./session.js";

/** What a renewal or a release did. `unknown`: it may or may not have taken effect. */
export type Outcome = "done" | "refused" | "unknown";
/** Why a lease was lost: a renewal was refused, or its deadline passed without a confirmed renewal. */
export type LossReason = "refused" | "expired";
export type WaitMode = "automatic" | "server" | "poll";

/** How an acquire whose outcome is unknown is retried (same owner token, exponential backoff, full jitter). */
export interface RetryOptions {
  maxAttempts?: number;
  initialBackoff?: number;
  maxBackoff?: number;
}

/** Durations are milliseconds. */
export interface LocksOptions {
  /** A URI, a libpq keyword/value string, or node-postgres's configuration; default: the PG* environment. */
  connection?: string | pg.ClientConfig;
  /** Written to the lock's `holder` (default `hostname:pid`). */
  holder?: string;
  /** The bound of every call (statement_timeout; an acquire's wait adds to it). Default 5000. */
  callTimeout?: number;
  /** TCP keepalive and connect timeout of the library's connections. Default 10000. */
  networkTimeout?: number;
  /** `detect` (default): find a transaction pooler at a connection's first call; `transaction`; `none`. */
  pooling?: Pooling;
  /** `automatic` (default): wait in the server on a direct connection, in the client behind a pooler. */
  waitMode?: WaitMode;
  /** The longest sleep between two tries of a client-side wait. Default 500. */
  pollInterval?: number;
  driftAllowance?: number;
  safetyMargin?: number;
  retry?: RetryOptions;
}

export interface LeaseOptions {
  /** The lease's length (ms). */
  ttl: number;
  /** The owner token (a UUID); default: a new one, kept for retries. */
  ownerToken?: string;
  /** Renew in the background every `renewEvery` (default ttl/3). Default true. */
  keepAlive?: boolean;
  renewEvery?: number;
  /** Called once when the lease is lost. */
  onLost?: (lease: Lease) => void;
}

export interface AcquireOptions extends LeaseOptions {
  /** How long to wait for a held name (ms); 0 is one attempt. */
  wait: number;
}

interface Options {
  connection: pg.ClientConfig;
  holder: string;
  callTimeout: number;
  networkTimeout: number;
  pooling: Pooling;
  waitMode: WaitMode;
  pollInterval: number;
  driftAllowance: number;
  safetyMargin: number;
  retry: Required<RetryOptions>;
}

const IDLE_SESSIONS_KEPT = 4;
const POLL_FIRST_INTERVAL = 20;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

function duration(value: unknown, what: string, subject: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new InvalidArgumentError(`${what} must be a finite number of milliseconds`, subject);
  }
  return value;
}

/**
 * A lease on a lock name, granted to this client. It knows its own deadline on
 * the monotonic clock (`timeLeft()`, `valid`), keeps itself alive when asked to,
 * and says the moment it can no longer be sure it holds the lock: `lost`,
 * `signal` (an AbortSignal aborted on loss), `waitLost()`, `onLost`.
 */
export class Lease {
  readonly name: string;
  readonly ownerToken: string;
  readonly fencingToken: bigint;
  readonly ttl: number;
  renewEvery: number | undefined;
  /** @internal */ nextRenewal = 0;
  /** @internal */ renewing: Promise<unknown> | null = null;
  /** @internal */ timers: { renew?: NodeJS.Timeout; watch?: NodeJS.Timeout } = {};
  #deadline: number;
  #lost: LossReason | undefined;
  #released = false;
  readonly #controller = new AbortController();
  readonly #locks: Locks;

  /** @internal */
  constructor(locks: Locks, name: string, ownerToken: string, fencingToken: bigint, ttl: number, deadline: number) {
    this.#locks = locks;
    this.name = name;
    this.ownerToken = ownerToken;
    this.fencingToken = fencingToken;
    this.ttl = ttl;
    this.#deadline = deadline;
  }

  /** The end of the lease on `performance.now()`'s clock, as far as this client knows. */
  get deadline(): number {
    return this.#deadline;
  }
  /** Milliseconds until the deadline (0 when past, lost or released). */
  timeLeft(): number {
    if (this.#lost !== undefined || this.#released) return 0;
    return Math.max(0, this.#deadline - now());
  }
  /** Held as far as the client knows: not lost, not released, before its deadline. */
  get valid(): boolean {
    return this.timeLeft() > 0;
  }
  get lost(): boolean {
    return this.#lost !== undefined;
  }
  get lossReason(): LossReason | undefined {
    return this.#lost;
  }
  get released(): boolean {
    return this.#released;
  }
  /** Aborted when the lease is lost (its reason a LeaseLostError). */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Calls `callback(lease)` once when the lease is lost (at once if it is already). */
  onLost(callback: (lease: Lease) => void): void {
    if (this.#lost !== undefined) {
      callback(this);
      return;
    }
    this.signal.addEventListener("abort", () => callback(this), { once: true });
  }

  /** Resolves true when the lease is lost, false after `timeout` ms or at its release. */
  waitLost(timeout?: number): Promise<boolean> {
    if (this.#lost !== undefined) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = timeout === undefined ? undefined : setTimeout(() => resolve(this.lost), timeout);
      this.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        { once: true },
      );
    });
  }

  /** @internal */
  setDeadline(deadline: number): void {
    if (this.#lost === undefined) this.#deadline = deadline;
  }

  /** @internal */
  markLost(reason: LossReason): void {
    if (this.#lost !== undefined || this.#released) return;
    this.#lost = reason;
    this.#locks.forget(this);
    this.#controller.abort(new LeaseLostError(`lease of "${this.name}" was lost (${reason})`, this.name));
  }

  /** Renews now, for `ttl` ms (default: the lease's). A refused renewal marks the lease lost. */
  async renew(ttl?: number): Promise<Outcome> {
    const t = ttl === undefined ? this.ttl : duration(ttl, "ttl", this.name);
    if (this.#released) return "refused";
    if (this.renewing) await this.renewing.catch(() => undefined);
    const work = this.#locks.renewOnce(this, t);
    this.renewing = work;
    try {
      const outcome = await work;
      if (outcome === "refused") this.markLost("refused");
      return outcome;
    } finally {
      if (this.renewing === work) this.renewing = null;
    }
  }

  /**
   * Ends the lease: `done`, `refused` (it was no longer held) or `unknown`. Waits
   * for a renewal in flight (at most a call timeout); never rejects. A second
   * release returns `refused` without a call.
   */
  async release(): Promise<Outcome> {
    if (this.#released) return "refused";
    this.#released = true;
    this.#locks.forget(this);
    if (this.renewing) {
      await Promise.race([this.renewing.catch(() => undefined), sleep(this.#locks.callTimeout)]);
    }
    return this.#locks.releaseByOwner(this.name, this.ownerToken);
  }
}

/**
 * A pg_dlock client: leases on lock names of one database. May be used by many
 * concurrent tasks; each call takes one of its connections.
 */
export class Locks {
  readonly #options: Options;
  readonly #idle: Session[] = [];
  readonly #leases = new Set<Lease>();
  #keepAliveSession: Session | null = null;
  #closed = false;

  constructor(options: LocksOptions | string = {}) {
    const o: LocksOptions = typeof options === "string" ? { connection: options } : options;
    const pooling = o.pooling ?? "detect";
    if (!["detect", "none", "transaction"].includes(pooling)) {
      throw new InvalidArgumentError(`pooling must be detect, none or transaction, not ${String(pooling)}`);
    }
    const waitMode = o.waitMode ?? "automatic";
    if (!["automatic", "server", "poll"].includes(waitMode)) {
      throw new InvalidArgumentError(`waitMode must be automatic, server or poll, not ${String(waitMode)}`);
    }
    this.#options = {
      connection:
        typeof o.connection === "string" || o.connection === undefined
          ? connectionConfig(o.connection ?? "")
          : o.connection,
      holder: o.holder ?? `${hostname()}:${process.pid}`,
      callTimeout: o.callTimeout ?? 5000,
      networkTimeout: o.networkTimeout ?? 10000,
      pooling,
      waitMode,
      pollInterval: o.pollInterval ?? 500,
      driftAllowance: o.driftAllowance ?? 0.01,
      safetyMargin: o.safetyMargin ?? 50,
      retry: {
        maxAttempts: o.retry?.maxAttempts ?? 5,
        initialBackoff: o.retry?.initialBackoff ?? 50,
        maxBackoff: o.retry?.maxBackoff ?? 2000,
      },
    };
  }

  get callTimeout(): number {
    return this.#options.callTimeout;
  }

  /** The lease, or null when another owner holds a live lease. */
  async tryAcquire(name: string, options: LeaseOptions): Promise<Lease | null> {
    return this.#acquire(name, options, undefined);
  }

  /** The lease, waiting up to `options.wait` ms; BusyError when the wait runs out. */
  async acquire(name: string, options: AcquireOptions): Promise<Lease> {
    const lease = await this.#acquire(name, options, duration(options.wait, "wait", name));
    if (lease === null) throw new BusyError(`lock "${name}" is busy`, name);
    return lease;
  }

  /**
   * Acquires (waiting up to `options.wait`, default 0), runs `body(lease, signal)`
   * while the lease is kept alive, and releases it. `signal` aborts when the lease
   * is lost; the call then rejects with LeaseLostError (also when the body
   * finished but the lease was lost meanwhile).
   */
  async using<T>(
    name: string,
    options: LeaseOptions & { wait?: number },
    body: (lease: Lease, signal: AbortSignal) => Promise<T> | T,
  ): Promise<T> {
    const lease = await this.acquire(name, { ...options, wait: options.wait ?? 0, keepAlive: true });
    let result: T;
    try {
      result = await body(lease, lease.signal);
    } catch (e) {
      await lease.release();
      if (lease.lost) throw new LeaseLostError(`lease of "${name}" was lost: the body was stopped`, name, undefined, { cause: e });
      throw e;
    }
    await lease.release();
    if (lease.lost) throw new LeaseLostError(`lease of "${name}" was lost`, name);
    return result;
  }

  /** Releases the leases still held, stops the keep-alive, closes the connections. */
  async close(): Promise<void> {
    await Promise.all([...this.#leases].map((l) => l.release()));
    this.#closed = true;
    for (const s of this.#idle.splice(0)) s.close();
    this.#keepAliveSession?.close();
    this.#keepAliveSession = null;
  }

  // -- connections ----------------------------------------------------------

  async #withSession<T>(fn: (s: Session) => Promise<T>): Promise<T> {
    // A connection that broke while idle (the server or a pooler closed it) is dropped here.
    let idle = this.#idle.pop();
    while (idle !== undefined && idle.broken) {
      idle.close();
      idle = this.#idle.pop();
    }
    const s =
      idle ??
      (await Session.open({
        connection: this.#options.connection,
        pooling: this.#options.pooling,
        callTimeoutMs: this.#options.callTimeout,
        networkTimeoutMs: this.#options.networkTimeout,
      }));
    let keep = false;
    try {
      const result = await fn(s);
      keep = !s.broken;
      return result;
    } catch (e) {
      keep = !isUnknown(e) && !s.broken;
      throw e;
    } finally {
      if (keep && !this.#closed && this.#idle.length < IDLE_SESSIONS_KEPT) this.#idle.push(s);
      else s.close();
    }
  }

  #deadline(sent: number, received: number, waitedMs: unknown, ttl: number): number {
    const o = this.#options;
    const waited = Math.min(Math.max(0, Number(waitedMs ?? 0)), received - sent);
    return sent + waited + ttl - (waited + ttl) * o.driftAllowance - o.safetyMargin;
  }

  // -- acquire --------------------------------------------------------------

  async #acquire(name: string, options: LeaseOptions, wait: number | undefined): Promise<Lease | null> {
    if (this.#closed) throw new DlockError("the client is closed", name);
    if (typeof name !== "string") throw new InvalidArgumentError("the lock name must be a string", String(name));
    const ttl = duration(options.ttl, "ttl", name);
    if (ttl <= 0) throw new InvalidArgumentError(`ttl must be positive, not ${ttl}`, name);
    if (wait !== undefined && wait < 0) throw new InvalidArgumentError(`wait must not be negative, not ${wait}`, name);
    const every = options.renewEvery === undefined ? ttl / 3 : duration(options.renewEvery, "renewEvery", name);
    if (every <= 0) throw new InvalidArgumentError("renewEvery must be positive", name);
    const owner = options.ownerToken ?? randomUUID();
    const started = now();
    let lease: Lease | null;
    if (wait === undefined) lease = await this.#attempts(name, ttl, owner, undefined);
    else if (await this.#polls()) lease = await this.#poll(name, ttl, owner, started + wait);
    else lease = await this.#attempts(name, ttl, owner, started + wait);
    if (lease === null) return null;
    const keepAlive = options.keepAlive ?? true;
    lease.renewEvery = keepAlive ? every : undefined;
    lease.nextRenewal = now() + every;
    if (options.onLost) lease.onLost(options.onLost);
    this.#leases.add(lease);
    if (keepAlive) {
      this.#scheduleRenewal(lease);
      this.#watch(lease);
    }
    return lease;
  }

  async #polls(): Promise<boolean> {
    const mode = this.#options.waitMode;
    if (mode !== "automatic") return mode === "poll";
    try {
      return await this.#withSession((s) => s.transactionPooled());
    } catch {
      return true; // when detection fails, poll
    }
  }

  // A client-side wait: try, sleep a jittered interval that doubles up to
  // pollInterval, until the wait runs out; no server connection is held in
  // between (the default behind a transaction pooler).
  async #poll(name: string, ttl: number, owner: string, waitEnd: number): Promise<Lease> {
    let interval = POLL_FIRST_INTERVAL;
    for (;;) {
      const lease = await this.#attempts(name, ttl, owner, undefined);
      if (lease !== null) return lease;
      const left = waitEnd - now();
      if (left <= 0) throw new BusyError(`lock "${name}" is busy`, name);
      await sleep(Math.min(left, interval / 2 + (Math.random() * interval) / 2));
      interval = Math.min(interval * 2, this.#options.pollInterval);
    }
  }

  // One acquire, retried with the same owner token while its outcome is unknown.
  async #attempts(name: string, ttl: number, owner: string, waitEnd: number | undefined): Promise<Lease | null> {
    const o = this.#options;
    let uncertain = false;
    let last: unknown;
    const attempts = Math.max(1, o.retry.maxAttempts);
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        await sleep(Math.random() * Math.min(o.retry.maxBackoff, o.retry.initialBackoff * 2 ** (attempt - 1)));
      }
      let sent = 0;
      let received = 0;
      let rows: Record<string, unknown>[];
      try {
        rows = await this.#withSession(async (s) => {
          sent = now();
          let r: Record<string, unknown>[];
          if (waitEnd === undefined) {
            r = await s.call(o.callTimeout, TRY_ACQUIRE, [name, Math.round(ttl), owner, o.holder]);
          } else {
            const left = Math.max(0, waitEnd - sent);
            r = await s.call(left + o.callTimeout, ACQUIRE, [name, Math.round(ttl), owner, o.holder, Math.round(left)]);
          }
          received = now();
          if (s.commitUncertain) {
            // Committed locally, but the wait for the standby was cancelled.
            s.broken = true;
            throw new UnknownOutcomeError("commit only local", name, owner);
          }
          return r;
        });
      } catch (e) {
        if (e instanceof ConnectError) {
          if (!uncertain) throw e; // nothing was sent
          last = e;
          continue;
        }
        if (isUnknown(e)) {
          uncertain = true;
          last = e;
          continue;
        }
        throw mapError(e, name, owner);
      }
      const row = rows[0];
      if (row === undefined || row.fencing_token === null || row.fencing_token === undefined) return null;
      return new Lease(
        this,
        String(row.lock_name),
        String(row.owner_token),
        BigInt(String(row.fencing_token)),
        ttl,
        this.#deadline(sent, received, row.waited, ttl),
      );
    }
    const why = last instanceof Error ? last.message : String(last);
    throw new UnknownOutcomeError(
      `outcome of the acquire of "${name}" is unknown after ${attempts} attempts: ${why}`,
      name,
      owner,
      undefined,
      { cause: last },
    );
  }

  // -- renew and release ----------------------------------------------------

  /** @internal One renewal on a caller connection. */
  async renewOnce(lease: Lease, ttl: number): Promise<Outcome> {
    try {
      return await this.#withSession((s) => this.#renewOn(s, lease, ttl, this.#options.callTimeout));
    } catch (e) {
      if (e instanceof DlockError && !(e instanceof UnknownOutcomeError) && !(e instanceof ConnectError)) throw e;
      return "unknown";
    }
  }

  async #renewOn(s: Session, lease: Lease, ttl: number, timeout: number): Promise<Outcome> {
    const sent = now();
    let rows: Record<string, unknown>[];
    try {
      rows = await s.call(timeout, RENEW, [lease.name, lease.ownerToken, Math.round(ttl)]);
    } catch (e) {
      const mapped = mapError(e, lease.name, lease.ownerToken);
      const state = mapped.sqlstate;
      if (state === "22023" || state === "22004" || state === "42501" || state === "0A000") throw mapped;
      if (isUnknown(e)) s.broken = true;
      return "unknown";
    }
    const received = now();
    if (s.commitUncertain) {
      s.broken = true;
      return "unknown";
    }
    const row = rows[0];
    if (row === undefined || row.waited === null || row.waited === undefined) return "refused";
    lease.setDeadline(this.#deadline(sent, received, row.waited, ttl));
    lease.nextRenewal = now() + (lease.renewEvery ?? ttl / 3);
    if (lease.renewEvery !== undefined) {
      this.#scheduleRenewal(lease);
      this.#watch(lease);
    }
    return "done";
  }

  /** @internal Releases by owner token; never rejects. One more try on a fresh connection when the first broke. */
  async releaseByOwner(name: string, owner: string): Promise<Outcome> {
    let uncertain = false;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const { rows, local } = await this.#withSession(async (s) => {
          const r = await s.call(this.#options.callTimeout, RELEASE, [name, owner]);
          return { rows: r, local: s.commitUncertain };
        });
        if (local) return "unknown";
        if (rows[0]?.released === true) return "done";
        // After an uncertain first try, "not held" may mean the first one ended it.
        return uncertain ? "unknown" : "refused";
      } catch (e) {
        if (e instanceof ConnectError) return "unknown";
        if (!isUnknown(e)) return "unknown"; // e.g. the call timeout: not released
        uncertain = true;
      }
    }
    return "unknown";
  }

  /** @internal */
  forget(lease: Lease): void {
    this.#leases.delete(lease);
    clearTimeout(lease.timers.renew);
    clearTimeout(lease.timers.watch);
  }

  // -- keep-alive -----------------------------------------------------------
  // Renewals run on the keep-alive's own connection; the watcher is a timer at
  // each lease's deadline that marks it lost when no renewal moved it, also
  // while a renewal hangs.

  #scheduleRenewal(lease: Lease, at = lease.nextRenewal): void {
    clearTimeout(lease.timers.renew);
    lease.timers.renew = setTimeout(() => void this.#keepAliveRenew(lease), Math.max(0, at - now()));
  }

  #watch(lease: Lease): void {
    clearTimeout(lease.timers.watch);
    lease.timers.watch = setTimeout(
      () => {
        if (lease.released || lease.lost) return;
        if (now() >= lease.deadline) lease.markLost("expired");
        else this.#watch(lease);
      },
      Math.max(0, lease.deadline - now()) + 1,
    );
  }

  async #keepAliveRenew(lease: Lease): Promise<void> {
    if (lease.released || lease.lost || this.#closed) return;
    if (lease.renewing) {
      this.#scheduleRenewal(lease, now() + 50); // an explicit renew or a release runs
      return;
    }
    const every = lease.renewEvery ?? lease.ttl / 3;
    let shortest = every;
    for (const l of this.#leases) if (l.renewEvery !== undefined) shortest = Math.min(shortest, l.renewEvery);
    // Bounded by the time left and the shortest renewal interval, so one
    // renewal stuck behind a row lock does not stop the others for long.
    const timeout = Math.max(50, Math.min(this.#options.callTimeout, lease.timeLeft(), shortest));
    const work = (async (): Promise<Outcome> => {
      try {
        if (this.#keepAliveSession === null || this.#keepAliveSession.broken) {
          this.#keepAliveSession = await Session.open({
            connection: this.#options.connection,
            pooling: this.#options.pooling,
            callTimeoutMs: this.#options.callTimeout,
            networkTimeoutMs: this.#options.networkTimeout,
          });
        }
        return await this.#renewOn(this.#keepAliveSession, lease, lease.ttl, timeout);
      } catch {
        return "unknown";
      }
    })();
    lease.renewing = work;
    const outcome = await work;
    if (lease.renewing === work) lease.renewing = null;
    if (outcome === "refused") {
      lease.markLost("refused");
    } else if (outcome === "unknown" && !lease.released && !lease.lost) {
      // Unknown proves nothing: a fresh connection, and again soon, until the
      // watcher finds the deadline passed.
      this.#keepAliveSession?.close();
      this.#keepAliveSession = null;
      this.#scheduleRenewal(lease, now() + Math.min(200, every / 4));
    }
  }
}
