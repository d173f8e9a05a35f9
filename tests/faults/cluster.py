#!/usr/bin/env python3
"""tests/faults/cluster.py -- the PostgreSQL servers of the fault harness and the failover harness.

One layer with two back-ends, every server on 127.0.0.1 on ports from
tests/lib/ports.py, every one a PgServer (psql, postmaster pid):

  local    LocalServer: one data directory on this machine, created by
           scripts/pg-cluster.sh (initdb once, then copies), started by it or,
           with a libfaketime clock, by pg_ctl; crash, SIGKILL, promotion and
           streaming standbys are built on it by tests/faults/harness.py.
  Patroni  PatroniCluster: three PatroniNodes, each PostgreSQL managed by its
           own Patroni 3.0 process, with a one-member etcd 3.4 as the DCS, all
           under one private directory (mkdtemp under /tmp); used by
           tests/ha/ha.py.

The PostgreSQL binaries are those of PG_BINDIR, so the servers load the
pg_dlock that `make install` put there.

Patroni's timings are short so that a test sees a failover in seconds: leader
key ttl 10 s, loop_wait 1 s, retry_timeout 4 s, and primary_start_timeout 0 (a
crashed primary fails over at once instead of restarting in place; with the
default 300 s a SIGKILL of the postmaster is only a crash restart).

From the shell (a Patroni cluster to try things on):
  cluster.py patroni-start [--sync]   prints DIR and the node ports, leaves it running
  cluster.py patroni-stop DIR         stops everything and removes DIR
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ports import free_ports  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PG_BINDIR = os.environ.get("PG_BINDIR") or sorted(
    d for d in (os.path.join("/usr/lib/postgresql", v, "bin")
                for v in os.listdir("/usr/lib/postgresql")) if os.path.isdir(d))[-1]
PG_CLUSTER = os.path.join(ROOT, "scripts", "pg-cluster.sh")
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
PATRONI = shutil.which("patroni") or "/usr/bin/patroni"
ETCD = shutil.which("etcd") or "/usr/bin/etcd"

NODES = ("n1", "n2", "n3")

# Patroni's timing (seconds). loop_wait + 2 * retry_timeout must not exceed ttl.
LEADER_TTL = 10
LOOP_WAIT = 1
RETRY_TIMEOUT = 4


def as_postgres(cmd, env=None, **kw):
    """Runs cmd as the postgres OS user when we are root."""
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    return subprocess.run(cmd, env=env, **kw)


class PgServer:
    """A PostgreSQL server on 127.0.0.1:port whose data directory is dir/data.
    db: the database psql() connects to unless told otherwise."""

    connect_timeout = 5

    def __init__(self, directory, port, name=None, db="postgres"):
        self.dir = directory
        self.port = port
        self.name = name or os.path.basename(directory)
        self.db = db

    @property
    def data(self):
        return os.path.join(self.dir, "data")

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def psql(self, sql, db=None, check=True, timeout=30):
        """sql through psql as postgres; its output. Raises on an error unless not check."""
        env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(self.port), PGUSER="postgres",
                   PGDATABASE=db or self.db, PGCONNECT_TIMEOUT=str(self.connect_timeout))
        r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           env=env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"psql on {self.name} ({self.port}) failed: {r.stderr.strip()}")
        return r.stdout.strip()

    def psql_try(self, sql, db=None, timeout=10):
        """psql(), or None when it fails or times out."""
        try:
            return self.psql(sql, db=db, timeout=timeout)
        except (RuntimeError, subprocess.TimeoutExpired):
            return None


# ---------------------------------------------------------------------------
# The local back-end
# ---------------------------------------------------------------------------

class LocalServer(PgServer):
    """One PostgreSQL data directory under dir, on this machine."""

    def __init__(self, directory, port, db="postgres"):
        super().__init__(directory, port, db=db)
        self.faketime_file = None

    def destroy(self):
        subprocess.run([PG_CLUSTER, "destroy", self.dir], capture_output=True)

    def create(self, settings=()):
        """initdb by scripts/pg-cluster.sh, started; settings: extra postgresql.conf lines."""
        self.destroy()
        args = [a for line in settings for a in ("-c", line)]
        r = subprocess.run([PG_CLUSTER, "start", self.dir, str(self.port)] + args, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise RuntimeError(f"could not create {self.dir}: {r.stderr}{self.log_tail()}")

    def start_fresh(self, settings, template):
        """A copy of the template cluster with this port and settings."""
        self.destroy()
        os.makedirs(self.dir)
        shutil.copytree(template.data, self.data, symlinks=True)
        lines = [f"port = {self.port}", f"unix_socket_directories = '{self.dir}'"]
        lines += [f"{k} = {v}" for k, v in settings.items()]
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\n".join(lines) + "\n")
        self.configure_copy()
        self.chown()
        self.start()

    def configure_copy(self):
        """What a subclass adds to the copied data directory before the start."""

    def chown(self):
        if os.getuid() == 0:
            subprocess.run(["chown", "-R", "postgres:", self.dir], check=True)

    def start(self):
        if self.faketime_file:
            # Our own pg_ctl call: the server (and every backend it forks) runs
            # with libfaketime, its offset read from the file on every clock call.
            cmd = ["env", f"LD_PRELOAD={FAKETIME_LIB}",
                   f"FAKETIME_TIMESTAMP_FILE={self.faketime_file}", "FAKETIME_NO_CACHE=1",
                   "FAKETIME_DONT_FAKE_MONOTONIC=1",
                   os.path.join(PG_BINDIR, "pg_ctl"), "-D", self.data, "-l",
                   os.path.join(self.dir, "server.log"), "-w", "-t", "60", "start"]
            r = as_postgres(cmd, capture_output=True, text=True)
        else:
            r = subprocess.run([PG_CLUSTER, "restart", self.dir], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"could not start {self.dir}: {r.stderr}{self.log_tail()}")

    def crash(self):
        as_postgres([os.path.join(PG_BINDIR, "pg_ctl"), "-D", self.data, "-m", "immediate",
                     "-w", "stop"], capture_output=True)

    def kill(self):
        """SIGKILL of the postmaster (scripts/pg-cluster.sh kill): no shutdown at all."""
        subprocess.run([PG_CLUSTER, "kill", self.dir], capture_output=True, check=True)

    def stop(self):
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            as_postgres([os.path.join(PG_BINDIR, "pg_ctl"), "-D", self.data, "-m", "fast",
                         "-w", "stop"], capture_output=True)

    def promote(self):
        r = as_postgres([os.path.join(PG_BINDIR, "pg_ctl"), "-D", self.data, "-w", "-t", "60",
                         "promote"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"promote failed: {r.stderr}")

    def log_tail(self, n=20):
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


# ---------------------------------------------------------------------------
# The Patroni back-end
# ---------------------------------------------------------------------------

def server_user():
    """Patroni and PostgreSQL must not run as root: as root, run them as postgres
    (subprocess arguments)."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.getuid() == 0 else {}


