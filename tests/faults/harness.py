#!/usr/bin/env python3
"""tests/faults/harness.py -- runs the fault scenarios against real PostgreSQL servers.

For each scenario: start a fresh primary (and a streaming standby, a delay
proxy or PgBouncer when the scenario needs one) on loopback, create the
resource tables, start several fault_worker processes, inject the scenario's
faults while they run, capture the final database state, and hand the run
directory to checker.py; also writes the run's history in the standard format
(standard_history.py). Prints a table and writes tests/faults/results/latest.md.

Usage: harness.py --profile quick|full|soak [--only NAME,...] [--worker PATH] [--edition c|sql]
Run through tests/faults/run.sh, which builds the worker first. With --edition
sql the servers run without the library and the database has the SQL edition
(CREATE EXTENSION pg_dlock_sql, docs/sql-edition.md); scenarios of what it does
not offer are skipped, each with its reason (not_in_sql_edition below).
"""

import argparse
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
import uuid
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import checker  # noqa: E402
from cluster import FAKETIME_LIB, PG_BINDIR, LocalServer, as_postgres  # noqa: E402
from ports import free_ports  # noqa: E402
import kinds_check  # noqa: E402
import semaphore_check  # noqa: E402
from net_scenarios import NET_SCENARIOS  # noqa: E402
import standard_history  # noqa: E402

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

# Scratch paths carry the harness's process id, so two harness runs at the same
# time (make test in one checkout, make soak in another) never share a server.
SCRATCH = f"/tmp/faults-{os.getpid()}"

LOCKS = ["L1", "L2", "L3"]
LOCK_TIMEOUT_MS = 800

# The two editions (docs/sql-edition.md): the extension each database gets,
# and the settings every server of a run starts with.
EDITIONS = {
    "c": {"extension": "pg_dlock", "settings": {}},
    # No library at all: pg-cluster.sh preloads pg_dlock, the last line wins.
    "sql": {"extension": "pg_dlock_sql", "settings": {"shared_preload_libraries": "''"}},
}

PROFILES = {
    # seconds of workload per scenario, workers, lease ttl; each scenario repeats
    # its fault for as long as the run leaves time to see the recovery after it
    "quick": {"duration": 10, "workers": 4, "ttl_ms": 1000},
    "full": {"duration": 30, "workers": 6, "ttl_ms": 1500},
    "soak": {"duration": 120, "workers": 6, "ttl_ms": 2000},
}


def now_ns():
    return time.monotonic_ns()


def log(msg):
    print(f"  {time.strftime('%H:%M:%S')} {msg}", flush=True)


def local_server(name, port):
    """A server of the local back-end (cluster.py) under /tmp/faults-<pid>-<name>."""
    return LocalServer(f"{SCRATCH}-{name}", port, db="faults")


def make_template(edition):
    """initdb once per harness run; every scenario copies it."""
    t = local_server("template", free_ports(1)[0])
    t.create(f"{k} = {v}" for k, v in EDITIONS[edition]["settings"].items())
    t.stop()
    # The template's own port line is overridden by the copies (last one wins).
    return t


SCHEMA = """
CREATE EXTENSION {extension};
DO $$ BEGIN CREATE ROLE faults_app LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE res_g (id text PRIMARY KEY, counter bigint NOT NULL DEFAULT 0,
                    token bigint NOT NULL DEFAULT 0, writer text);
CREATE TABLE res_t (LIKE res_g INCLUDING ALL);
CREATE TABLE res_f (LIKE res_g INCLUDING ALL);
CREATE TABLE write_log (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL,
                        worker text NOT NULL, op bigint NOT NULL, before bigint, after bigint,
                        at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO res_g (id) SELECT unnest(ARRAY[{locks}]);
INSERT INTO res_t SELECT * FROM res_g;
INSERT INTO res_f SELECT * FROM res_g;
GRANT SELECT, INSERT, UPDATE ON res_g, res_t, res_f, write_log TO faults_app;
GRANT USAGE ON SEQUENCE write_log_id_seq TO faults_app;
-- dlock.fence() needs a grant: the role that writes the fenced resources gets it.
GRANT EXECUTE ON FUNCTION dlock.fence(text, bigint) TO faults_app;
GRANT EXECUTE ON FUNCTION dlock.holds(text, bigint), dlock.assert_holds(text, bigint) TO faults_app;
ALTER ROLE faults_app SET lock_timeout = '{lock_timeout}ms';
ALTER ROLE faults_app SET idle_in_transaction_session_timeout = '8s';
"""

FENCING_TRIGGERS = """
CREATE TRIGGER fencing BEFORE INSERT OR UPDATE ON res_g
    FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token');
CREATE TRIGGER fencing BEFORE INSERT OR UPDATE ON res_t
    FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('token');
"""

FINAL_STATE = """
SELECT json_build_object(
  'write_log', (SELECT coalesce(json_agg(w ORDER BY id), '[]'::json)
                  FROM (SELECT id, resource, token, worker, op, before, after FROM write_log) w),
  'resources', (SELECT json_object_agg(r.kind || ':' || r.id, r.counter) FROM (
                  SELECT 'g' AS kind, id, counter FROM res_g UNION ALL
                  SELECT 't', id, counter FROM res_t UNION ALL
                  SELECT 'f', id, counter FROM res_f) r),
  'locks', (SELECT coalesce(json_agg(json_build_object('lock_name', lock_name,
                  'fencing_token', fencing_token, 'state', state)), '[]'::json) FROM dlock.locks))
"""


