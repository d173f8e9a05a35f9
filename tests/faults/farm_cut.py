#!/usr/bin/env python3
"""tests/faults/farm_cut.py -- the lock farm's proxy cut off from one partition by a real network.

Hosts made of network namespaces (tests/faults/netns.py): proxy, p0, p1 and a
client, each PostgreSQL on its host's address; farm/setup.sh makes p0 and p1
partitions (database dlock) and the proxy's database farm their PL/Proxy
proxy, with each partition's connection string on its host's address
(connect_timeout=2) and the link bound setup.sh adds (FARM_LINK_OPTIONS, here
tcp_user_timeout of 3 s and keepalives after 2 s idle). The client calls the
proxy's dlock functions over TCP. Then the link proxy-p1 is cut, both ways:

  - the names of p0 go on: try_acquire through the proxy answers within 2 s;
  - the names of p1 fail, with an error, within the caller's statement_timeout
    in a new proxy session;
  - without any timeout of the caller's, a new session's call on p1 fails with
    a connection error within the link bound (tcp_user_timeout + 2 s);
  - a session whose connection to p1 was open before the cut, with
    statement_timeout, fails within statement_timeout + tcp_user_timeout + 2 s
    (PL/Proxy's cancel request to p1 is bounded by the same options);
  - a session waiting in acquire() on p1 when the cut falls, without a timeout
    of its own, fails within keepalives_idle + tcp_user_timeout + 3 s;
  - a lease of p1 taken before the cut runs out meanwhile: after the heal
    another owner gets the name with a higher token, the old owner's renew is
    refused and its fence() is refused after the new owner's;
  - every p1 token after the heal is above every p1 token before the cut.

Negative controls: the check that p0's names go on, run while p0 is cut off
too, must fail; with the proxy pointed at the partitions without the link
options (FARM_LINK_OPTIONS=), a new session's call on p1 and an open session's
call with statement_timeout must both still wait past their bounds. Prints ok / not ok lines and "N passed, N failed". Needs root,
PL/Proxy (postgresql-15-plproxy) and the farm (farm/setup.sh); without the
farm it says so and passes nothing (exit 0 with "0 passed, 0 failed" and a
skip line).

  tests/faults/farm_cut.py    (make faults; PG_BINDIR picks the server)
  FARM_CUT_SERVER_OPTIONS="ADD query_timeout '3'" tests/faults/farm_cut.py
                              the same with more options of the proxy's SQL/MED server
"""

import os
import re
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import harness  # noqa: E402
from net_scenarios import NetServer  # noqa: E402
from netns import Topology  # noqa: E402
from ports import free_ports  # noqa: E402

SETUP = os.path.join(ROOT, "farm", "setup.sh")
STATEMENT_TIMEOUT_S = 3
NEW_SESSION_BOUND_S = STATEMENT_TIMEOUT_S + 2.0
# Short on purpose, so that the run stays short; farm/setup.sh's defaults are longer.
USER_TIMEOUT_S = 3
KEEPALIVES_IDLE_S = 2
LINK_OPTIONS = (f"tcp_user_timeout={USER_TIMEOUT_S * 1000} keepalives=1 keepalives_idle={KEEPALIVES_IDLE_S} "
                "keepalives_interval=1 keepalives_count=2")
LINK_BOUND_S = USER_TIMEOUT_S + 2.0
OPEN_SESSION_BOUND_S = STATEMENT_TIMEOUT_S + USER_TIMEOUT_S + 2.0
WAITING_BOUND_S = KEEPALIVES_IDLE_S + USER_TIMEOUT_S + 3.0

results = []


def check(what, ok, detail=""):
    results.append(ok)
    print(f"{'ok' if ok else 'not ok'} - farm cut: {what}{f' ({detail})' if detail else ''}", flush=True)


