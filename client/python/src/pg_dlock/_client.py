"""Locks (the client), Lease, and the keep-alive that renews leases and notices their loss."""

from __future__ import annotations

import enum
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

import psycopg

from ._errors import (
    BusyError,
    ConnectError,
    DlockError,
    InvalidArgumentError,
    LeaseLostError,
    UnknownOutcomeError,
    is_unknown,
    mapped,
)
from ._session import ACQUIRE, RELEASE, RENEW, TRY_ACQUIRE, Pooling, Session

__all__ = ["Locks", "Lease", "Outcome", "LossReason", "Retry", "WaitMode"]

WaitMode = Literal["automatic", "server", "poll"]
_IDLE_SESSIONS_KEPT = 4
_POLL_FIRST_INTERVAL = 0.02


class Outcome(enum.Enum):
    """What a renewal or a release did: ``DONE``, ``REFUSED`` (the lease was
    not there), or ``UNKNOWN`` (the call may or may not have taken effect)."""

    DONE = "done"
    REFUSED = "refused"
    UNKNOWN = "unknown"


class LossReason(enum.Enum):
    """Why a lease was lost: a renewal was refused, or its deadline passed
    without a confirmed renewal."""

    REFUSED = "refused"
    EXPIRED = "expired"


@dataclass(frozen=True)
class Retry:
    """How an acquire whose outcome is unknown is retried (same owner token,
    exponential backoff with full jitter)."""

    max_attempts: int = 5
    initial_backoff: float = 0.05
    max_backoff: float = 2.0


@dataclass(frozen=True)
class _Options:
    conninfo: str
    holder: str
    call_timeout: float
    network_timeout: float
    pooling: Pooling
    wait_mode: WaitMode
    poll_interval: float
    drift_allowance: float
    safety_margin: float
    retry: Retry


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _seconds(value: float | Any, what: str) -> float:
    """A duration in seconds: a number, or a datetime.timedelta."""
    if hasattr(value, "total_seconds"):
        value = value.total_seconds()
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be a number of seconds or a timedelta")
    return float(value)


class _Core:
    """The state a client and its leases share: options, idle sessions, keep-alive."""

    def __init__(self, options: _Options) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._idle: list[Session] = []
        self._keep_alive: _KeepAlive | None = None
        self.leases: set[Lease] = set()
        self.closed = False

    def new_session(self) -> Session:
        o = self.options
        return Session(o.conninfo, pooling=o.pooling, call_timeout=o.call_timeout, network_timeout=o.network_timeout)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A caller connection from the pool; dropped when it broke or the call's outcome was unknown."""
        with self._lock:
            s = self._idle.pop() if self._idle else None
            # A connection that broke while idle (the server or a pooler closed it) is dropped here.
            while s is not None and s.broken:
                s.close()
                s = self._idle.pop() if self._idle else None
        if s is None:
            s = self.new_session()
        ok = False
        try:
            yield s
            ok = True
        except BaseException as e:
            ok = not (is_unknown(e) or s.broken)
            raise
        finally:
            if ok and not s.broken:
                with self._lock:
                    if len(self._idle) < _IDLE_SESSIONS_KEPT and not self.closed:
                        self._idle.append(s)
                        s = None
            if s is not None:
                s.close()

    def keep_alive(self) -> _KeepAlive:
        with self._lock:
            if self._keep_alive is None:
                self._keep_alive = _KeepAlive(self)
            return self._keep_alive

    def deadline(self, sent: float, received: float, waited_ms: float | None, ttl: float) -> float:
        """The lease's deadline on the monotonic clock, counted from when the request left."""
        o = self.options
        waited = min(max(0.0, (waited_ms or 0.0) / 1000.0), received - sent)
        return sent + waited + ttl - (waited + ttl) * o.drift_allowance - o.safety_margin

    def renew(self, s: Session, lease: Lease, ttl: float, timeout: float) -> tuple[Outcome, float | None]:
        """One renewal call: its outcome, and the new deadline when done."""
        sent = time.monotonic()
        try:
            rows = s.call(timeout, RENEW, {"name": lease.name, "owner": lease.owner_token, "ttl": _ms(ttl)})
        except psycopg.Error as e:
            if e.sqlstate in ("22023", "22004", "42501", "0A000"):
                raise mapped(e, lease.name, lease.owner_token) from e
            return Outcome.UNKNOWN, None
        except OSError:
            return Outcome.UNKNOWN, None
        received = time.monotonic()
        if s.commit_uncertain:
            return Outcome.UNKNOWN, None
        if not rows or rows[0][0] is None:
            return Outcome.REFUSED, None
        return Outcome.DONE, self.deadline(sent, received, rows[0][0], ttl)

    def release(self, name: str, owner: str) -> Outcome:
        """Releases by owner token; never raises. One more try on a fresh
        connection when the first broke."""
        uncertain = False
        for _ in range(2):
            try:
                with self.session() as s:
                    rows = s.call(self.options.call_timeout, RELEASE, {"name": name, "owner": owner})
                    if s.commit_uncertain:
                        return Outcome.UNKNOWN
                if rows and rows[0][0]:
                    return Outcome.DONE
                # After an uncertain first try, "not held" may mean the first one ended it.
                return Outcome.UNKNOWN if uncertain else Outcome.REFUSED
            except ConnectError:
                return Outcome.UNKNOWN
            except Exception as e:  # noqa: BLE001 -- a release reports, never raises
                if not is_unknown(e):
                    return Outcome.UNKNOWN  # e.g. the call timeout: not released
                uncertain = True
        return Outcome.UNKNOWN

    def close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
            keep_alive = self._keep_alive
        if keep_alive is not None:
            keep_alive.stop()
        for s in idle:
            s.close()


