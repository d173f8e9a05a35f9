#!/usr/bin/env python3
"""tests/faults/netns.py -- hosts made of network namespaces, and faults between them.

A Topology is a set of hosts on this machine, each a network namespace with
its own address on one Ethernet segment: every host's eth0 is a veth whose
other end is a port of a bridge that lives in a namespace of its own (the
switch), so nothing of a topology is in the machine's own namespace and two
topologies never share a name or a packet. A process runs on a host by
`ip netns exec` (exec_args); a PostgreSQL server listens on its host's address.

Faults are between chosen pairs of hosts, per direction, as iptables rules in
the receiving host's INPUT chain (a chain of our own, netfault): the sender's
packets are dropped on arrival, silently, the way a lossy link or a cut cable
loses them (dropping on the sender's OUTPUT would return EPERM to the sending
socket, which no real network does):

  cut(a, b)              nothing passes between a and b, either way
  cut(a, b, one_way=True) nothing passes from a to b; b to a still does
  loss(a, b, percent)    each packet a<->b (or a->b) is lost with that chance
  heal(a, b) / heal()    the pair's faults, or every fault, removed
  delay(host, ms)        netem on the host's eth0, every packet it sends
                         (needs the kernel's sch_netem; DelayUnavailable if not)
  congest(host, to, ms)  the host's eth0 made a slow link (tbf, 64 kbit/s, a queue
                         of ms) that a filler stream to host `to` keeps full: every
                         packet the host sends waits about ms in the queue (or is
                         lost when it is full), as on a congested link; what a
                         kernel without netem can do (docs/testing.md)
  uncongest(host)        the queue and its filler removed
  flap(...)              is cut() and heal() in turn, driven by the caller, who
                         records each change (tests/faults/net_scenarios.py)

Names: namespaces dlnet-<pid>-<random>-<host>, so two runs cannot collide, and
a run's leftovers (a SIGKILLed run skips its cleanup) are found by the pid:
`netns.py sweep` removes the namespaces of runs whose process is gone. A
Topology tears itself down on close(), as a context manager, at interpreter
exit and on SIGTERM/SIGINT: the processes still in its namespaces are killed
and the namespaces deleted (their veths and bridge go with them).

  netns.py selftest     builds three hosts and checks that each fault does
                        what it says (a TCP connection, a refused connect)
  netns.py sweep        removes stale namespaces of dead runs
Needs root, iproute2 and iptables (scripts/install-deps.sh faults).
"""

import atexit
import os
import secrets
import signal
import subprocess
import sys
import time

PREFIX = "dlnet"
SUBNET = "10.77.0"
FIRST_HOST = 10


# A congested link (congest): its rate, and the filler that keeps its queue full
# (1000-byte datagrams at twice the rate; a full queue blocks the sender).
CONGEST_KBIT = 64
FILLER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
gap = 1000 * 8 / (2 * 1000 * float(sys.argv[2]))
while True:
    try:
        s.sendto(b"x" * 1000, (sys.argv[1], 9))
    except OSError:
        pass
    time.sleep(gap)
