"""Fencing in the caller's own transaction: holds, assert_holds, fence.

Each runs one unnamed statement on the caller's connection or cursor, in
whatever transaction it has open, so a refusal aborts the business
transaction and a commit carries the check. Nothing is prepared by name
(fine behind a transaction pooler), and no setting is changed.
"""

from __future__ import annotations

from typing import Any, overload

import psycopg

from ._client import Lease
from ._errors import InvalidArgumentError, mapped

__all__ = ["holds", "assert_holds", "fence"]

Executor = psycopg.Connection[Any] | psycopg.Cursor[Any]


def _name_and_token(lease_or_name: Lease | str, token: int | None) -> tuple[str, int]:
    if isinstance(lease_or_name, Lease):
        return lease_or_name.name, lease_or_name.fencing_token
    if token is None:
        raise InvalidArgumentError("a fencing token is needed with a lock name", lease_or_name)
    return lease_or_name, int(token)


def _one(conn: Executor, query: str, params: tuple[Any, ...], subject: str) -> Any:
    try:
        cur = conn.execute(query, params, prepare=False)
        row = cur.fetchone()
    except psycopg.Error as e:
        raise mapped(e, subject) from e
    return row[0] if row else None


@overload
def holds(conn: Executor, lease: Lease, /) -> bool: ...
@overload
def holds(conn: Executor, name: str, token: int, /) -> bool: ...
def holds(conn: Executor, lease_or_name: Lease | str, token: int | None = None, /) -> bool:
    """True when the token is the live lease of the lock; then pins the lease
    until the caller's transaction ends (``dlock.holds``)."""
    name, tok = _name_and_token(lease_or_name, token)
    return bool(_one(conn, "SELECT dlock.holds(%s, %s::bigint)", (name, tok), name))


@overload
def assert_holds(conn: Executor, lease: Lease, /) -> None: ...
@overload
def assert_holds(conn: Executor, name: str, token: int, /) -> None: ...
def assert_holds(conn: Executor, lease_or_name: Lease | str, token: int | None = None, /) -> None:
    """Like ``holds``, but raises ``NotHeldError`` (PD002) when the token is not
    the live lease, which aborts the caller's transaction."""
    name, tok = _name_and_token(lease_or_name, token)
    _one(conn, "SELECT dlock.assert_holds(%s, %s::bigint)", (name, tok), name)


def fence(conn: Executor, resource: str, token: int | Lease) -> None:
    """Accepts ``token`` for ``resource`` when it is not below the highest the
    resource accepted, and records it; raises ``StaleTokenError`` (PD001)
    otherwise (``dlock.fence``). Fence a resource with the tokens of one lock."""
    tok = token.fencing_token if isinstance(token, Lease) else int(token)
    _one(conn, "SELECT dlock.fence(%s, %s::bigint)", (resource, tok), resource)
