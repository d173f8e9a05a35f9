#!/usr/bin/env bash
# The TypeScript client (client/typescript, docs/clients/typescript.md):
# npm ci from package-lock.json (skipped while node_modules matches the lock
# file), the strict TypeScript build with its declarations (and a planted
# misuse the declarations must catch), npm pack, then node --test -- the
# client's tests and the conformance scenarios of client/conformance with their
# negative controls -- against the test server, through PgBouncer in
# transaction pooling, and once against the SQL edition. Ends with
# "N passed, N failed".
set -uo pipefail
root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DLOCK_ROOT=$root
. "$root/tests/lib/check.sh"
. "$root/tests/lib/clients.sh"

src=$root/client/typescript
version=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$root/META.json")
scratch=$(mktemp -d /tmp/pg_dlock-typescript.XXXXXX)
sqled_db=dlock_clients_typescript_sqled
trap 'clients_pgbouncer_stop; rm -rf "$scratch"' EXIT
export npm_config_cache=${npm_config_cache:-$(clients_cache)/npm-cache}
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

install_modules() {
	local stamp
	stamp="$(sha256sum "$src/package-lock.json" | cut -c1-16) $(node --version)"
	if [ -d "$src/node_modules" ] && [ "$(cat "$src/node_modules/.dlock-stamp" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	(cd "$src" && npm ci --prefer-offline --loglevel=error) && echo "$stamp" >"$src/node_modules/.dlock-stamp"
}
check "typescript: npm ci installs the locked packages (package-lock.json)" install_modules

build() {
	(cd "$src" && rm -rf dist build-test && npx tsc -p tsconfig.json && npx tsc -p tsconfig.test.json) &&
		test -f "$src/dist/index.d.ts" -a -f "$src/dist/index.js"
}
check "typescript: tsc --strict builds the ESM package and its declarations" build
# Control: code that uses the package wrongly is caught through its declarations.
printf 'import { Locks } from "../dist/index.js";\nconst t: number = new Locks().callTimeout.toUpperCase();\nvoid new Locks().tryAcquire("n", { ttl: "1s" });\nexport { t };\n' \
	>"$src/build-test/misuse.ts"
check "typescript: tsc catches misuse of the package's declarations (control)" \
	bash -c '! (cd "$1" && npx tsc --noEmit --strict --module NodeNext --moduleResolution NodeNext --target ES2022 build-test/misuse.ts >/dev/null)' _ "$src"
rm -f "$src/build-test/misuse.ts"

pack() {
	(cd "$src" && npm pack --silent --ignore-scripts --pack-destination "$scratch" >/dev/null) &&
		test -f "$scratch/pg-dlock-$version.tgz" &&
		tar -tzf "$scratch/pg-dlock-$version.tgz" >"$scratch/files" &&
		grep -qx 'package/dist/index.d.ts' "$scratch/files" &&
		tar -xzOf "$scratch/pg-dlock-$version.tgz" package/package.json >"$scratch/package.json" &&
		grep -q "\"version\": \"$version\"" "$scratch/package.json"
}
check "typescript: npm pack makes pg-dlock-$version.tgz with the compiled package and its declarations" pack

run_node_tests() {
	local label=$1 log status p f s
	shift
	log=$(mktemp)
	(cd "$src" && timeout 600 node --test --test-concurrency=1 --test-reporter=spec "$@") 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	p=$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$log" | tail -n 1)
	s=$(sed -n 's/^ℹ skipped \([0-9]*\)$/\1/p' "$log" | tail -n 1)
	rm -f "$log"
	f=${f:-0}
	if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "node --test exited with status $status"
		f=1
	fi
	clients_add_counts "$label" "${p:-0}" "$f" "${s:-0}"
}

if [ "$failed" -eq 0 ]; then
	echo "=== typescript: direct connection"
	clients_env_direct
	run_node_tests "typescript (direct)" build-test/test/conformance.test.js build-test/test/client.test.js
	echo "=== typescript: through PgBouncer (transaction pooling)"
	if clients_pgbouncer_start; then
		clients_env_pooled
		run_node_tests "typescript (PgBouncer, transaction pooling)" build-test/test/conformance.test.js build-test/test/client.test.js
		clients_pgbouncer_stop
	else
		check "typescript: PgBouncer starts" false
	fi
	echo "=== typescript: against the SQL edition"
	if clients_sql_edition_db "$sqled_db"; then
		clients_env_sql_edition "$sqled_db"
		run_node_tests "typescript (SQL edition)" build-test/test/conformance.test.js
		psql -X -q -p "$clients_server_port" -d postgres -c "DROP DATABASE $sqled_db WITH (FORCE)"
	else
		check "typescript: a database with the SQL edition" false
	fi
fi
finish
