#!/usr/bin/env bash
# The Python client (client/python, docs/clients/python.md): a virtual
# environment with the locked tools (cached under build/clients, rebuilt when
# client/python/requirements-dev.lock or the Python version changes), the wheel
# built with pip and installed there, mypy --strict over the package (and a
# planted type error it must catch), then pytest -- the client's tests and the
# conformance scenarios of client/conformance with their negative controls --
# against the test server, through PgBouncer in transaction pooling, and once
# against the SQL edition. Ends with "N passed, N failed".
set -uo pipefail
root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DLOCK_ROOT=$root
. "$root/tests/lib/check.sh"
. "$root/tests/lib/clients.sh"

cache=$(clients_cache)
venv=$cache/python-venv
src=$root/client/python
lock=$src/requirements-dev.lock
version=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$root/META.json")
scratch=$(mktemp -d /tmp/pg_dlock-python.XXXXXX)
sqled_db=dlock_clients_python_sqled
trap 'clients_pgbouncer_stop; rm -rf "$scratch"' EXIT

setup_venv() {
	local stamp
	stamp="$(sha256sum "$lock" | cut -c1-16) $(python3 --version 2>&1)"
	if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	rm -rf "$venv"
	python3 -m venv "$venv" &&
		"$venv/bin/pip" install -q --disable-pip-version-check -r "$lock" &&
		echo "$stamp" >"$venv/.stamp"
}
check "python: a virtual environment with the locked tools ($(basename "$lock"))" setup_venv

# The wheel is built from a copy, so that the build leaves nothing in the tree;
# it is imported from the scratch directory: the tree's root holds the
# extension's pg_dlock.so, which Python would take for the package.
build_wheel() {
	mkdir -p "$scratch/src" "$scratch/dist"
	cp -r "$src/pyproject.toml" "$src/README.md" "$src/src" "$scratch/src/" &&
		"$venv/bin/pip" wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
			-w "$scratch/dist" "$scratch/src" >/dev/null &&
		test -f "$scratch/dist/pg_dlock-$version-py3-none-any.whl" &&
		"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall \
			"$scratch/dist/pg_dlock-$version-py3-none-any.whl" &&
		(cd "$scratch" && "$venv/bin/python" -c 'import sys, pg_dlock, importlib.metadata as m;
assert pg_dlock.__version__ == m.version("pg-dlock") == sys.argv[1]; assert "site-packages" in pg_dlock.__file__' "$version") &&
		"$venv/bin/python" -c 'import sys, zipfile; sys.exit("pg_dlock/py.typed" not in zipfile.ZipFile(sys.argv[1]).namelist())' \
			"$scratch/dist/pg_dlock-$version-py3-none-any.whl"
}
check "python: pip builds the wheel pg_dlock-$version (with py.typed) and it installs with the project's version" build_wheel

mypy_clean() {
	"$venv/bin/mypy" --cache-dir "$cache/mypy-cache" --config-file "$src/pyproject.toml" "$src/src"
}
check "python: mypy --strict finds nothing in the package" mypy_clean
# Control: code that uses the installed package wrongly is caught through its type hints.
printf 'import pg_dlock\nx: int = pg_dlock.Outcome.DONE\ny: str = pg_dlock.Locks().try_acquire("n", ttl=1)\n' >"$scratch/misuse.py"
check "python: mypy catches misuse of the installed package's types (control)" \
	bash -c '! "$1" --cache-dir "$2" --strict "$3" >/dev/null' _ "$venv/bin/mypy" "$cache/mypy-cache" "$scratch/misuse.py"

run_pytest() {
	local label=$1 log status line p f e s
	shift
	log=$(mktemp)
	(cd "$src" && timeout 600 "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$@") 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	line=$(grep -E '^[0-9]+ (passed|failed|skipped|errors?)' "$log" | tail -n 1)
	rm -f "$log"
	p=$(grep -oE '[0-9]+ passed' <<<"$line" | cut -d' ' -f1)
	f=$(grep -oE '[0-9]+ failed' <<<"$line" | cut -d' ' -f1)
	e=$(grep -oE '[0-9]+ errors?' <<<"$line" | cut -d' ' -f1)
	s=$(grep -oE '[0-9]+ skipped' <<<"$line" | cut -d' ' -f1)
	f=$((${f:-0} + ${e:-0}))
	if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "pytest exited with status $status"
		f=1
	fi
	clients_add_counts "$label" "${p:-0}" "$f" "${s:-0}"
}

if [ "$failed" -eq 0 ]; then
	echo "=== python: direct connection"
	clients_env_direct
	run_pytest "python (direct)" tests
	echo "=== python: through PgBouncer (transaction pooling)"
	if clients_pgbouncer_start; then
		clients_env_pooled
		run_pytest "python (PgBouncer, transaction pooling)" tests
		clients_pgbouncer_stop
	else
		check "python: PgBouncer starts" false
	fi
	echo "=== python: against the SQL edition"
	if clients_sql_edition_db "$sqled_db"; then
		clients_env_sql_edition "$sqled_db"
		run_pytest "python (SQL edition)" tests/test_conformance.py
		psql -X -q -p "$clients_server_port" -d postgres -c "DROP DATABASE $sqled_db WITH (FORCE)"
	else
		check "python: a database with the SQL edition" false
	fi
fi
finish
