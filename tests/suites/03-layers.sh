#!/usr/bin/env bash
# The extension's layers (extension/README): no file includes a header of a
# higher layer, every file is in the table, and no file but the executor
# runs SQL. The C++ library's edge: the dlock tool and the examples include
# only its public headers (client/include/dlock). Each check is also run on a
# copy with a planted violation, which it must catch. Needs no server.
set -uo pipefail
root=${DLOCK_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$root/tests/lib/check.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

layers() { python3 "$root/tests/lib/layers.py" "$1" >"$scratch/out" 2>&1; }

check "no file includes a header of a higher layer, and every file is in the table" layers "$root/extension"
cat "$scratch/out"
check "only spi_plans.c runs SQL" bash -c '! grep -l -E "SPI_(execute|prepare|exec|cursor_open)" "$1"/*.c | grep -v "/spi_plans\.c$"' _ "$root/extension"
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
check "control: SQL run outside the executor is caught" bash -c 'grep -l -E "SPI_(execute|prepare|exec|cursor_open)" "$1"/*.c | grep -q -v "/spi_plans\.c$"' _ "$scratch/sql"

mkdir "$scratch/client"
cp -r "$root/client/src" "$root/client/include" "$root/client/cli" "$scratch/client/"
printf '#include "../src/session.hpp"\n' >>"$scratch/client/cli/run.cpp"
check "control: dlock including client/src/session.hpp is caught" \
	bash -c '! python3 "$1" "$2" "$2/cli" >/dev/null' _ "$root/tests/lib/public_headers.py" "$scratch/client"

finish
