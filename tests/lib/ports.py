"""Free TCP ports on 127.0.0.1 for the test servers, proxies and clusters.

The one place that picks ports: the shell suites (tests/lib/ports.sh), the
fault harness (tests/faults) and the failover cluster (tests/ha) all call it.

  python3 tests/lib/ports.py [N]     prints N ports (default 1), one per line
"""
import random
import socket
import sys


def free_ports(n=1):
    """n distinct ports that nothing listens on now, below the kernel's
    ephemeral range, from a random place in the 12000 ports under it.

    Below that range a port is never handed out as a client's local port, so a
    server stopped for a fault (a crash, a failover) can always bind its port
    again; the random start keeps two runs on one machine apart, and the short
    window before a server binds a port is the price of choosing it first."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    candidates = list(range(max(1024, low - 12000), low))
    start = random.randrange(len(candidates))
    found = []
    for port in candidates[start:] + candidates[:start]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == n:
            return found
    raise RuntimeError("no free ports below the ephemeral range")


if __name__ == "__main__":
    print("\n".join(str(p) for p in free_ports(int(sys.argv[1]) if len(sys.argv) > 1 else 1)))