class Run:
    """One scenario run: servers, workers, events."""

    def __init__(self, harness, scenario):
        self.h = harness
        self.sc = scenario
        self.dir = os.path.join(harness.run_root, scenario["name"])
        os.makedirs(os.path.join(self.dir, "history"), exist_ok=True)
        self.events = open(os.path.join(self.dir, "events.jsonl"), "w")
        self.workers = {}
        (self.port_primary, self.port_standby, self.port_proxy, self.port_bouncer,
         self.port_repl_proxy) = free_ports(5)
        self.primary = local_server(scenario["name"], self.port_primary)
        self.servers = [self.primary]
        self.standby = None
        self.current = self.primary  # the server the final state is read from
        self.helpers = []  # extra processes (proxies, pgbouncer)
        self.scratch = []  # extra directories under /tmp to remove
        self.ttl_ms = scenario.get("ttl_ms", harness.profile["ttl_ms"])
        self.rng = random.Random(harness.seed * 1000 + zlib.crc32(scenario["name"].encode()) % 1000)
        self.t_end = None
        self.store = None  # the workers' file store (--store), read into the final state
        self.on_cleanup = []  # called last by cleanup() (a network topology's teardown)

    # --- events -------------------------------------------------------
    def event(self, ev, fault, lock=None, **extra):
        rec = {"t": now_ns(), "ev": ev, "fault": fault, "lock": lock}
        rec.update(extra)
        self.events.write(json.dumps(rec) + "\n")
        self.events.flush()

    def fault_start(self, fault, lock=None, **extra):
        self.event("fault_start", fault, lock, **extra)

    def fault_end(self, fault, lock=None, **extra):
        self.event("fault_end", fault, lock, **extra)

    # --- servers ------------------------------------------------------
    def start_primary(self, settings=None, faketime=False):
        s = {"log_min_messages": "warning", "wal_level": "replica", "max_wal_senders": "5",
             "wal_keep_size": "'64MB'", "fsync": "on"}
        s.update(settings or {})
        if faketime:
            self.primary.faketime_file = f"{SCRATCH}-{self.sc['name']}-faketime-offset"
            self.scratch.append(self.primary.faketime_file)
            with open(self.primary.faketime_file, "w") as f:
                f.write("+0\n")
            os.chmod(self.primary.faketime_file, 0o644)
        self.primary.start_fresh(s, self.h.template)
        self.primary.psql("CREATE DATABASE faults", db="postgres")
        self.primary.psql(SCHEMA.format(extension=EDITIONS[self.h.edition]["extension"],
                                        locks=",".join(f"'{l}'" for l in LOCKS),
                                        lock_timeout=LOCK_TIMEOUT_MS))
        if self.sc.get("fencing", True):
            self.primary.psql(FENCING_TRIGGERS)

    def start_standby(self, sync, via_port=None, source=None, port=None, label="standby"):
        """A streaming standby of source (default: the primary) by pg_basebackup -R;
        sync = named in source's synchronous_standby_names."""
        source = source or self.primary
        sb = local_server(f"{self.sc['name']}-{label}", port or self.port_standby)
        sb.destroy()
        self.servers.append(sb)
        os.makedirs(sb.dir)
        sb.chown()
        r = as_postgres([os.path.join(PG_BINDIR, "pg_basebackup"), "-h", "127.0.0.1", "-p",
                         str(source.port), "-U", "postgres", "-D", sb.data, "-R",
                         "-X", "stream", "--no-sync", "-c", "fast"],
                        capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed: {r.stderr}")
        upstream = via_port or source.port
        with open(os.path.join(sb.data, "postgresql.conf"), "a") as f:
            f.write(f"port = {sb.port}\nunix_socket_directories = '{sb.dir}'\n")
        # postgresql.auto.conf comes from the source and wins over postgresql.conf;
        # within it the last line wins (ALTER SYSTEM later rewrites both names).
        with open(os.path.join(sb.data, "postgresql.auto.conf"), "a") as f:
            f.write(f"primary_conninfo = 'host=127.0.0.1 port={upstream} user=postgres "
                    f"application_name=faults_standby'\nsynchronous_standby_names = ''\n")
        sb.chown()
        sb.start()
        self.standby = sb
        if sync:
            source.psql("ALTER SYSTEM SET synchronous_standby_names = 'faults_standby'",
                        db="postgres")
            source.psql("SELECT pg_reload_conf()", db="postgres")
        want = "sync" if sync else "async"
        deadline = time.time() + 30
        while time.time() < deadline:
            state = source.psql_try(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'faults_standby'",
                db="postgres")
            if state == want:
                return sb
            time.sleep(0.2)
        raise RuntimeError(f"standby did not reach {want} streaming")

    def start_proxy(self, listen, target, control):
        set_delay(control, 0)
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "delay_proxy.py"), "--listen",
                              str(listen), "--target", str(target), "--control", control],
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(
                                 self.dir, f"proxy-{listen}.log"), "w"))
        self.helpers.append(p)
        wait_port(listen)
        return p

    def start_pgbouncer(self, listen_addr="127.0.0.1", server_host="127.0.0.1", prefix=(), wait=None):
        """PgBouncer in transaction pooling before the primary; prefix runs it on a
        host of a network topology, wait(port) waits for it there."""
        d = f"{SCRATCH}-{self.sc['name']}-pgbouncer"
        self.scratch.append(d)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "userlist.txt"), "w") as f:
            f.write('"faults_app" ""\n"postgres" ""\n')
        with open(os.path.join(d, "pgbouncer.ini"), "w") as f:
            f.write(f"""[databases]
faults = host={server_host} port={self.primary.port} dbname=faults

[pgbouncer]
listen_addr = {listen_addr}
listen_port = {self.port_bouncer}
unix_socket_dir =
auth_type = trust
auth_file = {d}/userlist.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = {d}/pgbouncer.log
pidfile = {d}/pgbouncer.pid
""")
        if os.getuid() == 0:
            subprocess.run(["chown", "-R", "postgres:", d], check=True)
        cmd = [PGBOUNCER, os.path.join(d, "pgbouncer.ini")]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        cmd = list(prefix) + cmd
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.dir, "pgbouncer.stderr"), "w"))
        self.helpers.append(p)
        (wait or wait_port)(self.port_bouncer)
        return p

    # --- workers ------------------------------------------------------
    def conninfo(self, ports=None):
        ports = ports or [self.primary.port]
        hosts = ",".join("127.0.0.1" for _ in ports)
        s = (f"host={hosts} port={','.join(str(p) for p in ports)} user=faults_app dbname=faults "
             f"connect_timeout=3")
        if len(ports) > 1:
            s += " target_session_attrs=read-write"
        return s

    def start_workers(self, conninfo, extra_args=None, per_worker=None, env_for=None,
                      prefix_for=None, mode_for=None):
        """prefix_for(i): a command that runs worker i (ip netns exec NS); mode_for(i):
        its fault_worker --mode, None for the default workload."""
        prof = self.h.profile
        n = prof["workers"]
        self.duration_ms = max(prof["duration"], self.sc.get("min_duration", 0)) * 1000
        self.worker_spawn = (conninfo, extra_args)
        for i in range(1, n + 1):
            wid = f"w{i}"
            mode = mode_for(i) if mode_for else None
            args = (prefix_for(i) if prefix_for else []) + [self.h.worker]
            args += (["--mode", mode] if mode else []) + ["--id", wid, "--conninfo", conninfo,
                    "--history", os.path.join(self.dir, "history", f"{wid}.jsonl"),
                    "--locks", ",".join(LOCKS), "--duration-ms", str(self.duration_ms),
                    "--ttl-ms", str(self.ttl_ms), "--seed", str(self.h.seed * 100 + i),
                    "--fencing", "1" if self.sc.get("fencing", True) else "0",
                    "--think-ms", "10"]
            if self.h.force_pqxx or (self.sc.get("pqxx") and not self.h.client_everywhere):
                args.append("--pqxx")
            args += extra_args or []
            if per_worker:
                args += per_worker(i)
            env = dict(os.environ)
            if env_for:
                env.update(env_for(i))
            p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(self.dir, f"worker-{wid}.log"), "w"))
            self.workers[wid] = p
        self.t_start = time.monotonic()
        self.t_end = self.t_start + self.duration_ms / 1000.0

    def respawn_worker(self, wid):
        """A new worker process in place of a killed one, under a new id (its own
        history file), for the rest of the run; same settings as start_workers."""
        conninfo, extra_args = self.worker_spawn
        n = sum(1 for w in self.workers if w.startswith(wid + "r"))
        new_id = f"{wid}r{n + 1}"
        args = [self.h.worker, "--id", new_id, "--conninfo", conninfo,
                "--history", os.path.join(self.dir, "history", f"{new_id}.jsonl"),
                "--locks", ",".join(LOCKS),
                "--duration-ms", str(max(0, int(self.time_left() * 1000))),
                "--ttl-ms", str(self.ttl_ms), "--seed", str(self.rng.randrange(1 << 30)),
                "--fencing", "1" if self.sc.get("fencing", True) else "0", "--think-ms", "10"]
        if self.h.force_pqxx or (self.sc.get("pqxx") and not self.h.client_everywhere):
            args.append("--pqxx")
        args += extra_args or []
        self.workers[new_id] = subprocess.Popen(
            args, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, f"worker-{new_id}.log"), "w"))
        return new_id

    def time_left(self):
        return self.t_end - time.monotonic()

    def sleep(self, seconds):
        time.sleep(max(0.0, min(seconds, self.time_left())))

    def late_writes_refused(self):
        """How many writes the fencing has refused so far, read from the workers'
        history files (each worker appends one record per line as it goes)."""
        refused = 0
        for wid in self.workers:
            path = os.path.join(self.dir, "history", f"{wid}.jsonl")
            writes = set()
            try:
                with open(path) as f:
                    for line in f:
                        try:
                            rec = json.loads(line)
                        except ValueError:
                            continue  # a line still being written
                        if rec.get("ev") == "invoke" and rec.get("op") == "write":
                            writes.add(rec.get("id"))
                        elif (rec.get("ev") == "refused" and rec.get("id") in writes
                              and rec.get("why") in checker.LATE_WRITE_REFUSALS):
                            refused += 1
            except FileNotFoundError:
                pass
        return refused

    def fault_window(self):
        """True while there is time for another fault and the recovery after it."""
        return self.time_left() > 3 * self.ttl_ms / 1000.0 + 2.5

    def wait_workers(self):
        for wid, p in self.workers.items():
            try:
                p.wait(timeout=max(5, self.time_left() + 30))
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()

    def holders(self, server=None):
        """lock name -> worker id of the live leases (holder text = worker id)."""
        out = (server or self.current).psql_try(
            "SELECT lock_name || ' ' || holder FROM dlock.locks WHERE state = 'held'")
        result = {}
        for line in (out or "").splitlines():
            lock, _, holder = line.partition(" ")
            result[lock] = holder
        return result

    def backends(self, where="true"):
        out = self.current.psql_try(
            f"SELECT pid || ' ' || coalesce(state, '') || ' ' || coalesce(application_name, '') "
            f"FROM pg_stat_activity WHERE usename = 'faults_app' AND {where}")
        rows = []
        for line in (out or "").splitlines():
            parts = line.split(" ", 2)
            if len(parts) >= 2:
                # the output's last line comes stripped: an empty application_name is lost
                rows.append(parts + [""] * (3 - len(parts)))
        return rows

    # --- the end ------------------------------------------------------
    def finish(self):
        self.wait_workers()
        state = None
        for _ in range(20):
            state = self.current.psql_try(FINAL_STATE, timeout=30)
            if state:
                break
            time.sleep(0.5)
        if state and self.store:
            state = json.dumps(merge_store(json.loads(state), self.store))
        with open(os.path.join(self.dir, "final.json"), "w") as f:
            f.write(state or "{}")
        info = {k: v for k, v in self.sc.items() if k != "run"}
        info["ttl_ms"] = self.ttl_ms
        info["profile"] = self.h.profile_name
        info["edition"] = self.h.edition
        with open(os.path.join(self.dir, "scenario.json"), "w") as f:
            json.dump(info, f)
        self.events.close()

    def cleanup(self):
        for p in self.workers.values():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
                p.wait()
        for p in self.helpers:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
        for s in self.servers:
            if s is not None:
                s.crash()
                try:
                    shutil.copy(os.path.join(s.dir, "server.log"),
                                os.path.join(self.dir, os.path.basename(s.dir) + ".log"))
                except OSError:
                    pass
                if not self.h.keep:
                    s.destroy()
        for path in self.scratch:
            log = os.path.join(path, "pgbouncer.log")
            if os.path.isfile(log):
                shutil.copy(log, self.dir)
            if self.h.keep:
                continue
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.exists(path):
                os.remove(path)
        for done in self.on_cleanup:
            done()


