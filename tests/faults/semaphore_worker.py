#!/usr/bin/python3
"""tests/faults/semaphore_worker.py -- one worker of the semaphore fault scenario.

Loops until the duration is over: takes a permit of one semaphore
(dlock.acquire_permit), keeps it a little, then makes a fenced write -- a
transaction that checks its token with dlock.assert_holds (unless fencing is
off, the negative control), records its start, works for a while and records
its end -- and releases the permit. Some iterations are "slow": the worker
waits past its ttl before writing, as a paused process would. Every outcome
is appended to the history file as one JSON line, so a worker killed or
paused by the harness leaves what it did so far.

Runs with Debian's python3 and python3-psycopg2 (scripts/install-deps.sh).
"""

import argparse
import json
import random
import time

import psycopg2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--id", required=True)
    ap.add_argument("--conninfo", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--semaphore", default="S1")
    ap.add_argument("--permits", type=int, default=2)
    ap.add_argument("--ttl-ms", type=int, default=1000)
    ap.add_argument("--duration-ms", type=int, default=10000)
    ap.add_argument("--fencing", type=int, default=1)
    ap.add_argument("--slow-prob", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    history = open(args.history, "a", encoding="utf-8")
    end = time.monotonic() + args.duration_ms / 1000.0
    conn = None

    def record(op, result, **extra):
        rec = {"t": time.monotonic_ns(), "worker": args.id, "op": op, "result": result}
        rec.update(extra)
        history.write(json.dumps(rec) + "\n")
        history.flush()

    while time.monotonic() < end:
        try:
            if conn is None or conn.closed:
                conn = psycopg2.connect(args.conninfo, application_name=args.id)
                conn.autocommit = True
            cur = conn.cursor()
            try:
                cur.execute(
                    "SELECT owner_token, fencing_token FROM dlock.acquire_permit("
                    "%s, %s, %s::interval, %s::interval, NULL, %s)",
                    (args.semaphore, args.permits, f"{args.ttl_ms} ms",
                     f"{2 * args.ttl_ms} ms", args.id))
            except psycopg2.errors.LockNotAvailable:
                record("acquire", "timeout")
                continue
            owner, token = cur.fetchone()
            record("acquire", "ok", token=token)
            slow = rng.random() < args.slow_prob
            time.sleep(2.0 * args.ttl_ms / 1000.0 if slow else rng.uniform(0, 0.1))

            conn.autocommit = False
            try:
                if args.fencing:
                    cur.execute("SELECT dlock.assert_holds(%s, %s)", (args.semaphore, token))
                cur.execute("INSERT INTO sem_write (worker, token, started)"
                            " VALUES (%s, %s, clock_timestamp()) RETURNING id",
                            (args.id, token))
                row_id = cur.fetchone()[0]
                cur.execute("SELECT pg_sleep(%s)", (rng.uniform(0.2, 0.4),))
                cur.execute("UPDATE sem_write SET ended = clock_timestamp() WHERE id = %s",
                            (row_id,))
                conn.commit()
                record("write", "ok", token=token, slow=slow)
            except psycopg2.Error as e:
                if not conn.closed:
                    conn.rollback()
                why = e.pgcode or "connection"
                record("write", "refused" if e.pgcode == "PD002" else "fail", token=token,
                       why=why, slow=slow)
            finally:
                if not conn.closed:
                    conn.autocommit = True
            if not conn.closed:
                cur.execute("SELECT dlock.release(%s, %s)", (args.semaphore, owner))
        except psycopg2.Error as e:
            record("error", "fail", why=e.pgcode or "connection")
            try:
                conn.close()
            except Exception:  # noqa: BLE001 -- reconnect on the next round
                pass
            conn = None
            time.sleep(0.05)
    history.close()


if __name__ == "__main__":
    main()
