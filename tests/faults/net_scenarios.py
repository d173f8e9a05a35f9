"""tests/faults/net_scenarios.py -- the fault harness's scenarios on a real network.

Each scenario builds its own hosts (tests/faults/netns.py): the primary, two
client hosts (clienta, clientb) and, for the PgBouncer scenario, a pooler
host, for the standby scenario a streaming standby's host, each a network namespace with its own address on one bridge. The
primary's PostgreSQL runs on its host (`ip netns exec NS runuser -u postgres
-- pg_ctl ...`) and listens on the host's address only; the workers run on
the client hosts and reach it over TCP through the bridge, the harness
reaches it by its Unix socket (a path, which no network namespace hides).
Odd workers (w1, w3, ...) run on clienta, even ones on clientb; the faults
are between clienta (or the pooler) and the primary, per direction, as packets
dropped on arrival. Everything else -- the workload, the histories, the
checker, the standard format -- is the harness's (harness.py).

Every connection of the workers gives up on a link that acknowledges nothing
for 4 s (tcp_user_timeout), so no call waits for TCP's own quarter of an hour.
"""

import os
import subprocess
import time

from cluster import PG_BINDIR, LocalServer
from netns import Topology

# Bounds every worker connection on a dead link (libpq's keepalives and
# tcp_user_timeout); a cut of 2-3 ttl stays below them, so what a client sent
# during the cut arrives when the link heals.
TCP_BOUNDS = ("keepalives=1 keepalives_idle=1 keepalives_interval=1 keepalives_count=3 "
              "tcp_user_timeout=4000")


class NetServer(LocalServer):
    """A LocalServer that runs on a host of a Topology, on the host's address."""

    def __init__(self, directory, port, topo, host, db="postgres"):
        super().__init__(directory, port, db=db)
        self.topo = topo
        self.host = host

    @property
    def address(self):
        return self.topo.ip[self.host]

    def start_fresh(self, settings, template):
        super().start_fresh(dict(settings, listen_addresses=f"'{self.address}'"), template)

    def configure_copy(self):
        subnet = f"{self.address.rsplit('.', 1)[0]}.0/24"
        with open(os.path.join(self.data, "pg_hba.conf"), "a") as f:
            f.write(f"host all all {subnet} trust\nhost replication all {subnet} trust\n")

    def start(self):
        r = subprocess.run(self.topo.exec_args(self.host) + [
            "runuser", "-u", "postgres", "--", os.path.join(PG_BINDIR, "pg_ctl"), "-D", self.data,
            "-l", os.path.join(self.dir, "server.log"), "-w", "-t", "60", "start"],
            capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"could not start {self.dir} on {self.host}: {r.stderr}{self.log_tail()}")

    def psql(self, sql, db=None, check=True, timeout=30):
        env = dict(os.environ, PGHOST=self.dir, PGPORT=str(self.port), PGUSER="postgres",
                   PGDATABASE=db or self.db, PGCONNECT_TIMEOUT=str(self.connect_timeout))
        r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           env=env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"psql on {self.name} ({self.host}) failed: {r.stderr.strip()}")
        return r.stdout.strip()


def net_setup(run, hosts=("primary", "clienta", "clientb")):
    """The run's hosts, its primary a NetServer on host "primary" (not started)."""
    topo = Topology(hosts).create()
    run.on_cleanup.append(topo.close)
    run.net = topo
    scratch = run.primary.dir
    run.primary = NetServer(scratch, run.port_primary, topo, "primary", db="faults")
    run.servers = [run.primary]
    run.current = run.primary
    run.event("topology", None, hosts={h: topo.ip[h] for h in topo.names}, tag=topo.tag)
    return topo