"""


class DelayUnavailable(RuntimeError):
    """The kernel has no sch_netem: delays cannot be made on this machine."""


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def iptables_command():
    """iptables (the nft back-end on Debian 12), else iptables-legacy."""
    for name in ("iptables", "iptables-legacy"):
        for d in ("/usr/sbin", "/sbin"):
            path = os.path.join(d, name)
            if os.path.exists(path):
                return path
    raise RuntimeError("iptables is not installed (scripts/install-deps.sh faults)")


class Topology:
    """Hosts (names) on one bridge, each namespace with SUBNET.<10+i>/24."""

    def __init__(self, hosts):
        self.tag = f"{PREFIX}-{os.getpid()}-{secrets.token_hex(2)}"
        self.switch = f"{self.tag}-sw"
        self.names = list(hosts)
        self.ns = {h: f"{self.tag}-{h}" for h in self.names}
        self.ip = {h: f"{SUBNET}.{FIRST_HOST + i}" for i, h in enumerate(self.names)}
        self.rules = {}  # (src, dst) -> drop probability, 1.0 = cut
        self.created = []
        self.iptables = None
        self.fillers = {}  # host -> the filler process of its congestion
        self._closed = False

    # --- life ----------------------------------------------------------
    def create(self):
        atexit.register(self.close)
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
                signal.signal(sig, _exit_on_signal)
        try:
            self._add_ns(self.switch)
            self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
            self._in(self.switch, "ip", "link", "set", "br0", "up")
            for i, h in enumerate(self.names):
                ns = self.ns[h]
                self._add_ns(ns)
                # Made in the two namespaces at once: no name in the machine's own.
                run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth",
                     "peer", "name", f"p{i}", "netns", self.switch])
                self._in(self.switch, "ip", "link", "set", f"p{i}", "master", "br0")
                self._in(self.switch, "ip", "link", "set", f"p{i}", "up")
                self._in(ns, "ip", "addr", "add", f"{self.ip[h]}/24", "dev", "eth0")
                self._in(ns, "ip", "link", "set", "eth0", "up")
                self._in(ns, "ip", "link", "set", "lo", "up")
            self.iptables = iptables_command()
            for h in self.names:
                self._in(self.ns[h], self.iptables, "-w", "-N", "netfault")
                self._in(self.ns[h], self.iptables, "-w", "-A", "INPUT", "-j", "netfault")
            self._wait_links()
        except Exception:
            self.close()
            raise
        return self

    def _add_ns(self, ns):
        run(["ip", "netns", "add", ns])
        self.created.append(ns)
        self._in(ns, "ip", "link", "set", "lo", "up")

    def _in(self, ns, *cmd):
        return run(["ip", "netns", "exec", ns] + list(cmd))

    def _wait_links(self, timeout=10):
        """Until every host's eth0 has left the 'tentative' and bridge learning states."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            states = run(["ip", "-n", self.switch, "-br", "link", "show", "master", "br0"]).stdout
            if states and all(line.split()[1] == "UP" for line in states.splitlines()):
                return
            time.sleep(0.05)
        raise RuntimeError(f"the bridge of {self.tag} did not come up")

    def close(self):
        if self._closed:
            return
        self._closed = True
        for host in list(self.fillers):
            self.uncongest(host)
        for ns in reversed(self.created):
            kill_namespace_processes(ns)
            run(["ip", "netns", "del", ns], check=False)
        self.created = []

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.close()

    # --- use -----------------------------------------------------------
    def exec_args(self, host):
        """The command prefix that runs a program on host."""
        return ["ip", "netns", "exec", self.ns[host]]

    def wait_port(self, host, to, port, timeout=10):
        """Until a TCP connection from host to host to's port succeeds."""
        probe = ("import socket, sys, time\n"
                 "end = time.time() + float(sys.argv[3])\n"
                 "while True:\n"
                 "    try:\n"
                 "        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=0.5).close(); break\n"
                 "    except OSError:\n"
                 "        if time.time() > end: sys.exit(1)\n"
                 "        time.sleep(0.05)\n")
        r = run(self.exec_args(host) + [sys.executable, "-c", probe, self.ip[to], str(port), str(timeout)],
                check=False)
        if r.returncode != 0:
            raise RuntimeError(f"nothing listens on {to} ({self.ip[to]}) port {port}, seen from {host}")

    def cut(self, a, b, one_way=False):
        self.loss(a, b, 100, one_way)

    def loss(self, a, b, percent, one_way=False):
        pairs = [(a, b)] if one_way else [(a, b), (b, a)]
        for src, dst in pairs:
            self.rules[(src, dst)] = percent / 100.0
            self._apply(dst)

    def heal(self, a=None, b=None):
        """Every fault between a and b (both ways), or every fault of the topology."""
        touched = set()
        for src, dst in list(self.rules):
            if a is None or {src, dst} == {a, b}:
                del self.rules[(src, dst)]
                touched.add(dst)
        for dst in touched:
            self._apply(dst)

    def _apply(self, dst):
        """dst's netfault chain rebuilt from the rules whose packets arrive at dst."""
        ns = self.ns[dst]
        self._in(ns, self.iptables, "-w", "-F", "netfault")
        for (src, to), p in sorted(self.rules.items()):
            if to != dst:
                continue
            rule = ["-w", "-A", "netfault", "-s", self.ip[src]]
            if p < 1.0:
                rule += ["-m", "statistic", "--mode", "random", "--probability", f"{p:.4f}"]
            self._in(ns, self.iptables, *rule, "-j", "DROP")

    def delay(self, host, ms):
        """Every packet host sends waits ms (0: no delay)."""
        ns = self.ns[host]
        run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
        if ms <= 0:
            return
        r = run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "netem",
                 "delay", f"{ms}ms"], check=False)
        if r.returncode != 0:
            raise DelayUnavailable(f"tc netem: {r.stderr.strip()}")

    def congest(self, host, to, ms, kbit=CONGEST_KBIT):
        """host's outgoing link: kbit/s through a tbf queue of ms, kept full by a
        filler stream of UDP datagrams to `to`'s discard port at twice the rate, so
        that every packet host sends waits about ms (the queue's length) or, when
        it arrives at a full queue, is lost and sent again by TCP."""
        self.uncongest(host)
        self._in(self.ns[host], "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", f"{kbit}kbit",
                 "burst", "1600", "latency", f"{ms}ms")
        self.fillers[host] = subprocess.Popen(
            self.exec_args(host) + [sys.executable, "-c", FILLER, self.ip[to], str(kbit)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def uncongest(self, host):
        p = self.fillers.pop(host, None)
        if p is not None:
            p.kill()
            p.wait()
        run(["ip", "netns", "exec", self.ns[host], "tc", "qdisc", "del", "dev", "eth0", "root"], check=False)

    def queue_drops(self, host):
        """Packets host's tbf queue dropped (0 without one)."""
        out = run(["ip", "netns", "exec", self.ns[host], "tc", "-s", "qdisc", "show", "dev", "eth0"],
                  check=False).stdout
        for word, nxt in zip(out.split(), out.split()[1:]):
            if word == "(dropped":
                return int(nxt.rstrip(","))
        return 0

    def drops(self):
        """Packets dropped by every host's faults now in force (read before heal())."""
        return sum(self.dropped(h) for h in self.names)

    def dropped(self, host):
        """Packets host's netfault chain has dropped since its rules last changed."""
        out = self._in(self.ns[host], self.iptables, "-w", "-L", "netfault", "-n", "-v", "-x").stdout
        total = 0
        for line in out.splitlines()[2:]:
            fields = line.split()
            if fields and fields[0].isdigit():
                total += int(fields[0])
        return total


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def kill_namespace_processes(ns):
    """SIGKILL whatever still runs in ns (our servers and workers, by construction)."""
    for _ in range(50):
        out = run(["ip", "netns", "pids", ns], check=False).stdout.split()
        if not out:
            return
        for pid in out:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        time.sleep(0.1)


def sweep():
    """Removes the namespaces of topologies whose creating process is gone."""
    removed = []
    for line in run(["ip", "netns", "list"]).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) < 4 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        if os.path.exists(f"/proc/{parts[1]}"):
            continue
        kill_namespace_processes(name)
        run(["ip", "netns", "del", name], check=False)
        removed.append(name)
    return removed


# ---------------------------------------------------------------------------
# Self-test: each fault does what it says, on real sockets
# ---------------------------------------------------------------------------

LISTENER = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000)); s.listen(16); print("ready", flush=True)
# One thread per connection: a probe cut off by lost packets (or slowed by
# a congested link) leaves its connection reset or half open, and holds up
# no other probe.
def serve(c):
    c.settimeout(2)
    try:
        while True:
            data = c.recv(100)
            if not data: break
            c.sendall(data)
    except OSError:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


