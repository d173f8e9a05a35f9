#!/usr/bin/env python3
"""tests/lib/fenced_crash.py -- fenced grants (dlock.durability = fenced) through
crashes and the promotion of an asynchronous standby.

The promise under test: no fencing token is ever issued twice, and every token
issued after a crash, a restart or a promotion is above every token that could
have been handed out before it, including fenced grants the crash lost.

Used by tests/suites/22-fenced-crash.sh, which starts the servers with
scripts/pg-cluster.sh (wal_writer_delay = 10s: an asynchronously committed
grant stays in the WAL buffers until something flushes them).

  fenced_crash.py crash   --port P --dir D --rounds N [--control]
  fenced_crash.py promote --port P --dir D --standby-port P --standby-dir D [--control]

Each round: several client sessions (one psql process each) make fenced grants
of every kind for a while and record every token they are returned; then one
last grant of each kind with nothing after it (so that no durable commit
flushes it), the crash (immediate stop and SIGKILL of the postmaster in turn)
or the kill of the primary and the standby's promotion, and the checks. With
--control (the server runs with dlock.test_ignore_epoch, and for a promotion
dlock.test_ignore_timeline) the run must show a token issued twice.

Prints one line per check, "ok      ..." or "FAILED  ...", for the suite to count.
"""

import argparse
import os
import random
import subprocess
import sys
import threading
import time
import uuid

import psql_session
from psql_session import check, note, results

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLUSTER = os.path.join(ROOT, "scripts", "pg-cluster.sh")
PG_BINDIR = os.environ.get("PG_BINDIR") or sorted(
    d for d in (os.path.join("/usr/lib/postgresql", v, "bin")
                for v in os.listdir("/usr/lib/postgresql")) if os.path.isdir(d))[-1]
DB = "fenced"

EXCLUSIVE = ["fc:x1", "fc:x2", "fc:h"]   # fc:h gets the most waiters: handoffs
SHARED = "fc:rw"                         # shared leases, and writers that downgrade
SEMAPHORE = "fc:sem"
PERMITS = 2
MULTI = ["fc:m1", "fc:m2"]               # acquire_all
WORKLOAD_TTL = "300 milliseconds"
WAIT = "400 milliseconds"
# Errors the workload explains: a wait that ran out, and the session the crash ended.
EXPECTED_ERRORS = ("55P03", "lock_not_available", "could not obtain", "lost")

FENCED = True  # --durable: the same workload in the default mode (nothing may be lost)


class Session(psql_session.Session):
    """A client session of this workload: fenced unless --durable."""

    def __init__(self, port, label, fenced=None):
        super().__init__(port, DB, label, FENCED if fenced is None else fenced)


def psql(port, sql):
    """One statement in its own session (durable mode): its output, or None on an error."""
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                        str(port), "-U", "postgres", "-d", DB, "-c", sql],
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