class Farm:
    def __init__(self):
        self.topo = Topology(["proxy", "p0", "p1", "client"]).create()
        self.template = harness.make_template("c")
        self.servers = {}
        for host, port in zip(("proxy", "p0", "p1"), free_ports(3)):
            s = NetServer(f"{harness.SCRATCH}-farm-{host}", port, self.topo, host, db="postgres")
            s.start_fresh({"max_connections": "50"}, self.template)
            self.servers[host] = s
        for p in ("p0", "p1"):
            s = self.servers[p]
            s.psql("CREATE DATABASE dlock")
            self.setup("partition", f"host={s.dir} port={s.port} user=postgres dbname=dlock")
        proxy = self.servers["proxy"]
        proxy.psql("CREATE DATABASE farm")
        self.proxy_conninfo = f"host={proxy.dir} port={proxy.port} user=postgres dbname=farm"
        self.setup("proxy", self.proxy_conninfo, *self.partition_connstrs())
        extra = os.environ.get("FARM_CUT_SERVER_OPTIONS")
        if extra:
            # To try a bound of PL/Proxy's own, e.g. "ADD query_timeout '3'".
            proxy.psql(f"ALTER SERVER dlock_farm OPTIONS ({extra})", db="farm")
        self.url = f"host={self.topo.ip['proxy']} port={proxy.port} user=postgres dbname=farm connect_timeout=3"

    def partition_connstrs(self):
        return [f"host={self.topo.ip[p]} port={self.servers[p].port} dbname=dlock connect_timeout=2"
                for p in ("p0", "p1")]

    @staticmethod
    def setup(*args, link_options=LINK_OPTIONS):
        r = subprocess.run([SETUP, *args], capture_output=True, text=True,
                           env={**os.environ, "FARM_LINK_OPTIONS": link_options})
        if r.returncode != 0:
            raise RuntimeError(f"farm/setup.sh {args[0]}: {r.stderr.strip()}")

    def client(self, *statements, timeout=60):
        """psql from the client host: one session, the statements in turn, each timed.
        (rc, [(output, ms)], stderr)."""
        args = ["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.url, "-c", "\\timing on"]
        for st in statements:
            args += ["-c", st]
        t0 = time.monotonic()
        r = subprocess.run(self.topo.exec_args("client") + args, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr.strip(), (time.monotonic() - t0)

    def client_bounded(self, *statements, timeout=15):
        """client(), or (None, "", "no answer", timeout) when psql itself has to be given up."""
        try:
            return self.client(*statements, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "", f"no answer within {timeout} s", float(timeout)

    def acquire(self, name, ttl="2s", owner=None):
        owner = owner or str(uuid.uuid4())
        rc, out, err, secs = self.client_bounded(
            f"SET statement_timeout = '{STATEMENT_TIMEOUT_S}s'",
            f"SELECT fencing_token FROM dlock.try_acquire('{name}', '{ttl}', '{owner}')")
        token = next((int(l) for l in out.splitlines() if l.strip().isdigit()), None)
        return rc, token, owner, err, secs

    def close(self):
        for s in self.servers.values():
            s.destroy()
        self.template.destroy()
        self.topo.close()


def names_by_partition(farm, count=40):
    rc, out, err, _ = farm.client(
        "SELECT n || ' ' || dlock_farm.partition_number(n) FROM (SELECT 'farm-cut-' || g AS n "
        f"FROM generate_series(1, {count}) g) s")
    if rc != 0:
        raise RuntimeError(f"dlock.partition_of through the proxy: {err}")
    by = {0: [], 1: []}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            by[int(parts[1])].append(parts[0])
    return by


def names_go_on(farm, names):
    """Each name granted through the proxy within 2 s."""
    slow = []
    for n in names:
        rc, token, _, err, secs = farm.acquire(n, ttl="1s")
        if rc != 0 or token is None or secs > 2.0:
            slow.append(f"{n}: rc {rc}, {secs:.1f} s {err[:80]}")
    return slow


def open_session_call(farm, name):
    """A session that opens its proxy backend's connection to the name's
    partition, sleeps 2 s, then calls it again with statement_timeout."""
    return subprocess.Popen(
        farm.topo.exec_args("client") + [
            "psql", "-X", "-At", "-d", farm.url, "-c", "\\timing on",
            "-c", f"SELECT fencing_token FROM dlock.try_acquire('{name}', '1s')",
            "-c", "SELECT pg_sleep(2)",
            "-c", f"SET statement_timeout = '{STATEMENT_TIMEOUT_S}s'",
            "-c", f"SELECT fencing_token FROM dlock.try_acquire('{name}', '1s')"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def waiting_call(farm, name):
    """A session that waits up to 60 s in acquire() for the name (held by another owner)."""
    return subprocess.Popen(
        farm.topo.exec_args("client") + [
            "psql", "-X", "-At", "-d", farm.url, "-c", "\\timing on",
            "-c", f"SELECT fencing_token FROM dlock.acquire('{name}', '1s', '60s')"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def open_session_result(session, wait_s):
    """(rc, stderr, seconds of its last call), rc None when it still waited after wait_s more."""
    try:
        out, err = session.communicate(timeout=wait_s)
    except subprocess.TimeoutExpired:
        session.kill()
        session.communicate()
        return None, "still waiting", None
    times = [float(t) for t in re.findall(r"Time: ([0-9.]+) ms", out + err)]
    return session.returncode, err.strip(), (times[3] / 1000 if len(times) >= 4 else None)


def unbounded_call(farm, name):
    """A new session's call without statement_timeout: (rc, stderr, seconds), rc None when
    psql had to be given up after LINK_BOUND_S + 3 s."""
    try:
        rc, out, err, secs = farm.client(f"SELECT fencing_token FROM dlock.try_acquire('{name}', '1s')",
                                         timeout=LINK_BOUND_S + 3)
        return rc, err, secs
    except subprocess.TimeoutExpired:
        return None, "no answer", LINK_BOUND_S + 3


def main():
    if not os.path.exists(SETUP):
        print("ok - farm cut: skipped, no farm in this tree (farm/setup.sh)")
        print("0 passed, 0 failed")
        return 0
    farm = Farm()
    try:
        by = names_by_partition(farm)
        check("names on both partitions", len(by[0]) >= 3 and len(by[1]) >= 4,
              f"{len(by[0])} on p0, {len(by[1])} on p1")
        if len(by[0]) < 3 or len(by[1]) < 4:
            raise RuntimeError("too few names on a partition")
        p0, p1 = by[0][:3], by[1][:4]
        before = []
        for n in p1[1:3]:
            rc, token, _, err, _ = farm.acquire(n, ttl="1s")
            before.append(token)
        check("before the cut: grants on both partitions", all(before) and not names_go_on(farm, p0))
        rc, held, old_owner, err, _ = farm.acquire(p1[0], ttl="2s")
        check("a lease of p1 held before the cut", held is not None, err)

        # Sessions whose proxy backend already has its connection to p1 open when
        # the cut falls: one sleeps, then calls p1 with a statement_timeout; one
        # waits in acquire() for a name of p1 that another owner holds.
        rc, other, _, err, _ = farm.acquire(p1[3], ttl="60s")
        check("a name of p1 held for 60 s by another owner", other is not None, err)
        open_session = open_session_call(farm, p1[2])
        waiting = waiting_call(farm, p1[3])
        time.sleep(1.0)
        farm.topo.cut("proxy", "p1")
        t_cut = time.monotonic()
        slow = names_go_on(farm, p0)
        check("during the cut p0's names go on", not slow, "; ".join(slow))
        rc, out, err, secs = farm.client(
            f"SET statement_timeout = '{STATEMENT_TIMEOUT_S}s'",
            f"SELECT fencing_token FROM dlock.try_acquire('{p1[1]}', '1s')")
        check(f"during the cut a new session's call on p1 fails by its statement_timeout "
              f"(within {NEW_SESSION_BOUND_S:.0f} s)",
              rc != 0 and secs <= NEW_SESSION_BOUND_S, f"{secs:.1f} s: {err[:160]}")
        rc, err, secs = unbounded_call(farm, p1[1])
        check(f"without a timeout of the caller's, a new session's call on p1 fails with a connection "
              f"error within tcp_user_timeout + 2 s ({LINK_BOUND_S:.0f} s)",
              rc not in (0, None) and secs <= LINK_BOUND_S and "timed out" in err, f"{secs:.1f} s: {err[:200]}")
        rc, err, secs = open_session_result(open_session, OPEN_SESSION_BOUND_S + 8)
        check(f"a session with its connection to p1 open before the cut fails within statement_timeout "
              f"+ tcp_user_timeout + 2 s ({OPEN_SESSION_BOUND_S:.0f} s)",
              rc not in (0, None) and secs is not None and secs <= OPEN_SESSION_BOUND_S, f"{secs} s: {err[:200]}")
        try:
            out, err = waiting.communicate(timeout=max(0.0, t_cut + WAITING_BOUND_S + 8 - time.monotonic()))
            rc = waiting.returncode
            times = [float(t) for t in re.findall(r"Time: ([0-9.]+) ms", out + err)]
            # psql's time of the call, which began about 1 s before the cut
            secs = times[0] / 1000 - 1.0 if times else None
        except subprocess.TimeoutExpired:
            waiting.kill()
            waiting.communicate()
            rc, err, secs = None, "no answer", None
        check(f"a session waiting in acquire() on p1 when the cut falls fails within keepalives_idle "
              f"+ tcp_user_timeout + 3 s ({WAITING_BOUND_S:.0f} s)",
              rc not in (0, None) and secs is not None and secs <= WAITING_BOUND_S and "timed out" in err,
              f"{secs and round(secs, 1)} s after the cut: {err.strip()[:200]}")

        # Negative control: p0 cut off as well, the same check must fail.
        farm.topo.cut("proxy", "p0")
        control = names_go_on(farm, p0[:1])
        check("negative control: with p0 cut off too, 'p0's names go on' fails", bool(control),
              "; ".join(control)[:160])
        farm.topo.heal("proxy", "p0")

        dropped = farm.topo.drops()
        farm.topo.heal()
        check("the cut dropped packets", dropped > 0, f"{dropped}")
        rc, out, err, _ = farm.client("SELECT count(*) FROM dlock.locks")
        check("after the heal a new session reaches p1 again (dlock.locks of both)", rc == 0, err[:120])
        rc, token, new_owner, err, _ = farm.acquire(p1[0], ttl="5s")
        check("after the heal another owner gets the expired name of p1, with a higher token",
              token is not None and token > held, f"{held} -> {token} {err[:80]}")
        rc, out, err, _ = farm.client(
            f"SELECT dlock.renew('{p1[0]}', '{old_owner}', '2s') IS NOT NULL")
        check("the old owner's renew is refused (NULL)", rc == 0 and "f" in out.split("\n"),
              (err or out.strip())[:120])
        rc, out, err, _ = farm.client(f"SELECT dlock.fence('farm-cut-res', {token})")
        rc2, out2, err2, _ = farm.client(f"SELECT dlock.fence('farm-cut-res', {held})")
        check("the old owner's fence is refused after the new owner's", rc == 0 and rc2 != 0, err2[:120])
        after = []
        for n in p1[1:3]:
            _, token, _, _, _ = farm.acquire(n, ttl="1s")
            after.append(token)
        check("every p1 token after the heal above every one before the cut",
              all(after) and min(after) > max(before + [held]), f"before {before + [held]}, after {after}")

        # Negative control: the proxy pointed at the partitions without the link
        # options, the same cut leaves the calls waiting past their bounds.
        farm.setup("partitions", farm.proxy_conninfo, *farm.partition_connstrs(), link_options="")
        rc, out, err, _ = farm.client("SELECT string_agg(connstr, ' ') FROM dlock_farm.partitions()")
        check("control: the partitions' connection strings without the link options",
              rc == 0 and "tcp_user_timeout" not in out and "keepalives" not in out, out.strip()[:160])
        open_session = open_session_call(farm, p1[2])
        waiting = waiting_call(farm, p1[3])
        time.sleep(1.0)
        farm.topo.cut("proxy", "p1")
        rc, err, secs = unbounded_call(farm, p1[1])
        check(f"control: without the link options a new session's call on p1 still waits after "
              f"{LINK_BOUND_S + 3:.0f} s", rc is None, f"{secs:.1f} s: {err[:160]}")
        rc, err, secs = open_session_result(open_session, 3.0)
        check(f"control: without the link options the open session's call still waits past "
              f"{OPEN_SESSION_BOUND_S:.0f} s", rc is None, f"{secs} s: {err[:160]}")
        try:
            waiting.communicate(timeout=0.5)
            still = False
        except subprocess.TimeoutExpired:
            waiting.kill()
            waiting.communicate()
            still = True
        check(f"control: without the link options the session waiting in acquire() still waits past "
              f"{WAITING_BOUND_S:.0f} s", still)
        farm.topo.heal()
    finally:
        farm.close()
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