PROBE = """
import socket, sys, time
try:
    t0 = time.monotonic()
    c = socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[2]))
    c.settimeout(float(sys.argv[2])); c.sendall(b"x"); ok = c.recv(1) == b"x"
    print("echo" if ok else "closed", end="")
    print(f" {time.monotonic() - t0:.3f}" if len(sys.argv) > 3 else "")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error", e.errno)
"""


def selftest():
    failures = []

    def expect(what, got, want):
        verdict = "ok" if got == want else "not ok"
        print(f"{verdict} - netns: {what} (got {got})")
        if got != want:
            failures.append(what)

    with Topology(["a", "b", "c"]) as topo:
        server = subprocess.Popen(topo.exec_args("b") + [sys.executable, "-c", LISTENER, topo.ip["b"]],
                                  stdout=subprocess.PIPE, text=True)
        server.stdout.readline()

        def probe(host, timeout=0.8):
            return run(topo.exec_args(host) + [sys.executable, "-c", PROBE, topo.ip["b"],
                                                str(timeout)]).stdout.strip()

        expect("a reaches b on its own address", probe("a"), "echo")
        r = run([sys.executable, "-c", PROBE, topo.ip["b"], "0.5"]).stdout.strip()
        expect("the machine's own namespace does not reach b", r != "echo", True)
        topo.cut("a", "b")
        expect("cut a-b: a's connect times out (packets lost, not refused)", probe("a"), "timeout")
        expect("cut a-b: c still reaches b", probe("c"), "echo")
        topo.heal("a", "b")
        expect("healed: a reaches b again", probe("a"), "echo")
        topo.cut("b", "a", one_way=True)
        expect("one way b->a cut: the SYN arrives, its answer does not", probe("a"), "timeout")
        expect("one way b->a cut: b's chain dropped nothing", topo.dropped("b"), 0)
        expect("one way b->a cut: a's chain dropped the answers", topo.dropped("a") > 0, True)
        topo.heal()
        # About three packets a->b per probe: each passes about half the time.
        topo.loss("a", "b", 20, one_way=True)
        got = [probe("a", 0.3) for _ in range(16)]
        expect("loss 20% a->b: some connections pass, some do not",
               "echo" in got and "timeout" in got, True)
        topo.heal()
        expect("healed after loss: a reaches b", probe("a"), "echo")
        # A congested link: a connection and an echo cross a->b twice (SYN, data)
        def timed(host):
            out = run(topo.exec_args(host) + [sys.executable, "-c", PROBE, topo.ip["b"], "5", "t"]).stdout.split()
            return out[0], float(out[1]) if len(out) > 1 else None

        topo.congest("a", "b", 600)
        time.sleep(1.0)  # the filler fills the queue
        got, took = timed("c")
        expect(f"congested a: c's echo is quick (under 0.3 s: {took:.3f} s)", (got, took < 0.3), ("echo", True))
        got, took = timed("a")
        expect("congested a (600 ms queue): a's echo passes, after at least 0.6 s", (got, took >= 0.6), ("echo", True))
        expect("congested a: the queue dropped filler packets", topo.queue_drops("a") > 0, True)
        topo.uncongest("a")
        got, took = timed("a")
        expect("uncongested: a's echo is quick again (under 0.3 s)", (got, took < 0.3), ("echo", True))
        names = list(topo.created)
        server.kill()
        server.wait()
    left = [n for n in names if n in run(["ip", "netns", "list"]).stdout]
    expect("closed: no namespace left", left, [])
    return 1 if failures else 0


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("selftest", "sweep"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "sweep":
        for name in sweep():
            print(f"removed {name}")
        return 0
    return selftest()


if __name__ == "__main__":
    sys.exit(main())
