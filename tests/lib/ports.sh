# Shared by the test scripts: free_ports [N] prints N (default 1) distinct TCP
# ports on 127.0.0.1 that nothing listens on now, one per line, so that two
# runs on one machine do not collide. The kernel picks them (bind to port 0,
# all held open together so they differ); the short window before a server
# binds one is the usual price of this approach.
free_ports() {
	python3 - "${1:-1}" <<'PY'
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in held))
PY
}
