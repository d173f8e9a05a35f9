#!/usr/bin/env python3
"""bench/session_handoff.py -- the session-handoff case of make bench: handoff after the holder's
client is killed (session-bound leases).

A holder takes the lock on a connection of its own and then sits idle, the way
a client between two statements does; a waiter is already blocked in the
server waiting for the lock. The holder's client process is killed with
SIGKILL. Measured: from the kill to the waiter's grant. Three systems:

  session-bound   dlock.acquire(..., session_bound => true), ttl 30 s: the lease
                  ends when the holder's session ends; the waiter in
                  dlock.acquire is woken by the exiting backend
  ttl lease       the same without session_bound, ttl 2 s, killed at a random
                  point of its first third (as a lease renewed every ttl/3
                  would be): the waiter gets the lock when the ttl runs out
  advisory        pg_advisory_lock, released when the holder's backend exits

The kill time is this script's wall clock, the grant time the server's
clock_timestamp() after the grant; both run on this machine (loopback), so they
read the same clock. Clients are psql processes (their start-up is not measured).

Usage: session_handoff.py --samples N [--ttl-samples N] --out FILE.md
Connects with the PG* environment; needs pg_dlock preloaded (session-bound).
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import time

PSQL = [os.path.join(os.environ.get("PG_BINDIR", "/usr/bin"), "psql"), "-X", "-q", "-At",
        "-v", "ON_ERROR_STOP=1"]


def query(sql):
    return subprocess.run(PSQL + ["-c", sql], capture_output=True, text=True, check=True).stdout.strip()


def start_holder(sql):
    """A psql whose stdin stays open: it runs sql, prints a line, then sits idle."""
    p = subprocess.Popen(PSQL, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdin.write(sql + "\n")
    p.stdin.flush()
    line = p.stdout.readline().strip()
    if not line:
        raise RuntimeError(f"holder got nothing for: {sql}")
    return p


def start_waiter(sql):
    """A psql that blocks in sql, then prints the server clock at the grant."""
    return subprocess.Popen(PSQL + ["-c", sql, "-c",
                                    "SELECT extract(epoch FROM clock_timestamp())"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until_blocked(fragment, timeout=10.0):
    until = time.time() + timeout
    while time.time() < until:
        n = query("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                  f"AND wait_event IS NOT NULL AND query LIKE '%{fragment}%' "
                  "AND pid <> pg_backend_pid()")
        if n == "1":
            return
        time.sleep(0.01)
    raise RuntimeError(f"the waiter never blocked in {fragment}")


def one_handoff(system, i, rng):
    name = f"bench:handoff:{system}:{os.getpid()}:{i}"
    if system == "session-bound":
        holder = start_holder(f"SELECT fencing_token FROM dlock.try_acquire('{name}', '30 seconds', "
                              "session_bound => true);")
        waiter_sql = f"SELECT fencing_token FROM dlock.acquire('{name}', '30 seconds', '60 seconds')"
        fragment = "dlock.acquire"
    elif system == "ttl lease":
        holder = start_holder(f"SELECT fencing_token FROM dlock.try_acquire('{name}', '2 seconds');")
        waiter_sql = f"SELECT fencing_token FROM dlock.acquire('{name}', '30 seconds', '60 seconds')"
        fragment = "dlock.acquire"
    else:
        key = 900000 + i
        holder = start_holder(f"SELECT pg_advisory_lock({key}), 1;")
        waiter_sql = f"SELECT pg_advisory_lock({key})"
        fragment = "pg_advisory_lock"
    acquired_at = time.time()
    waiter = start_waiter(waiter_sql)
    wait_until_blocked(fragment)
    if system == "ttl lease":
        # a random point of the first third of the ttl, as with renewals every ttl/3
        time.sleep(max(0.0, acquired_at + rng.uniform(0, 2.0 / 3) - time.time()))
    killed = time.time()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    out, err = waiter.communicate(timeout=60)
    if waiter.returncode != 0:
        raise RuntimeError(f"waiter failed: {err}")
    granted = float(out.strip().splitlines()[-1])
    return (granted - killed) * 1000.0


def percentile(values, p):
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--ttl-samples", type=int, default=10)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(16)
    rows = []
    for system, n in (("session-bound", args.samples), ("ttl lease", args.ttl_samples),
                      ("advisory", args.samples)):
        ms = [one_handoff(system, i, rng) for i in range(n)]
        rows.append((system, n, statistics.median(ms), percentile(ms, 99), max(ms)))
        print(f"  {system}: {n} handoffs, p50 {rows[-1][2]:.1f} ms, p99 {rows[-1][3]:.1f} ms", flush=True)
    advisory_p50 = rows[-1][2]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("## session-handoff: handoff after the holder's client is SIGKILLed\n\n")
        f.write(f"Run {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average "
                f"{open('/proc/loadavg').read().split()[0]} at the end "
                "(bench/session_handoff.py; the kill to the waiter's grant, the waiter already "
                "blocked in the server).\n\n")
        f.write("| system | handoffs | p50 ms | p99 ms | worst ms | p50 vs advisory |\n")
        f.write("|---|---:|---:|---:|---:|---:|\n")
        for system, n, p50, p99, worst in rows:
            f.write(f"| {system} | {n} | {p50:.1f} | {p99:.1f} | {worst:.1f} | "
                    f"{p50 / advisory_p50:.2f}× |\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