class Record:
    """Every token a client was returned, with the server life it was returned in
    (the number of crashes or promotions before it)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.grants = []      # dicts: name, token, owner, kind, life, live (expected live at the crash)
        self.errors = []      # unexplained errors
        self.waited = 0       # grants that came after a wait in the server (handoffs)

    def grant(self, name, token, owner, kind, life, live=False):
        g = {"name": name, "token": int(token), "owner": owner, "kind": kind, "life": life, "live": live,
             "at": time.time()}
        with self.lock:
            self.grants.append(g)
        return g

    def error(self, what, err):
        if any(e in err for e in EXPECTED_ERRORS):
            return
        with self.lock:
            self.errors.append(f"{what}: {err}")


def grant_call(s, rec, life, kind, name, call, owner):
    """Runs a call returning dlock.lease rows; records the tokens; the tokens or []."""
    t0 = time.monotonic()
    rows, err = s.run(f"SELECT lock_name, fencing_token FROM {call} WHERE fencing_token IS NOT NULL")
    if err:
        rec.error(call, err)
        return []
    got = []
    for row in rows:
        lock, _, token = row.partition("|")
        got.append(rec.grant(lock, token, owner, kind, life))
    if got and time.monotonic() - t0 > 0.05 and "wait" in kind:
        with rec.lock:
            rec.waited += 1
    return got


def client(port, label, seed, stop, rec, life, ready):
    """One client's workload until stop is set: fenced grants of every kind,
    renewals, releases (handoffs to waiters), downgrades."""
    rng = random.Random(seed)
    try:
        s = Session(port, label)
    except RuntimeError as e:
        rec.error(label, str(e))
        return
    finally:
        ready.release()
    try:
        while not stop.is_set() and not s.broken:
            owner = str(uuid.uuid4())
            wait = rng.random() < 0.5
            what = rng.choice(["exclusive", "exclusive", "exclusive", "shared", "permit", "all", "downgrade"])
            if what == "exclusive":
                name = rng.choice(EXCLUSIVE + ["fc:h"])
                if wait:
                    got = grant_call(s, rec, life, "exclusive-wait", name,
                                     f"dlock.acquire('{name}', '{WORKLOAD_TTL}', '{WAIT}', '{owner}')", owner)
                else:
                    got = grant_call(s, rec, life, "exclusive", name,
                                     f"dlock.try_acquire('{name}', '{WORKLOAD_TTL}', '{owner}')", owner)
                names = [name]
            elif what == "shared":
                name = SHARED
                call = (f"dlock.acquire_shared('{name}', '{WORKLOAD_TTL}', '{WAIT}', '{owner}')" if wait
                        else f"dlock.try_acquire_shared('{name}', '{WORKLOAD_TTL}', '{owner}')")
                got = grant_call(s, rec, life, "shared-wait" if wait else "shared", name, call, owner)
                names = [name]
            elif what == "permit":
                name = SEMAPHORE
                call = (f"dlock.acquire_permit('{name}', {PERMITS}, '{WORKLOAD_TTL}', '{WAIT}', '{owner}')" if wait
                        else f"dlock.try_acquire_permit('{name}', {PERMITS}, '{WORKLOAD_TTL}', '{owner}')")
                got = grant_call(s, rec, life, "permit-wait" if wait else "permit", name, call, owner)
                names = [name]
            elif what == "all":
                arr = "ARRAY[" + ",".join(f"'{n}'" for n in MULTI) + "]"
                call = (f"dlock.acquire_all({arr}, '{WORKLOAD_TTL}', '{WAIT}', '{owner}')" if wait
                        else f"dlock.try_acquire_all({arr}, '{WORKLOAD_TTL}', '{owner}')")
                got = grant_call(s, rec, life, "all-wait" if wait else "all", None, call, owner)
                names = MULTI
            else:
                name = SHARED
                got = grant_call(s, rec, life, "exclusive", name,
                                 f"dlock.try_acquire('{name}', '{WORKLOAD_TTL}', '{owner}')", owner)
                if got:
                    grant_call(s, rec, life, "downgrade", name, f"dlock.downgrade('{name}', '{owner}')", owner)
                names = [name]
            if not got:
                continue
            if rng.random() < 0.4:
                _, err = s.run(f"SELECT dlock.renew('{names[0]}', '{owner}', '{WORKLOAD_TTL}')")
                if err:
                    rec.error("renew", err)
            time.sleep(rng.uniform(0, 0.04))
            if what == "all":
                _, err = s.run(f"SELECT dlock.release_all(ARRAY[{','.join(repr(n) for n in MULTI)}], '{owner}')")
            else:
                _, err = s.run(f"SELECT dlock.release('{names[0]}', '{owner}')")
            if err:
                rec.error("release", err)
    finally:
        s.close()


def workload(port, rec, life, seconds, clients, seed, min_grants=20):
    """The clients for `seconds` once all are connected (a loaded machine starts
    psql slowly), and on until they were returned min_grants tokens (at most 10 s
    more)."""
    stop = threading.Event()
    ready = threading.Semaphore(0)
    threads = [threading.Thread(target=client, args=(port, f"fc-client-{i}", seed * 100 + i, stop, rec, life,
                                                     ready))
               for i in range(clients)]
    for t in threads:
        t.start()
    for _ in threads:
        ready.acquire(timeout=60)
    time.sleep(seconds)
    deadline = time.monotonic() + 10
    while sum(1 for g in rec.grants if g["life"] == life) < min_grants and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(timeout=60)


def tail(port, rec, life, rare=False):
    """The last grants before the crash, one of each kind, with nothing after them
    that would flush the WAL: their commits are asynchronous (fenced), so the
    crash may lose them. Each is expected live (ttl 1 hour) when the server dies.
    The workload's leases (ttl 300 ms) have ended by now."""
    time.sleep(0.4)
    s = Session(port, "fc-tail")
    b = Session(port, "fc-tail-waiter")

    def one(kind, name, call, owner, live=True):
        for _ in range(20):
            got = grant_call(s, rec, life, kind, name, call, owner)
            if got:
                for g in got:
                    g["live"] = live
                    g["tail"] = True
                return got
            time.sleep(0.05)
        raise RuntimeError(f"tail grant refused for 1 s: {call}")

    try:
        o = str(uuid.uuid4())
        one("exclusive", "fc:x1", f"dlock.try_acquire('fc:x1', '1 hour', '{o}')", o)
        if rare:
            o = str(uuid.uuid4())
            one("exclusive", "fc:rare", f"dlock.try_acquire('fc:rare', '1 hour', '{o}')", o)
        o = str(uuid.uuid4())
        arr = "ARRAY[" + ",".join(f"'{n}'" for n in MULTI) + "]"
        one("all", None, f"dlock.try_acquire_all({arr}, '1 hour', '{o}')", o)
        o = str(uuid.uuid4())
        one("shared", SHARED, f"dlock.try_acquire_shared('{SHARED}', '1 hour', '{o}')", o)
        o = str(uuid.uuid4())
        one("permit", SEMAPHORE, f"dlock.try_acquire_permit('{SEMAPHORE}', {PERMITS}, '1 hour', '{o}')", o)
        # an exclusive lease downgraded to a shared one: the shared token is the live one
        o = str(uuid.uuid4())
        one("exclusive", "fc:x2", f"dlock.try_acquire('fc:x2', '1 hour', '{o}')", o, live=False)
        one("downgrade", "fc:x2", f"dlock.downgrade('fc:x2', '{o}')", o)
        # a handoff: the holder releases while a waiter is queued; the waiter's lease is the live one
        oa, ob = str(uuid.uuid4()), str(uuid.uuid4())
        one("exclusive", "fc:h", f"dlock.try_acquire('fc:h', '1 hour', '{oa}')", oa, live=False)
        waiter = []
        t = threading.Thread(target=lambda: waiter.extend(grant_call(
            b, rec, life, "exclusive-wait", "fc:h", f"dlock.acquire('fc:h', '1 hour', '20 s', '{ob}')", ob)))
        t.start()
        for _ in range(100):
            if psql(port, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fc-tail-waiter' "
                          "AND state = 'active'") == "1":
                break
            time.sleep(0.02)
        time.sleep(0.1)
        _, err = s.run(f"SELECT dlock.release('fc:h', '{oa}')")
        t.join(timeout=30)
        if err or not waiter:
            raise RuntimeError(f"the tail's handoff did not happen: {err}")
        waiter[0]["live"] = True
        waiter[0]["tail"] = True
    finally:
        s.close()
        b.close()