def yaml_quote(value):
    return json.dumps(str(value))


class PatroniNode(PgServer):
    """One node of a PatroniCluster: its PostgreSQL, run by its own Patroni."""

    connect_timeout = 3

    def __init__(self, cluster, name, pg_port, rest_port):
        super().__init__(os.path.join(cluster.dir, name), pg_port, name=name)
        self.cluster = cluster
        # On a topology (tests/faults/netns.py) the node is the host of its name.
        self.addr = cluster.topology.ip[name] if cluster.topology else "127.0.0.1"
        self.rest_port = rest_port
        self.proc = None
        self.stopped = False  # SIGSTOPped by pause_patroni()

    @property
    def config_path(self):
        return os.path.join(self.dir, "patroni.yml")

    def write_config(self, sync):
        c = self.cluster
        net = f"{self.addr.rsplit('.', 1)[0]}.0/24" if c.topology else "127.0.0.1/32"
        hba = [f"host all all {net} trust", f"host replication all {net} trust",
               "local all all trust", "local replication all trust"]
        lines = [
            f"scope: {c.scope}",
            f"name: {self.name}",
            "log:",
            "  level: INFO",
            f"  dir: {yaml_quote(self.dir)}",
            "  file_num: 1",
            "  file_size: 100000000",
            "restapi:",
            f"  listen: {self.addr}:{self.rest_port}",
            f"  connect_address: {self.addr}:{self.rest_port}",
            "etcd3:",
            f"  hosts: {c.etcd_addr}:{c.etcd_client_port}",
            "bootstrap:",
            "  dcs:",
            f"    ttl: {LEADER_TTL}",
            f"    loop_wait: {LOOP_WAIT}",
            f"    retry_timeout: {RETRY_TIMEOUT}",
            "    primary_start_timeout: 0",
            "    maximum_lag_on_failover: 104857600",
            f"    synchronous_mode: {'true' if sync else 'false'}",
            "    synchronous_node_count: 1",
            "    postgresql:",
            "      use_pg_rewind: true",
            "      use_slots: true",
            "      parameters:",
            "        shared_preload_libraries: pg_dlock",
            "        max_connections: 100",
            "        wal_keep_size: 256MB",
            "        max_wal_senders: 10",
            "        max_replication_slots: 10",
            "        wal_log_hints: 'on'",
            "        log_min_messages: warning",
            "  initdb:",
            "  - encoding: UTF8",
            "  - locale: C.UTF-8",
            "  - auth: trust",
            "postgresql:",
            f"  listen: {self.addr}:{self.port}",
            f"  connect_address: {self.addr}:{self.port}",
            f"  data_dir: {yaml_quote(self.data)}",
            f"  bin_dir: {yaml_quote(PG_BINDIR)}",
            f"  pgpass: {yaml_quote(os.path.join(self.dir, 'pgpass'))}",
            "  authentication:",
            "    superuser:",
            "      username: postgres",
            "    replication:",
            "      username: postgres",
            "    rewind:",
            "      username: postgres",
            "  parameters:",
            f"    unix_socket_directories: {yaml_quote(self.dir)}",
            # Outside the data directory, which pg_rewind overwrites.
            "    logging_collector: 'on'",
            f"    log_directory: {yaml_quote(self.dir)}",
            "    log_filename: postgresql.log",
            "  pg_hba:",
        ] + [f"  - {h}" for h in hba] + [
            "  basebackup:",
            "  - checkpoint: fast",
        ]
        with open(self.config_path, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self):
        out = open(os.path.join(self.dir, "patroni.out"), "a")
        topo = self.cluster.topology
        if topo:
            # Into the namespace as root, then down to postgres (Patroni refuses root).
            cmd = topo.exec_args(self.name) + ["runuser", "-u", "postgres", "--", PATRONI, self.config_path]
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                         start_new_session=True)
        else:
            self.proc = subprocess.Popen([PATRONI, self.config_path], stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.dir, start_new_session=True, **server_user())
        self.stopped = False

    def rest(self, path, timeout=1.0):
        """GET on this node's REST API: (status, parsed JSON or None); (None, None) if unreachable."""
        if self.cluster.topology:
            return self.cluster.topology_get(self.name, f"http://{self.addr}:{self.rest_port}{path}", timeout)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.rest_port}{path}", timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read() or b"null")
            except ValueError:
                return e.code, None
        except (OSError, ValueError):
            return None, None

    def psql(self, sql, db=None, check=True, timeout=30):
        """On a topology by the node's Unix socket (its address is in another namespace)."""
        if not self.cluster.topology:
            return super().psql(sql, db=db, check=check, timeout=timeout)
        env = dict(os.environ, PGHOST=self.dir, PGPORT=str(self.port), PGUSER="postgres",
                   PGDATABASE=db or self.db, PGCONNECT_TIMEOUT=str(self.connect_timeout))
        r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           env=env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"psql on {self.name} failed: {r.stderr.strip()}")
        return r.stdout.strip()

    def kill_postmaster(self):
        """SIGKILL to the postmaster (its backends die when they notice)."""
        pid = self.postmaster_pid()
        if pid is None:
            raise RuntimeError(f"{self.name}: no postmaster.pid")
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill_patroni(self):
        """SIGKILL to this node's Patroni: it no longer refreshes the leader key, and
        its PostgreSQL keeps running, unmanaged. start() brings Patroni back."""
        self.proc.kill()
        self.proc.wait()

    def pause_patroni(self):
        """SIGSTOP to this node's Patroni (resume_patroni() continues it)."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.stopped = True

    def resume_patroni(self):
        os.kill(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def stop(self):
        """Throwaway: Patroni killed with what it runs (pg_basebackup, pg_rewind: its
        process group), then an immediate shutdown of its PostgreSQL."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        if self.postmaster_pid() is not None:
            subprocess.run([os.path.join(PG_BINDIR, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w",
                            "-t", "30", "stop"], capture_output=True, **server_user())


class PatroniCluster:
    """Three PatroniNodes and their etcd (see the module's docstring)."""

    def __init__(self, sync, directory=None, topology=None):
        """topology: a tests/faults/netns.py Topology with hosts n1, n2, n3 and etcd;
        each node and etcd then run on their own host, on its address."""
        self.sync = sync
        self.topology = topology
        self.etcd_addr = topology.ip["etcd"] if topology else "127.0.0.1"
        self.dir = directory or tempfile.mkdtemp(prefix="pg_dlock-ha.")
        os.chmod(self.dir, 0o755)
        self.scope = "dlock-ha-" + os.path.basename(self.dir).split(".")[-1]
        ports = free_ports(2 + 2 * len(NODES))
        self.etcd_client_port, self.etcd_peer_port = ports[:2]
        self.nodes = [PatroniNode(self, name, ports[2 + 2 * i], ports[3 + 2 * i]) for i, name in enumerate(NODES)]
        self.etcd = None

    # --- lifecycle -----------------------------------------------------
    def start(self, timeout=180):
        deadline = time.monotonic() + timeout
        self.start_etcd()
        for n in self.nodes:
            os.makedirs(n.dir, exist_ok=True)
            n.write_config(self.sync)
        if os.getuid() == 0:
            subprocess.run(["chown", "-R", "postgres:", *[n.dir for n in self.nodes]], check=True)
        # The first node bootstraps alone, so that it surely becomes the leader;
        # the others clone it then.
        self.nodes[0].start()
        self.wait_for(lambda: self.leader() is self.nodes[0], deadline, "the first node to bootstrap")
        for n in self.nodes[1:]:
            n.start()
        self.wait_healthy(deadline)

    def start_etcd(self):
        data = os.path.join(self.dir, "etcd")
        peer = f"http://{self.etcd_addr}:{self.etcd_peer_port}"
        client = f"http://{self.etcd_addr}:{self.etcd_client_port}"
        out = open(os.path.join(self.dir, "etcd.log"), "w")
        self.etcd = subprocess.Popen(
            (self.topology.exec_args("etcd") if self.topology else []) +
            [ETCD, "--name", "e1", "--data-dir", data,
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"e1={peer}", "--initial-cluster-state", "new",
             "--initial-cluster-token", self.scope],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30

        def etcd_up():
            if self.topology:
                status, body = self.topology_get("etcd", f"{client}/health", 1.0)
                return status == 200 and (body or {}).get("health") == "true"
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=1) as r:
                    return json.loads(r.read()).get("health") == "true"
            except (OSError, ValueError):
                return False
        self.wait_for(etcd_up, deadline, "etcd")

    def stop(self, remove=True, keep_logs_in=None):
        for n in self.nodes:
            try:
                n.stop()
            except (OSError, subprocess.SubprocessError):
                pass
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()
                self.etcd.wait()
        if keep_logs_in:
            os.makedirs(keep_logs_in, exist_ok=True)
            for n in self.nodes:
                for name in ("patroni.log", "patroni.out", "postgresql.log"):
                    src = os.path.join(n.dir, name)
                    if os.path.exists(src):
                        shutil.copy(src, os.path.join(keep_logs_in, f"{n.name}-{name}"))
            if os.path.exists(os.path.join(self.dir, "etcd.log")):
                shutil.copy(os.path.join(self.dir, "etcd.log"), keep_logs_in)
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)

    def topology_get(self, host, url, timeout):
        """GET url from host's namespace: (status, parsed JSON or None), (None, None)."""
        probe = ("import json, sys, urllib.request, urllib.error\n"
                 "try:\n"
                 "    r = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])); c, b = r.status, r.read()\n"
                 "except urllib.error.HTTPError as e:\n"
                 "    c, b = e.code, e.read()\n"
                 "except Exception:\n"
                 "    print(json.dumps([None, None])); sys.exit()\n"
                 "try:\n"
                 "    b = json.loads(b or b'null')\n"
                 "except ValueError:\n"
                 "    b = None\n"
                 "print(json.dumps([c, b]))\n")
        try:
            r = subprocess.run(self.topology.exec_args(host) + [sys.executable, "-c", probe, url, str(timeout)],
                               capture_output=True, text=True, timeout=timeout + 5)
            status, body = json.loads(r.stdout)
            return status, body
        except (subprocess.TimeoutExpired, ValueError):
            return None, None

    # --- state ---------------------------------------------------------
    @staticmethod
    def wait_for(predicate, deadline, what):
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}")

    def members(self):
        """Patroni's view of the cluster (GET /cluster on any responsive node)."""
        for n in self.nodes:
            if n.stopped:
                continue
            status, body = n.rest("/cluster")
            if status == 200 and body:
                return body.get("members", [])
        return []

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def leader(self):
        """The node holding the leader key, or None."""
        for m in self.members():
            if m.get("role") == "leader":
                return self.node(m["name"])
        return None

    def writable_primary(self, exclude=()):
        """A node whose REST API says it is a running, writable primary."""
        for n in self.nodes:
            if n in exclude or n.stopped:
                continue
            status, _ = n.rest("/primary", timeout=0.5)
            if status == 200:
                return n
        return None

    def wait_healthy(self, deadline):
        """A leader and two replicas streaming from it (one of them the synchronous
        standby in synchronous mode)."""
        def healthy():
            ms = self.members()
            if len(ms) != len(self.nodes):
                return False
            leader = [m for m in ms if m.get("role") == "leader" and m.get("state") == "running"]
            streaming = [m for m in ms if m.get("role") in ("replica", "sync_standby")
                         and m.get("state") in ("running", "streaming")
                         and isinstance(m.get("lag"), int) and m.get("lag") < 16 * 1024 * 1024]
            synced = not self.sync or any(m.get("role") == "sync_standby" for m in ms)
            return len(leader) == 1 and len(streaming) == len(self.nodes) - 1 and synced
        self.wait_for(healthy, deadline, "a leader and two streaming replicas")

    def conninfo(self, user, dbname):
        hosts = ",".join(n.addr for n in self.nodes)
        ports = ",".join(str(n.port) for n in self.nodes)
        return (f"host={hosts} port={ports} user={user} dbname={dbname} "
                f"target_session_attrs=read-write connect_timeout=2")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("patroni-start")
    st.add_argument("--sync", action="store_true", help="Patroni synchronous_mode")
    sp = sub.add_parser("patroni-stop")
    sp.add_argument("dir")
    args = ap.parse_args()
    if args.cmd == "patroni-start":
        c = PatroniCluster(args.sync)
        try:
            c.start()
        except Exception:
            c.stop(remove=False)
            raise
        # Detach: leave etcd and Patroni running for the caller.
        print(c.dir)
        for n in c.nodes:
            print(f"{n.name} postgresql 127.0.0.1:{n.port} rest 127.0.0.1:{n.rest_port}")
        print(c.conninfo("postgres", "postgres"))
        with open(os.path.join(c.dir, "pids"), "w") as f:
            f.write(" ".join(str(p.pid) for p in [c.etcd] + [n.proc for n in c.nodes]) + "\n")
        return 0
    # stop: the pids file lists etcd then the Patroni processes; Patroni stops
    # its PostgreSQL on SIGTERM.
    pids_file = os.path.join(args.dir, "pids")
    if not args.dir.startswith(tempfile.gettempdir() + "/pg_dlock-ha.") or not os.path.exists(pids_file):
        print(f"cluster.py: {args.dir} is not a cluster made by cluster.py patroni-start", file=sys.stderr)
        return 2
    with open(pids_file) as f:
        pids = [int(p) for p in f.read().split()]
    for pid in pids[1:] + pids[:1]:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        for _ in range(300):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    shutil.rmtree(args.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
