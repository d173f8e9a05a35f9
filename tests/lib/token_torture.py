#!/usr/bin/env python3
"""tests/lib/token_torture.py -- seeded random sequences of everything that
makes or moves fencing tokens, checked for the two promises of
docs/fencing.md: per name, no token is ever returned twice, and every token
returned after a crash, a restore, a promotion or a DROP/CREATE EXTENSION is
above every token returned for that name before it (the ones lost included).

  token_torture.py --dir D --port P --standby-port P [--seed N] [--profile short|long]
                   [--steps N] [--control epoch|restore-step]

The driver runs its own servers with scripts/pg-cluster.sh under D (the
primary, an asynchronous standby, a cold backup), wal_writer_delay = 10s so
that a fenced grant not followed by a durable commit is lost by a crash. Each
step is chosen by a random generator seeded with --seed (printed; the same
seed repeats the same sequence of steps, though not the servers' timing):

  grants    exclusive (try_acquire, acquire with a short wait), shared leases,
            semaphore permits, try_acquire_all / acquire_all, downgrade; each
            in a fenced session (dlock.durability = fenced) or a durable one,
            always with a new owner, so that every token returned is a new one
  leases    renew and release of leases the driver holds
  reap      dlock.reap('0') (the floor as a token state)
  crash     a few fenced grants, then pg_ctl stop -m immediate or SIGKILL of
            the postmaster, and a restart
  backup    a cold copy of the data directory (clean stop, copy, start)
  restore   the primary is lost (a few fenced grants, then killed); the
            backup comes back, then SELECT dlock.after_restore(n), n the
            timelines the lost servers ran on since the backup, as
            docs/fencing.md says
  promote   a few fenced grants, SIGKILL of the primary, promotion of the
            asynchronous standby (which never received the unflushed grants);
            a new standby is cloned from the new primary
  drop      DROP EXTENSION, CREATE EXTENSION and the carry-over of
            docs/fencing.md: the highest token of dlock.locks,
            dlock.lock_holders and dlock.token_floor inserted as the floor

Negative controls (the run must find a violation):
  --control epoch         every server runs with dlock.test_ignore_epoch = on
  --control restore-step  restores use the step of 1.4 (rows one generation
                          up, the floor set by hand to the highest row)

Prints one line per check, "ok      ..." or "FAILED  ...", then
"token_torture: N passed, N failed" (tests/suites/24-token-torture.sh).
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
import uuid

from psql_session import Session, check, note, psql_lines, results

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLUSTER = os.path.join(ROOT, "scripts", "pg-cluster.sh")
PG_BINDIR = os.environ.get("PG_BINDIR") or sorted(
    d for d in (os.path.join("/usr/lib/postgresql", v, "bin")
                for v in os.listdir("/usr/lib/postgresql")) if os.path.isdir(d))[-1]
DB = "torture"
SERVER_OPTS = ["-c", "wal_writer_delay=10000", "-c", "wal_level=replica", "-c", "max_wal_senders=4",
               "-c", "recovery_init_sync_method=syncfs"]

NAMES = ["t:a", "t:b", "t:c", "t:d"]        # exclusive, shared, acquire_all and downgrade
SEMAPHORES = ["t:s1", "t:s2"]
PERMITS = 2
TTLS = ["50 milliseconds", "300 milliseconds", "2 seconds", "1 hour"]
# errors a step may meet and that say nothing about tokens: a wait that ran
# out, a name busy in another kind's way
EXPECTED = ("55P03", "could not obtain", "could not acquire", "lock_not_available")

PROFILES = {
    # steps, and the weight of each kind of step (grants and lease steps share the rest)
    "short": dict(steps=500, crash=4, backup=2, restore=2, promote=2, drop=1.5, reap=5),
    "long": dict(steps=2500, crash=4, backup=2, restore=2, promote=2, drop=1, reap=5),
    # the negative controls: crashes, backups and restores only, so that
    # what the run finds comes from the switch under control
    "control": dict(steps=200, crash=6, backup=4, restore=4, promote=0, drop=0, reap=0),
}



def as_server_user(cmd):
    return (["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []) + cmd


def cluster(cmd, directory, *extra):
    subprocess.run([CLUSTER, cmd, directory, *extra], check=True, stdout=subprocess.DEVNULL)


class Torture:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.prof = dict(PROFILES[args.profile])
        if args.steps:
            self.prof["steps"] = args.steps
        if args.no_reap:
            self.prof["reap"] = 0
        if args.no_drop:
            self.prof["drop"] = 0
        self.shared_names = [f"t:r{i}" for i in range(2)] if args.separate_kinds else NAMES
        base = args.dir
        self.dirs = [os.path.join(base, "a"), os.path.join(base, "b")]
        self.ports = [args.port, args.standby_port]
        self.backup = os.path.join(base, "backup")
        self.primary = 0                 # index of the primary in dirs/ports
        self.standby = False             # a standby streams from the primary
        self.have_backup = False
        self.timelines_since_backup = 0  # promotions and DROP EXTENSIONs since the backup
        self.opts = list(SERVER_OPTS)
        if args.control == "epoch":
            self.opts += ["-c", "dlock.test_ignore_epoch=on"]
        self.sessions = {}
        self.issued = {}                 # name -> set of tokens returned
        self.order = {}                  # name -> tokens in the order returned
        self.barrier = {}                # name -> highest token returned before the last event
        self.held = []                   # leases the driver may renew, release, downgrade
        self.repeats = []
        self.not_above = []
        self.counts = {}
        self.errors = []
        self.events = []
        self.stepno = 0

    # --- servers -----------------------------------------------------------
    @property
    def port(self):
        return self.ports[self.primary]

    @property
    def pdir(self):
        return self.dirs[self.primary]

    @property
    def sdir(self):
        return self.dirs[1 - self.primary]

    def psql(self, sql, port=None, db=DB):
        return psql_lines(port or self.port, db, sql)

    def start(self):
        for d in self.dirs + [self.backup]:
            subprocess.run([CLUSTER, "destroy", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cluster("start", self.pdir, str(self.port), *self.opts)
        self.psql(f"CREATE DATABASE {DB}", db="postgres")
        self.psql("CREATE EXTENSION pg_dlock")

    def stop_all(self):
        self.close_sessions()
        for d in self.dirs + [self.backup]:
            subprocess.run([CLUSTER, "destroy", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def close_sessions(self):
        for s in self.sessions.values():
            s.close()
        self.sessions = {}

    def session(self, fenced):
        s = self.sessions.get(fenced)
        if s is None or s.broken:
            if s is not None:
                s.close()
            s = self.sessions[fenced] = Session(self.port, DB, "torture", fenced, statement_timeout="20s")
        return s

    def make_standby(self):
        """An asynchronous standby cloned from the primary, streaming."""
        subprocess.run([CLUSTER, "destroy", self.sdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.makedirs(self.sdir)
        if os.getuid() == 0:
            shutil.chown(self.sdir, "postgres", "postgres")
        subprocess.run(as_server_user([os.path.join(PG_BINDIR, "pg_basebackup"), "-h", "127.0.0.1",
                                       "-p", str(self.port), "-U", "postgres", "-D",
                                       os.path.join(self.sdir, "data"), "-R", "-X", "stream", "-c", "fast"]),
                       check=True, stdout=subprocess.DEVNULL)
        conf = os.path.join(self.sdir, "data", "postgresql.conf")
        with open(conf, "a") as f:
            f.write(f"port = {self.ports[1 - self.primary]}\nunix_socket_directories = '{self.sdir}'\n")
        cluster("restart", self.sdir)
        for _ in range(200):
            rows = self.psql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", db="postgres")
            if rows == ["1"]:
                self.standby = True
                return
            time.sleep(0.05)
        raise RuntimeError("the standby does not stream")

    def drop_standby(self):
        if self.standby:
            subprocess.run([CLUSTER, "destroy", self.sdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.standby = False

    # --- the record -------------------------------------------------------
    def record(self, name, token, how):
        if token is None:
            return
        seen = self.issued.setdefault(name, set())
        if token in seen:
            self.repeats.append((name, token, how))
        bar = self.barrier.get(name)
        if bar is not None and token <= bar:
            self.not_above.append((name, token, bar, how))
        seen.add(token)
        self.order.setdefault(name, []).append(token)
        self.trace(f"{how} {name} -> {token >> 40}.{token & ((1 << 40) - 1)}")
        self.counts[how] = self.counts.get(how, 0) + 1

    def history_event(self, what):
        """After a crash, restore, promotion or drop: every later token of a
        name must be above every token returned for it so far."""
        for name, order in self.order.items():
            self.barrier[name] = max(order)
        self.events.append(what)
        self.trace(f"=== {what}")

    def trace(self, msg):
        if self.args.trace:
            print(f"    [{self.stepno}] {msg}", flush=True)

    def error(self, what, err):
        if err and not any(e in err for e in EXPECTED):
            self.errors.append(f"{what}: {err}")

    # --- steps ------------------------------------------------------------
    def lease(self, fenced, sql, what, kind):
        """A grant with a new owner: every row returned is a new token."""
        owner = str(uuid.uuid4())
        rows, err = self.session(fenced).run(sql.format(o=owner))
        self.error(what, err)
        for row in rows:
            name, token = row.split("|")
            if token:
                self.record(name, int(token), what)
                self.held.append([name, kind, owner])

    def grant(self, fenced=None):
        r = self.rng
        if fenced is None:
            fenced = r.random() < 0.7
        ttl = r.choice(TTLS)
        n = r.choice(NAMES)
        k = r.randrange(7)
        if k == 0:
            self.lease(fenced, f"SELECT lock_name, fencing_token FROM dlock.try_acquire('{n}', '{ttl}', '{{o}}')",
                       "try_acquire", "x")
        elif k == 1:
            self.lease(fenced, f"SELECT lock_name, fencing_token FROM dlock.acquire('{n}', '{ttl}', "
                       f"'30 milliseconds', '{{o}}')", "acquire", "x")
        elif k == 2:
            n = r.choice(self.shared_names)
            self.lease(fenced, f"SELECT lock_name, fencing_token FROM dlock.try_acquire_shared('{n}', '{ttl}', '{{o}}')",
                       "shared", "s")
        elif k == 3:
            s = r.choice(SEMAPHORES)
            self.lease(fenced, f"SELECT lock_name, fencing_token FROM dlock.try_acquire_permit('{s}', {PERMITS}, "
                       f"'{ttl}', '{{o}}')", "permit", "p")
        elif k == 4:
            names = sorted(r.sample(NAMES, 2))
            arr = "ARRAY[" + ",".join(f"'{x}'" for x in names) + "]"
            if r.random() < 0.5:
                self.lease(fenced, f"SELECT lock_name, fencing_token FROM dlock.try_acquire_all({arr}, '{ttl}', '{{o}}')",
                           "acquire_all", "m")
            else:
                self.lease(fenced, f"SELECT lock_name, fencing_token FROM dlock.acquire_all({arr}, '{ttl}', "
                           f"'30 milliseconds', '{{o}}')", "acquire_all", "m")
        elif k == 5 and not self.args.separate_kinds:
            self.downgrade(fenced)
        else:
            self.lease(fenced, f"SELECT lock_name, fencing_token FROM dlock.try_acquire('{n}', '{ttl}', '{{o}}')",
                       "try_acquire", "x")

    def downgrade(self, fenced):
        mine = [h for h in self.held if h[1] in ("x", "m")]
        if not mine:
            return
        h = self.rng.choice(mine)
        rows, err = self.session(fenced).run(
            f"SELECT lock_name, fencing_token FROM dlock.downgrade('{h[0]}', '{h[2]}')")
        self.error("downgrade", err)
        for row in rows:
            name, token = row.split("|")
            if token:
                self.record(name, int(token), "downgrade")
                h[1] = "s"

    def lease_step(self):
        if not self.held:
            return self.grant()
        r = self.rng
        i = r.randrange(len(self.held))
        name, kind, owner = self.held[i]
        fenced = r.random() < 0.7
        if r.random() < 0.5:
            _, err = self.session(fenced).run(
                f"SELECT dlock.renew('{name}', '{owner}', '{r.choice(TTLS)}')")
            self.error("renew", err)
            self.counts["renew"] = self.counts.get("renew", 0) + 1
        else:
            _, err = self.session(fenced).run(f"SELECT dlock.release('{name}', '{owner}')")
            self.error("release", err)
            self.counts["release"] = self.counts.get("release", 0) + 1
            self.held.pop(i)
        if len(self.held) > 40:
            del self.held[:-40]

    def reap(self):
        _, err = self.session(False).run("SELECT dlock.reap('0 seconds')")
        self.error("reap", err)
        self.counts["reap"] = self.counts.get("reap", 0) + 1
        self.trace("reap")

    def tail(self):
        """A few fenced grants with nothing flushed after them."""
        for _ in range(self.rng.randrange(1, 5)):
            self.grant(fenced=True)

    def crash(self):
        self.tail()
        how = self.rng.choice(["crash", "kill"])
        self.close_sessions()
        cluster(how, self.pdir)
        cluster("restart", self.pdir)
        if self.standby:
            # the standby may be ahead of the restarted primary's history no
            # more (it received only flushed WAL); it keeps following
            pass
        self.history_event(how)

    def take_backup(self):
        """A cold copy of the data directory: clean stop, copy, start."""
        self.close_sessions()
        cluster("stop", self.pdir)
        shutil.rmtree(self.backup, ignore_errors=True)
        subprocess.run(["cp", "-a", os.path.join(self.pdir, "data"), self.backup], check=True)
        cluster("restart", self.pdir)
        self.have_backup = True
        self.timelines_since_backup = 0
        self.events.append("backup")
        self.trace("=== backup")

    def restore(self):
        if not self.have_backup:
            return self.take_backup()
        self.tail()
        self.close_sessions()
        self.drop_standby()
        cluster("kill", self.pdir)
        shutil.rmtree(os.path.join(self.pdir, "data"))
        subprocess.run(["cp", "-a", self.backup, os.path.join(self.pdir, "data")], check=True)
        # the backup came from whichever server was primary then: its own port and socket now
        with open(os.path.join(self.pdir, "data", "postgresql.conf"), "a") as f:
            f.write(f"port = {self.port}\nunix_socket_directories = '{self.pdir}'\n")
        for f in ("standby.signal", "postmaster.pid"):
            try:
                os.remove(os.path.join(self.pdir, "data", f))
            except FileNotFoundError:
                pass
        cluster("restart", self.pdir)
        if self.args.control == "restore-step":
            self.psql("""UPDATE dlock.distributed_lock SET fencing_seq = fencing_seq + (1::bigint << 40);
                INSERT INTO dlock.token_floor (reaped_max, reaped_at)
                SELECT max(fencing_seq), now() FROM dlock.distributed_lock HAVING max(fencing_seq) IS NOT NULL;""")
        else:
            self.psql(f"SELECT dlock.after_restore({self.timelines_since_backup + 1})")
        self.held = []
        # a backup is restored once: the restored server's own lives are
        # lost servers for no later backup but one taken after them
        self.have_backup = False
        self.history_event(f"restore({self.timelines_since_backup + 1})")

    def promote(self):
        if not self.standby:
            self.make_standby()
            self.events.append("standby")
            self.trace("=== standby")
            return
        self.tail()
        self.close_sessions()
        cluster("kill", self.pdir)
        r = subprocess.run(as_server_user([os.path.join(PG_BINDIR, "pg_ctl"), "-D",
                                           os.path.join(self.sdir, "data"), "-w", "-t", "60", "promote"]),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"promotion failed: {r.stderr.strip()}")
        old = self.pdir
        self.primary = 1 - self.primary
        self.standby = False
        subprocess.run([CLUSTER, "destroy", old], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.timelines_since_backup += 1
        # the promoted server accepts writes once its end-of-recovery checkpoint is requested
        for _ in range(200):
            if self.psql("SELECT pg_is_in_recovery()") == ["f"]:
                break
            time.sleep(0.05)
        self.history_event("promote")

    def drop(self):
        # the carry-over docs/fencing.md prescribes: the highest token, read
        # before the drop, becomes the new extension's floor at its position
        token, history = self.psql("SELECT fencing_token || ' ' || history FROM dlock.highest_token()")[0].split()
        self.close_sessions()
        self.psql(f"DROP EXTENSION pg_dlock; CREATE EXTENSION pg_dlock; SELECT dlock.carry_over({token}, {history});")
        self.held = []
        # counted for after_restore as docs/fencing.md says
        self.timelines_since_backup += 1
        self.history_event("drop")

    def step(self):
        p = self.prof
        r = self.rng
        events = [("crash", p["crash"]), ("backup", p["backup"] if not self.have_backup else p["backup"] / 3),
                  ("restore", p["restore"] if self.have_backup else 0),
                  ("promote", p["promote"]),
                  ("drop", 0 if self.have_backup and self.args.no_drop_after_backup else p["drop"]),
                  ("reap", p["reap"])]
        x = r.random() * 100
        for what, w in events:
            if x < w:
                return {"crash": self.crash, "backup": self.take_backup, "restore": self.restore,
                        "promote": self.promote, "drop": self.drop, "reap": self.reap}[what]()
            x -= w
        if r.random() < 0.6:
            self.grant()
        else:
            self.lease_step()

    def run(self):
        started = time.time()
        print(f"token_torture: seed {self.args.seed}, profile {self.args.profile}, {self.prof['steps']} steps"
              + (f", control {self.args.control}" if self.args.control else ""), flush=True)
        self.start()
        try:
            for self.stepno in range(self.prof["steps"]):
                self.step()
        finally:
            self.stop_all()
        took = time.time() - started
        grants = sum(len(v) for v in self.order.values())
        ev = {e: self.events.count(e) for e in sorted(set(self.events))}
        note(f"{took:.0f} s: {grants} tokens over {len(self.order)} names; steps {self.counts}; events {ev}")
        for n in sorted(self.order):
            g = sorted({t >> 40 for t in self.order[n]})
            note(f"{n}: {len(self.order[n])} tokens, generations {g[:6]}{' ...' if len(g) > 6 else ''}")
        if self.repeats[:3] or self.not_above[:3]:
            note(f"repeats {self.repeats[:3]}, not above {self.not_above[:3]}")
        return took

    def report(self):
        a = self.args
        lost = sum(1 for e in self.events if e in ("crash", "kill", "promote") or e.startswith("restore"))
        if a.control:
            check(f"control {a.control}: a token is returned twice or not above an earlier one (seed {a.seed})",
                  bool(self.repeats or self.not_above),
                  f"{len(self.repeats)} repeated, {len(self.not_above)} not above")
            return
        check(f"the run made grants of every kind and went through history events (seed {a.seed})",
              all(self.counts.get(k, 0) > 0 for k in ("try_acquire", "shared", "permit", "acquire_all"))
              and lost > 0, f"{self.counts}, {lost} events")
        check(f"no token returned twice for a name (seed {a.seed})", not self.repeats,
              f"{len(self.repeats)} repeated, e.g. {self.repeats[:3]}")
        check(f"every token after a crash, restore, promotion or drop above every earlier token of its name "
              f"(seed {a.seed})", not self.not_above,
              f"{len(self.not_above)} not above, e.g. {self.not_above[:3]}")
        check(f"no unexpected errors (seed {a.seed})", not self.errors,
              f"{len(self.errors)}, e.g. {sorted(set(self.errors))[:3]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--standby-port", type=int, required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="short")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--control", choices=["epoch", "restore-step"])
    ap.add_argument("--trace", action="store_true", help="print every token and event")
    ap.add_argument("--no-reap", action="store_true", help="no dlock.reap steps")
    ap.add_argument("--separate-kinds", action="store_true",
                    help="shared leases on names of their own, no downgrade")
    ap.add_argument("--no-drop", action="store_true", help="no DROP/CREATE EXTENSION steps")
    ap.add_argument("--no-drop-after-backup", action="store_true",
                    help="no DROP/CREATE EXTENSION between a backup and its restore")
    a = ap.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 10 ** 6)
    t = Torture(a)
    try:
        t.run()
    except Exception as e:  # noqa: BLE001 -- any failure of the driver is a failed check
        check(f"the run completes (seed {a.seed})", False, str(e).splitlines()[0] if str(e) else repr(e))
        t.stop_all()
    else:
        t.report()
    print(f"token_torture: {results['passed']} passed, {results['failed']} failed", flush=True)
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()
