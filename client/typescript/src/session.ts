// The library's own connections: how a call is sent, bounded and read.
//
// A connection is direct or behind a transaction pooler. `pooling: "detect"`
// finds out at the connection's first call, as the C++ client does: the
// statement that makes the session settings makes them only WHERE
// pg_backend_pid() is the process id the server gave when it connected; a
// pooler in between hands out its own, so no row comes back, nothing was set,
// and the connection sends self-contained calls from then on.
//
// - Direct: statement_timeout = callTimeout and client_connection_check_interval
//   = 1s are session settings, and each call is a statement prepared by name.
//   A call with another bound (an acquire's wait) is sent self-contained.
// - Self-contained (behind a transaction pooler, or a call with its own bound):
//   one simple query that sets both for its own transaction (set_config(...,
//   true), that is SET LOCAL), then runs the statement with its values as
//   literals quoted by the driver. Nothing is prepared by name, nothing is left
//   in the server connection.
import pg from "pg";

import { ConnectError, UnknownOutcomeError } from "./errors.js";

export type Pooling = "detect" | "none" | "transaction";

export interface Statement {
  name: string;
  text: string;
}

// The lease columns: the lease, and how long the server waited between
// receiving the statement and granting (ms): the extension sets lease_until to
// its clock_timestamp() at the grant plus the ttl, so the grant time is
// lease_until - ttl, and statement_timestamp() is when the statement arrived.
const LEASE_COLUMNS =
  "SELECT l.lock_name, l.owner_token::text, l.fencing_token::text, " +
  "pg_catalog.date_part('epoch', l.lease_until - $2::bigint * interval '1 millisecond' " +
  "- pg_catalog.statement_timestamp()) * 1000 AS waited ";

export const TRY_ACQUIRE: Statement = {
  name: "dlock.try_acquire",
  text:
    LEASE_COLUMNS +
    "FROM dlock.try_acquire($1, $2::bigint * interval '1 millisecond', $3::uuid, NULLIF($4::text, '')) l",
};
export const ACQUIRE: Statement = {
  name: "dlock.acquire",
  text:
    LEASE_COLUMNS +
    "FROM dlock.acquire($1, $2::bigint * interval '1 millisecond', $5::bigint * interval '1 millisecond', " +
    "$3::uuid, NULLIF($4::text, '')) l",
};
// The server-side wait before the renewal (as above); NULL when refused.
export const RENEW: Statement = {
  name: "dlock.renew",
  text:
    "SELECT pg_catalog.date_part('epoch', r.lease_until - $3::bigint * interval '1 millisecond' " +
    "- pg_catalog.statement_timestamp()) * 1000 AS waited " +
    "FROM dlock.renew($1, $2::uuid, $3::bigint * interval '1 millisecond') AS r(lease_until)",
};
export const RELEASE: Statement = {
  name: "dlock.release",
  text: "SELECT dlock.release($1, $2::uuid) AS released",
};

const CONNECTION_CHECK_INTERVAL_MS = 1000;

/** A call's bound in whole milliseconds, never 0 (which means none). */
export function statementTimeoutMs(timeoutMs: number): number {
  return Math.max(1, Math.round(timeoutMs));
}

function settingsSelect(timeoutMs: number, local: boolean): string {
  const scope = local ? "true" : "false";
  return (
    `SELECT pg_catalog.set_config('statement_timeout', '${statementTimeoutMs(timeoutMs)}', ${scope}), ` +
    `pg_catalog.set_config('client_connection_check_interval', '${CONNECTION_CHECK_INTERVAL_MS}', ${scope})`
  );
}

/**
 * A connection string as node-postgres's configuration: a URI as it is, or a
 * libpq keyword/value string (`host=db port=5432 dbname=app`); empty: the PG*
 * environment.
 */
export function connectionConfig(dsn: string): pg.ClientConfig {
  const text = dsn.trim();
  if (text === "") return {};
  if (/^postgres(ql)?:\/\//.test(text)) return { connectionString: text };
  const config: Record<string, string> = {};
  const re = /(\w+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S+))/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const key = m[1] as string;
    const value = m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : (m[3] as string);
    config[key] = value;
  }
  const out: pg.ClientConfig = {};
  if (config.host !== undefined) out.host = config.host;
  if (config.hostaddr !== undefined && out.host === undefined) out.host = config.hostaddr;
  if (config.port !== undefined) out.port = Number(config.port);
  if (config.dbname !== undefined) out.database = config.dbname;
  if (config.user !== undefined) out.user = config.user;
  if (config.password !== undefined) out.password = config.password;
  if (config.application_name !== undefined) out.application_name = config.application_name;
  if (config.connect_timeout !== undefined) out.connectionTimeoutMillis = Number(config.connect_timeout) * 1000;
  return out;
}

