"""The asyncio API: ``AsyncLocks``, whose ``async with locks.lease(...)`` cancels
the body's task when the lease is lost, and fencing on an ``AsyncConnection``.

The calls run the synchronous client on worker threads of the client's own
executor, and the keep-alive is the synchronous client's two threads: a
renewal never waits for the event loop, and a busy event loop never delays a
renewal. A call cancelled while in flight is not undone on the server: an
acquire that completes after its caller was cancelled is released at once.

    async with AsyncLocks("dbname=app") as locks:
        async with locks.lease("nightly-export", ttl=10, wait=5) as lease:
            async with await psycopg.AsyncConnection.connect("dbname=app") as db:
                async with db.transaction():
                    await fence(db, "export-target", lease.fencing_token)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar, overload

import psycopg

from ._client import Lease, Locks, LossReason, Outcome, Retry, WaitMode
from ._errors import InvalidArgumentError, LeaseLostError, mapped
from ._session import Pooling

__all__ = ["AsyncLocks", "AsyncLease", "holds", "assert_holds", "fence"]

T = TypeVar("T")


class AsyncLease:
    """A lease (see ``pg_dlock.Lease``) with awaitable calls."""

    def __init__(self, lease: Lease, locks: AsyncLocks) -> None:
        self.lease = lease
        self._locks = locks

    @property
    def name(self) -> str:
        return self.lease.name

    @property
    def owner_token(self) -> str:
        return self.lease.owner_token

    @property
    def fencing_token(self) -> int:
        return self.lease.fencing_token

    @property
    def deadline(self) -> float:
        return self.lease.deadline

    def time_left(self) -> float:
        return self.lease.time_left()

    @property
    def valid(self) -> bool:
        return self.lease.valid

    @property
    def lost(self) -> bool:
        return self.lease.lost

    @property
    def loss_reason(self) -> LossReason | None:
        return self.lease.loss_reason

    def on_lost(self, callback: Callable[[Lease], object]) -> None:
        """``callback(lease)`` runs on a keep-alive thread when the lease is lost."""
        self.lease.on_lost(callback)

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """Waits until the lease is lost (True), or ``timeout`` seconds passed or it was released (False)."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        self.lease.on_lost(lambda _: loop.call_soon_threadsafe(event.set))
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        return self.lease.lost

    async def renew(self, ttl: float | None = None) -> Outcome:
        return await self._locks._run(lambda: self.lease.renew(ttl))

    async def release(self) -> Outcome:
        return await self._locks._run(self.lease.release)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.release()


class AsyncLocks:
    """The asyncio form of ``pg_dlock.Locks``: the same options, awaitable calls."""

    def __init__(self, conninfo: str = "", *, holder: str | None = None, call_timeout: float = 5.0,
                 network_timeout: float = 10.0, pooling: Pooling = "detect", wait_mode: WaitMode = "automatic",
                 poll_interval: float = 0.5, drift_allowance: float = 0.01, safety_margin: float = 0.05,
                 retry: Retry | None = None, max_concurrent_calls: int = 64) -> None:
        self.locks = Locks(conninfo, holder=holder, call_timeout=call_timeout, network_timeout=network_timeout,
                           pooling=pooling, wait_mode=wait_mode, poll_interval=poll_interval,
                           drift_allowance=drift_allowance, safety_margin=safety_margin, retry=retry)
        self._executor = ThreadPoolExecutor(max_workers=max_concurrent_calls, thread_name_prefix="pg_dlock-call")

    async def _run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, fn)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            def undo(f: asyncio.Future[T]) -> None:
                if not f.cancelled() and f.exception() is None:
                    result = f.result()
                    if isinstance(result, Lease):
                        threading.Thread(target=result.release, daemon=True).start()

            future.add_done_callback(undo)
            raise

    async def try_acquire(self, name: str, *, ttl: float, owner_token: str | None = None, keep_alive: bool = True,
                          renew_every: float | None = None,
                          on_lost: Callable[[Lease], object] | None = None) -> AsyncLease | None:
        lease = await self._run(lambda: self.locks.try_acquire(
            name, ttl=ttl, owner_token=owner_token, keep_alive=keep_alive, renew_every=renew_every, on_lost=on_lost))
        return AsyncLease(lease, self) if lease is not None else None

    async def acquire(self, name: str, *, ttl: float, wait: float, owner_token: str | None = None,
                      keep_alive: bool = True, renew_every: float | None = None,
                      on_lost: Callable[[Lease], object] | None = None) -> AsyncLease:
        lease = await self._run(lambda: self.locks.acquire(
            name, ttl=ttl, wait=wait, owner_token=owner_token, keep_alive=keep_alive, renew_every=renew_every,
            on_lost=on_lost))
        return AsyncLease(lease, self)

    def lease(self, name: str, *, ttl: float, wait: float = 0.0, owner_token: str | None = None,
              renew_every: float | None = None, on_lost: Callable[[Lease], object] | None = None) -> _AsyncLeaseBlock:
        """``async with locks.lease(name, ttl=..., wait=...) as lease:`` acquires,
        keeps the lease alive while the body runs, and releases it at the end.
        When the lease is lost the body's task is cancelled, and the block
        raises ``LeaseLostError`` (also when the body finished but the lease was
        lost meanwhile)."""
        return _AsyncLeaseBlock(self, lambda: self.acquire(name, ttl=ttl, wait=wait, owner_token=owner_token,
                                                           renew_every=renew_every, on_lost=on_lost))

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self.locks.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncLocks:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


