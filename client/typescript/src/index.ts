// pg_dlock: leases with fencing tokens on PostgreSQL's pg_dlock extension, over node-postgres.
export {
  Lease,
  Locks,
  type AcquireOptions,
  type LeaseOptions,
  type LocksOptions,
  type LossReason,
  type Outcome,
  type RetryOptions,
  type WaitMode,
} from "./locks.js";
export { assertHolds, fence, holds, type Queryable } from "./fencing.js";
export { connectionConfig, type Pooling } from "./session.js";
export {
  BusyError,
  ConnectError,
  DlockError,
  InvalidArgumentError,
  LeaseLostError,
  NotHeldError,
  PermissionDeniedError,
  ServerError,
  StaleTokenError,
  UnknownOutcomeError,
} from "./errors.js";

export const VERSION = "1.6.0";
