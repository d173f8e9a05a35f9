"""Case 1 (uncontended) for the Python client: try_acquire + release pairs on
distinct names, at 1 and 8 clients (threads, each with its own client and
connections), beside psycopg's own two statements (dlock.try_acquire and
dlock.release with parameters, prepared) as the floor the client is measured
against. Prints TSV rows in bench/run.sh's format: case, system, clients,
metric, value.

    python bench/clients/python_bench.py --pg "dbname=bench" --duration 2 [--clients 1 8]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

import psycopg

from pg_dlock import Locks


def client_worker(dsn: str, stop: float, prefix: str, acq: list[float], counts: list[int], i: int) -> None:
    with Locks(dsn) as locks:
        n = 0
        while time.monotonic() < stop:
            name = f"{prefix}/{i}/{n}"
            t0 = time.perf_counter()
            lease = locks.try_acquire(name, ttl=30, keep_alive=False)
            t1 = time.perf_counter()
            assert lease is not None
            lease.release()
            acq.append((t1 - t0) * 1e6)
            n += 1
        counts[i] = n


def driver_worker(dsn: str, stop: float, prefix: str, acq: list[float], counts: list[int], i: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        n = 0
        while time.monotonic() < stop:
            name = f"{prefix}/{i}/{n}"
            t0 = time.perf_counter()
            row = conn.execute("SELECT owner_token FROM dlock.try_acquire(%s, %s::interval, %s::uuid)",
                               (name, "30 seconds", str(uuid.uuid4())), prepare=True).fetchone()
            t1 = time.perf_counter()
            assert row is not None
            conn.execute("SELECT dlock.release(%s, %s)", (name, row[0]), prepare=True)
            acq.append((t1 - t0) * 1e6)
            n += 1
        counts[i] = n


def run(system: str, worker, dsn: str, clients: int, duration: float) -> list[str]:  # type: ignore[no-untyped-def]
    # warm-up: connections, prepared statements
    worker(dsn, time.monotonic() + 0.3, f"bench-{system}-warm-{uuid.uuid4().hex[:8]}", [], [0] * 1, 0)
    prefix = f"bench-{system}-{uuid.uuid4().hex[:8]}"
    acq: list[list[float]] = [[] for _ in range(clients)]
    counts = [0] * clients
    start = time.monotonic()
    stop = start + duration
    threads = [threading.Thread(target=worker, args=(dsn, stop, prefix, acq[i], counts, i)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    lat = sorted(x for a in acq for x in a)
    rows = [
        ("pairs_per_s", sum(counts) / elapsed),
        ("acq_p50_us", statistics.median(lat) if lat else float("nan")),
    ]
    return [f"uncontended\t{system}\t{clients}\t{m}\t{v:.6g}" for m, v in rows]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg", default="")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--clients", type=int, nargs="*", default=[1, 8])
    args = ap.parse_args()
    for clients in args.clients:
        for system, worker in (("python-psycopg-sql", driver_worker), ("python-client", client_worker)):
            for line in run(system, worker, args.pg, clients, args.duration):
                print(line, flush=True)


if __name__ == "__main__":
    main()