def start_net_standby(run, host="standby"):
    """An asynchronous streaming standby of the primary on its own host: cloned
    over the network (pg_basebackup from the standby's host), streaming from the
    primary's address with the TCP bounds of the workers and short replication
    timeouts, so that a cut is noticed within a few seconds and a healed link is
    used again within one."""
    topo, primary = run.net, run.primary
    sb = NetServer(primary.dir + "-standby", run.port_standby, topo, host, db="faults")
    sb.destroy()
    run.servers.append(sb)
    os.makedirs(sb.dir)
    sb.chown()
    r = subprocess.run(topo.exec_args(host) + [
        "runuser", "-u", "postgres", "--", os.path.join(PG_BINDIR, "pg_basebackup"), "-h", primary.address,
        "-p", str(primary.port), "-U", "postgres", "-D", sb.data, "-R", "-X", "stream", "--no-sync",
        "-c", "fast"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pg_basebackup on {host} failed: {r.stderr}")
    with open(os.path.join(sb.data, "postgresql.conf"), "a") as f:
        f.write(f"port = {sb.port}\nunix_socket_directories = '{sb.dir}'\nlisten_addresses = '{sb.address}'\n"
                "wal_receiver_timeout = '2s'\nwal_retrieve_retry_interval = '500ms'\nhot_standby = on\n")
    # postgresql.auto.conf (pg_basebackup -R) wins over postgresql.conf; its last line wins
    with open(os.path.join(sb.data, "postgresql.auto.conf"), "a") as f:
        f.write(f"primary_conninfo = 'host={primary.address} port={primary.port} user=postgres "
                f"application_name=faults_standby connect_timeout=2 {TCP_BOUNDS}'\n")
    sb.chown()
    sb.start()
    run.standby = sb
    deadline = time.time() + 30
    while time.time() < deadline:
        if primary.psql_try("SELECT state FROM pg_stat_replication WHERE application_name = 'faults_standby'",
                            db="postgres") == "streaming":
            run.event("standby", None, host=host, address=sb.address)
            return sb
        time.sleep(0.2)
    raise RuntimeError(f"the standby on {host} did not start streaming{sb.log_tail()}")


def net_conninfo(run, host="primary", port=None):
    return (f"host={run.net.ip[host]} port={port or run.primary.port} user=faults_app "
            f"dbname=faults connect_timeout=3 {TCP_BOUNDS}")


def on_host(run, i):
    """Worker i's host: odd ones on clienta (the side the faults cut), even on clientb."""
    return "clienta" if i % 2 == 1 else "clientb"


def start_net_workload(run, keep_alive_cut_side=False, conninfo_for=None):
    """Workers on both client hosts; holders keep the lease up to half a ttl before
    writing, so that a fault usually lands between a grant and its write.
    keep_alive_cut_side: the workers on clienta hold keep-alive leases through the
    client library and record both deadlines of each grant and write (the
    fault_worker's keep-alive mode, tests/faults/worker/keep_alive.cpp)."""
    conninfo = net_conninfo(run)
    run.start_workers(
        conninfo, extra_args=["--hold-ms", str(run.ttl_ms // 2)],
        per_worker=(lambda i: ["--conninfo", conninfo_for(i)]) if conninfo_for else None,
        prefix_for=lambda i: run.net.exec_args(on_host(run, i)),
        mode_for=(lambda i: "keep-alive" if on_host(run, i) == "clienta" else None)
        if keep_alive_cut_side else None)


def wait_for_cut_side_holder(run, seconds):
    """Up to seconds for a lease held by a worker on clienta; its lock or None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        held = {lock: w for lock, w in run.holders().items()
                if w.startswith("w") and w[1:].isdigit() and on_host(run, int(w[1:])) == "clienta"}
        if held:
            return run.rng.choice(sorted(held))
        time.sleep(0.05)
    return None


def client_link_faults(run, fault, apply, clear, **extra):
    """While time allows: once a worker on clienta holds a lease, apply(topo) to
    the clienta-primary link for 2-3 ttl, then clear(topo) (its result: fields of
    the fault_end event), then 1.5 ttl to recover. clienta's workers hold
    keep-alive leases when the scenario says keep_alive."""
    topo = net_setup(run)
    run.start_primary()
    start_net_workload(run, keep_alive_cut_side=run.sc.get("keep_alive", False))
    run.sleep(1.0)
    while run.fault_window():
        lock = wait_for_cut_side_holder(run, run.ttl_ms / 1000.0)
        seconds = run.rng.uniform(2.0, 3.0) * run.ttl_ms / 1000.0
        apply(topo)
        run.fault_start(fault, None, hosts="clienta-primary", holder_lock=lock,
                        seconds=round(seconds, 2), **extra)
        time.sleep(seconds)
        run.fault_end(fault, None, hosts="clienta-primary", **clear(topo))
        run.sleep(1.5 * run.ttl_ms / 1000.0)


def s_net_cut(run):
    """N-a. clienta is cut off from the primary (both ways) for 2-3 ttl while one of
    its workers holds a lease; clientb's workers take over; then the link heals."""
    def heal(topo):
        dropped = topo.drops()
        topo.heal()
        return {"dropped": dropped}

    client_link_faults(run, "net cut", lambda topo: topo.cut("clienta", "primary"), heal)


def s_net_one_way(run):
    """N-b. An asymmetric link: packets from clienta to the primary are lost, or the
    primary's to clienta (requests arrive, replies do not), in turn, 2-3 ttl each."""
    topo = net_setup(run)
    run.start_primary()
    start_net_workload(run)
    run.sleep(1.0)
    directions = [("clienta", "primary"), ("primary", "clienta")]
    turn = run.rng.randrange(2)
    while run.fault_window():
        lock = wait_for_cut_side_holder(run, run.ttl_ms / 1000.0)
        src, dst = directions[turn % 2]
        turn += 1
        seconds = run.rng.uniform(2.0, 3.0) * run.ttl_ms / 1000.0
        topo.cut(src, dst, one_way=True)
        run.fault_start("one-way loss", None, direction=f"{src}->{dst}", holder_lock=lock,
                        seconds=round(seconds, 2))
        time.sleep(seconds)
        dropped = topo.drops()
        topo.heal()
        run.fault_end("one-way loss", None, direction=f"{src}->{dst}", dropped=dropped)
        run.sleep(1.5 * run.ttl_ms / 1000.0)


def s_net_flap(run):
    """N-c. A flapping link: clienta-primary down 0.2-1.2 ttl, up 0.1-0.4 ttl, in
    turn for 3-4 ttl, then up for 1.5 ttl. TCP's retransmission timer doubles
    with each loss, so a connection may stay silent across an up phase."""
    topo = net_setup(run)
    run.start_primary()
    start_net_workload(run)
    run.sleep(1.0)
    while run.fault_window():
        lock = wait_for_cut_side_holder(run, run.ttl_ms / 1000.0)
        until = time.monotonic() + run.rng.uniform(3.0, 4.0) * run.ttl_ms / 1000.0
        run.fault_start("flapping link", None, hosts="clienta-primary", holder_lock=lock)
        flaps = dropped = 0
        while time.monotonic() < until:
            topo.cut("clienta", "primary")
            time.sleep(run.rng.uniform(0.2, 1.2) * run.ttl_ms / 1000.0)
            dropped += topo.drops()
            topo.heal()
            flaps += 1
            time.sleep(run.rng.uniform(0.1, 0.4) * run.ttl_ms / 1000.0)
        run.fault_end("flapping link", None, hosts="clienta-primary", flaps=flaps, dropped=dropped)
        run.sleep(1.5 * run.ttl_ms / 1000.0)


def s_net_loss(run):
    """N-d. A lossy link: 30 % of the packets between clienta and the primary lost,
    each way, for 3 ttl."""
    topo = net_setup(run)
    run.start_primary()
    start_net_workload(run)
    run.sleep(1.0)
    while run.fault_window():
        topo.loss("clienta", "primary", 30)
        run.fault_start("packet loss 30%", None, hosts="clienta-primary")
        time.sleep(3 * run.ttl_ms / 1000.0)
        dropped = topo.drops()
        topo.heal()
        run.fault_end("packet loss 30%", None, hosts="clienta-primary", dropped=dropped)
        run.sleep(1.5 * run.ttl_ms / 1000.0)


def s_net_congested(run):
    """N-g. clienta's link to the primary is congested for 2-3 ttl while one of its
    workers holds a keep-alive lease: every packet clienta sends waits about one
    ttl in a full queue (netns.congest: tbf and a filler stream; this kernel has
    no netem), so renewals arrive late or not at all; then the link clears."""
    def clear(topo):
        dropped = topo.queue_drops("clienta")
        topo.uncongest("clienta")
        return {"queue_dropped": dropped}

    client_link_faults(run, "congested link", lambda topo: topo.congest("clienta", "primary", run.ttl_ms),
                       clear, queue_ms=run.ttl_ms)


def s_net_pooler_cut(run):
    """N-e. clienta's workers go through PgBouncer on a host of its own (transaction
    pooling), clientb's straight to the primary; the pooler's host is cut off
    from the primary (both ways) for 2-3 ttl: the hop in the middle fails, not
    the client's own link."""
    topo = net_setup(run, ("primary", "pooler", "clienta", "clientb"))
    run.start_primary()
    run.start_pgbouncer(listen_addr=topo.ip["pooler"], server_host=topo.ip["primary"],
                        prefix=topo.exec_args("pooler"),
                        wait=lambda port: topo.wait_port("clienta", "pooler", port))
    pooled = net_conninfo(run, "pooler", run.port_bouncer)
    start_net_workload(run, conninfo_for=lambda i: pooled if on_host(run, i) == "clienta" else net_conninfo(run))
    run.sleep(1.0)
    while run.fault_window():
        lock = wait_for_cut_side_holder(run, run.ttl_ms / 1000.0)
        seconds = run.rng.uniform(2.0, 3.0) * run.ttl_ms / 1000.0
        topo.cut("pooler", "primary")
        run.fault_start("net cut", None, hosts="pooler-primary", holder_lock=lock,
                        seconds=round(seconds, 2))
        time.sleep(seconds)
        dropped = topo.drops()
        topo.heal()
        run.fault_end("net cut", None, hosts="pooler-primary", dropped=dropped)
        run.sleep(1.5 * run.ttl_ms / 1000.0)


def replay_behind(standby, lsn):
    """Bytes of WAL up to lsn the standby has not replayed (None: no answer)."""
    got = standby.psql_try(f"SELECT pg_wal_lsn_diff('{lsn}', pg_last_wal_replay_lsn())", db="postgres")
    return None if got in (None, "") else max(0, int(float(got)))


def caught_up(standby, lsn, bound):
    """Seconds until the standby has replayed up to lsn, or None after bound seconds."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        if replay_behind(standby, lsn) == 0:
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def tokens(server):
    """lock name -> fencing token of the last grant, as server sees it (None: no answer)."""
    out = server.psql_try("SELECT lock_name || ' ' || fencing_token FROM dlock.locks "
                          "WHERE fencing_token IS NOT NULL")
    if out is None:
        return None
    return {lock: int(tok) for lock, _, tok in (line.partition(" ") for line in out.splitlines())}


def s_net_standby_cut(run):
    """N-f. The standby, on its own host, is cut off from the primary (both ways)
    for 2-3 ttl while the clients keep taking leases on the primary; then the link
    heals. The standby must catch up: within STANDBY_CATCH_UP seconds of the heal
    it has replayed all the WAL the primary had written at the heal, and every
    lock's fencing token there is at least the primary's at the heal. Each cut
    must have left the standby behind (else the cut cut nothing), the catch-up
    check must fail on a standby still cut off (its control, at the end), and the
    clients' histories pass the usual checks."""
    topo = net_setup(run, ("primary", "standby", "clienta", "clientb"))
    run.start_primary()
    standby = start_net_standby(run)
    start_net_workload(run)
    run.sleep(1.0)
    behind_at_heal = []
    while run.fault_window():
        seconds = run.rng.uniform(2.0, 3.0) * run.ttl_ms / 1000.0
        topo.cut("standby", "primary")
        run.fault_start("standby cut", None, hosts="standby-primary", seconds=round(seconds, 2))
        time.sleep(seconds)
        # what the primary had at the heal, the standby must reach
        lsn = run.primary.psql("SELECT pg_current_wal_lsn()", db="postgres")
        at_heal = tokens(run.primary) or {}
        behind = replay_behind(standby, lsn)
        dropped = topo.drops()
        topo.heal()
        caught = caught_up(standby, lsn, STANDBY_CATCH_UP)
        if caught is None:
            raise RuntimeError(f"the standby did not replay the primary's WAL up to {lsn} within "
                               f"{STANDBY_CATCH_UP} s of the heal{standby.log_tail(5)}")
        there = tokens(standby)
        if there is None:
            raise RuntimeError("the standby does not answer dlock.locks after the heal")
        lower = {lock: (tok, there.get(lock)) for lock, tok in at_heal.items() if (there.get(lock) or 0) < tok}
        if lower:
            raise RuntimeError(f"tokens on the standby lower than the primary's at the heal: {lower}")
        behind_at_heal.append(behind)
        run.fault_end("standby cut", None, hosts="standby-primary", dropped=dropped,
                      behind_bytes=behind, caught_up_s=round(caught, 2), tokens_checked=len(at_heal))
        run.sleep(1.5 * run.ttl_ms / 1000.0)
    if not any(b for b in behind_at_heal if b):
        raise RuntimeError(f"no cut left the standby behind (bytes at each heal: {behind_at_heal}): "
                           "the cut did not cut the replication")
    # control: the catch-up check fails on a standby still cut off
    topo.cut("standby", "primary")
    time.sleep(1.0)
    lsn = run.primary.psql("SELECT pg_current_wal_lsn()", db="postgres")
    control = caught_up(standby, lsn, 2.0)
    topo.heal()
    run.event("control", None, what="catch-up check on a standby still cut off", caught_up_s=control)
    if control is not None:
        raise RuntimeError("control: the catch-up check passed on a standby that was still cut off")


# A healed link: the walreceiver retries every 500 ms (wal_retrieve_retry_interval)
# once its dead connection is given up (wal_receiver_timeout 2 s, tcp_user_timeout 4 s).
STANDBY_CATCH_UP = 15


NO_FENCING = {"fencing": False, "negative_control": True, "expect_violations": ["1", "2"],
              "standard_expect_violations": True}

# "quick": in make test (tests/suites/62-faults-network.sh); the others in make faults.
NET_SCENARIOS = [
    {"name": "net1-client-cut", "network": True, "quick": True,
     "title": "client host cut off from the primary 2-3 ttl (netns), keep-alive leases on the cut side",
     "run": s_net_cut, "keep_alive": True,
     "checks": {"min_stale_refusals": 1, "client_deadline": True}},
    {"name": "net2-one-way", "network": True, "quick": True,
     "title": "asymmetric link: requests or replies lost one way only 2-3 ttl (netns)",
     "run": s_net_one_way},
    {"name": "net3-flapping", "network": True, "quick": True,
     "title": "flapping link: down 0.2-1.2 ttl, up 0.1-0.4 ttl, for 3-4 ttl (netns)",
     "run": s_net_flap},
    {"name": "net4-packet-loss", "network": True,
     "title": "lossy link: 30% of packets lost each way for 3 ttl (netns)", "run": s_net_loss},
    {"name": "net5-pooler-cut", "network": True,
     "title": "PgBouncer's host cut off from the primary 2-3 ttl (netns), its clients on another host",
     "run": s_net_pooler_cut},
    {"name": "net6-standby-cut", "network": True,
     "title": "standby host cut off from the primary 2-3 ttl (netns): replay catches up, tokens kept",
     "run": s_net_standby_cut},
    {"name": "net7-congested", "network": True,
     "title": "client host's link congested 2-3 ttl: a queue of one ttl (tbf, netns), keep-alive leases",
     "run": s_net_congested, "keep_alive": True, "checks": {"client_deadline": True}},
    {"name": "Nnet1-cut-no-fencing", "network": True, "quick": True,
     "title": "negative control: client host cut off, fencing off", "run": s_net_cut, **NO_FENCING},
    {"name": "Nnet2-one-way-no-fencing", "network": True,
     "title": "negative control: asymmetric link, fencing off", "run": s_net_one_way, **NO_FENCING},
    {"name": "Nnet3-flapping-no-fencing", "network": True,
     "title": "negative control: flapping link, fencing off", "run": s_net_flap, **NO_FENCING},
    {"name": "Nnet7-congested-no-fencing", "network": True,
     "title": "negative control: client host's link congested, fencing off", "run": s_net_congested,
     **NO_FENCING},
    {"name": "Nnet5-pooler-cut-no-fencing", "network": True,
     "title": "negative control: PgBouncer's host cut off, fencing off", "run": s_net_pooler_cut,
     **NO_FENCING},
]
