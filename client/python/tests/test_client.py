"""Promises of the Python client beyond the conformance scenarios."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import psycopg
import pytest

import pg_dlock
from pg_dlock import LeaseLostError, Locks, LossReason, Outcome
from pg_dlock.aio import AsyncLocks


def fresh(prefix: str) -> str:
    return f"pytest/{prefix}/{secrets.token_hex(4)}"


@pytest.fixture
def admin(env: Any, caps: set[str]) -> Any:
    with psycopg.connect(env.admin_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def locks(dsn: str) -> Any:
    with Locks(dsn) as client:
        yield client


def test_keep_alive_keeps_a_lease_across_several_ttls(locks: Locks, admin: Any) -> None:
    name = fresh("keep")
    lease = locks.try_acquire(name, ttl=0.6)
    assert lease is not None
    time.sleep(1.8)
    assert lease.valid and not lease.lost
    row = admin.execute("SELECT state, renewals FROM dlock.locks WHERE lock_name = %s", (name,)).fetchone()
    assert row[0] == "held" and row[1] >= 3
    assert lease.release() is Outcome.DONE


def test_lease_without_keep_alive_is_not_renewed(locks: Locks, admin: Any) -> None:
    """Control for the test above: the same wait without keep-alive ends the lease."""
    name = fresh("nokeep")
    lease = locks.try_acquire(name, ttl=0.6, keep_alive=False)
    assert lease is not None
    time.sleep(1.0)
    assert not lease.valid
    row = admin.execute("SELECT state, renewals FROM dlock.locks WHERE lock_name = %s", (name,)).fetchone()
    assert row == ("expired", 0)


def test_with_block_raises_lease_lost_and_on_lost_runs(locks: Locks, admin: Any) -> None:
    name = fresh("with")
    called: list[LossReason | None] = []
    with pytest.raises(LeaseLostError):
        with locks.lease(name, ttl=0.9, on_lost=lambda l: called.append(l.loss_reason)) as lease:
            admin.execute("SELECT dlock.force_release(%s, 'pytest')", (name,))
            assert lease.wait_lost(3.0)
            assert lease.loss_reason is LossReason.REFUSED
    assert called == [LossReason.REFUSED]


def test_with_block_releases_at_its_end(locks: Locks, admin: Any) -> None:
    name = fresh("with-release")
    with locks.lease(name, ttl=5) as lease:
        assert lease.valid
    assert lease.released and not lease.valid
    row = admin.execute("SELECT state FROM dlock.locks WHERE lock_name = %s", (name,)).fetchone()
    assert row[0] == "free"


def test_wait_lost_honours_its_timeout_while_renewals_go_on(locks: Locks) -> None:
    lease = locks.try_acquire(fresh("wait-lost"), ttl=0.6)
    assert lease is not None
    started = time.monotonic()
    assert lease.wait_lost(0.5) is False
    assert 0.45 <= time.monotonic() - started < 1.5
    lease.release()


def test_never_renews_after_release(locks: Locks, admin: Any) -> None:
    name = fresh("after-release")
    lease = locks.try_acquire(name, ttl=0.3)
    assert lease is not None
    assert lease.release() is Outcome.DONE
    before = admin.execute("SELECT renewals, state FROM dlock.locks WHERE lock_name = %s", (name,)).fetchone()
    time.sleep(0.5)
    after = admin.execute("SELECT renewals, state FROM dlock.locks WHERE lock_name = %s", (name,)).fetchone()
    assert before == after and after[1] == "free"
    assert lease.release() is Outcome.REFUSED


def test_nothing_sent_is_a_connect_error(dsn: str) -> None:
    """With nowhere to connect after the first try, the acquire fails as a
    connection error (nothing was sent), not as an unknown outcome."""
    with Locks("host=127.0.0.1 port=1 connect_timeout=1") as broken:
        with pytest.raises(pg_dlock.ConnectError):
            broken.try_acquire(fresh("connect"), ttl=1)


def test_fencing_on_an_async_connection(env: Any, caps: set[str], locks: Locks) -> None:
    from pg_dlock import aio

    name = fresh("async-fence")
    lease = locks.try_acquire(name, ttl=5, keep_alive=False)
    assert lease is not None

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(env.dsn, prepare_threshold=None) as conn:
            async with conn.transaction():
                await aio.assert_holds(conn, lease)
                await aio.fence(conn, name, lease.fencing_token)
            with pytest.raises(pg_dlock.StaleTokenError):
                async with conn.transaction():
                    await aio.fence(conn, name, lease.fencing_token - 1)

    asyncio.run(main())
    lease.release()


def test_async_body_is_cancelled_on_loss_and_the_block_raises(env: Any, caps: set[str], admin: Any) -> None:
    name = fresh("async-body")
    reached_end = False

    async def main() -> None:
        nonlocal reached_end
        async with AsyncLocks(env.dsn) as locks:
            with pytest.raises(LeaseLostError):
                async with locks.lease(name, ttl=0.9) as lease:
                    await asyncio.to_thread(admin.execute, "SELECT dlock.force_release(%s, 'pytest')", (name,))
                    await asyncio.sleep(5)
                    reached_end = True
            assert lease.lost

    started = time.monotonic()
    asyncio.run(main())
    assert not reached_end
    assert time.monotonic() - started < 3


def test_async_cancel_from_outside_is_not_turned_into_lease_lost(env: Any, caps: set[str]) -> None:
    async def main() -> None:
        async with AsyncLocks(env.dsn) as locks:
            async def body() -> None:
                async with locks.lease(fresh("outside-cancel"), ttl=5):
                    await asyncio.sleep(10)

            task = asyncio.create_task(body())
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())


def test_bad_pooling_option_is_refused() -> None:
    with pytest.raises(pg_dlock.InvalidArgumentError):
        Locks(pooling="session")  # type: ignore[arg-type]


def test_version_is_the_projects() -> None:
    from importlib.metadata import version

    assert pg_dlock.__version__ == version("pg-dlock")
