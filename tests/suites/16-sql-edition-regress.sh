#!/usr/bin/env bash
# The C extension's pg_regress files (regress/sql) and isolation specs
# (regress/specs) against the SQL edition (pg_dlock_sql, docs/sql-edition.md),
# with the C extension's expected outputs, on the shared test server
# (PostgreSQL 15, pg_dlock preloaded, as for 10-regress).
#
# tests/sql_edition/regress-skip.txt lists, each with its reason, the files and
# specs that do not run as they are: left out where the SQL edition differs as
# docs/sql-edition.md lists (or for a bug of the SQL edition, until fixed), or
# compared with an alternative output of the SQL edition's own
# (tests/sql_edition/regress-expected/NAME.out). The alternatives live apart
# from regress/expected: the run here reads a scratch copy of regress/ with
# them laid over the C extension's outputs of the same name (PostgreSQL 15's
# pg_regress has no --expecteddir), so 10-regress never accepts them.
#
# pg_regress and pg_isolation_regress create databases of their own
# (dlock_sqled_regress, dlock_sqled_isolation) and CREATE EXTENSION
# pg_dlock_sql there as the superuser, as make installcheck does for the C
# extension (--use-existing would skip both). Each regress file and each spec
# counts as one test. Further checks: every file and spec is run or listed;
# the list names only files that exist, with a reason of a known kind; every
# alternative output is listed and every listed one exists; a negative
# control plants a new file in a copy of regress/ and the first check finds it.
set -uo pipefail
cd "$DLOCK_ROOT"
export LC_COLLATE=C
. tests/lib/check.sh
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
		grep -qE "^(test| ) *$name +\.\.\. " "$scratch/$kind.log" 2>/dev/null && continue
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
opts=(--inputdir="$input" --bindir="$PG_BINDIR" --load-extension=pg_dlock_sql)
# a file that waits for ever (one the SQL edition cannot pass, unlisted) fails
# at the timeout instead of stalling make test
mkdir -p "$scratch/out-regress" "$scratch/out-iso"
chmod 777 "$scratch/out-regress" "$scratch/out-iso"
timeout -k 10 600 "$pgxs/regress/pg_regress" "${opts[@]}" --outputdir="$scratch/out-regress" \
	--dbname=dlock_sqled_regress $run_regress >"$scratch/regress.log" 2>&1
regress_status=$?
timeout -k 10 600 "$pgxs/isolation/pg_isolation_regress" "${opts[@]}" --outputdir="$scratch/out-iso" \
	--dbname=dlock_sqled_isolation $run_specs >"$scratch/spec.log" 2>&1
iso_status=$?
grep -hE '^(test| ) *[a-z0-9_-]+ +\.\.\.' "$scratch/regress.log" "$scratch/spec.log"
passed=$(cat "$scratch/regress.log" "$scratch/spec.log" | grep -cE '^(test| ) *[a-z0-9_-]+ +\.\.\. ok')
failed=$(cat "$scratch/regress.log" "$scratch/spec.log" | grep -cE '^(test| ) *[a-z0-9_-]+ +\.\.\. FAILED')
for out in out-regress out-iso; do
	[ -f "$scratch/$out/regression.diffs" ] && head -n 200 "$scratch/$out/regression.diffs"
done
ran=$(cat "$scratch/regress.log" "$scratch/spec.log" | grep -cE '^(test| ) *[a-z0-9_-]+ +\.\.\. ')
expected_runs=$(echo $run_regress $run_specs | wc -w)
if [ "$regress_status" -ne 0 ] || [ "$iso_status" -ne 0 ] || [ "$ran" -ne "$expected_runs" ]; then
	if [ "$failed" -eq 0 ] || [ "$ran" -ne "$expected_runs" ]; then
		tail -n 20 "$scratch/regress.log" "$scratch/spec.log"
		echo "FAILED  pg_regress exited $regress_status, pg_isolation_regress $iso_status; $ran of $expected_runs files and specs reported"
		failed=$((failed + 1))
	fi
fi
echo "left out on the SQL edition (tests/sql_edition/regress-skip.txt):"
sed -e '/^#/d' -e '/^\s*$/d' "$list" | awk '$3 != "alt"' | sed 's/^/    /'

# --- the list -----------------------------------------------------------------
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
# negative control: a new file in a copy of regress/, neither run nor listed
mkdir -p "$scratch/planted"
cp -r regress/sql regress/specs "$scratch/planted/"
echo "SELECT 1;" >"$scratch/planted/sql/zz-planted-new-test.sql"
echo 'session s step s1 { SELECT 1; }' >"$scratch/planted/specs/zz-planted-new-spec.spec"
planted=$(not_covered "$scratch/planted" | tr '\n' ',')
check "negative control: a regress file and a spec added to a copy of regress/ are found neither run nor listed ($planted)" \
	test "$planted" = "regress zz-planted-new-test,spec zz-planted-new-spec,"

for db in dlock_sqled_regress dlock_sqled_isolation; do
	psql -X -q -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
done
rm -rf "$scratch"
finish