def epoch(port):
    # the table keeps every epoch used; the newest (highest) is the current one
    v = psql(port, "SELECT max(epoch) FROM dlock.token_epoch")
    return int(v) if v else None


def crash(directory, how):
    """Ends the server without a shutdown checkpoint: pg_ctl stop -m immediate,
    or SIGKILL of the postmaster."""
    subprocess.run([CLUSTER, "crash" if how == "immediate" else "kill", directory], check=True)


def restart(directory):
    subprocess.run([CLUSTER, "restart", directory], check=True)


def after_crash(port, rec, life, label, crashed=True):
    """What the restarted (or promoted) server knows of the last grants before
    the crash: for those expected live, holds() false = lost, and a lost one's
    renew must be refused. Whatever of them survived is released, for the next
    round. Returns the number lost by kind."""
    lost = {}
    tail_grants = [g for g in rec.grants if g["life"] == life and g.get("tail")]
    for g in tail_grants:
        held = psql(port, f"SELECT dlock.holds('{g['name']}', {g['token']})")
        g["held_after"] = held
        if held not in ("t", "f"):
            rec.errors.append(f"{label}: holds() on {g['name']} failed")
        if not g["live"] or held != "f":
            continue
        lost[g["kind"]] = lost.get(g["kind"], 0) + 1
        # a downgrade commits durably in every mode: a crash of the same server never loses it
        # (an asynchronous standby may still not have it; the exclusive lease it replaced then
        # lives on there, and its owner learns at holds())
        if g["kind"] == "downgrade" and crashed:
            rec.errors.append(f"{label}: the downgrade of {g['name']} (token {g['token']}) was lost by a crash")
        if g["kind"] != "downgrade":
            renewed = psql(port, f"SELECT dlock.renew('{g['name']}', '{g['owner']}', '1 minute') IS NOT NULL")
            if renewed != "f":
                rec.errors.append(f"{label}: {g['name']} token {g['token']} is unknown to the server, "
                                  f"but its renew was {'accepted' if renewed == 't' else 'an error'}")
    for g in tail_grants:
        if g["held_after"] == "t":
            if g["kind"] == "all":
                psql(port, f"SELECT dlock.release_all(ARRAY[{','.join(repr(n) for n in MULTI)}], '{g['owner']}')")
            else:
                psql(port, f"SELECT dlock.release('{g['name']}', '{g['owner']}')")
    return lost


