#!/usr/bin/env bash
# The documentation covers what ships and its links resolve (tests/lib/check_docs.py):
# every function, view, table and type of schema dlock in the test database, every
# dlock.* setting in pg_settings and every PD SQLSTATE the C sources define appear in
# docs/reference.md; every subcommand and option of the built dlock appears in
# docs/cli.md; every relative link of README.md and docs/*.md reaches its file and
# heading. Negative controls: the checker must fail on a copy of the docs with one
# function, one SQLSTATE, one setting and one option taken out, a link to a file
# that is not there and a link to a heading that is not there.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh

cli=${DLOCK_CLI:-$DLOCK_ROOT/build/client/cli/dlock}
if [ ! -x "$cli" ]; then
	make -s client >/dev/null 2>&1 || true
fi
scratch=$(mktemp -d "${DLOCK_SCRATCH:-/tmp}/docs.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

run_checker() { # ROOT LOG: the checker on the tree at ROOT, its output in LOG
	python3 "$DLOCK_ROOT/tests/lib/check_docs.py" --docs "$1/docs" --readme "$1/README.md" \
		--catalog --sources "$1/extension" --cli "$cli" >"$2" 2>&1
}

check "the built dlock is there to read its --help from" test -x "$cli"

# --- the real documentation ---------------------------------------------------
run_checker "$DLOCK_ROOT" "$scratch/real.log"
status=$?
cat "$scratch/real.log"
check "the checker looked at the catalog, the SQLSTATEs and the CLI" \
	grep -qE '^checked: [0-9]+ files linked, [1-9][0-9]* catalog objects and settings, [1-9][0-9]* PD SQLSTATEs, [1-9][0-9]* subcommands and options' "$scratch/real.log"
check "every function, view, setting, SQLSTATE and CLI option is documented; every link resolves" \
	test "$status" -eq 0

# --- one version number ------------------------------------------------------
control_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" pg_dlock.control)
meta_version=$(python3 -c 'import json; print(json.load(open("META.json"))["version"])')
meta_provides=$(python3 -c 'import json; print(json.load(open("META.json"))["provides"]["pg_dlock"]["version"])')
cmake_version=$(sed -n 's/^project(dlock VERSION \([0-9.]*\) .*/\1/p' client/CMakeLists.txt)
cli_version=$("$cli" --version 2>/dev/null | awk '{ print $2 }')
echo "versions: control $control_version, META.json $meta_version ($meta_provides), client $cmake_version, dlock $cli_version"
check "META.json's version is the control file's default_version" test "$meta_version" = "$control_version.0"
check "META.json provides the same version" test "$meta_provides" = "$meta_version"
check "the C++ library has the same version" test "$cmake_version" = "$meta_version"
check "dlock --version prints the same version" test "$cli_version" = "$meta_version"

# --- the manual page names every subcommand and option of dlock --help --------
man_missing=$(python3 - "$cli" client/cli/dlock.1 <<'PY'
import re, subprocess, sys
cli, page = sys.argv[1], open(sys.argv[2]).read().replace('\\-', '-').replace('\\fB', '').replace('\\fR', '')
top = subprocess.run([cli, '--help'], capture_output=True, text=True).stdout
subs = re.findall(r'^  ([a-z][a-z-]*)\s{2,}\S', top.split('Subcommands:')[1].split('\n\n')[0], re.M)
words = set(subs)
for sub in subs:
    text = subprocess.run([cli, sub, '--help'], capture_output=True, text=True).stdout
    words |= set(re.findall(r'^\s{2}(?:-\w,)?(--[a-z][a-z-]*)', text.split('Options:')[1], re.M)) - {'--help'}
print(' '.join(sorted(w for w in words if not re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(w), page))))
PY
)
check "the dlock(1) manual page names every subcommand and option (missing: ${man_missing:-none})" test -z "$man_missing"

# --- the complete C++ program of docs/client.md is the one the tests build -------
check "docs/client.md's complete program is examples/quickstart.cpp (built and run by 30-client)" \
	diff <(sed -n '/^### A complete program/,/^```$/p' docs/client.md | sed -n '/^```cpp/,/^```$/p' | sed '1d;$d') \
	<(sed '1,3d' examples/quickstart.cpp)

# --- negative controls on a copy ------------------------------------------------
copy=$scratch/copy
mkdir "$copy"
tar -C "$DLOCK_ROOT" --exclude=./build --exclude=./.git -cf - . | tar -C "$copy" -xf -
# One function, one SQLSTATE and one setting gone from the reference, one option
# from the CLI page, and two broken links.
sed -i -e '/resize_semaphore/d' -e '/PD020/d' -e '/dlock\.max_lock_delay/d' "$copy/docs/reference.md"
sed -i -e 's/--lock-delay/--lock-dilay/g' "$copy/docs/cli.md"
printf '\nSee [nowhere](docs/no-such-file.md) and [no heading](docs/limits.md#no-such-heading).\n' \
	>>"$copy/README.md"
run_checker "$copy" "$scratch/broken.log"
status=$?
cat "$scratch/broken.log"
check "negative control: the checker fails on the broken copy" test "$status" -ne 0
check "negative control: a function missing from reference.md is found" \
	grep -q '^missing: function resize_semaphore ' "$scratch/broken.log"
check "negative control: a PD SQLSTATE missing from reference.md is found" \
	grep -q '^missing: SQLSTATE PD020 ' "$scratch/broken.log"
check "negative control: a setting missing from reference.md is found" \
	grep -q '^missing: setting dlock.max_lock_delay ' "$scratch/broken.log"
check "negative control: an option missing from cli.md is found" \
	grep -q '^missing: option dlock run --lock-delay ' "$scratch/broken.log"
check "negative control: a link to a file that is not there is found" \
	grep -q '^broken link: .*README.md:[0-9]*: docs/no-such-file.md ' "$scratch/broken.log"
check "negative control: a link to a heading that is not there is found" \
	grep -q '^broken link: .*README.md:[0-9]*: docs/limits.md#no-such-heading ' "$scratch/broken.log"
check "negative control: nothing else is reported on the copy" \
	test "$(grep -cE '^(missing|broken link):' "$scratch/broken.log")" -eq 6

finish
