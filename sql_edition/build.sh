#!/usr/bin/env bash
# Copies the C extension's view definitions (sql/pg_dlock--*.sql) into the
# regions of the SQL edition's scripts marked "-- BEGIN view dlock.NAME as in
# pg_dlock VERSION" (see build.py), then generates the SQL edition's other
# installers from those scripts (sql_edition/pg_dlock_sql--*.sql), so that
# every way of installing runs the same SQL:
#   dist/pg_dlock_sql-install.sql   psql -f, without CREATE EXTENSION
#   dist/pg_dlock_sql-upgrade.sql   psql -f, updates a psql -f installation
#   dist/pg_dlock_sql-pg_tle.sql    registers the extension with pg_tle
#                                   (RDS, Aurora), then CREATE EXTENSION
# Usage: sql_edition/build.sh [SOURCE_DIR [OUT_DIR [C_SQL_DIR]]]
#   (defaults: sql_edition, SOURCE_DIR/dist, sql; SOURCE_DIR's scripts are updated in place)
# tests/suites/16-sql-edition.sh checks that the committed scripts and dist/ are current.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here}
out=${2:-$src/dist}
c_sql=${3:-$here/../sql}
mkdir -p "$out"
exec python3 "$here/build.py" "$src" "$out" "$c_sql"
