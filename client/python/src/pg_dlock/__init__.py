"""pg_dlock: leases with fencing tokens on PostgreSQL's pg_dlock extension.

    from pg_dlock import Locks, fence

    with Locks("dbname=app") as locks:
        with locks.lease("nightly-export", ttl=10, wait=5) as lease:
            with psycopg.connect("dbname=app") as db, db.transaction():
                fence(db, "export-target", lease.fencing_token)
                ...

The asyncio API is in ``pg_dlock.aio``.
"""

from ._client import Lease, Locks, LossReason, Outcome, Retry, WaitMode
from ._errors import (
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
)
from ._fencing import assert_holds, fence, holds
from ._session import Pooling

__version__ = "1.6.0"

__all__ = [
    "Locks",
    "Lease",
    "Outcome",
    "LossReason",
    "Retry",
    "Pooling",
    "WaitMode",
    "holds",
    "assert_holds",
    "fence",
    "DlockError",
    "StaleTokenError",
    "NotHeldError",
    "BusyError",
    "InvalidArgumentError",
    "PermissionDeniedError",
    "UnknownOutcomeError",
    "ConnectError",
    "LeaseLostError",
    "ServerError",
    "__version__",
]