def merge_store(final, store):
    """The file store's accepted writes (worker/resource.hpp, kind x) as write_log
    rows and resources of the final state, in each file's order, so that the
    checker holds them to the same invariants as the tables' writes."""
    next_id = 1 << 40  # after every write_log id of the database
    for name in sorted(os.listdir(store)):
        if not name.startswith("x-"):
            continue
        resource = "x:" + name[2:]
        before = 0
        with open(os.path.join(store, name)) as f:
            for line in f:
                fields = line.split()
                if len(fields) != 4:
                    continue  # a torn last line: never acknowledged
                token, after, worker, op = int(fields[0]), int(fields[1]), fields[2], int(fields[3])
                final.setdefault("write_log", []).append(
                    {"id": next_id, "resource": resource, "token": token, "worker": worker, "op": op,
                     "before": before, "after": after})
                final.setdefault("resources", {})[resource] = after
                next_id += 1
                before = after
    return final


class HarnessClient:
    """The orchestrator as one more client, "h": its grants go to history/h.jsonl
    in the workers' format (worker/history.hpp), so the checkers judge them like
    any other grant."""

    def __init__(self, run):
        self.f = open(os.path.join(run.dir, "history", "h.jsonl"), "a")
        self.next_id = 0
        self.record(0, "start", impl="psql", fencing=True)

    def record(self, op_id, ev, **extra):
        rec = {"t": now_ns(), "w": "h", "id": op_id, "ev": ev}
        rec.update(extra)
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()

    def fenced_grant(self, server, ttl_ms, seconds, rng):
        """A fenced try_acquire of a free lock, tried on each lock in turn for up to
        `seconds`; (lock, token) or None. A paused worker's transaction may pin a
        lock: lock_timeout moves on to the next."""
        deadline = time.monotonic() + seconds
        locks = list(LOCKS)
        rng.shuffle(locks)
        i = 0
        while time.monotonic() < deadline:
            lock = locks[i % len(locks)]
            i += 1
            owner = str(uuid.uuid4())
            self.next_id += 1
            self.record(self.next_id, "invoke", op="acquire", lock=lock, owner=owner, mode="try")
            env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(server.port), PGUSER="postgres",
                       PGDATABASE="faults", PGCONNECT_TIMEOUT="5",
                       PGOPTIONS="-c dlock.durability=fenced -c lock_timeout=200 -c statement_timeout=1000")
            r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
                                "-c", f"SELECT fencing_token FROM dlock.try_acquire('{lock}', "
                                      f"'{ttl_ms} milliseconds', '{owner}', 'h')"],
                               env=env, capture_output=True, text=True, timeout=30)
            out = r.stdout.strip()
            if r.returncode != 0:
                code = re.search(r"(?:ERROR|FATAL):\s+([0-9A-Z]{5}):", r.stderr)
                self.record(self.next_id, "fail", why=code.group(1) if code else "connection")
            elif not out:
                self.record(self.next_id, "refused", why="busy")
            else:
                self.record(self.next_id, "ok", token=int(out), owner=owner)
                return lock, int(out)
            time.sleep(0.05)
        return None

    def close(self):
        self.f.close()


def compress_histories(run_dir):
    """Histories of long runs are large; the checker reads them gzipped too."""
    for name in os.listdir(os.path.join(run_dir, "history")):
        path = os.path.join(run_dir, "history", name)
        if name.endswith(".jsonl"):
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(path)


def prune_old_runs(keep=6):
    """Keeps the newest run directories under results/ (they are not versioned)."""
    runs = sorted(d for d in os.listdir(os.path.join(HERE, "results")) if d.startswith("run-"))
    for d in runs[:-keep]:
        shutil.rmtree(os.path.join(HERE, "results", d), ignore_errors=True)


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


# ---------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------

