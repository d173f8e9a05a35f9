// Fencing in the caller's own transaction: holds, assertHolds, fence.
//
// Each runs one unnamed statement on the caller's client (a pg.Client or a
// pooled pg.PoolClient), in whatever transaction it has open, so a refusal
// aborts the business transaction and its commit carries the check. Nothing is
// prepared by name (fine behind a transaction pooler), no setting is changed.
import { InvalidArgumentError, mapError } from "./errors.js";
import { Lease } from "./locks.js";

/** Anything with node-postgres's `query(text, values)`: pg.Client, pg.PoolClient. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

function nameAndToken(leaseOrName: Lease | string, token?: bigint | number): [string, string] {
  if (leaseOrName instanceof Lease) return [leaseOrName.name, leaseOrName.fencingToken.toString()];
  if (token === undefined) throw new InvalidArgumentError("a fencing token is needed with a lock name", leaseOrName);
  return [leaseOrName, BigInt(token).toString()];
}

async function one(client: Queryable, text: string, values: unknown[], subject: string): Promise<unknown> {
  try {
    const res = await client.query(text, values);
    const row = res.rows[0];
    return row === undefined ? undefined : Object.values(row)[0];
  } catch (e) {
    throw mapError(e, subject);
  }
}

/** True when the token is the live lease of the lock; then pins the lease until the caller's transaction ends. */
export async function holds(client: Queryable, lease: Lease): Promise<boolean>;
export async function holds(client: Queryable, name: string, token: bigint | number): Promise<boolean>;
export async function holds(client: Queryable, leaseOrName: Lease | string, token?: bigint | number): Promise<boolean> {
  const [name, tok] = nameAndToken(leaseOrName, token);
  return (await one(client, "SELECT dlock.holds($1, $2::bigint)", [name, tok], name)) === true;
}

/** Like holds, but rejects with NotHeldError (PD002), which aborts the caller's transaction. */
export async function assertHolds(client: Queryable, lease: Lease): Promise<void>;
export async function assertHolds(client: Queryable, name: string, token: bigint | number): Promise<void>;
export async function assertHolds(client: Queryable, leaseOrName: Lease | string, token?: bigint | number): Promise<void> {
  const [name, tok] = nameAndToken(leaseOrName, token);
  await one(client, "SELECT dlock.assert_holds($1, $2::bigint)", [name, tok], name);
}

/**
 * Accepts `token` for `resource` when it is not below the highest the resource
 * accepted, and records it; rejects with StaleTokenError (PD001) otherwise.
 */
export async function fence(client: Queryable, resource: string, token: bigint | number | Lease): Promise<void> {
  const tok = token instanceof Lease ? token.fencingToken : BigInt(token);
  await one(client, "SELECT dlock.fence($1, $2::bigint)", [resource, tok.toString()], resource);
}