def duplicates(grants):
    """(name, token) returned by more than one grant."""
    seen = {}
    for g in grants:
        seen.setdefault((g["name"], g["token"]), []).append(g)
    return {k: v for k, v in seen.items() if len(v) > 1}


def below(grants):
    """Tokens returned in a later server life that are not above every token
    returned before it: per name, and across names."""
    lives = sorted({g["life"] for g in grants})
    same, across = [], []
    for life in lives[1:]:
        before = [g for g in grants if g["life"] < life]
        after = [g for g in grants if g["life"] == life]
        if not before or not after:
            continue
        top = max(before, key=lambda g: g["token"])
        low = min(after, key=lambda g: g["token"])
        if low["token"] <= top["token"]:
            across.append(f"life {life}: {low['name']} token {low['token']} <= {top['name']} token {top['token']}")
        for name in {g["name"] for g in after}:
            b = [g["token"] for g in before if g["name"] == name]
            a = [g["token"] for g in after if g["name"] == name]
            if b and min(a) <= max(b):
                same.append(f"life {life}: {name} token {min(a)} <= {max(b)} returned before")
    return same, across


def report(rec, lost, epochs, control, label, epoch_must_move=True):
    dups = duplicates(rec.grants)
    same, across = below(rec.grants)
    lives = max(g["life"] for g in rec.grants) if rec.grants else 0
    n_lost = sum(lost.values())
    note(f"{label}: {len(rec.grants)} tokens returned in {lives + 1} server lives "
         f"({rec.waited} after a wait in the server), last grants lost {n_lost} {lost}, epochs {epochs}, "
         f"{len(dups)} tokens returned twice, {len(same)} not above the name's earlier ones; "
         f"tokens per life {[sum(1 for g in rec.grants if g['life'] == l) for l in range(lives + 1)]}")
    for (name, token), gs in list(dups.items())[:3]:
        note(f"  token {token} of {name} returned {len(gs)} times: " +
             ", ".join(f"{g['kind']} in life {g['life']}" for g in gs))
    if control:
        check(f"{label}, negative control: the checker reports a token returned twice", len(dups) > 0,
              f"{len(dups)} duplicates, {n_lost} grants lost")
        return
    check(f"{label}: the crashes lost fenced grants (holds() false after the restart)", n_lost > 0,
          f"{n_lost} lost" if n_lost else "none lost: the fault never reached the mechanism")
    check(f"{label}: clients saw only explained errors; a lost grant's renew is refused",
          not rec.errors, "; ".join(rec.errors[:3]))
    check(f"{label}: no token was returned twice for a name", not dups,
          "; ".join(f"{n} {t}" for n, t in list(dups)[:3]))
    check(f"{label}: every token after a crash is above every earlier token of its name", not same,
          "; ".join(same[:3]))
    # Across names only as information: fencing compares the tokens of one name,
    # and the docs promise order per name. A life's second first grant may move
    # the epoch once more (token_epoch.c: safe, if not needed), which leaves the
    # names it grants a generation ahead of the others.
    if across:
        note(f"{label}: not ordered across names (not promised): " + "; ".join(across[:3]))
    if epoch_must_move:
        moved = all(e is not None for e in epochs) and all(b > a for a, b in zip(epochs, epochs[1:]))
        check(f"{label}: dlock.token_epoch moved at every restart", moved and len(epochs) > 1, f"{epochs}")