class _AsyncLeaseBlock:
    def __init__(self, locks: AsyncLocks, acquire: Callable[[], Any]) -> None:
        self._locks = locks
        self._acquire = acquire
        self._lease: AsyncLease | None = None
        self._task: asyncio.Task[Any] | None = None
        self._done = False
        self._cancelled_by_loss = False

    async def __aenter__(self) -> AsyncLease:
        lease: AsyncLease = await self._acquire()
        self._lease = lease
        self._task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        lease.lease.on_lost(lambda _: loop.call_soon_threadsafe(self._cancel_body))
        return lease

    def _cancel_body(self) -> None:
        if self._done or self._task is None:
            return
        self._cancelled_by_loss = True
        self._task.cancel("pg_dlock: the lease was lost")

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._done = True
        lease = self._lease
        assert lease is not None and self._task is not None
        release = asyncio.ensure_future(lease.release())
        try:
            await asyncio.shield(release)
        except asyncio.CancelledError:
            if not self._cancelled_by_loss:
                raise
            await release  # our own cancellation arrived only now
        lost = lease.lost
        if self._cancelled_by_loss:
            if self._task.uncancel() > 0:
                return  # someone else cancelled the task too: let CancelledError go on
            raise LeaseLostError(f"lease of \"{lease.name}\" was lost: the body was cancelled", lease.name) from exc
        if lost and exc_type is None:
            raise LeaseLostError(f"lease of \"{lease.name}\" was lost", lease.name)


AsyncExecutor = psycopg.AsyncConnection[Any] | psycopg.AsyncCursor[Any]


def _name_and_token(lease_or_name: AsyncLease | Lease | str, token: int | None) -> tuple[str, int]:
    if isinstance(lease_or_name, (AsyncLease, Lease)):
        return lease_or_name.name, lease_or_name.fencing_token
    if token is None:
        raise InvalidArgumentError("a fencing token is needed with a lock name", lease_or_name)
    return lease_or_name, int(token)


async def _one(conn: AsyncExecutor, query: str, params: tuple[Any, ...], subject: str) -> Any:
    try:
        cur = await conn.execute(query, params, prepare=False)
        row = await cur.fetchone()
    except psycopg.Error as e:
        raise mapped(e, subject) from e
    return row[0] if row else None


@overload
async def holds(conn: AsyncExecutor, lease: AsyncLease | Lease, /) -> bool: ...
@overload
async def holds(conn: AsyncExecutor, name: str, token: int, /) -> bool: ...
async def holds(conn: AsyncExecutor, lease_or_name: AsyncLease | Lease | str, token: int | None = None, /) -> bool:
    """``pg_dlock.holds`` on an ``AsyncConnection``, in its transaction."""
    name, tok = _name_and_token(lease_or_name, token)
    return bool(await _one(conn, "SELECT dlock.holds(%s, %s::bigint)", (name, tok), name))


@overload
async def assert_holds(conn: AsyncExecutor, lease: AsyncLease | Lease, /) -> None: ...
@overload
async def assert_holds(conn: AsyncExecutor, name: str, token: int, /) -> None: ...
async def assert_holds(conn: AsyncExecutor, lease_or_name: AsyncLease | Lease | str,
                       token: int | None = None, /) -> None:
    """``pg_dlock.assert_holds`` on an ``AsyncConnection``: ``NotHeldError`` aborts its transaction."""
    name, tok = _name_and_token(lease_or_name, token)
    await _one(conn, "SELECT dlock.assert_holds(%s, %s::bigint)", (name, tok), name)


async def fence(conn: AsyncExecutor, resource: str, token: int | AsyncLease | Lease) -> None:
    """``pg_dlock.fence`` on an ``AsyncConnection``: ``StaleTokenError`` aborts its transaction."""
    tok = token.fencing_token if isinstance(token, (AsyncLease, Lease)) else int(token)
    await _one(conn, "SELECT dlock.fence(%s, %s::bigint)", (resource, tok), resource)
