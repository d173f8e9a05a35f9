# Shared by the test scripts: free_ports [N] prints N (default 1) distinct TCP
# ports on 127.0.0.1 that nothing listens on now, one per line, so that two
# runs on one machine do not collide; tests/lib/ports.py picks them.
free_ports() {
	python3 "$(dirname "${BASH_SOURCE[0]}")/ports.py" "${1:-1}"
}
