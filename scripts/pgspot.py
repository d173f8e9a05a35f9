#!/usr/bin/env python3
"""Runs pgspot (https://github.com/timescale/pgspot, pinned in
scripts/install-deps.sh) over every install and update script of both
editions and prints each finding; exits 1 when there is one.

  scripts/pgspot.py [--pgspot PATH] [--edition c|sql|all] [--root DIR]

pgspot reads PL/pgSQL through libpg_query, which cannot resolve a variable
declared as a table's %ROWTYPE without a catalog and then stops reading the
whole file. So each script is read twice:
  1. the whole script with --no-plpgsql: every top-level statement, every
     function's definition (search_path pinned, SECURITY DEFINER, CREATE OR
     REPLACE), views, defaults and constraints;
  2. each DO block of the script alone, with its PL/pgSQL analysed: the
     blocks are what an install or update script runs itself (as a superuser
     for a trusted extension). The functions' bodies run later, as their
     owner, with search_path pinned to pg_catalog, pg_temp (checked in 1).
The scripts of one extension are read in the order CREATE EXTENSION runs
them (base, then each step), appended (pgspot -a), after a prelude standing
for the schema the control file creates: the base script refuses that schema
unless it is empty (any object of any kind) and the installer's, and an
update script may CREATE OR REPLACE only its extension's own members
(PostgreSQL refuses the others). The psql -f upgrade is read after the psql -f
installer it updates, with psql's meta-commands (\\if, \\echo, ...) and the
queries that \\gset the installed version left out.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def vkey(v):
    return [int(x) for x in v.split(".")]


def chain(directory, ext):
    files = os.listdir(directory)
    bases = sorted((f for f in files if re.fullmatch(re.escape(ext) + r"--[0-9.]+\.sql", f)),
                   key=lambda f: vkey(f[len(ext) + 2:-4]))
    steps = {}
    for f in files:
        m = re.fullmatch(re.escape(ext) + r"--([0-9.]+)--([0-9.]+)\.sql", f)
        if m:
            steps[m.group(1)] = (m.group(2), f)
    out = [bases[0]]
    v = bases[0][len(ext) + 2:-4]
    while v in steps:
        v, f = steps[v]
        out.append(f)
    left = sorted(set(files) - set(out) - {f for f in files if not f.endswith(".sql")})
    return [os.path.join(directory, f) for f in out], [os.path.join(directory, f) for f in left]


def strip_meta(text):
    # psql's meta-commands, and the queries whose results \gset keeps in
    # psql variables (they read dlock.plain_install, as the owning role)
    text = re.sub(r"^.*\\gset\n", "", text, flags=re.M)
    return re.sub(r"^\\.*\n", "", text, flags=re.M)


ROOT = os.getcwd()


# the copies read in place of a script (see restored_search_path), by the
# script's path
ALIAS = {}


def rel(path):
    path = ALIAS.get(path, path)
    return os.path.relpath(path, ROOT) if not path.startswith(tempfile.gettempdir()) else os.path.basename(path)


# A script that pins search_path to pg_catalog, pg_temp around a statement
# sets it back to what CREATE / ALTER EXTENSION gave it ("dlock, pg_temp").
# pgspot takes the schema the prelude creates for one it may trust, which
# holds for CREATE EXTENSION but not for an update (the schema exists, and
# its owner may have put objects in it): the line is read as RESET, so that
# every statement after it is checked as if search_path were not safe.
RESTORE = re.compile(r"^SET LOCAL search_path = dlock, pg_temp;$", re.M)


def restored_search_path(path, tmp):
    text = open(path).read()
    if not RESTORE.search(text):
        return path
    os.makedirs(os.path.join(tmp, "restored"), exist_ok=True)
    copy = os.path.join(tmp, "restored", os.path.basename(path))
    with open(copy, "w") as f:
        f.write(RESTORE.sub("RESET search_path;", text))
    ALIAS[copy] = path
    return copy


FINDING = re.compile(r"^(PS\d{3}): (.*)$", re.M)


def pgspot(exe, files, plpgsql, label):
    """Runs pgspot over files (appended); returns the findings as lines."""
    args = [exe, "--plpgsql" if plpgsql else "--no-plpgsql"]
    if len(files) > 1:
        args.append("-a")
    res = subprocess.run(args + files, capture_output=True, text=True)
    found = []
    where = label
    for line in res.stdout.splitlines():
        s = line.strip()
        if not s or s.startswith(("Errors:", "TOTAL:")):
            continue
        if len(files) > 1 and s.endswith(":") and s[:-1] in files:
            where = rel(s[:-1])     # pgspot -a names each file before its findings
            continue
        m = FINDING.match(s)
        # anything else is what pgspot could not read (it stops reading that file)
        found.append(f"{where}: {m.group(1)}: {m.group(2)}" if m else f"{where}: could not read: {s}")
    if res.returncode != 0 and not found:
        found.append(f"{label}: pgspot exited {res.returncode}: {res.stderr.strip()}")
    return found


def do_blocks(text):
    return [m.group(0) for m in re.finditer(r"^DO (\$\w*\$)\n.*?^\1;\n", text, flags=re.M | re.S)]


def check(exe, name, files, tmp, schema="dlock"):
    findings = []
    prelude = os.path.join(tmp, "prelude.sql")
    with open(prelude, "w") as f:
        f.write(f"-- the schema the control file creates\nCREATE SCHEMA {schema};\n")
    findings += pgspot(exe, [prelude] + [restored_search_path(f, tmp) for f in files], False, name)
    for path in files:
        text = open(path).read()
        for i, block in enumerate(do_blocks(text)):
            b = os.path.join(tmp, f"{os.path.basename(path)}.do{i}.sql")
            with open(b, "w") as f:
                f.write(block)
            findings += pgspot(exe, [b], True, f"{rel(path)} (DO block {i + 1})")
    return findings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pgspot", default=os.environ.get("PGSPOT", "pgspot"))
    ap.add_argument("--edition", choices=["c", "sql", "all"], default="all")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    a = ap.parse_args()
    root = os.path.normpath(a.root)
    global ROOT
    ROOT = root
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        if a.edition in ("c", "all"):
            files, left = chain(os.path.join(root, "sql"), "pg_dlock")
            findings += check(a.pgspot, "sql/ (CREATE EXTENSION pg_dlock)", files, tmp)
            for f in left:
                findings += check(a.pgspot, rel(f), [f], tmp)
        if a.edition in ("sql", "all"):
            files, left = chain(os.path.join(root, "sql_edition"), "pg_dlock_sql")
            findings += check(a.pgspot, "sql_edition/ (CREATE EXTENSION pg_dlock_sql)", files, tmp)
            for f in left:
                findings += check(a.pgspot, rel(f), [f], tmp)
            dist = os.path.join(root, "sql_edition", "dist")
            install = os.path.join(dist, "pg_dlock_sql-install.sql")
            upgrade = os.path.join(tmp, "pg_dlock_sql-upgrade.sql")
            with open(upgrade, "w") as f:
                f.write(strip_meta(open(os.path.join(dist, "pg_dlock_sql-upgrade.sql")).read()))
            inst = os.path.join(tmp, "pg_dlock_sql-install.sql")
            with open(inst, "w") as f:
                f.write(strip_meta(open(install).read()))
            findings += pgspot(a.pgspot, [inst], False, rel(install))
            for i, block in enumerate(do_blocks(open(install).read())):
                b = os.path.join(tmp, f"install.do{i}.sql")
                with open(b, "w") as f:
                    f.write(block)
                findings += pgspot(a.pgspot, [b], True, f"{rel(install)} (DO block {i + 1})")
            findings += pgspot(a.pgspot, [inst, upgrade], False,
                               "sql_edition/dist/pg_dlock_sql-upgrade.sql (after the installer)")
            for i, block in enumerate(do_blocks(open(upgrade).read())):
                b = os.path.join(tmp, f"upgrade.do{i}.sql")
                with open(b, "w") as f:
                    f.write(block)
                findings += pgspot(a.pgspot, [b], True, f"sql_edition/dist/pg_dlock_sql-upgrade.sql (DO block {i + 1})")
            findings += pgspot(a.pgspot, [os.path.join(dist, "pg_dlock_sql-pg_tle.sql")], False,
                               "sql_edition/dist/pg_dlock_sql-pg_tle.sql")
    for f in findings:
        print(f)
    print(f"pgspot: {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
