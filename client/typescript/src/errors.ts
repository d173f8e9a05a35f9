// The library's errors, and the one mapping from SQLSTATEs to them.
import pg from "pg";

/** Base of every error the library raises. `subject` is the lock or resource name. */
export class DlockError extends Error {
  readonly subject: string;
  readonly sqlstate: string | undefined;
  constructor(message: string, subject = "", sqlstate?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.subject = subject;
    this.sqlstate = sqlstate;
  }
}
/** PD001: the fencing token is below the highest the resource accepted. */
export class StaleTokenError extends DlockError {}
/** PD002: the token is not the live lease of the lock. */
export class NotHeldError extends DlockError {}
/** 55P03, or a client-side wait: the lock stayed taken for the whole wait. */
export class BusyError extends DlockError {}
/** 22023 / 22004 (and PD020), or an argument refused before sending. */
export class InvalidArgumentError extends DlockError {}
/** 42501: the role lacks a grant (fence, holds, admin functions). */
export class PermissionDeniedError extends DlockError {}
/** The call may or may not have taken effect; `ownerToken` resolves an acquire later. */
export class UnknownOutcomeError extends DlockError {
  readonly ownerToken: string | undefined;
  constructor(message: string, subject = "", ownerToken?: string, sqlstate?: string, options?: { cause?: unknown }) {
    super(message, subject, sqlstate, options);
    this.ownerToken = ownerToken;
  }
}
/** The library could not connect: nothing was sent. */
export class ConnectError extends DlockError {}
/** The lease of a `using` body was lost while the body ran. */
export class LeaseLostError extends DlockError {}
/** Any other error of the server. */
export class ServerError extends DlockError {}

export function isUnknownSqlstate(state: string | undefined): boolean {
  if (state === undefined) return false;
  return state.startsWith("08") || state === "57P01" || state === "57P02" || state === "57P03" || state === "40003";
}

function sqlstateOf(e: unknown): string | undefined {
  if (e instanceof pg.DatabaseError) return e.code;
  return undefined;
}

/** Whether `e` (a driver error) leaves the call's outcome unknown. */
export function isUnknown(e: unknown): boolean {
  if (e instanceof UnknownOutcomeError) return true;
  if (e instanceof DlockError) return false;
  if (e instanceof pg.DatabaseError) return isUnknownSqlstate(e.code);
  // Anything else from a connection in use: it broke (terminated, reset, timed out).
  return e instanceof Error;
}

/** The library's error for a driver error: the one SQLSTATE table. */
export function mapError(e: unknown, subject: string, ownerToken?: string): DlockError {
  if (e instanceof DlockError) return e;
  const message = e instanceof Error ? e.message : String(e);
  const state = sqlstateOf(e);
  if (isUnknown(e)) return new UnknownOutcomeError(message, subject, ownerToken, state, { cause: e });
  switch (state) {
    case "PD001":
    case "DL001":
      return new StaleTokenError(message, subject, state, { cause: e });
    case "PD002":
    case "DL002":
      return new NotHeldError(message, subject, state, { cause: e });
    case "55P03":
      return new BusyError(message, subject, state, { cause: e });
    case "22023":
    case "22004":
    case "PD020":
      return new InvalidArgumentError(message, subject, state, { cause: e });
    case "42501":
      return new PermissionDeniedError(message, subject, state, { cause: e });
    default:
      return new ServerError(message, subject, state, { cause: e });
  }
}