def s_pause(run):
    """1. The holder is paused (SIGSTOP) for 1.5-3x the ttl, then resumed."""
    run.start_primary()
    # Holders keep the lease up to half a ttl before writing, so the pause
    # usually lands between the grant and the fenced write.
    run.start_workers(run.conninfo(), extra_args=["--hold-ms", str(run.ttl_ms // 2)])
    run.sleep(1.0)
    while run.fault_window():
        held = run.holders()
        if not held:
            run.sleep(0.1)
            continue
        lock = run.rng.choice(sorted(held))
        wid = held[lock]
        p = run.workers.get(wid)
        if p is None or p.poll() is not None:
            run.sleep(0.1)
            continue
        pause = run.rng.uniform(1.5, 3.0) * run.ttl_ms / 1000.0
        os.kill(p.pid, signal.SIGSTOP)
        run.fault_start("sigstop", lock, worker=wid, seconds=round(pause, 2))
        time.sleep(pause)
        os.kill(p.pid, signal.SIGCONT)
        run.fault_end("sigstop", lock, worker=wid)
        run.sleep(run.ttl_ms / 1000.0)


def s_delay(run):
    """2. Replies are delayed past the ttl by a TCP delay proxy."""
    run.start_primary()
    control = os.path.join(run.dir, "proxy.control")
    run.start_proxy(run.port_proxy, run.primary.port, control)
    run.start_workers(run.conninfo([run.port_proxy]))
    run.sleep(1.0)
    while run.fault_window():
        # Replies to what the clients send in the first 1.5 ttl of the window
        # arrive after their lease ended; the next request is then a late one.
        delay_ms = int(run.rng.uniform(1.2, 1.5) * run.ttl_ms)
        refused_before = run.late_writes_refused()
        set_delay(control, delay_ms)
        run.fault_start("reply delay", None, ms=delay_ms)
        time.sleep(3 * run.ttl_ms / 1000.0)
        # Each call now takes longer than a ttl, so a worker makes only two or
        # three calls in the window; if none of them was a granted acquire, no
        # write was late yet. The delay stays on until one is (or time runs
        # short): a fencing that lets it through still fails the run.
        deadline = time.monotonic() + 6 * run.ttl_ms / 1000.0
        while (run.late_writes_refused() == refused_before and time.monotonic() < deadline
               and run.time_left() > 1.5 * run.ttl_ms / 1000.0 + 1.0):
            time.sleep(0.1)
        set_delay(control, 0)
        run.fault_end("reply delay", None)
        run.sleep(1.5 * run.ttl_ms / 1000.0)


def slow_workers(run):
    # Worker 1 pauses before every write, so each quick run has late writes
    # for the fencing to refuse (min_stale_refusals); with 0.15 for all, a
    # short run could draw none and fail.
    slow = str(2 * run.ttl_ms)
    return lambda i: (["--slow-prob", "1" if i == 1 else "0.15", "--slow-ms", slow,
                       "--slow-where", "inside" if i % 2 == 0 else "before"])


def s_late_write(run):
    """3. A fenced write is delayed until after a takeover (slow holders)."""
    run.start_primary()
    run.start_workers(run.conninfo(), per_worker=slow_workers(run))
    run.sleep(run.time_left())


def s_kill(run):
    """4. Backends are killed with pg_terminate_backend at random points."""
    run.start_primary()
    run.start_workers(run.conninfo(), extra_args=["--p-txn", "0.4", "--txn-pause-ms", "40"])
    run.sleep(1.0)
    while run.fault_window():
        between = run.backends("state = 'idle in transaction'")
        victims = between if between and run.rng.random() < 0.6 else run.backends()
        if victims:
            pid, state, app = run.rng.choice(victims)
            run.fault_start("pg_terminate_backend", None, backend=app, state=state)
            run.current.psql_try(f"SELECT pg_terminate_backend({pid})")
            run.fault_end("pg_terminate_backend", None)
        run.sleep(run.rng.uniform(0.15, 0.4))


def s_session_bound(run):
    """14. Session-bound leases: holders are SIGKILLed (their session ends: the
    lease must go at once, long before its ttl) or paused with SIGSTOP (their
    session lives: the lease ends with its ttl and the late write is fenced)."""
    run.start_primary()
    bound = "1" if run.sc.get("session_bound", True) else "0"
    run.start_workers(run.conninfo(), extra_args=["--session-bound", bound,
                                                  "--hold-ms", str(run.ttl_ms // 2)])
    run.sleep(1.0)
    faults_done = 0
    while run.time_left() > run.ttl_ms / 1000.0 + 1.5:
        held = run.holders()
        live = [(lock, wid) for lock, wid in sorted(held.items())
                if wid in run.workers and run.workers[wid].poll() is None]
        if not live:
            run.sleep(0.05)
            continue
        lock, wid = run.rng.choice(live)
        p = run.workers[wid]
        if faults_done % 3 != 2:  # two kills, then a pause
            left = run.current.psql_try(
                "SELECT round(extract(epoch FROM expires_in) * 1000) FROM dlock.locks "
                f"WHERE lock_name = '{lock}' AND holder = '{wid}' AND state = 'held'")
            if not left:
                continue
            run.fault_start("sigkill", lock, worker=wid, expires_in_ms=float(left))
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            run.fault_end("sigkill", lock, worker=wid)
            run.respawn_worker(wid)
            run.sleep(0.5 * run.ttl_ms / 1000.0)
        else:
            pause = run.rng.uniform(1.5, 2.0) * run.ttl_ms / 1000.0
            os.kill(p.pid, signal.SIGSTOP)
            run.fault_start("sigstop", lock, worker=wid, seconds=round(pause, 2))
            time.sleep(pause)
            os.kill(p.pid, signal.SIGCONT)
            run.fault_end("sigstop", lock, worker=wid)
            run.sleep(0.5 * run.ttl_ms / 1000.0)
        faults_done += 1


def s_server_clock(run):
    """5. The server's clock steps forward by 2x the ttl, then back by one ttl."""
    run.start_primary(faketime=True)
    run.start_workers(run.conninfo(), extra_args=["--hold-ms", str(run.ttl_ms * 6 // 10)])
    run.sleep(1.0)
    offset = 0.0
    ttl = run.ttl_ms / 1000.0
    # Each step lies between its fault_start and fault_end: the server may read
    # its clock as soon as the offset file changes.
    while run.fault_window():
        offset += 2 * ttl
        run.fault_start("server clock +2 ttl", None, offset=offset)
        set_offset(run.primary.faketime_file, offset)
        run.fault_end("server clock +2 ttl", None, measured=server_offset(run))
        run.sleep(1.5 * ttl)
        offset -= ttl
        run.fault_start("server clock -1 ttl", None, offset=offset)
        set_offset(run.primary.faketime_file, offset)
        run.fault_end("server clock -1 ttl", None, measured=server_offset(run))
        run.sleep(1.5 * ttl)


def server_offset(run):
    """How far the server's clock_timestamp() is from ours, in seconds (evidence)."""
    before = time.time()
    out = run.primary.psql_try("SELECT extract(epoch FROM clock_timestamp())")
    after = time.time()
    return None if out is None else round(float(out) - (before + after) / 2, 2)


def set_delay(path, down_ms, up_ms=0):
    """Tells a delay proxy its delays (atomically: it may read at any moment)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{down_ms} {up_ms}\n")
    os.replace(tmp, path)


def set_offset(path, seconds):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{seconds:+.3f}\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def s_client_clock(run):
    """6. Client clocks run fast or slow (libfaketime rate) within the drift allowance."""
    run.start_primary()
    rates = run.sc.get("rates", ["1.04", "0.96"])

    def env_for(i):
        rate = rates[i % 2]
        return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"+0 x{rate}"}

    run.start_workers(run.conninfo(), extra_args=["--use-lease", "1", "--drift", "0.05",
                                                  "--p-renew", "0", "--p-wait", "0"],
                      env_for=env_for)
    for i, wid in enumerate(sorted(run.workers), start=1):
        run.fault_start("client clock", None, worker=wid, rate=rates[i % 2])
    run.sleep(run.time_left())
    for i, wid in enumerate(sorted(run.workers), start=1):
        run.fault_end("client clock", None, worker=wid)


def s_crash(run):
    """7. The server crashes (pg_ctl stop -m immediate) and restarts."""
    run.start_primary()
    run.start_workers(run.conninfo())
    run.sleep(1.5)
    while run.fault_window():
        run.fault_start("crash", None)
        run.primary.crash()
        time.sleep(0.3)
        run.primary.start()
        run.fault_end("crash", None)
        run.sleep(max(1.5, 2 * run.ttl_ms / 1000.0))


def s_fenced_crash(run):
    """17. Fenced grants (dlock.durability = fenced: the grant commits without
    waiting for its WAL flush) through crashes, in turn pg_ctl stop -m immediate
    and SIGKILL of the postmaster. The workers write to the tables and, first
    after each grant, to a file store outside the database. With
    wal_writer_delay = 10s a grant stays in the WAL buffers until a durable
    commit flushes it, so each crash is made to lose one: the workers are paused,
    the harness makes one more fenced grant, and the server dies with nothing
    flushed after it. Right after the restart, before the workers go on, the
    harness reads each name's highest token ("recovered"): the checker counts the
    grants the crashes lost (min_lost_grants), and every later token must be above
    them all the same (invariant 3: a token of one owner only, later grants higher)."""
    settings = {"wal_writer_delay": "'10s'", "recovery_init_sync_method": "syncfs"}
    if run.sc.get("ignore_epoch"):
        settings["dlock.test_ignore_epoch"] = "on"
    run.start_primary(settings)
    run.store = os.path.join(run.dir, "store")
    os.makedirs(run.store)
    run.start_workers(run.conninfo() + " options='-c dlock.durability=fenced'",
                      extra_args=["--store", run.store])
    client = HarnessClient(run)
    run.sleep(1.5)
    rounds = 0
    try:
        while run.fault_window():
            rounds += 1
            how = "immediate stop" if rounds % 2 else "SIGKILL of the postmaster"
            paused = [p for p in run.workers.values() if p.poll() is None]
            run.fault_start("crash", None, how=how, round=rounds)
            for p in paused:
                os.kill(p.pid, signal.SIGSTOP)
            time.sleep(0.2)  # what the workers had sent completes
            got = client.fenced_grant(run.primary, run.ttl_ms, 1.5 * run.ttl_ms / 1000.0, run.rng)
            t_crash = now_ns()  # every grant acknowledged before this the server may have lost
            if rounds % 2:
                run.primary.crash()
            else:
                run.primary.kill()
            run.primary.start()
            tokens = {}
            out = run.primary.psql_try("SELECT lock_name || ' ' || fencing_seq FROM dlock.distributed_lock")
            for line in (out or "").splitlines():
                lock, _, token = line.partition(" ")
                tokens[lock] = int(token)
            run.event("recovered", "crash", None, since=t_crash, tokens=tokens,
                      harness_grant=list(got) if got else None)
            for p in paused:
                os.kill(p.pid, signal.SIGCONT)
            run.fault_end("crash", None, how=how)
            run.sleep(max(1.5, 2 * run.ttl_ms / 1000.0))
    finally:
        client.close()


def failover(run, sync, async_lag_ms=0):
    """Primary killed, standby promoted; workers follow through a multi-host string.
    While time allows, a new standby is cloned from the new primary onto the dead
    server's port and the failover repeats (one more timeline each round)."""
    run.start_primary({"dlock.test_ignore_timeline": "on"} if run.sc.get("ignore_timeline") else None)
    ports = [run.port_primary, run.port_standby]

    def attach_standby(source, port, label):
        via = proxy = None
        if async_lag_ms:
            # Replication through the delay proxy: what the primary committed in
            # the last async_lag_ms is still in the proxy when the primary dies.
            control = os.path.join(run.dir, f"repl-proxy-{label}.control")
            proxy = run.start_proxy(run.port_repl_proxy, source.port, control)
            via = run.port_repl_proxy
        standby = run.start_standby(sync, via_port=via, source=source, port=port, label=label)
        if proxy is not None:
            set_delay(control, async_lag_ms)
        return standby, proxy

    standby, proxy = attach_standby(run.primary, run.port_standby, "standby")
    run.start_workers(run.conninfo(ports))
    run.sleep(max(2.0, run.time_left() / 3))
    current = run.primary
    rounds = 0
    while True:
        rounds += 1
        run.fault_start("failover", None, sync=sync, round=rounds)
        current.crash()
        if proxy is not None:
            proxy.kill()
            proxy.wait()
        time.sleep(0.3)
        standby.promote()
        run.current = current = standby
        run.fault_end("failover", None, round=rounds)
        # Another round needs a base backup, streaming, and time to recover after it.
        if run.time_left() < 3 * run.ttl_ms / 1000.0 + 8:
            break
        run.sleep(run.ttl_ms / 1000.0)
        port = ports[(rounds - 1) % 2]  # the dead server's port
        standby, proxy = attach_standby(current, port, f"standby{rounds + 1}")
        run.sleep(2 * run.ttl_ms / 1000.0)
    run.sleep(run.time_left())


def s_sync_failover(run):
    """8. The primary is killed and a synchronous standby is promoted."""
    failover(run, sync=True)


def s_async_failover(run):
    """9. The same with an asynchronous standby (timeline bits keep tokens growing)."""
    failover(run, sync=False, async_lag_ms=600)


def s_syncrep_cancel(run):
    """10. A commit waiting for the synchronous standby is canceled."""
    run.start_primary()
    run.start_standby(sync=True)
    run.start_workers(run.conninfo())
    run.sleep(1.5)
    while run.fault_window():
        run.fault_start("standby down, waits canceled", None)
        run.standby.stop()
        t_stop = time.monotonic() + 1.5 * run.ttl_ms / 1000.0 + 0.5
        while time.monotonic() < t_stop:
            time.sleep(0.15)
            run.current.psql_try("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                                 "WHERE wait_event = 'SyncRep'")
        run.standby.start()
        deadline = time.time() + 20
        while time.time() < deadline:
            if run.primary.psql_try("SELECT sync_state FROM pg_stat_replication", db="postgres") == "sync":
                break
            time.sleep(0.1)
        run.fault_end("standby down, waits canceled", None)
        run.sleep(2 * run.ttl_ms / 1000.0)


def s_idle_txn(run):
    """11. A transaction sits idle holding the lease row's lock."""
    run.start_primary()
    run.start_workers(run.conninfo())
    run.sleep(1.0)
    env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(run.primary.port), PGUSER="postgres",
               PGDATABASE="faults")
    while run.fault_window():
        lock = run.rng.choice(LOCKS)
        p = subprocess.Popen(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        p.stdin.write("SET lock_timeout = 0;\nSET idle_in_transaction_session_timeout = 0;\n"
                      "BEGIN;\n"
                      f"SELECT 'locked' FROM dlock.distributed_lock WHERE lock_name = '{lock}' "
                      "FOR UPDATE;\n")
        p.stdin.flush()
        line = p.stdout.readline().strip()
        if line != "locked":
            p.kill()
            p.wait()
            raise RuntimeError(f"could not lock the row of {lock}: {line}")
        run.fault_start("idle transaction", lock)
        time.sleep(2.5 * run.ttl_ms / 1000.0)
        p.stdin.write("ROLLBACK;\n")
        p.stdin.close()
        p.wait()
        run.fault_end("idle transaction", lock)
        run.sleep(1.5 * run.ttl_ms / 1000.0)


def s_pgbouncer(run):
    """12. The whole workload through PgBouncer in transaction pooling mode."""
    run.start_primary()
    run.start_pgbouncer()
    run.start_workers(run.conninfo([run.port_bouncer]), per_worker=slow_workers(run))
    run.sleep(1.0)
    while run.fault_window():
        victims = run.backends()
        if victims:
            pid, state, app = run.rng.choice(victims)
            run.fault_start("pg_terminate_backend", None, state=state)
            run.current.psql_try(f"SELECT pg_terminate_backend({pid})")
            run.fault_end("pg_terminate_backend", None)
        run.sleep(run.rng.uniform(0.5, 1.0))


def s_partition(run):
    """13. Half the workers are cut off from the server (a network partition) for
    2-3x the ttl, then the partition heals and what they sent arrives late."""
    run.start_primary()
    control = os.path.join(run.dir, "proxy.control")
    proxy = run.start_proxy(run.port_proxy, run.primary.port, control)
    cut_off = run.conninfo([run.port_proxy])
    run.start_workers(run.conninfo(), extra_args=["--hold-ms", str(run.ttl_ms // 2)],
                      per_worker=lambda i: ["--conninfo", cut_off] if i % 2 == 1 else [])
    run.sleep(1.0)
    while run.fault_window():
        # A stopped proxy forwards nothing, in either direction, and accepts no
        # connection: the same as a partition for the workers behind it.
        seconds = run.rng.uniform(2.0, 3.0) * run.ttl_ms / 1000.0
        os.kill(proxy.pid, signal.SIGSTOP)
        run.fault_start("partition", None, seconds=round(seconds, 2))
        time.sleep(seconds)
        os.kill(proxy.pid, signal.SIGCONT)
        run.fault_end("partition", None)
        run.sleep(1.5 * run.ttl_ms / 1000.0)


ELECTION = "E"


class Election:
    """The candidates and observers of the election scenario (fault_worker
    --mode elector processes). Candidates write histories like the workers' (history/), so the
    usual invariants apply to their fenced writes; observers write the leaders
    they report to observers/. A process replaced after a fault gets a new id."""

    def __init__(self, run):
        self.run = run
        probe = subprocess.run([run.h.worker, "--mode", "elector"], capture_output=True, text=True)
        if "needs the client library" in probe.stderr:
            raise RuntimeError(f"{run.h.worker} has no elector mode (it needs the C++ client library)")
        os.makedirs(os.path.join(run.dir, "observers"), exist_ok=True)
        self.candidates = {}
        self.observers = {}
        self.started = 0
        run.duration_ms = max(run.h.profile["duration"], run.sc.get("min_duration", 0)) * 1000
        run.t_start = time.monotonic()
        run.t_end = run.t_start + run.duration_ms / 1000.0

    def _start(self, role, out_dir, extra):
        self.started += 1
        pid_name = f"{'c' if role == 'candidate' else 'o'}{self.started}"
        args = [self.run.h.worker, "--mode", "elector", "--role", role, "--id", pid_name, "--conninfo", self.run.conninfo(),
                "--out", os.path.join(self.run.dir, out_dir, f"{pid_name}.jsonl"),
                "--election", ELECTION, "--ttl-ms", str(self.run.ttl_ms),
                "--duration-ms", str(self.run.duration_ms + 60000)] + extra
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.run.dir, f"{role}-{pid_name}.log"), "w"))
        return pid_name, p

    def start_candidate(self):
        fencing = "1" if self.run.sc.get("fencing", True) else "0"
        wid, p = self._start("candidate", "history", ["--fencing", fencing])
        self.candidates[wid] = p
        self.run.workers[wid] = p  # stopped by the run's cleanup like workers

    def start_observer(self):
        oid, p = self._start("observer", "observers",
                             ["--trust-events"] if self.run.sc.get("trust_events") else [])
        self.observers[oid] = p
        self.run.helpers.append(p)

    def leader(self):
        """(holder, fencing token) of the live lease, or None."""
        out = self.run.primary.psql_try(
            f"SELECT holder || ' ' || fencing_token FROM dlock.leader('{ELECTION}')")
        if not out:
            return None
        holder, _, token = out.partition(" ")
        return holder, int(token)

    def wait_leader(self, other_than=None, timeout=None):
        """The leader, once there is one (and it is not other_than); None after the timeout."""
        deadline = time.monotonic() + (timeout or 4 * self.run.ttl_ms / 1000.0 + 2)
        while time.monotonic() < deadline:
            got = self.leader()
            if got and got[0] != other_than:
                return got
            time.sleep(0.05)
        return None

    def stop(self, procs, timeout=15):
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def s_election(run):
    """14. Leader election: the leader is paused (SIGSTOP past the ttl) or killed
    (SIGKILL) while observers follow; at the end the observers are killed and
    restarted across a change of leader. Invariant 6: every observer's final
    view is the server's leader."""
    run.start_primary(settings={"dlock.worker_database": "'faults'", "dlock.worker_naptime": "'1s'"})
    run.primary.psql("ALTER DATABASE faults SET dlock.events = on", db="postgres")
    run.primary.psql("; ".join(f"INSERT INTO res_{k} (id) VALUES ('{ELECTION}')" for k in "gtf"))
    e = Election(run)
    for _ in range(3):
        e.start_candidate()
    for _ in range(3):
        e.start_observer()
    ttl = run.ttl_ms / 1000.0
    if not e.wait_leader():
        raise RuntimeError("no candidate became leader")
    run.sleep(ttl)
    # Without fencing (the negative control) only pauses: a paused leader that
    # resumes in the middle of its read-modify-write is what fencing must stop.
    kinds = ["pause", "kill"] if run.sc.get("fencing", True) else ["pause"]
    while run.fault_window():
        got = e.wait_leader()
        if not got or got[0] not in e.candidates:
            raise RuntimeError(f"no leader among the candidates: {got}")
        wid, p = got[0], e.candidates[got[0]]
        if run.rng.choice(kinds) == "pause":
            pause = run.rng.uniform(1.5, 3.0) * ttl
            os.kill(p.pid, signal.SIGSTOP)
            run.fault_start("sigstop leader", ELECTION, worker=wid, seconds=round(pause, 2))
            time.sleep(pause)
            os.kill(p.pid, signal.SIGCONT)
            run.fault_end("sigstop leader", ELECTION, worker=wid)
        else:
            os.kill(p.pid, signal.SIGKILL)
            run.fault_start("sigkill leader", ELECTION, worker=wid)
            p.wait()
            e.start_candidate()
            run.fault_end("sigkill leader", ELECTION, worker=wid)
        run.sleep(ttl)

    # The last change of leader happens while the observers are down: only an
    # observer that reads the state when it (re)starts can know the new leader.
    got = e.wait_leader()
    if not got:
        raise RuntimeError("no leader before the last fault")
    for p in e.observers.values():
        p.kill()
        p.wait()
    e.observers.clear()
    os.kill(e.candidates[got[0]].pid, signal.SIGKILL)
    run.fault_start("sigkill leader, observers killed", ELECTION, worker=got[0])
    e.candidates[got[0]].wait()
    e.start_candidate()
    if not e.wait_leader(other_than=got[0]):
        raise RuntimeError("no new leader after the last fault")
    for _ in range(3):
        e.start_observer()
    run.fault_end("sigkill leader, observers killed", ELECTION, worker=got[0])

    # Settle, then ask each observer for the leader it knows, with the server's
    # leader read before and after.
    time.sleep(2 * ttl + 1)
    before = e.leader()
    e.stop(list(e.observers.values()))
    after = e.leader()
    with open(os.path.join(run.dir, "election.json"), "w") as f:
        json.dump({"before": before[1] if before else 0, "after": after[1] if after else 0,
                   "leader": after[0] if after else None, "observers": sorted(e.observers)}, f)
    e.stop(list(e.candidates.values()))


SEMAPHORE_SCHEMA = """
CREATE TABLE sem_write (id bigserial PRIMARY KEY, worker text NOT NULL, token bigint NOT NULL,
                        started timestamptz NOT NULL, ended timestamptz);
GRANT SELECT, INSERT, UPDATE ON sem_write TO faults_app;
GRANT USAGE ON SEQUENCE sem_write_id_seq TO faults_app;
"""

SEMAPHORE_WRITES = """
SELECT coalesce(json_agg(json_build_object(
         'worker', worker, 'token', token,
         'started', (extract(epoch FROM started) * 1000000)::bigint,
         'ended', (extract(epoch FROM ended) * 1000000)::bigint) ORDER BY id), '[]'::json)
  FROM sem_write WHERE ended IS NOT NULL
"""

# Debian's interpreter, which has python3-psycopg2 (the harness may run under another)
SYSTEM_PYTHON = "/usr/bin/python3"


def s_semaphore(run):
    """S. Semaphore of 2 permits, 6 workers: holders paused (SIGSTOP) past
    their ttl, backends killed, some writers late on their own; fenced writes
    (dlock.assert_holds) must never be more than 2 at a time."""
    permits = run.sc["permits"]
    run.start_primary()
    run.primary.psql(SEMAPHORE_SCHEMA)
    run.duration_ms = run.h.profile["duration"] * 1000
    for i in range(1, 7):
        wid = f"w{i}"
        args = [SYSTEM_PYTHON, os.path.join(HERE, "semaphore_worker.py"), "--id", wid,
                "--conninfo", run.conninfo(), "--history",
                os.path.join(run.dir, "history", f"{wid}.jsonl"),
                "--permits", str(permits), "--ttl-ms", str(run.ttl_ms),
                "--duration-ms", str(run.duration_ms), "--seed", str(run.h.seed * 100 + i),
                "--fencing", "1" if run.sc.get("fencing", True) else "0",
                "--slow-prob", str(run.sc.get("slow_prob", 0.15))]
        run.workers[wid] = subprocess.Popen(
            args, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(run.dir, f"worker-{wid}.log"), "w"))
    run.t_start = time.monotonic()
    run.t_end = run.t_start + run.duration_ms / 1000.0
    run.sleep(1.0)
    while run.fault_window() and run.sc.get("faults", True):
        wid = run.rng.choice(sorted(run.workers))
        pause = run.rng.uniform(1.5, 3.0) * run.ttl_ms / 1000.0
        os.kill(run.workers[wid].pid, signal.SIGSTOP)
        run.fault_start("sigstop", "S1", worker=wid, seconds=round(pause, 2))
        time.sleep(pause)
        os.kill(run.workers[wid].pid, signal.SIGCONT)
        run.fault_end("sigstop", "S1", worker=wid)
        victims = run.backends()
        if victims:
            pid, state, app = run.rng.choice(victims)
            run.fault_start("pg_terminate_backend", "S1", backend=app, state=state)
            run.current.psql_try(f"SELECT pg_terminate_backend({pid})")
            run.fault_end("pg_terminate_backend", "S1")
        run.sleep(run.ttl_ms / 1000.0)
    run.wait_workers()
    with open(os.path.join(run.dir, "sem_writes.json"), "w") as f:
        f.write(run.current.psql_try(SEMAPHORE_WRITES, timeout=30) or "[]")


KINDS_SCHEMA = """
CREATE TABLE kinds_write (id bigserial PRIMARY KEY, name text NOT NULL, role text NOT NULL,
                          worker text NOT NULL, token bigint NOT NULL,
                          started timestamptz NOT NULL, ended timestamptz);
GRANT SELECT, INSERT, UPDATE ON kinds_write TO faults_app;
GRANT USAGE ON SEQUENCE kinds_write_id_seq TO faults_app;
"""

KINDS_WRITES = """
SELECT coalesce(json_agg(json_build_object(
         'name', name, 'role', role, 'worker', worker, 'token', token,
         'started', (extract(epoch FROM started) * 1000000)::bigint,
         'ended', (extract(epoch FROM ended) * 1000000)::bigint) ORDER BY id), '[]'::json)
  FROM kinds_write WHERE ended IS NOT NULL
"""

# the leases live on a server, by kind (read just before a fault)
LIVE_BY_KIND = """
SELECT coalesce(json_object_agg(kind, n), '{}'::json)
  FROM (SELECT kind, count(*) AS n FROM dlock.lock_holders GROUP BY kind) k
"""


def await_live_holders(psql, seconds=3.0):
    """The leases live by kind, read through psql(sql) until a shared lease and
    a permit are both live (at most seconds): the fault that follows then hits
    readers and permits, not only the moments between them."""
    deadline = time.monotonic() + seconds
    live = {}
    while True:
        try:
            live = json.loads(psql(LIVE_BY_KIND) or "{}")
        except Exception:  # noqa: BLE001 -- a server that does not answer: record nothing
            live = {}
        if (live.get("shared") and live.get("permit")) or time.monotonic() >= deadline:
            return live
        time.sleep(0.05)

# who runs in the kinds scenario: role, name, how many
KINDS_WORKERS = [("permit", "S1", 3), ("reader", "RW1", 3), ("writer", "RW1", 1)]


def s_kinds_failover(run):
    """18. Readers and a writer of one name and holders of a semaphore's
    permits, all renewing and making fenced writes, through an immediate stop,
    a SIGKILL of the postmaster and the promotion of an asynchronous standby
    (replication 600 ms behind, so the promotion loses the last grants): no
    token twice per name, no reader beside a writer, no permit over the size
    (kinds_check.py). The workers follow the primary by a multi-host string.
    The faults come one after the other, each when the server is back, and the
    workers stop a few seconds after the promotion (however long the restarts
    took), so that every kind has time to go on there."""
    permits = run.sc["permits"]
    run.start_primary({"dlock.test_ignore_timeline": "on"} if run.sc.get("ignore_timeline") else None)
    run.primary.psql(KINDS_SCHEMA)
    control = os.path.join(run.dir, "repl-proxy.control")
    proxy = run.start_proxy(run.port_repl_proxy, run.primary.port, control)
    standby = run.start_standby(False, via_port=run.port_repl_proxy)
    set_delay(control, 600)
    conninfo = run.conninfo([run.port_primary, run.port_standby])
    stop_file = os.path.join(run.dir, "stop-workers")
    run.duration_ms = 120 * 1000  # a bound only: the stop file ends them
    seq = 0
    for role, name, count in KINDS_WORKERS:
        for i in range(1, count + 1):
            seq += 1
            wid = f"{role[0]}{i}"
            args = [SYSTEM_PYTHON, os.path.join(HERE, "kinds_worker.py"), "--id", wid,
                    "--role", role, "--name", name, "--conninfo", conninfo,
                    "--history", os.path.join(run.dir, "history", f"{wid}.jsonl"),
                    "--permits", str(permits), "--ttl-ms", str(run.ttl_ms),
                    "--duration-ms", str(run.duration_ms), "--seed", str(run.h.seed * 100 + seq),
                    "--stop-file", stop_file]
            run.workers[wid] = subprocess.Popen(
                args, stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(run.dir, f"worker-{wid}.log"), "w"))
    run.t_start = time.monotonic()
    run.t_end = run.t_start + run.duration_ms / 1000.0

    def live(server):
        return await_live_holders(lambda sql: server.psql_try(sql, timeout=5))

    gap = max(1.5, 2 * run.ttl_ms / 1000.0)
    time.sleep(1.5)
    for how in ("immediate stop", "SIGKILL of the postmaster"):
        run.fault_start("crash", None, how=how, live=live(run.primary))
        if how == "immediate stop":
            run.primary.crash()
        else:
            run.primary.kill()
        time.sleep(0.3)
        run.primary.start()
        run.fault_end("crash", None, how=how)
        time.sleep(gap)
    run.fault_start("failover", None, how="promotion", live=live(run.primary))
    run.primary.crash()
    proxy.kill()  # what the primary committed in the last 600 ms is lost
    proxy.wait()
    time.sleep(0.3)
    standby.promote()
    run.current = standby
    run.fault_end("failover", None, how="promotion")
    time.sleep(max(4.0, 3 * run.ttl_ms / 1000.0))
    open(stop_file, "w").close()
    run.t_end = time.monotonic()  # workers end within one round (a wait of at most 2 ttl)
    run.wait_workers()
    with open(os.path.join(run.dir, "kinds_writes.json"), "w") as f:
        f.write(run.current.psql_try(KINDS_WRITES, timeout=30) or "[]")


# standard_expect_violations: a negative control whose fault the standard
# history shows (check_standard_history.py must flag it); the other negative
# controls break what that model does not cover.
# not_in_sql_edition: why the scenario is skipped with --edition sql (what it
# needs that the SQL edition does not offer, docs/sql-edition.md); every other
# scenario runs against both editions with the same checks.
NOT_SESSION_BOUND = "session-bound leases: the SQL edition refuses session_bound => true (55000)"
NOT_FENCED = ("fenced grants and the token epoch: the SQL edition refuses "
              "dlock.durability = fenced (0A000) and commits every grant durably")
SCENARIOS = [
    {"name": "01-pause", "title": "holder paused (SIGSTOP) 1.5-3x ttl", "run": s_pause},
    {"name": "02-reply-delay", "title": "replies delayed past the ttl (TCP proxy)", "run": s_delay,
     "checks": {"min_stale_refusals": 1}},
    {"name": "03-late-write", "title": "fenced write delayed until after a takeover",
     "run": s_late_write, "checks": {"min_stale_refusals": 1}},
    {"name": "04-kill-backends", "title": "backends killed (pg_terminate_backend)", "run": s_kill},
    {"name": "05-server-clock", "title": "server clock +2 ttl, then -1 ttl (libfaketime)",
     "run": s_server_clock, "checks": {"min_stale_refusals": 1}},
    {"name": "06-client-clock", "title": "client clock x1.04 / x0.96 (allowance 5%)",
     "run": s_client_clock, "checks": {"local_belief": True}},
    {"name": "07-crash-restart", "title": "server crash (immediate stop) and restart",
     "run": s_crash},
    {"name": "08-sync-failover", "title": "primary killed, synchronous standby promoted",
     "run": s_sync_failover},
    {"name": "09-async-failover", "title": "primary killed, asynchronous standby promoted",
     "run": s_async_failover, "checks": {"async_loss": True}},
    {"name": "10-syncrep-cancel", "title": "sync-rep wait canceled (standby down)",
     "run": s_syncrep_cancel, "checks": {"converge": True, "min_unknown": 1}},
    {"name": "11-idle-txn", "title": "idle transaction holds the lease row lock",
     "run": s_idle_txn, "checks": {"acquire_bound_ms": LOCK_TIMEOUT_MS + 1000}},
    # The workers use the C++ client library here too (unnamed statements,
    # settings per transaction: it works through transaction pooling).
    {"name": "12-pgbouncer", "title": "through PgBouncer, transaction pooling",
     "run": s_pgbouncer},
    {"name": "13-partition", "title": "network partition of half the workers (stopped proxy)",
     "run": s_partition},
    {"name": "14-election", "title": "leaders paused past the ttl and killed, observers restarted",
     "run": s_election, "min_duration": 20, "checks": {"election": True}},
    # Lock kinds: a semaphore's permits, each its own fenced lease
    {"name": "15-semaphore", "title": "semaphore of 2 permits: holders paused past the ttl, backends killed",
     "run": s_semaphore, "permits": 2, "checker": "semaphore",
     "checks": {"min_stale_refusals": 1}},
    # ttl 2 s, so that a killed holder's lease has time left to judge by.
    {"name": "16-session-bound", "title": "session-bound leases, holders SIGKILLed or paused",
     "run": s_session_bound, "ttl_ms": 2000,
     "checks": {"session_takeover": True}, "not_in_sql_edition": NOT_SESSION_BOUND},
    # The harness's own grants go to history/h.jsonl, so the standard history has them too.
    {"name": "17-fenced-crash", "title": "fenced grants (no WAL flush wait), crash restarts lose some",
     "run": s_fenced_crash, "min_duration": 16, "checks": {"min_lost_grants": 1},
     "not_in_sql_edition": NOT_FENCED},
    # Lock kinds through crashes and a promotion: readers, a writer, permits
    {"name": "18-kinds-failover",
     "title": "readers, a writer and permits live through crashes and an async promotion",
     "run": s_kinds_failover, "permits": 2, "checker": "kinds",
     "checks": {"faults": ["immediate stop", "SIGKILL of the postmaster", "promotion"]},
     "not_in_sql_edition": "without writer preference (docs/sql-edition.md) three readers starve "
                           "the writer, whose progress the scenario requires"},
    {"name": "N1-no-fencing", "title": "negative control: slow holders, fencing off",
     "run": s_late_write, "fencing": False, "negative_control": True,
     "standard_expect_violations": True},
    {"name": "N2-no-timeline", "title": "negative control: async failover, timeline bits off",
     "run": s_async_failover, "ignore_timeline": True, "negative_control": True,
     "checks": {"async_loss": True},
     "standard_expect_violations": True,
     "not_in_sql_edition": "the switch that turns the timeline bits off (dlock.test_ignore_timeline) "
                           "is the C extension's; the SQL edition has no test settings"},
    {"name": "N3-clock-outside-allowance",
     "title": "negative control: client clock x0.7, outside the 5% allowance",
     "run": s_client_clock, "rates": ["0.7", "0.7"], "negative_control": True,
     "checks": {"local_belief": True}, "expect_violations": ["extra"]},
    {"name": "N4-election-no-fencing", "title": "negative control: paused leaders write without fencing",
     "run": s_election, "min_duration": 20, "fencing": False, "negative_control": True,
     "checks": {"election": True}, "expect_violations": ["1", "2"],
     "standard_expect_violations": True},
    {"name": "N5-observer-trusts-events",
     "title": "negative control: observers believe notifications, never read the leader",
     "run": s_election, "min_duration": 20, "trust_events": True, "negative_control": True,
     "checks": {"election": True}, "expect_violations": ["6"]},
    {"name": "N6-semaphore-no-fencing",
     "title": "negative control: semaphore, late writers, fencing off",
     "run": s_semaphore, "permits": 2, "checker": "semaphore", "fencing": False,
     "faults": False, "slow_prob": 0.4, "negative_control": True, "expect_violations": ["S"]},
    {"name": "N7-not-session-bound",
     "title": "negative control: holders SIGKILLed, leases not session-bound",
     "run": s_session_bound, "ttl_ms": 2000, "session_bound": False,
     "negative_control": True, "checks": {"session_takeover": True},
     "expect_violations": ["extra"], "not_in_sql_edition": NOT_SESSION_BOUND},
    {"name": "N8-fenced-crash-no-epoch",
     "title": "negative control: fenced grants through crashes, token epoch never moved",
     "run": s_fenced_crash, "min_duration": 16, "ignore_epoch": True, "negative_control": True,
     "checks": {"min_lost_grants": 1}, "expect_violations": ["3"],
     "standard_expect_violations": True, "not_in_sql_edition": NOT_FENCED},
    {"name": "N9-kinds-no-timeline",
     "title": "negative control: lock kinds through an async promotion, timeline bits off",
     "run": s_kinds_failover, "permits": 2, "checker": "kinds",
     "ignore_timeline": True, "negative_control": True, "expect_violations": ["T"],
     "checks": {"faults": ["immediate stop", "SIGKILL of the postmaster", "promotion"]},
     "not_in_sql_edition": "the switch that turns the timeline bits off (dlock.test_ignore_timeline) "
                           "is the C extension's; the SQL edition has no test settings"},
]
# Faults of a real network between hosts made of network namespaces (needs
# root): run with --set network or --set all (net_scenarios.py).
NET_NOT_IN_SQL_EDITION = "the network scenarios run against the C extension only"
SCENARIOS += [dict(sc, not_in_sql_edition=NET_NOT_IN_SQL_EDITION) for sc in NET_SCENARIOS]
SETS = {"local": lambda sc: not sc.get("network"), "network": lambda sc: bool(sc.get("network")),
        "network-quick": lambda sc: bool(sc.get("network")) and bool(sc.get("quick")),
        "all": lambda sc: True}


class Harness:
    def __init__(self, args):
        self.profile_name = args.profile
        self.profile = PROFILES[args.profile]
        self.seed = args.seed
        self.keep = args.keep
        self.force_pqxx = args.pqxx
        self.client_everywhere = args.client_everywhere
        self.worker = args.worker
        self.edition = args.edition
        self.in_set = SETS[args.set]
        self.set_name = args.set
        stamp = time.strftime("%Y%m%d-%H%M%S")
        suffix = ("" if args.edition == "c" else "-sql-edition") + \
            ("" if args.set == "local" else f"-{args.set}")
        self.run_root = os.path.join(HERE, "results", f"run-{stamp}-{args.profile}{suffix}")
        os.makedirs(self.run_root, exist_ok=True)
        self.template = None
        self.skipped = []  # scenarios the edition does not run, with the reason

    def run_one(self, sc):
        run = Run(self, sc)
        error = None
        try:
            sc["run"](run)
            run.finish()
        except Exception:  # noqa: BLE001 -- reported as the scenario's failure
            error = traceback.format_exc()
            with open(os.path.join(run.dir, "harness-error.txt"), "w") as f:
                f.write(error)
        finally:
            run.cleanup()
        if error:
            return {"scenario": sc["name"], "title": sc["title"], "error": error.strip().splitlines()[-1],
                    "negative_control": bool(sc.get("negative_control")), "passed": False}
        if sc.get("checker") == "semaphore":
            summary = semaphore_check.check_semaphore(run.dir)
        elif sc.get("checker") == "kinds":
            # readers, writers and permits are another model: not converted either
            summary = kinds_check.check_kinds(run.dir)
        else:
            summary = checker.check_run(run.dir)
            # The same run in the shape outside checkers read (docs/fault-histories.md);
            # a semaphore's permits are another model, not converted.
            try:
                summary["standard_history"] = standard_history.write_standard_history(run.dir)
            except Exception:  # noqa: BLE001 -- reported by 60-faults-quick; the verdict stands
                summary["standard_history_error"] = traceback.format_exc().strip().splitlines()[-1]
        summary["standard_expect_violations"] = bool(sc.get("standard_expect_violations"))
        with open(os.path.join(run.dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        compress_histories(run.dir)
        summary["title"] = sc["title"]
        if sc.get("negative_control"):
            expected = sc.get("expect_violations", ["1", "2", "3"])
            summary["passed"] = sum(summary["violations_by_invariant"][k] for k in expected) > 0
        else:
            ok = summary["violations"] == 0
            summary["passed"] = ok
        return summary

    def run(self, only):
        self.template = make_template(self.edition)
        results = []
        try:
            for sc in SCENARIOS:
                if not self.in_set(sc):
                    continue
                if self.edition == "sql" and sc.get("not_in_sql_edition"):
                    print(f"--- {sc['name']}: skipped with the SQL edition: {sc['not_in_sql_edition']}",
                          flush=True)
                    self.skipped.append({"scenario": sc["name"], "reason": sc["not_in_sql_edition"]})
                    continue
                if only and not any(o in sc["name"] for o in only):
                    continue
                sc = dict(sc)
                sc["checks"] = dict(sc.get("checks", {}))
                print(f"--- {sc['name']}: {sc['title']}", flush=True)
                t0 = time.monotonic()
                res = self.run_one({**sc})
                res["seconds"] = round(time.monotonic() - t0, 1)
                results.append(res)
                verdict = "PASS" if res["passed"] else "FAIL"
                detail = res.get("error") or (
                    f"{res['operations']} ops, {res['faults']} faults, {res['unknown']} unknown, "
                    f"{res['violations']} violations")
                print(f"{verdict} {sc['name']} ({res['seconds']} s): {detail}", flush=True)
                for inv, examples in (res.get("examples") or {}).items():
                    for e in examples[:3]:
                        print(f"      [{inv}] {e}")
        finally:
            if not self.keep:
                self.template.destroy()
        return results


def fmt_ms(v):
    return "-" if v is None else f"{v:.0f}"


def table(results, profile, machine, edition="c", skipped=()):
    lines = [
        f"# Fault-injection results ({profile} profile)" if edition == "c" else
        f"# Fault-injection results ({profile} profile, SQL edition pg_dlock_sql)",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}.",
        "Invariants: (1) accepted tokens never decrease per resource; (2) no interleaved writes on",
        "holds()-guarded resources; (3) a token is never issued to two owners, later grants get higher",
        "tokens; (4) acknowledged writes are in the final state, refused ones are not; (5) recovery",
        "time = fault end to the next successful acquire (elections: fault start to the next leader);",
        "(6) elections: every observer's final view is the server's leader, and no observer goes back.",
        "",
        "Lock calls: client = the C++ client library, pqxx = plain SQL over libpqxx.",
        "",
        "Late writes refused: fenced writes the server turned down because the writer's lease had",
        "ended or a newer token had been accepted (evidence that the fault reached the fencing).",
        "",
        "| scenario | lock calls | operations | faults | unknown | late writes refused | violations | recovery median ms | recovery worst ms | result |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        name = f"{r['scenario']} {r['title']}"
        if "error" in r:
            lines.append(f"| {name} | - | - | - | - | - | - | - | - | FAIL: harness error: {r['error']} |")
            continue
        by = r["violations_by_invariant"]
        v = str(r["violations"])
        if r["violations"]:
            v += " (" + ", ".join(f"{k}:{n}" for k, n in by.items() if n) + ")"
        if r["negative_control"]:
            verdict = "PASS (violations detected)" if r["passed"] else "FAIL (not detected)"
        else:
            verdict = "PASS" if r["passed"] else "FAIL"
        note = ""
        lost = r.get("info", {}).get("lost_acknowledged_writes")
        if lost:
            note = f"; {lost} acknowledged writes lost (async, not counted)"
        lines.append(f"| {name} | {r.get('lock_calls', '')} | {r['operations']} | {r['faults']} | {r['unknown']} | "
                     f"{r['writes_refused']} | {v} | "
                     f"{fmt_ms(r['recovery_median_ms'])} | {fmt_ms(r['recovery_worst_ms'])} | "
                     f"{verdict}{note} |")
    if skipped:
        lines += ["", "Skipped with this edition:", ""]
        lines += [f"- {s['scenario']}: {s['reason']}" for s in skipped]
    return "\n".join(lines) + "\n"


def machine_name():
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    except OSError:
        model = "?"
    return f"{os.uname().nodename} ({os.cpu_count()} cores, {model}, PostgreSQL {PG_BINDIR.split('/')[-2]})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    ap.add_argument("--only", help="comma-separated scenario name parts")
    ap.add_argument("--worker", default=os.path.join(ROOT, "build", "faults", "fault_worker"))
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--keep", action="store_true", help="keep the server directories")
    ap.add_argument("--pqxx", action="store_true", help="workers use libpqxx, not the client library")
    ap.add_argument("--client-everywhere", action="store_true",
                    help="use the client library in scenario 12 (PgBouncer) too")
    ap.add_argument("--edition", choices=sorted(EDITIONS), default="c",
                    help="c: pg_dlock, preloaded; sql: pg_dlock_sql, no library")
    ap.add_argument("--set", choices=sorted(SETS), default="local",
                    help="local: the one-host scenarios (default); network: those between "
                         "network namespaces (root); network-quick: their make test subset; all")
    ap.add_argument("--results", help="the results table (default results/latest.md, "
                                      "results/latest-sql-edition.md with --edition sql)")
    ap.add_argument("--summary-json", help="also write the per-scenario results here")
    args = ap.parse_args()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    prune_old_runs()
    h = Harness(args)
    print(f"fault harness: profile {args.profile}, edition {EDITIONS[args.edition]['extension']}, "
          f"seed {args.seed}, runs in {h.run_root}")
    results = h.run(args.only.split(",") if args.only else None)
    text = table(results, args.profile, machine_name(), args.edition, h.skipped)
    with open(os.path.join(h.run_root, "results.md"), "w") as f:
        f.write(text)
    with open(os.path.join(h.run_root, "results.json"), "w") as f:
        json.dump(results, f, indent=2, default=str)
    if not args.only and args.set in ("local", "network"):
        latest = "latest.md" if args.edition == "c" else "latest-sql-edition.md"
        if args.set != "local":
            latest = latest.replace(".md", f"-{args.set}.md")
        with open(args.results or os.path.join(HERE, "results", latest), "w") as f:
            f.write(text)
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump(results, f, indent=2, default=str)
    print()
    print(text)
    return 0 if results and all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
