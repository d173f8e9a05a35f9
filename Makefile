EXTENSION = pg_dlock
EXTVERSION = $(shell grep default_version $(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")

MODULE_big = pg_dlock
OBJS = $(patsubst %.c,%.o,$(wildcard extension/*.c))
HEADERS = $(wildcard extension/*.h)
DATA = $(wildcard sql/$(EXTENSION)--*.sql)

TESTS = $(wildcard regress/sql/*.sql)
REGRESS = $(patsubst regress/sql/%.sql,%,$(TESTS))
REGRESS_OPTS = --inputdir=regress --load-extension=$(EXTENSION)
ISOLATION = $(patsubst regress/specs/%.spec,%,$(wildcard regress/specs/*.spec))
ISOLATION_OPTS = --inputdir=regress --load-extension=$(EXTENSION)

PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror

# Debian 12 ships PostgreSQL 15; pg_config from libpq-dev would not know PGXS.
PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/15/bin/pg_config) pg_config)
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# Without the server headers (a fresh machine) only the driver targets below work;
# they install the packages and then call make again.
# The test, bench and fault scripts run the server binaries of this PG_CONFIG.
export PG_BINDIR ?= $(shell $(PG_CONFIG) --bindir 2>/dev/null)
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
endif

# PGXS does not track header dependencies by default.
$(OBJS): $(HEADERS)

# ---------------------------------------------------------------------------
# Driver targets: README commands. Each installs what it needs first.
# ---------------------------------------------------------------------------
.PHONY: deps client install-client test demo bench faults soak

BUILD_DIR ?= build

deps:
	scripts/install-deps.sh all

client:
	cmake -S client -B $(BUILD_DIR)/client -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD_DIR)/client -j2

# Headers, libdlock, the CMake package, dlock.pc and the dlock command line.
install-client: client
	cmake --install $(BUILD_DIR)/client

test: deps
	$(MAKE) all
	$(MAKE) install
	$(MAKE) client
	tests/run-all.sh

demo:
	scripts/install-deps.sh core
	$(MAKE) all
	$(MAKE) install
	scripts/demo.sh

bench: deps
	$(MAKE) all
	$(MAKE) install
	$(MAKE) client
	bench/run.sh $(BENCH_ARGS)

faults: deps
	$(MAKE) all
	$(MAKE) install
	$(MAKE) client
	tests/faults/run.sh --profile full
	model/check.sh --profile full

soak: deps
	$(MAKE) all
	$(MAKE) install
	$(MAKE) client
	tests/faults/run.sh --profile soak
