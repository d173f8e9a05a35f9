#!/usr/bin/env bash
# The extension's layers (extension/README): no file includes a header of a
# higher layer, every file is in the table, and no file but the executor
# (sql_executor.c) uses SPI: no SPI_ function or variable, no executor/spi.h.
# The C++ library's edge: the dlock tool and the examples include only its
# public headers (client/include/dlock). Each check is also run on a copy with
# a planted violation, which it must catch. Needs no server.
set -uo pipefail
root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$root/tests/lib/check.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

layers() { python3 "$root/tests/lib/layers.py" "$1" >"$scratch/out" 2>&1; }
# the files of extension directory $1 other than the executor that use SPI
spi_users() { grep -l -E '\bSPI_[A-Za-z_]+|executor/spi\.h' "$1"/*.c "$1"/*.h | grep -v -E '/sql_executor\.[ch]$'; }

check "no file includes a header of a higher layer, and every file is in the table" layers "$root/extension"
cat "$scratch/out"
check "only sql_executor.c uses SPI" bash -c "$(declare -f spi_users); ! spi_users \"\$1\"" _ "$root/extension"
check "the dlock tool and the examples include only the library's public headers" \
	python3 "$root/tests/lib/public_headers.py" "$root/client" "$root/client/cli" "$root/examples"

# negative controls
cp -r "$root/extension" "$scratch/upward"
sed -i '0,/#include "dlock.h"/s//#include "dlock.h"\n#include "lease.h"/' "$scratch/upward/args.c"
check "control: args.c (base) including lease.h (operations) is caught" bash -c '! python3 "$1" "$2" >/dev/null' _ "$root/tests/lib/layers.py" "$scratch/upward"
cp -r "$root/extension" "$scratch/unlisted"
printf '#include "dlock.h"\n' >"$scratch/unlisted/newfile.c"
check "control: a file missing from the table is caught" bash -c '! python3 "$1" "$2" >/dev/null' _ "$root/tests/lib/layers.py" "$scratch/unlisted"
cp -r "$root/extension" "$scratch/sql"
printf 'static void f(void) { SPI_execute("SELECT 1", false, 0); }\n' >>"$scratch/sql/lease.c"
check "control: SQL run outside the executor is caught" bash -c "$(declare -f spi_users); spi_users \"\$1\" | grep -q lease.c" _ "$scratch/sql"
cp -r "$root/extension" "$scratch/connect"
printf 'static void f(void) { SPI_connect(); SPI_finish(); }\n' >>"$scratch/connect/admin.c"
check "control: an SPI connection opened outside the executor is caught" bash -c "$(declare -f spi_users); spi_users \"\$1\" | grep -q admin.c" _ "$scratch/connect"
cp -r "$root/extension" "$scratch/header"
sed -i '0,/#include "dlock.h"/s//#include "executor\/spi.h"\n#include "dlock.h"/' "$scratch/header/fence.c"
check "control: executor/spi.h included outside the executor is caught" bash -c "$(declare -f spi_users); spi_users \"\$1\" | grep -q fence.c" _ "$scratch/header"

mkdir "$scratch/client"
cp -r "$root/client/src" "$root/client/include" "$root/client/cli" "$scratch/client/"
printf '#include "../src/session.hpp"\n' >>"$scratch/client/cli/run.cpp"
check "control: dlock including client/src/session.hpp is caught" \
	bash -c '! python3 "$1" "$2" "$2/cli" >/dev/null' _ "$root/tests/lib/public_headers.py" "$scratch/client"

finish
