"""Runs the conformance scenarios of client/conformance with the Python client.

The format is described in client/conformance/README.md. ``run_scenario``
returns passed, failed (with the step and the reason) or skipped (with the
reason); it never raises for a scenario's failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as psql

import pg_dlock
from pg_dlock import (
    BusyError,
    ConnectError,
    DlockError,
    InvalidArgumentError,
    Lease,
    LeaseLostError,
    Locks,
    NotHeldError,
    PermissionDeniedError,
    ServerError,
    StaleTokenError,
    UnknownOutcomeError,
)
from pg_dlock._errors import mapped
from pg_dlock.aio import AsyncLocks

CONFORMANCE_DIR = Path(__file__).resolve().parents[2] / "conformance"
SKIP_FILE = Path(__file__).resolve().parent / "conformance-skip.json"

_ERROR_NAMES: list[tuple[type[BaseException], str]] = [
    (StaleTokenError, "stale_token"),
    (NotHeldError, "not_held"),
    (BusyError, "busy"),
    (InvalidArgumentError, "invalid_argument"),
    (PermissionDeniedError, "permission"),
    (UnknownOutcomeError, "unknown_outcome"),
    (ConnectError, "connection"),
    (LeaseLostError, "lease_lost"),
    (ServerError, "server"),
]

# The expectation keys each op's result has (besides error and elapsed_ms).
_RESULT_KEYS: dict[str, set[str]] = {
    "try_acquire": {"granted", "fencing_token", "owner_token"},
    "acquire": {"granted", "fencing_token", "owner_token"},
    "renew": {"outcome"},
    "release": {"outcome"},
    "lease_state": {"valid", "lost", "time_left_ms", "on_lost_called"},
    "wait_lost": {"lost"},
    "body": set(),
    "body_started": set(),
    "fenced_write": {"committed"},
    "sql": {"rows", "value"},
    "new_owner": set(),
    "sleep": set(),
    "mark": set(),
}
_REFERENCE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?")
_COMPARATORS = {"eq", "ne", "gt", "ge", "lt", "le"}


class StepFailed(Exception):
    pass


@dataclass
class Environment:
    dsn: str
    admin_dsn: str
    pool2_dsn: str
    pooler: str

    @staticmethod
    def from_environ() -> Environment:
        dsn = os.environ.get("DLOCK_CONFORMANCE_DSN", "")
        return Environment(
            dsn=dsn,
            admin_dsn=os.environ.get("DLOCK_CONFORMANCE_ADMIN_DSN", dsn),
            pool2_dsn=os.environ.get("DLOCK_CONFORMANCE_POOL2_DSN", ""),
            pooler=os.environ.get("DLOCK_CONFORMANCE_POOLER", ""),
        )

    def dsn_named(self, name: str) -> str:
        if name == "default":
            return self.dsn
        if name == "admin":
            return self.admin_dsn
        if name == "pool2":
            if not self.pool2_dsn:
                raise StepFailed("dsn pool2 asked for, but DLOCK_CONFORMANCE_POOL2_DSN is not set")
            return self.pool2_dsn
        raise StepFailed(f"unknown dsn {name!r}")


@dataclass
class Result:
    name: str
    status: str  # passed, failed, skipped
    detail: str = ""


def error_name(exc: BaseException) -> str | None:
    for cls, name in _ERROR_NAMES:
        if isinstance(exc, cls):
            return name
    return None


def connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True, prepare_threshold=None)


def capabilities(env: Environment) -> set[str]:
    caps = {"transaction_pooler"} if env.pooler else {"direct"}
    with connect(env.admin_dsn) as admin:
        row = admin.execute("SELECT dlock.waiters('x') IS NOT NULL").fetchone()
        if row and row[0]:
            caps.add("wait_queue")
    return caps


def setup(env: Environment) -> None:
    with connect(env.admin_dsn) as admin:
        admin.execute((CONFORMANCE_DIR / "setup.sql").read_text())


def _to_number(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def values_equal(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool) or got is None or want is None:
        return got is want or got == want and type(got) is type(want)
    if isinstance(got, int) or isinstance(want, int):
        return _to_number(got) == _to_number(want)
    return bool(got == want)


@dataclass
class _Body:
    started: threading.Event = field(default_factory=threading.Event)
    token: int | None = None


@dataclass
class _Pending:
    step: dict[str, Any]
    started: float
    future: Future[tuple[dict[str, Any], BaseException | None, float]]


class ScenarioRun:
    def __init__(self, scenario: dict[str, Any], env: Environment, language: str = "python") -> None:
        self.scenario = scenario
        self.env = env
        self.ns = f"conf/{language}/{secrets.token_hex(4)}/{scenario['name']}/"
        self.vars: dict[str, Any] = {}
        self.marks: dict[str, float] = {}
        self.clients: dict[str, Locks] = {}
        self.sessions: dict[str, psycopg.Connection[Any]] = {}
        self.fence_conns: dict[str, psycopg.Connection[Any]] = {}
        self.leases: list[Lease] = []
        self.on_lost_called: dict[int, bool] = {}
        self.bodies: dict[str, _Body] = {}
        self.pending: dict[str, _Pending] = {}
        self.pool = ThreadPoolExecutor(max_workers=16)
        self.admin = connect(env.admin_dsn)

    # -- values -------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        if isinstance(value, str):
            m = _REFERENCE.fullmatch(value)
            if m:
                var, attr = m.group(1), m.group(2)
                if var not in self.vars:
                    raise StepFailed(f"unknown variable ${var}")
                obj = self.vars[var]
                if attr is None:
                    if isinstance(obj, dict):
                        return obj["_"]
                    return obj
                if isinstance(obj, dict):
                    if attr not in obj:
                        raise StepFailed(f"variable ${var} has no field {attr}")
                    return obj[attr]
                if isinstance(obj, Lease) and attr in ("fencing_token", "owner_token", "name"):
                    return getattr(obj, attr)
                raise StepFailed(f"variable ${var} has no field {attr}")
            return value.replace("${ns}", self.ns)
        return value

    def lock_name(self, value: Any) -> str:
        if isinstance(value, dict):
            if "exact" not in value:
                raise StepFailed(f"a name object needs exact: {value}")
            return str(value["exact"]) * int(value.get("repeat", 1))
        return self.ns + str(value)

    def compare(self, what: str, got: Any, want: Any) -> None:
        if isinstance(want, dict) and want and set(want) <= _COMPARATORS:
            for op, operand in want.items():
                w = _to_number(self.resolve(operand))
                g = _to_number(got)
                ok = {
                    "eq": lambda: values_equal(g, w),
                    "ne": lambda: not values_equal(g, w),
                    "gt": lambda: g is not None and g > w,
                    "ge": lambda: g is not None and g >= w,
                    "lt": lambda: g is not None and g < w,
                    "le": lambda: g is not None and g <= w,
                }[op]()
                if not ok:
                    raise StepFailed(f"{what}: got {got!r}, expected {op} {w!r}")
            return
        if isinstance(want, list):
            if not isinstance(got, list) or len(got) != len(want):
                raise StepFailed(f"{what}: got {got!r}, expected {want!r}")
            for i, (g, w) in enumerate(zip(got, want)):
                self.compare(f"{what}[{i}]", g, w)
            return
        w = self.resolve(want)
        if not values_equal(got, w):
            raise StepFailed(f"{what}: got {got!r}, expected {w!r}")

    def check(self, step: dict[str, Any], op: str, result: dict[str, Any], error: BaseException | None,
              elapsed: float) -> None:
        expect: dict[str, Any] = step.get("expect", {})
        for key in expect:
            if key not in _RESULT_KEYS[op] and key not in ("error", "elapsed_ms"):
                raise StepFailed(f"unknown expectation key {key!r} for op {op}")
        if "error" in expect:
            if error is None:
                raise StepFailed(f"expected error {expect['error']}, but it succeeded with {result}")
            name = error_name(error)
            if name != expect["error"]:
                raise StepFailed(f"expected error {expect['error']}, got {name}: {error!r}")
        elif error is not None:
            raise StepFailed(f"raised {error_name(error)}: {error!r}")
        for key, want in expect.items():
            if key == "error":
                continue
            got = elapsed * 1000 if key == "elapsed_ms" else result.get(key)
            if key not in result and key != "elapsed_ms":
                raise StepFailed(f"no {key} in the result {result}")
            self.compare(key, got, want)

    # -- actors -------------------------------------------------------------
    def client(self, name: str) -> Locks:
        if name not in self.clients:
            raise StepFailed(f"unknown client {name!r}")
        return self.clients[name]

    def client_options(self, name: str) -> dict[str, Any]:
        spec = self.scenario.get("clients", {}).get(name, {})
        known = {"dsn", "pooling", "wait_mode", "call_timeout_ms", "poll_interval_ms"}
        unknown = set(spec) - known
        if unknown:
            raise StepFailed(f"unknown client options {sorted(unknown)}")
        opts: dict[str, Any] = {"conninfo": self.env.dsn_named(spec.get("dsn", "default"))}
        if "pooling" in spec:
            opts["pooling"] = spec["pooling"]
        if "wait_mode" in spec:
            opts["wait_mode"] = spec["wait_mode"]
        if "call_timeout_ms" in spec:
            opts["call_timeout"] = spec["call_timeout_ms"] / 1000
        if "poll_interval_ms" in spec:
            opts["poll_interval"] = spec["poll_interval_ms"] / 1000
        return opts

    def session(self, name: str | None) -> psycopg.Connection[Any]:
        if name is None:
            return self.admin
        if name not in self.sessions:
            spec = self.scenario.get("sessions", {}).get(name)
            if spec is None:
                raise StepFailed(f"unknown session {name!r}")
            self.sessions[name] = connect(self.env.dsn_named(spec.get("dsn", "admin")))
        return self.sessions[name]

    def track(self, lease: Lease) -> Lease:
        self.leases.append(lease)
        self.on_lost_called[id(lease)] = False

        def called(_: Lease) -> None:
            self.on_lost_called[id(lease)] = True

        lease.on_lost(called)
        return lease

    # -- ops ----------------------------------------------------------------
    def op_acquire(self, step: dict[str, Any], op: str) -> dict[str, Any]:
        locks = self.client(step["client"])
        name = self.lock_name(step["name"])
        ttl = step["ttl_ms"] / 1000
        owner = self.resolve(step["owner"]) if "owner" in step else None
        keep_alive = step.get("keep_alive", True)
        if op == "try_acquire":
            lease = locks.try_acquire(name, ttl=ttl, owner_token=owner, keep_alive=keep_alive)
        else:
            lease = locks.acquire(name, ttl=ttl, wait=step["wait_ms"] / 1000, owner_token=owner,
                                  keep_alive=keep_alive)
        if lease is None:
            return {"granted": False}
        self.track(lease)
        if "as" in step:
            self.vars[step["as"]] = lease
        return {"granted": True, "fencing_token": lease.fencing_token, "owner_token": lease.owner_token}

    def lease_var(self, step: dict[str, Any]) -> Lease:
        lease = self.vars.get(step["lease"])
        if not isinstance(lease, Lease):
            raise StepFailed(f"no lease {step['lease']!r}")
        return lease

    def op_renew(self, step: dict[str, Any]) -> dict[str, Any]:
        lease = self.lease_var(step)
        ttl = step["ttl_ms"] / 1000 if "ttl_ms" in step else None
        return {"outcome": lease.renew(ttl).value}

    def op_release(self, step: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": self.lease_var(step).release().value}

    def op_lease_state(self, step: dict[str, Any]) -> dict[str, Any]:
        lease = self.lease_var(step)
        return {"valid": lease.valid, "lost": lease.lost, "time_left_ms": lease.time_left() * 1000,
                "on_lost_called": self.on_lost_called.get(id(lease), False)}

    def op_wait_lost(self, step: dict[str, Any]) -> dict[str, Any]:
        lease = self.lease_var(step)
        return {"lost": lease.wait_lost(step["within_ms"] / 1000)}

    def op_body(self, step: dict[str, Any]) -> tuple[dict[str, Any], BaseException | None, float]:
        """The asyncio scoped form: the body waits (sleeps up to max_ms) until the
        library cancels it because the lease was lost."""
        client = step["client"]
        opts = self.client_options(client)
        name = self.lock_name(step["name"])
        body = self.bodies.setdefault(step["as"], _Body())
        started = time.monotonic()

        async def main() -> None:
            async with AsyncLocks(**opts) as locks:
                async with locks.lease(name, ttl=step["ttl_ms"] / 1000, wait=step.get("wait_ms", 0) / 1000) as lease:
                    self.track(lease.lease)
                    body.token = lease.fencing_token
                    body.started.set()
                    await asyncio.sleep(step["max_ms"] / 1000)

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 -- reported as the step's error
            return {}, e, time.monotonic() - started
        return {}, None, time.monotonic() - started

    def op_body_started(self, step: dict[str, Any]) -> dict[str, Any]:
        body = self.bodies.get(step["body"])
        if body is None:
            raise StepFailed(f"no body {step['body']!r}")
        if not body.started.wait(step["within_ms"] / 1000):
            pending = self.pending.get(step["body"])
            if pending and pending.future.done():
                _, err, _ = pending.future.result()
                raise StepFailed(f"the body did not start: {err!r}")
            raise StepFailed("the body did not start in time")
        self.vars[step["body"]] = {"fencing_token": body.token, "_": body.token}
        return {}

    def op_fenced_write(self, step: dict[str, Any]) -> dict[str, Any]:
        client = step["client"]
        if client not in self.fence_conns:
            self.fence_conns[client] = connect(self.client_options(client)["conninfo"])
        conn = self.fence_conns[client]
        token = int(self.resolve(step["token"]))
        with conn.transaction():
            if "role" in step:
                conn.execute(psql.SQL("SET LOCAL ROLE {}").format(psql.Identifier(step["role"])))
            if "lock" in step:
                pg_dlock.assert_holds(conn, self.lock_name(step["lock"]), token)
            pg_dlock.fence(conn, self.lock_name(step["resource"]), token)
            conn.execute("INSERT INTO public.dlock_conformance_ledger (ns, writer, fencing_token) VALUES (%s, %s, %s)",
                         (self.ns, step["writer"], token))
        return {"committed": True}

    def op_sql(self, step: dict[str, Any]) -> dict[str, Any]:
        conn = self.session(step.get("session"))
        query: str = step["query"]
        params = [self.resolve(p) for p in step.get("params", [])]
        until = step.get("until")
        deadline = time.monotonic() + step.get("within_ms", 0) / 1000
        while True:
            try:
                if params:
                    text = re.sub(r"\$(\d+)", lambda m: f"%(p{m.group(1)})s", query.replace("%", "%%"))
                    cur = conn.execute(text, {f"p{i + 1}": p for i, p in enumerate(params)})
                else:
                    cur = conn.execute(query)
            except psycopg.Error as e:
                raise mapped(e, "sql") from e
            rows = [list(r) for r in cur.fetchall()] if cur.description else []
            columns = [c.name for c in cur.description] if cur.description else []
            done = until is None or (until == "rows" and rows) or (until == "true" and rows and rows[0][0] is True)
            if until not in (None, "rows", "true"):
                raise StepFailed(f"unknown until {until!r}")
            if done:
                break
            if time.monotonic() >= deadline:
                raise StepFailed(f"{query!r} did not return {until} within {step.get('within_ms', 0)} ms")
            time.sleep(0.05)
        if "as" in step:
            saved: dict[str, Any] = {"_": rows[0][0] if rows and rows[0] else None}
            if rows:
                saved.update(zip(columns, rows[0]))
            self.vars[step["as"]] = saved
        return {"rows": rows, "value": rows[0][0] if rows and rows[0] else None}

    def execute(self, step: dict[str, Any]) -> tuple[dict[str, Any], BaseException | None, float]:
        op = step["op"]
        started = time.monotonic()
        try:
            if op in ("try_acquire", "acquire"):
                result = self.op_acquire(step, op)
            elif op == "renew":
                result = self.op_renew(step)
            elif op == "release":
                result = self.op_release(step)
            elif op == "lease_state":
                result = self.op_lease_state(step)
            elif op == "wait_lost":
                result = self.op_wait_lost(step)
            elif op == "body":
                return self.op_body(step)
            elif op == "body_started":
                result = self.op_body_started(step)
            elif op == "fenced_write":
                result = self.op_fenced_write(step)
            elif op == "sql":
                result = self.op_sql(step)
            elif op == "new_owner":
                self.vars[step["as"]] = str(uuid.uuid4())
                result = {}
            elif op == "sleep":
                time.sleep(step["ms"] / 1000)
                result = {}
            elif op == "mark":
                self.marks[step["as"]] = time.monotonic()
                result = {}
            else:
                raise StepFailed(f"unknown op {op!r}")
        except StepFailed:
            raise
        except DlockError as e:
            return {}, e, time.monotonic() - started
        except psycopg.Error as e:
            return {}, mapped(e, op), time.monotonic() - started
        return result, None, time.monotonic() - started

    def step(self, step: dict[str, Any]) -> None:
        op = step["op"]
        if op not in _RESULT_KEYS and op != "await":
            raise StepFailed(f"unknown op {op!r}")
        if op == "await":
            pending = self.pending.pop(step["handle"], None)
            if pending is None:
                raise StepFailed(f"no async step or body {step['handle']!r}")
            result, error, _ = pending.future.result(timeout=120)
            since = self.marks[step["since"]] if "since" in step else pending.started
            self.check(step, pending.step["op"], result, error, time.monotonic() - since)
            return
        if "async" in step or op == "body":
            handle = step.get("async") or step["as"]
            self.pending[handle] = _Pending(step, time.monotonic(), self.pool.submit(self.execute, step))
            return
        if op == "wait_lost" and "since" in step:
            result, error, _ = self.execute(step)
            self.check(step, op, result, error, time.monotonic() - self.marks[step["since"]])
            return
        result, error, elapsed = self.execute(step)
        self.check(step, op, result, error, elapsed)

    def run(self) -> None:
        for name in self.scenario.get("clients", {}):
            self.clients[name] = Locks(**self.client_options(name))
        for i, step in enumerate(self.scenario["steps"]):
            try:
                self.step(step)
            except StepFailed as e:
                raise StepFailed(f"step {i + 1} ({step['op']}): {e}") from None

    def cleanup(self) -> None:
        for step in self.scenario.get("cleanup", []):
            try:
                self.op_sql(step)
            except Exception:  # noqa: BLE001
                pass
        for lease in self.leases:
            try:
                lease.release()
            except Exception:  # noqa: BLE001
                pass
        for p in self.pending.values():
            try:
                p.future.result(timeout=30)
            except Exception:  # noqa: BLE001
                pass
        for locks in self.clients.values():
            locks.close()
        for conn in [*self.sessions.values(), *self.fence_conns.values(), self.admin]:
            conn.close()
        self.pool.shutdown(wait=False)


def load(path: Path) -> dict[str, Any]:
    scenario: dict[str, Any] = json.loads(path.read_text())
    if scenario.get("format") != 1:
        raise ValueError(f"{path}: format {scenario.get('format')} is not 1")
    return scenario


def skips() -> dict[str, str]:
    if SKIP_FILE.exists():
        data: dict[str, str] = json.loads(SKIP_FILE.read_text())
        return data
    return {}


def run_scenario(scenario: dict[str, Any], env: Environment, caps: set[str],
                 skip: dict[str, str] | None = None,
                 log: Callable[[str], None] = lambda _: None) -> Result:
    name = scenario["name"]
    if skip and name in skip:
        return Result(name, "skipped", f"skipped by the Python client: {skip[name]}")
    missing = [r for r in scenario.get("requires", []) if r not in caps]
    if missing:
        return Result(name, "skipped", f"requires {', '.join(missing)}")
    run = ScenarioRun(scenario, env)
    try:
        run.run()
        return Result(name, "passed")
    except StepFailed as e:
        return Result(name, "failed", str(e))
    except Exception:  # noqa: BLE001 -- a runner error fails the scenario
        return Result(name, "failed", traceback.format_exc())
    finally:
        run.cleanup()
