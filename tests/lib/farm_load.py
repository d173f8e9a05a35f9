#!/usr/bin/python3
"""Load and checker for the lock farm's resharding (tests/suites/50-farm.sh).

  farm_load.py load PROXY STOPFILE HISTORY [--threads N] [--names N]
      clients take, renew and release leases through the proxy until STOPFILE
      exists; every grant is one JSON line of HISTORY
  farm_load.py hold PROXY HISTORY NAME...
      takes each name with a long lease and keeps it (the live names of a move)
  farm_load.py check HISTORY... [--reshard LOG PROXY] [--plant dup|overlap]
      no token twice per name, every later grant of a name has a higher token,
      and no two grants of a name live at once

Times are the machine's wall clock: the servers run on the same machine, so a
lease's grant time (lease_until - ttl, on the server's clock) and the clients'
send times compare. A grant's lease ended no earlier than the smallest of its
last known lease_until, the time its release was sent and, for a name that
moved, the time the reshard began ending the old partition's leases (read from
farm/reshard.sh's output LOG; PROXY says which names moved there). Another grant of the name before that is two holders.
"""
import json
import os
import random
import re
import sys
import threading
import time
import uuid

TTL_MS = 800


def connect(conninfo):
    import psycopg2
    conn = psycopg2.connect(conninfo)
    conn.autocommit = True
    return conn


def epoch(ts):
    return ts.timestamp()


def record(out, lock, grant):
    with lock:
        out.write(json.dumps(grant) + "\n")
        out.flush()


def client(conninfo, stopfile, names, out, lock, seed, counts):
    import psycopg2
    rnd = random.Random(seed)
    conn = None
    while not os.path.exists(stopfile):
        try:
            if conn is None or conn.closed:
                conn = connect(conninfo)
            cur = conn.cursor()
            name = rnd.choice(names)
            owner = str(uuid.uuid4())
            sent = time.time()
            cur.execute("SELECT fencing_token, lease_until FROM dlock.try_acquire(%s, %s::interval, %s::uuid)",
                        (name, f"{TTL_MS} ms", owner))
            token, until = cur.fetchone()
            acked = time.time()
            if token is None:
                counts["busy"] += 1
                continue
            counts["grants"] += 1
            grant = {"name": name, "token": token, "owner": owner, "sent": sent, "acked": acked,
                     "granted": epoch(until) - TTL_MS / 1000.0, "until": epoch(until), "released": None}
            try:
                # some leases are held across a few renewals, the others released at once
                for _ in range(rnd.choice([0, 0, 1, 3])):
                    time.sleep(0.15)
                    cur.execute("SELECT dlock.renew(%s, %s::uuid, %s::interval)", (name, owner, f"{TTL_MS} ms"))
                    (renewed,) = cur.fetchone()
                    if renewed is None:
                        counts["lost"] += 1
                        break
                    grant["until"] = epoch(renewed)
                grant["released"] = time.time()
                cur.execute("SELECT dlock.release(%s, %s::uuid)", (name, owner))
            finally:
                record(out, lock, grant)
        except psycopg2.Error as e:
            counts["errors"] += 1
            key = "error:" + (e.pgcode or "connect")
            if key not in counts:
                counts[key] = 0
                print(f"{key} first seen: {str(e).strip().splitlines()[0]}", flush=True)
            counts[key] += 1
            if conn is not None and conn.closed:
                conn = None
            time.sleep(0.02)


def load(args):
    conninfo, stopfile, history = args[:3]
    threads = int(args[args.index("--threads") + 1]) if "--threads" in args else 4
    nnames = int(args[args.index("--names") + 1]) if "--names" in args else 48
    names = [f"n{i}" for i in range(nnames)]
    lock = threading.Lock()
    counts = {"grants": 0, "busy": 0, "lost": 0, "errors": 0}
    with open(history, "a") as out:
        ts = [threading.Thread(target=client, args=(conninfo, stopfile, names, out, lock, i, counts))
              for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    print("load " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())))


def hold(args):
    conninfo, history = args[:2]
    conn = connect(conninfo)
    cur = conn.cursor()
    granted = busy = 0
    with open(history, "a") as out:
        for name in args[2:]:
            owner = str(uuid.uuid4())
            sent = time.time()
            cur.execute("SELECT fencing_token, lease_until FROM dlock.try_acquire(%s, '60 s', %s::uuid)", (name, owner))
            token, until = cur.fetchone()
            if token is None:
                busy += 1
                continue
            granted += 1
            out.write(json.dumps({"name": name, "token": token, "owner": owner, "sent": sent, "acked": time.time(),
                                  "granted": epoch(until) - 60, "until": epoch(until), "released": None}) + "\n")
    print(f"hold granted={granted} busy={busy}")


def check(args):
    forced = {}
    plant = None
    files = []
    i = 0
    while i < len(args):
        if args[i] == "--reshard":
            with open(args[i + 1]) as f:
                for line in f:
                    m = re.match(r"reshard.sh: ending the moving leases of partition (\d+) from (\S+)$", line)
                    if m:
                        forced[int(m.group(1))] = float(m.group(2))
            proxy = args[i + 2]
            i += 3
        elif args[i] == "--plant":
            plant = args[i + 1]
            i += 2
        else:
            files.append(args[i])
            i += 1
    grants = []
    for path in files:
        with open(path) as f:
            grants += [json.loads(line) for line in f if line.strip()]
    by_name = {}
    moved_at = {}
    if forced:
        cur = connect(proxy).cursor()
        for name in {g["name"] for g in grants}:
            cur.execute("SELECT dlock_farm.partition_number(%s)", (name,))
            (p,) = cur.fetchone()
            if p in forced:
                moved_at[name] = forced[p]
    for g in grants:
        by_name.setdefault(g["name"], []).append(g)
    if plant:
        # the busiest name gets a planted fault
        gs = sorted(max(by_name.values(), key=len), key=lambda g: g["granted"])
        if plant == "dup":
            gs[-1]["token"] = gs[0]["token"]
        elif plant == "overlap":
            gs[1]["granted"] = (gs[0]["granted"] + min(gs[0]["until"], gs[0]["released"] or gs[0]["until"])) / 2
    violations = []
    for name, gs in by_name.items():
        tokens = [g["token"] for g in gs]
        if len(set(tokens)) != len(tokens):
            violations.append(f"{name}: a token twice: {sorted(t for t in set(tokens) if tokens.count(t) > 1)}")
        gs.sort(key=lambda g: g["granted"])
        for a in gs:
            end = min(a["until"], a["released"] or a["until"])
            if name in moved_at and a["granted"] < moved_at[name]:
                end = min(end, moved_at[name])
            for b in gs:
                if b is a:
                    continue
                if a["granted"] <= b["granted"] < end:
                    violations.append(f"{name}: two live holders: token {b['token']} granted at {b['granted']:.6f}"
                                      f" while token {a['token']} lived until at least {end:.6f}")
                if b["granted"] > a["acked"] and b["token"] <= a["token"]:
                    violations.append(f"{name}: token {b['token']} granted after token {a['token']}")
    for v in violations[:10]:
        print("violation " + v)
    print(f"grants {len(grants)} names {len(by_name)} violations {len(violations)}")
    return 1 if violations else 0


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "load":
        load(rest)
    elif mode == "hold":
        hold(rest)
    elif mode == "check":
        sys.exit(check(rest))
    else:
        sys.exit(__doc__)