export function isCommitUncertainNotice(message: string): boolean {
  return message.includes("synchronous replication") || message.includes("committed locally");
}

export interface SessionOptions {
  connection: pg.ClientConfig;
  pooling: Pooling;
  callTimeoutMs: number;
  networkTimeoutMs: number;
}

/** One of the library's connections (each call its own transaction). */
export class Session {
  readonly client: pg.Client;
  pooling: Pooling;
  commitUncertain = false;
  broken = false;
  private settled = false;
  private readonly prepared = new Set<string>();
  private readonly options: SessionOptions;

  private constructor(client: pg.Client, options: SessionOptions) {
    this.client = client;
    this.options = options;
    this.pooling = options.pooling;
  }

  static async open(options: SessionOptions): Promise<Session> {
    const client = new pg.Client({
      ...options.connection,
      keepAlive: true,
      keepAliveInitialDelayMillis: Math.max(1000, Math.floor(options.networkTimeoutMs / 3)),
      connectionTimeoutMillis: options.connection.connectionTimeoutMillis ?? options.networkTimeoutMs,
    });
    const session = new Session(client, options);
    // A connection that breaks while idle emits "error": it is then dropped.
    client.on("error", () => {
      session.broken = true;
    });
    client.on("end", () => {
      session.broken = true;
    });
    client.on("notice", (msg: { message?: string; detail?: string }) => {
      const text = `${msg.message ?? ""} ${msg.detail ?? ""}`;
      if (isCommitUncertainNotice(text)) session.commitUncertain = true;
    });
    try {
      await client.connect();
    } catch (e) {
      session.broken = true;
      void client.end().catch(() => undefined);
      throw new ConnectError(`could not connect: ${e instanceof Error ? e.message : String(e)}`, "", undefined, {
        cause: e,
      });
    }
    return session;
  }

  close(): void {
    this.broken = true;
    void this.client.end().catch(() => undefined);
  }

  async transactionPooled(): Promise<boolean> {
    await this.settle();
    return this.pooling === "transaction";
  }

  private async settle(): Promise<void> {
    if (this.pooling === "transaction" || this.settled) return;
    let text = settingsSelect(this.options.callTimeoutMs, false);
    if (this.pooling === "detect") {
      const pid = (this.client as unknown as { processID: number | null }).processID;
      text += ` WHERE pg_catalog.pg_backend_pid() = ${Number(pid ?? -1)}`;
    }
    const res = await this.guarded(this.client.query(text), this.options.callTimeoutMs);
    if (res.rows.length === 0) {
      this.pooling = "transaction"; // a pooler is in between: self-contained calls from now on
      return;
    }
    this.settled = true;
  }

  // Every call is bounded by the server's statement_timeout; should the reply
  // never come (a network that drops everything), the connection is given up
  // after the bound and the network timeout, and the outcome is unknown.
  private async guarded<T>(query: Promise<T>, timeoutMs: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.broken = true;
        const stream = (this.client as unknown as { connection?: { stream?: { destroy(): void } } }).connection
          ?.stream;
        stream?.destroy();
        reject(new UnknownOutcomeError("no reply within the call's bound: connection given up"));
      }, timeoutMs + this.options.networkTimeoutMs);
    });
    try {
      return await Promise.race([query, limit]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Runs one statement of the library under `timeoutMs` and returns its rows. */
  async call(timeoutMs: number, statement: Statement, values: unknown[]): Promise<Record<string, unknown>[]> {
    this.commitUncertain = false;
    await this.settle();
    if (
      this.pooling !== "transaction" &&
      statementTimeoutMs(timeoutMs) === statementTimeoutMs(this.options.callTimeoutMs)
    ) {
      const res = await this.guarded(
        this.client.query({ name: statement.name, text: statement.text, values }),
        timeoutMs,
      );
      this.prepared.add(statement.name);
      return res.rows as Record<string, unknown>[];
    }
    const text =
      settingsSelect(timeoutMs, true) +
      "; " +
      statement.text.replace(/\$(\d+)/g, (_, n: string) => {
        const v = values[Number(n) - 1];
        return v === null || v === undefined ? "NULL" : this.client.escapeLiteral(String(v));
      });
    const res = (await this.guarded(this.client.query(text), timeoutMs)) as unknown as
      | pg.QueryResult
      | pg.QueryResult[];
    const last = Array.isArray(res) ? res[res.length - 1] : res;
    return (last?.rows ?? []) as Record<string, unknown>[];
  }
}