class Lease:
    """A lease on a lock name, granted to this client.

    It knows its own deadline on the monotonic clock (``time_left()``,
    ``valid``), keeps itself alive when asked to (every ``renew_every``, by
    default a third of the ttl), and says the moment it can no longer be sure
    it holds the lock (``lost``, ``wait_lost()``, the ``on_lost`` callbacks).
    Used as a context manager it is released at the end of the block.
    """

    def __init__(self, core: _Core, name: str, owner_token: str, fencing_token: int, ttl: float,
                 deadline: float, renew_every: float | None) -> None:
        self._core = core
        self.name = name
        self.owner_token = owner_token
        self.fencing_token = fencing_token
        self.ttl = ttl
        self.renew_every = renew_every
        self._deadline = deadline
        self._state = threading.Lock()
        self._renewing = threading.Lock()
        self._lost_event = threading.Event()
        self._lost: LossReason | None = None
        self._released = False
        self._on_lost: list[Callable[[Lease], object]] = []
        self.next_renewal = time.monotonic() + (renew_every or 0.0)

    def __repr__(self) -> str:
        return f"<Lease {self.name!r} token={self.fencing_token} valid={self.valid}>"

    @property
    def deadline(self) -> float:
        """The end of the lease on ``time.monotonic()``'s clock, as far as this client knows."""
        with self._state:
            return self._deadline

    def time_left(self) -> float:
        """Seconds until the deadline (0 when past, lost or released)."""
        with self._state:
            if self._lost is not None or self._released:
                return 0.0
            return max(0.0, self._deadline - time.monotonic())

    @property
    def valid(self) -> bool:
        """Held as far as the client knows: not lost, not released, before its deadline."""
        return self.time_left() > 0.0

    @property
    def lost(self) -> bool:
        """True once the client found the lease lost (a refused renewal, or its deadline passed under keep-alive)."""
        with self._state:
            return self._lost is not None

    @property
    def loss_reason(self) -> LossReason | None:
        with self._state:
            return self._lost

    @property
    def released(self) -> bool:
        with self._state:
            return self._released

    def on_lost(self, callback: Callable[[Lease], object]) -> None:
        """Calls ``callback(lease)`` once when the lease is lost (at once if it is already)."""
        with self._state:
            if self._lost is None:
                self._on_lost.append(callback)
                return
        callback(self)

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Blocks until the lease is lost (True), or ``timeout`` seconds passed (False)."""
        return self._lost_event.wait(timeout) and self.lost

    def _set_deadline(self, deadline: float) -> None:
        with self._state:
            if self._lost is None:
                self._deadline = deadline

    def _mark_lost(self, reason: LossReason) -> None:
        with self._state:
            if self._lost is not None or self._released:
                return
            self._lost = reason
            callbacks, self._on_lost = self._on_lost, []
        self._lost_event.set()
        self._core.leases.discard(self)
        for cb in callbacks:
            try:
                cb(self)
            except Exception:  # noqa: BLE001 -- a callback's error must not stop the keep-alive
                pass

    def renew(self, ttl: float | None = None) -> Outcome:
        """Renews now, for ``ttl`` seconds (default: the lease's). A refused
        renewal marks the lease lost."""
        ttl_s = self.ttl if ttl is None else _seconds(ttl, "ttl")
        if self.released:
            return Outcome.REFUSED
        core = self._core
        if not self._renewing.acquire(timeout=core.options.call_timeout):
            return Outcome.UNKNOWN
        try:
            try:
                with core.session() as s:
                    outcome, deadline = core.renew(s, self, ttl_s, core.options.call_timeout)
                    if outcome is Outcome.UNKNOWN:
                        s.close()  # do not reuse a connection whose call ended uncertain
            except ConnectError:
                return Outcome.UNKNOWN
            if outcome is Outcome.DONE and deadline is not None:
                self._set_deadline(deadline)
                self.next_renewal = time.monotonic() + (self.renew_every or 0.0)
            elif outcome is Outcome.REFUSED:
                self._mark_lost(LossReason.REFUSED)
            return outcome
        finally:
            self._renewing.release()

    def release(self) -> Outcome:
        """Ends the lease: ``DONE``, ``REFUSED`` (it was no longer held), or
        ``UNKNOWN``. Waits at most one call timeout for a renewal in flight;
        never raises. A second release returns ``REFUSED`` without a call."""
        with self._state:
            if self._released:
                return Outcome.REFUSED
            self._released = True
        self._lost_event.set()
        self._core.leases.discard(self)
        got = self._renewing.acquire(timeout=self._core.options.call_timeout)
        try:
            return self._core.release(self.name, self.owner_token)
        finally:
            if got:
                self._renewing.release()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class _KeepAlive:
    """Two threads per client: a renewer with its own connection, and a
    watcher that marks a lease lost when its deadline passes without a
    confirmed renewal (also while a renewal hangs)."""

    def __init__(self, core: _Core) -> None:
        self._core = core
        self._cond = threading.Condition()
        self._leases: set[Lease] = set()
        self._stopped = False
        self._session: Session | None = None
        self._renewer = threading.Thread(target=self._renew_loop, name="pg_dlock-renewer", daemon=True)
        self._watcher = threading.Thread(target=self._watch_loop, name="pg_dlock-watcher", daemon=True)
        self._renewer.start()
        self._watcher.start()

    def add(self, lease: Lease) -> None:
        with self._cond:
            self._leases.add(lease)
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._renewer.join(timeout=self._core.options.call_timeout + 1)
        self._watcher.join(timeout=1)
        if self._session is not None:
            self._session.close()

    def _live(self) -> list[Lease]:
        self._leases = {lease for lease in self._leases if not lease.released and not lease.lost}
        return list(self._leases)

    def _renew_loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    leases = self._live()
                    now = time.monotonic()
                    due = [lease for lease in leases if lease.next_renewal <= now]
                    if due:
                        break
                    timeout = min((lease.next_renewal for lease in leases), default=now + 3600) - now
                    self._cond.wait(timeout)
            shortest = min((lease.renew_every or 1.0 for lease in due), default=1.0)
            for lease in due:
                self._renew(lease, shortest)
            with self._cond:
                self._cond.notify_all()  # new deadlines for the watcher

    def _renew(self, lease: Lease, shortest: float) -> None:
        core = self._core
        if not lease._renewing.acquire(blocking=False):
            lease.next_renewal = time.monotonic() + 0.05  # an explicit renew or a release runs
            return
        try:
            if lease.released or lease.lost:
                return
            # Bounded by the time left and by the shortest renewal interval, so
            # one renewal stuck behind a row lock does not stop the others.
            timeout = max(0.05, min(core.options.call_timeout, lease.time_left(), shortest))
            outcome: Outcome = Outcome.UNKNOWN
            try:
                if self._session is None:
                    self._session = core.new_session()
                outcome, deadline = core.renew(self._session, lease, lease.ttl, timeout)
            except DlockError:
                deadline = None
            if outcome is Outcome.DONE and deadline is not None:
                lease._set_deadline(deadline)
                lease.next_renewal = time.monotonic() + (lease.renew_every or 1.0)
            elif outcome is Outcome.REFUSED:
                lease._mark_lost(LossReason.REFUSED)
            else:
                # Unknown proves nothing: a fresh connection, and again soon,
                # until the watcher finds the deadline passed.
                if self._session is not None:
                    self._session.close()
                    self._session = None
                lease.next_renewal = time.monotonic() + min(0.2, (lease.renew_every or 1.0) / 4)
        finally:
            lease._renewing.release()

    def _watch_loop(self) -> None:
        while True:
            expired: list[Lease] = []
            with self._cond:
                if self._stopped:
                    return
                leases = self._live()
                now = time.monotonic()
                for lease in leases:
                    if lease.deadline <= now:
                        expired.append(lease)
                if not expired:
                    nearest = min((lease.deadline for lease in leases), default=now + 3600)
                    self._cond.wait(max(0.001, nearest - now))
            for lease in expired:
                lease._mark_lost(LossReason.EXPIRED)


def _default_holder() -> str:
    import os

    return f"{socket.gethostname()}:{os.getpid()}"


class Locks:
    """A pg_dlock client: leases on lock names of one database.

    ``conninfo`` is a libpq connection string or URI (empty: the ``PG*``
    environment). Durations are seconds (``float``) or ``timedelta``.

    - ``call_timeout`` (5 s) bounds every call (``statement_timeout``); an
      acquire's wait adds to it.
    - ``network_timeout`` (10 s): TCP keepalives, ``tcp_user_timeout`` and
      ``connect_timeout`` of the library's connections, unless set.
    - ``pooling``: ``"detect"`` (default) finds a transaction pooler at a
      connection's first call; ``"transaction"`` says there is one;
      ``"none"`` says there is none.
    - ``wait_mode``: ``"automatic"`` waits in the server on a direct
      connection and in the client behind a transaction pooler;
      ``"server"``; ``"poll"`` (every ``poll_interval`` at most).
    - ``retry``: how an acquire whose outcome is unknown is retried.

    A client may be shared between threads.
    """

    def __init__(self, conninfo: str = "", *, holder: str | None = None, call_timeout: float = 5.0,
                 network_timeout: float = 10.0, pooling: Pooling = "detect", wait_mode: WaitMode = "automatic",
                 poll_interval: float = 0.5, drift_allowance: float = 0.01, safety_margin: float = 0.05,
                 retry: Retry | None = None) -> None:
        if pooling not in ("detect", "none", "transaction"):
            raise InvalidArgumentError(f"pooling must be detect, none or transaction, not {pooling!r}")
        if wait_mode not in ("automatic", "server", "poll"):
            raise InvalidArgumentError(f"wait_mode must be automatic, server or poll, not {wait_mode!r}")
        self._core = _Core(_Options(
            conninfo=conninfo,
            holder=holder if holder is not None else _default_holder(),
            call_timeout=_seconds(call_timeout, "call_timeout"),
            network_timeout=_seconds(network_timeout, "network_timeout"),
            pooling=pooling,
            wait_mode=wait_mode,
            poll_interval=_seconds(poll_interval, "poll_interval"),
            drift_allowance=drift_allowance,
            safety_margin=_seconds(safety_margin, "safety_margin"),
            retry=retry or Retry(),
        ))

    @property
    def call_timeout(self) -> float:
        return self._core.options.call_timeout

    def try_acquire(self, name: str, *, ttl: float, owner_token: str | None = None, keep_alive: bool = True,
                    renew_every: float | None = None,
                    on_lost: Callable[[Lease], object] | None = None) -> Lease | None:
        """The lease, or ``None`` when another owner holds a live lease."""
        return self._acquire(name, ttl, None, owner_token, keep_alive, renew_every, on_lost)

    def acquire(self, name: str, *, ttl: float, wait: float, owner_token: str | None = None,
                keep_alive: bool = True, renew_every: float | None = None,
                on_lost: Callable[[Lease], object] | None = None) -> Lease:
        """The lease, waiting up to ``wait`` seconds for it; ``BusyError`` when the wait runs out."""
        lease = self._acquire(name, ttl, _seconds(wait, "wait"), owner_token, keep_alive, renew_every, on_lost)
        assert lease is not None
        return lease

    def lease(self, name: str, *, ttl: float, wait: float = 0.0, owner_token: str | None = None,
              keep_alive: bool = True, renew_every: float | None = None,
              on_lost: Callable[[Lease], object] | None = None) -> _LeaseBlock:
        """``with locks.lease(name, ttl=..., wait=...) as lease:`` acquires (waiting
        up to ``wait``), keeps the lease alive while the block runs, and releases
        it at the end. The body learns of a loss through ``lease.lost`` or
        ``on_lost``; a block whose lease was lost raises ``LeaseLostError`` at its
        end (unless the body raised)."""
        return _LeaseBlock(lambda: self.acquire(name, ttl=ttl, wait=wait, owner_token=owner_token,
                                                keep_alive=keep_alive, renew_every=renew_every, on_lost=on_lost))

    def _acquire(self, name: str, ttl: float, wait: float | None, owner_token: str | None, keep_alive: bool,
                 renew_every: float | None, on_lost: Callable[[Lease], object] | None) -> Lease | None:
        core = self._core
        if core.closed:
            raise DlockError("the client is closed", name)
        if not isinstance(name, str):
            raise InvalidArgumentError("the lock name must be a string", str(name))
        ttl_s = _seconds(ttl, "ttl")
        if ttl_s <= 0:
            raise InvalidArgumentError(f"ttl must be positive, not {ttl_s}", name)
        if wait is not None and wait < 0:
            raise InvalidArgumentError(f"wait must not be negative, not {wait}", name)
        every = _seconds(renew_every, "renew_every") if renew_every is not None else ttl_s / 3
        if every <= 0:
            raise InvalidArgumentError("renew_every must be positive", name)
        owner = owner_token if owner_token is not None else str(uuid.uuid4())
        started = time.monotonic()
        if wait is None:
            lease = self._attempts(name, ttl_s, owner, None)
        elif self._polls():
            lease = self._poll(name, ttl_s, owner, started + wait)
        else:
            lease = self._attempts(name, ttl_s, owner, started + wait)
            if lease is None:  # a wait of 0 is one attempt
                raise BusyError(f"lock \"{name}\" is busy", name)
        if lease is None:
            return None
        lease.renew_every = every if keep_alive else None
        lease.next_renewal = time.monotonic() + every
        if on_lost is not None:
            lease.on_lost(on_lost)
        core.leases.add(lease)
        if keep_alive:
            core.keep_alive().add(lease)
        return lease

    def _polls(self) -> bool:
        mode = self._core.options.wait_mode
        if mode != "automatic":
            return mode == "poll"
        try:
            with self._core.session() as s:
                return s.transaction_pooled()
        except Exception:  # noqa: BLE001 -- when detection fails, poll
            return True

    def _poll(self, name: str, ttl: float, owner: str, wait_end: float) -> Lease:
        """A client-side wait: try, sleep a jittered interval that doubles up to
        ``poll_interval``, until the wait runs out. Holds no server connection
        in between (the default behind a transaction pooler)."""
        interval = _POLL_FIRST_INTERVAL
        while True:
            lease = self._attempts(name, ttl, owner, None)
            if lease is not None:
                return lease
            left = wait_end - time.monotonic()
            if left <= 0:
                raise BusyError(f"lock \"{name}\" is busy", name)
            time.sleep(min(left, random.uniform(interval / 2, interval)))
            interval = min(interval * 2, self._core.options.poll_interval)

    def _attempts(self, name: str, ttl: float, owner: str, wait_end: float | None) -> Lease | None:
        """One acquire, retried with the same owner token while its outcome is unknown."""
        core = self._core
        o = core.options
        uncertain = False
        last: BaseException | None = None
        for attempt in range(max(1, o.retry.max_attempts)):
            if attempt:
                time.sleep(random.uniform(0, min(o.retry.max_backoff, o.retry.initial_backoff * 2 ** (attempt - 1))))
            try:
                with core.session() as s:
                    sent = time.monotonic()
                    params: dict[str, Any] = {"name": name, "ttl": _ms(ttl), "owner": owner, "holder": o.holder}
                    if wait_end is None:
                        rows = s.call(o.call_timeout, TRY_ACQUIRE, params)
                    else:
                        left = max(0.0, wait_end - sent)
                        params["wait"] = _ms(left)
                        rows = s.call(left + o.call_timeout, ACQUIRE, params)
                    received = time.monotonic()
                    if s.commit_uncertain:
                        # Committed locally, but the wait for the standby was cancelled.
                        s.close()
                        uncertain = True
                        last = UnknownOutcomeError("commit only local", name, owner)
                        continue
            except ConnectError:
                if not uncertain:
                    raise  # nothing was sent
                continue
            except Exception as e:  # noqa: BLE001 -- mapped below
                if is_unknown(e):
                    uncertain = True
                    last = e
                    continue
                raise mapped(e, name, owner) from e
            if not rows or rows[0][2] is None:
                return None
            row = rows[0]
            return Lease(core, row[0], row[1], int(row[2]), ttl, core.deadline(sent, received, row[3], ttl), None)
        raise UnknownOutcomeError(
            f"outcome of the acquire of \"{name}\" is unknown after {o.retry.max_attempts} attempts: {last}",
            name, owner)

    def close(self) -> None:
        """Releases the leases still held, stops the keep-alive, closes the connections."""
        for lease in list(self._core.leases):
            lease.release()
        self._core.close()

    def __enter__(self) -> Locks:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class _LeaseBlock:
    """The context manager of ``Locks.lease``."""

    def __init__(self, acquire: Callable[[], Lease]) -> None:
        self._acquire = acquire
        self._lease: Lease | None = None

    def __enter__(self) -> Lease:
        self._lease = self._acquire()
        return self._lease

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        lease = self._lease
        assert lease is not None
        lost = lease.lost
        lease.release()
        if lost and exc_type is None:
            raise LeaseLostError(f"lease of \"{lease.name}\" was lost ({lease.loss_reason.value if lease.loss_reason else 'lost'})",
                                 lease.name)
