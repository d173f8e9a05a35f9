#!/usr/bin/python3
"""tests/faults/kinds_worker.py -- one worker of the lock-kinds failover scenario.

A worker has one role: "permit" (dlock.acquire_permit of a semaphore), "reader"
(dlock.acquire_shared of a read-write name) or "writer" (dlock.acquire, an
exclusive lease of that same name). It loops until the duration is over: takes
its lease, keeps it a little, renews it now and then, makes a fenced write -- a
transaction that checks its token with dlock.assert_holds, records its start on
the server clock, works for a while and records its end -- and releases the
lease. It follows the primary through a multi-host connection string
(target_session_attrs=read-write), so it goes on across crash restarts and a
promotion (the fault harness's scenario 18 and tests/ha). Every outcome is appended to the history file as one JSON line
(monotonic clock, as the harness's events), so a worker cut off mid-call leaves
what it did so far.

Runs with Debian's python3 and python3-psycopg2 (scripts/install-deps.sh).
"""

import argparse
import json
import os
import random
import time
import uuid

import psycopg2

ACQUIRE = {
    "permit": "SELECT owner_token, fencing_token FROM dlock.acquire_permit("
              "%(name)s, %(permits)s, %(ttl)s::interval, %(wait)s::interval, %(owner)s, %(id)s)",
    "reader": "SELECT owner_token, fencing_token FROM dlock.acquire_shared("
              "%(name)s, %(ttl)s::interval, %(wait)s::interval, %(owner)s, %(id)s)",
    "writer": "SELECT owner_token, fencing_token FROM dlock.acquire("
              "%(name)s, %(ttl)s::interval, %(wait)s::interval, %(owner)s, %(id)s)",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--id", required=True)
    ap.add_argument("--role", choices=sorted(ACQUIRE), required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--conninfo", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--permits", type=int, default=2)
    ap.add_argument("--ttl-ms", type=int, default=1000)
    ap.add_argument("--duration-ms", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stop-file", help="stop once this file exists (tests/ha)")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    history = open(args.history, "a", encoding="utf-8")
    end = time.monotonic() + args.duration_ms / 1000.0
    conn = None

    def record(op, result, **extra):
        rec = {"t": time.monotonic_ns(), "worker": args.id, "role": args.role,
               "name": args.name, "op": op, "result": result}
        rec.update(extra)
        history.write(json.dumps(rec) + "\n")
        history.flush()

    while time.monotonic() < end and not (args.stop_file and os.path.exists(args.stop_file)):
        try:
            if conn is None or conn.closed:
                conn = psycopg2.connect(args.conninfo, application_name=args.id)
                conn.autocommit = True
            cur = conn.cursor()
            owner = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            record("acquire", "invoke", owner=owner)
            try:
                cur.execute(ACQUIRE[args.role], {
                    "name": args.name, "permits": args.permits, "ttl": f"{args.ttl_ms} ms",
                    "wait": f"{2 * args.ttl_ms} ms", "owner": owner, "id": args.id})
            except psycopg2.errors.LockNotAvailable:
                record("acquire", "timeout", owner=owner)
                continue
            _, token = cur.fetchone()
            record("acquire", "ok", owner=owner, token=token)
            time.sleep(rng.uniform(0, 0.2))
            if rng.random() < 0.5:
                cur.execute("SELECT dlock.renew(%s, %s, %s::interval)",
                            (args.name, owner, f"{args.ttl_ms} ms"))
                record("renew", "ok" if cur.fetchone()[0] is not None else "refused",
                       owner=owner, token=token)

            conn.autocommit = False
            try:
                cur.execute("SELECT dlock.assert_holds(%s, %s)", (args.name, token))
                cur.execute("INSERT INTO kinds_write (name, role, worker, token, started)"
                            " VALUES (%s, %s, %s, %s, clock_timestamp()) RETURNING id",
                            (args.name, args.role, args.id, token))
                row_id = cur.fetchone()[0]
                cur.execute("SELECT pg_sleep(%s)", (rng.uniform(0.05, 0.15),))
                cur.execute("UPDATE kinds_write SET ended = clock_timestamp() WHERE id = %s",
                            (row_id,))
                conn.commit()
                record("write", "ok", token=token)
            except psycopg2.Error as e:
                if not conn.closed:
                    conn.rollback()
                record("write", "refused" if e.pgcode == "PD002" else "fail", token=token,
                       why=e.pgcode or "connection")
            finally:
                if not conn.closed:
                    conn.autocommit = True
            if not conn.closed:
                cur.execute("SELECT dlock.release(%s, %s)", (args.name, owner))
                record("release", "ok" if cur.fetchone()[0] else "refused", owner=owner)
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
