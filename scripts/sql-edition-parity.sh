#!/usr/bin/env bash
# Parity of the SQL edition with the C extension: every function the C
# extension's install scripts leave in schema dlock (created and not dropped
# again in sql/pg_dlock--*.sql) must be defined by the SQL edition
# (sql_edition/pg_dlock_sql--*.sql) or listed, with what it does instead, in
# sql_edition/missing-functions.txt. Prints what is neither and exits 1.
# Usage: scripts/sql-edition-parity.sh [C_SQL_DIR [SQL_EDITION_DIR]]
# Run by tests/suites/16-sql-edition.sh; the live comparison of signatures,
# return types and privileges is there too.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
c_dir=${1:-$root/sql}
sql_dir=${2:-$root/sql_edition}
python3 - "$c_dir" "$sql_dir" <<'PY'
import glob, os, re, sys
c_dir, sql_dir = sys.argv[1:]
def functions(paths):
    count = {}
    for path in paths:
        text = re.sub(r"--[^\n]*", "", open(path).read())
        for m in re.finditer(r"\b(CREATE(?:\s+OR\s+REPLACE)?\s+FUNCTION|DROP\s+FUNCTION(?:\s+IF\s+EXISTS)?)\s+dlock\.([a-z_0-9]+)", text, re.I):
            name = m.group(2)
            if m.group(1).upper().startswith("CREATE"):
                if not m.group(1).upper().count("REPLACE") or name not in count:
                    count[name] = count.get(name, 0) + 1
            else:
                count[name] = count.get(name, 0) - 1
    return {n for n, k in count.items() if k > 0}
c = functions(sorted(glob.glob(os.path.join(c_dir, "pg_dlock--*.sql"))))
sql = functions(sorted(glob.glob(os.path.join(sql_dir, "pg_dlock_sql--*.sql"))))
listed = set()
path = os.path.join(sql_dir, "missing-functions.txt")
if os.path.exists(path):
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            listed.add(line.split()[0])
missing = sorted(c - sql - listed)
stale = sorted(listed & sql)
for n in missing:
    print(f"dlock.{n}: in the C extension, not in the SQL edition and not in missing-functions.txt")
for n in stale:
    print(f"dlock.{n}: listed as missing but the SQL edition defines it")
print(f"C extension functions: {len(c)}; SQL edition defines {len(c & sql)}; listed as missing {len(c & listed)}")
sys.exit(1 if missing or stale else 0)
PY
