"""The library's own connections: how a call is sent, bounded and read.

A connection is direct or behind a transaction pooler. ``pooling="detect"``
finds out at the connection's first call, as the C++ client does: the
statement that makes the session settings makes them only ``WHERE
pg_backend_pid()`` is the process id libpq was given when it connected; a
pooler in between hands out its own, so no row comes back, nothing was set,
and the connection sends self-contained calls from then on.

- Direct: ``statement_timeout = call_timeout`` and
  ``client_connection_check_interval = 1s`` are session settings, and each
  call is a statement prepared by name. A call with another bound (an
  acquire's wait) is sent self-contained instead.
- Self-contained (behind a transaction pooler, or a call with its own bound):
  one simple query that sets both for its own transaction (``set_config(...,
  true)``, that is ``SET LOCAL``) and then runs the statement, its values as
  literals quoted by the driver. Nothing is prepared by name and nothing is
  left in the server connection.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ._errors import ConnectError

Pooling = Literal["detect", "none", "transaction"]

# The lease columns: the lease, and how long the server waited between
# receiving the statement and granting (milliseconds): the extension sets
# lease_until to its clock_timestamp() at the grant plus the ttl, so the grant
# time is lease_until - ttl, and statement_timestamp() is when the statement
# arrived.
_LEASE_COLUMNS = (
    "SELECT l.lock_name, l.owner_token::text, l.fencing_token, "
    "pg_catalog.date_part('epoch', l.lease_until - %(ttl)s::bigint * interval '1 millisecond' "
    "- pg_catalog.statement_timestamp()) * 1000 "
)
TRY_ACQUIRE = _LEASE_COLUMNS + (
    "FROM dlock.try_acquire(%(name)s, %(ttl)s::bigint * interval '1 millisecond', %(owner)s::uuid, "
    "NULLIF(%(holder)s::text, '')) l"
)
ACQUIRE = _LEASE_COLUMNS + (
    "FROM dlock.acquire(%(name)s, %(ttl)s::bigint * interval '1 millisecond', "
    "%(wait)s::bigint * interval '1 millisecond', %(owner)s::uuid, NULLIF(%(holder)s::text, '')) l"
)
# The server-side wait before the renewal (as above); NULL when refused.
RENEW = (
    "SELECT pg_catalog.date_part('epoch', r.lease_until - %(ttl)s::bigint * interval '1 millisecond' "
    "- pg_catalog.statement_timestamp()) * 1000 "
    "FROM dlock.renew(%(name)s, %(owner)s::uuid, %(ttl)s::bigint * interval '1 millisecond') AS r(lease_until)"
)
RELEASE = "SELECT dlock.release(%(name)s, %(owner)s::uuid)"

CONNECTION_CHECK_INTERVAL_MS = 1000


def statement_timeout_ms(timeout: float) -> int:
    """A call's bound in whole milliseconds, never 0 (which means none)."""
    return max(1, int(round(timeout * 1000)))


def settings_select(timeout: float, local: bool) -> str:
    """The SELECT that sets the call's statement_timeout and the connection check."""
    scope = "true" if local else "false"
    return (
        f"SELECT pg_catalog.set_config('statement_timeout', '{statement_timeout_ms(timeout)}', {scope}), "
        f"pg_catalog.set_config('client_connection_check_interval', '{CONNECTION_CHECK_INTERVAL_MS}', {scope})"
    )


def bounded_conninfo_kwargs(conninfo: str, network_timeout: float) -> dict[str, Any]:
    """TCP keepalives, tcp_user_timeout and connect_timeout the caller did not set."""
    given = conninfo_to_dict(conninfo) if conninfo else {}
    ms = max(1000, int(network_timeout * 1000))
    bounds: dict[str, Any] = {
        "keepalives": 1,
        "keepalives_idle": max(1, ms // 3000),
        "keepalives_interval": 1,
        "keepalives_count": max(1, ms // 3000),
        "tcp_user_timeout": ms,
        "connect_timeout": max(2, ms // 1000),
    }
    if os.environ.get("PGCONNECT_TIMEOUT"):
        del bounds["connect_timeout"]
    return {k: v for k, v in bounds.items() if k not in given}


def is_commit_uncertain_notice(message: str) -> bool:
    """PostgreSQL's warning that a commit's wait for a synchronous standby was
    cancelled: the commit is only local."""
    return "synchronous replication" in message or "committed locally" in message


class Session:
    """One of the library's connections (autocommit: each call its own transaction)."""

    def __init__(self, conninfo: str, *, pooling: Pooling, call_timeout: float, network_timeout: float) -> None:
        self.pooling: Pooling = pooling
        self.call_timeout = call_timeout
        self._settled = False
        self.commit_uncertain = False
        try:
            self.conn = psycopg.connect(
                conninfo,
                autocommit=True,
                prepare_threshold=None,
                **bounded_conninfo_kwargs(conninfo, network_timeout),
            )
        except psycopg.Error as e:
            raise ConnectError(f"could not connect: {str(e).strip()}") from e
        self.conn.add_notice_handler(self._notice)

    def _notice(self, diag: psycopg.errors.Diagnostic) -> None:
        text = " ".join(filter(None, [diag.message_primary, diag.message_detail]))
        if is_commit_uncertain_notice(text):
            self.commit_uncertain = True

    @property
    def broken(self) -> bool:
        return self.conn.closed or self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 -- closing must not raise
            pass

    def transaction_pooled(self) -> bool:
        self._settle()
        return self.pooling == "transaction"

    def _settle(self) -> None:
        if self.pooling == "transaction" or self._settled:
            return
        text = settings_select(self.call_timeout, local=False)
        if self.pooling == "detect":
            text += f" WHERE pg_catalog.pg_backend_pid() = {int(self.conn.info.backend_pid)}"
        if not self.conn.execute(text).fetchall():
            self.pooling = "transaction"  # a pooler is in between: self-contained calls from now on
            return
        self._settled = True

    def call(self, timeout: float, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Runs one statement of the library under ``timeout`` and returns its rows."""
        self.commit_uncertain = False
        self._settle()
        if self.pooling != "transaction" and statement_timeout_ms(timeout) == statement_timeout_ms(self.call_timeout):
            return self.conn.execute(statement, params, prepare=True).fetchall()
        text = settings_select(timeout, local=True) + "; " + psycopg.ClientCursor(self.conn).mogrify(
            statement, params
        )
        cur = self.conn.execute(text)
        cur.nextset()
        return cur.fetchall()