def run_crash(args):
    rec = Record()
    lost = {}
    epochs = []
    for r in range(args.rounds):
        workload(args.port, rec, r, args.seconds, args.clients, args.seed + r)
        epochs.append(epoch(args.port))
        if args.control and duplicates(rec.grants):
            break  # the control has what it needs
        tail(args.port, rec, r, rare=(r == 0))
        how = "immediate" if r % 2 == 0 else "sigkill"
        crash(args.dir, how)
        restart(args.dir)
        n = after_crash(args.port, rec, r, f"round {r + 1}")
        for k, v in n.items():
            lost[k] = lost.get(k, 0) + v
        note(f"round {r + 1}: {how} crash, last grants lost {n}, epoch before {epochs[-1]}")
    else:
        # after the last crash: grants again, and the rare name once more
        workload(args.port, rec, args.rounds, args.seconds, args.clients, args.seed + args.rounds)
        o = str(uuid.uuid4())
        s = Session(args.port, "fc-last")
        grant_call(s, rec, args.rounds, "exclusive", "fc:rare",
                   f"dlock.try_acquire('fc:rare', '1 minute', '{o}')", o)
        s.close()
        epochs.append(epoch(args.port))
    report(rec, lost, epochs, args.control, "crash restarts")


def run_promote(args):
    rec = Record()
    workload(args.port, rec, 0, args.seconds, args.clients, args.seed)
    epochs = [epoch(args.port)]
    tail(args.port, rec, 0)
    crash(args.dir, "sigkill")
    r = subprocess.run((["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []) +
                       [os.path.join(PG_BINDIR, "pg_ctl"), "-D", os.path.join(args.standby_dir, "data"),
                        "-w", "-t", "60", "promote"], capture_output=True, text=True)
    if r.returncode != 0:
        check("the standby is promoted", False, r.stderr.strip())
        return
    lost = after_crash(args.standby_port, rec, 0, "promotion", crashed=False)
    note(f"promotion: the old primary's last grants unknown to the promoted standby: {lost}")
    workload(args.standby_port, rec, 1, args.seconds, args.clients, args.seed + 1)
    epochs.append(epoch(args.standby_port))
    note("token generations: old primary %s, promoted standby %s" % tuple(
        sorted({g["token"] >> 40 for g in rec.grants if g["life"] == life}) for life in (0, 1)))
    # a promotion moves the timeline, which the tokens carry; the epoch need not move
    report(rec, lost, epochs, args.control, "async standby promoted", epoch_must_move=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["crash", "promote"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--standby-port", type=int)
    ap.add_argument("--standby-dir")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=1.2)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--control", action="store_true")
    ap.add_argument("--durable", action="store_true", help="grants in the default (durable) mode")
    args = ap.parse_args()
    global FENCED
    FENCED = not args.durable
    note(f"{args.mode}: seed {args.seed}")
    try:
        (run_crash if args.mode == "crash" else run_promote)(args)
    except Exception as e:  # noqa: BLE001 -- reported as a failed check
        check(f"{args.mode}: the run completed", False, f"{type(e).__name__}: {e}")
    print(f"fenced_crash: {results['passed']} passed, {results['failed']} failed")
    return 0 if results["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
