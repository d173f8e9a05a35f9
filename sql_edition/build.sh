#!/usr/bin/env bash
# Generates the SQL edition's other installers from the extension scripts
# (sql_edition/pg_dlock_sql--*.sql), so that every way of installing runs the
# same SQL:
#   dist/pg_dlock_sql-install.sql   psql -f, without CREATE EXTENSION
#   dist/pg_dlock_sql-upgrade.sql   psql -f, updates a psql -f installation
#   dist/pg_dlock_sql-pg_tle.sql    registers the extension with pg_tle
#                                   (RDS, Aurora), then CREATE EXTENSION
# Usage: sql_edition/build.sh [SOURCE_DIR [OUT_DIR]]  (defaults: sql_edition, SOURCE_DIR/dist)
# tests/suites/16-sql-edition.sh checks that the committed dist/ is current.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here}
out=${2:-$src/dist}
mkdir -p "$out"
exec python3 "$here/build.py" "$src" "$out"
