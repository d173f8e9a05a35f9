EXTENSION = pg_dlock
# The version is default_version in pg_dlock.control (1.6 = META.json 1.6.0 = the
# C++ library and dlock); tests/suites/05-docs.sh checks that they agree.

MODULE_big = pg_dlock
OBJS = $(patsubst %.c,%.o,$(wildcard extension/*.c))
# Internal to the extension: not installed (no HEADERS), only a build dependency.
DLOCK_HEADERS = $(wildcard extension/*.h)
DATA = $(wildcard sql/$(EXTENSION)--*.sql)

TESTS = $(wildcard regress/sql/*.sql)
REGRESS = $(patsubst regress/sql/%.sql,%,$(TESTS))
REGRESS_OPTS = --inputdir=regress --load-extension=$(EXTENSION)
ISOLATION = $(patsubst regress/specs/%.spec,%,$(wildcard regress/specs/*.spec))
ISOLATION_OPTS = --inputdir=regress --load-extension=$(EXTENSION)

PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
# The project's own builds (the driver targets below, CI) treat warnings as
# errors; a user building with PGXS on a newer compiler gets warnings only.
ifdef DLOCK_WERROR
PG_CFLAGS += -Werror
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# The test, bench and fault scripts run the server binaries of this PG_CONFIG.
export PG_BINDIR ?= $(shell $(PG_CONFIG) --bindir 2>/dev/null)

# The driver targets below install the packages first and then call make again,
# so they work without the server headers (a fresh machine). Every other target
# needs a pg_config that knows PGXS: say so instead of failing obscurely.
DRIVER_TARGETS = deps client client-sanitize install-client test demo bench faults soak ha
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else ifneq ($(filter-out $(DRIVER_TARGETS),$(or $(MAKECMDGOALS),all)),)
$(error pg_config "$(PG_CONFIG)" was not found or does not know PGXS. Install the server development files (Debian: apt-get install postgresql-server-dev-15) or name one: make PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config)
endif

# The driver targets build with the PG_CONFIG the user named, else with Debian
# 12's PostgreSQL 15 that scripts/install-deps.sh installs, else pg_config on
# the PATH. The shell looks it up when the line runs, after the packages are
# there (make expands a recipe's lines before it runs the first).
ifeq ($(origin PG_CONFIG),file)
DRIVER_PG_CONFIG = $$(command -v /usr/lib/postgresql/15/bin/pg_config || echo $(PG_CONFIG))
else
DRIVER_PG_CONFIG = $(PG_CONFIG)
endif
DRIVER_MAKE = $(MAKE) PG_CONFIG=$(DRIVER_PG_CONFIG)

# PGXS does not track header dependencies by default.
$(OBJS): $(DLOCK_HEADERS)

# ---------------------------------------------------------------------------
# Driver targets: the commands of the README's development section. Each installs what it needs first.
# ---------------------------------------------------------------------------
.PHONY: deps client client-sanitize install-client install-sql-edition test demo bench faults soak ha

BUILD_DIR ?= build

deps:
	scripts/install-deps.sh all

client:
	cmake -S client -B $(BUILD_DIR)/client -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD_DIR)/client -j2

# The library, its tests and dlock under AddressSanitizer + UndefinedBehaviorSanitizer,
# and the keep-alive and listener tests under ThreadSanitizer (tests/suites/31-client-sanitizers.sh).
client-sanitize:
	cmake -S client -B $(BUILD_DIR)/client-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_SANITIZE=address,undefined -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
	cmake --build $(BUILD_DIR)/client-asan -j2
	cmake -S client -B $(BUILD_DIR)/client-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_SANITIZE=thread -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_CLI=OFF >/dev/null
	cmake --build $(BUILD_DIR)/client-tsan -j2 --target keep_alive_test listener_test

# Headers, libdlock, the CMake package, dlock.pc and the dlock command line,
# under CMake's prefix (/usr/local) or CLIENT_PREFIX. The installed dlock finds
# libdlock by its run path; ldconfig makes the new library known to other
# programs when installing into the system as root.
install-client: client
	cmake --install $(BUILD_DIR)/client $(if $(CLIENT_PREFIX),--prefix $(CLIENT_PREFIX))
	if [ -z "$(CLIENT_PREFIX)$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ]; then ldconfig; fi

# The SQL edition (docs/sql-edition.md): its control file and scripts only.
install-sql-edition:
	install -d $(DESTDIR)$(shell $(PG_CONFIG) --sharedir)/extension
	install -m 644 sql_edition/pg_dlock_sql.control $(wildcard sql_edition/pg_dlock_sql--*.sql) \
		$(DESTDIR)$(shell $(PG_CONFIG) --sharedir)/extension/

test: deps
	$(DRIVER_MAKE) all DLOCK_WERROR=1
	$(DRIVER_MAKE) install
	$(MAKE) client
	$(MAKE) client-sanitize
	tests/run-all.sh

demo:
	scripts/install-deps.sh core
	$(DRIVER_MAKE) all DLOCK_WERROR=1
	$(DRIVER_MAKE) install
	scripts/demo.sh

bench: deps
	$(DRIVER_MAKE) all DLOCK_WERROR=1
	$(DRIVER_MAKE) install
	$(MAKE) client
	bench/run.sh $(BENCH_ARGS)

faults: deps
	$(DRIVER_MAKE) all DLOCK_WERROR=1
	$(DRIVER_MAKE) install
	$(MAKE) client
	tests/faults/run.sh --profile full
	tests/faults/run.sh --profile full --set network
	tests/faults/farm_cut.py
	model/check.sh --profile full

soak: deps
	$(DRIVER_MAKE) all DLOCK_WERROR=1
	$(DRIVER_MAKE) install
	$(MAKE) client
	tests/faults/run.sh --profile soak
	TOKEN_TORTURE_PROFILE=long tests/run-all.sh 24-token-torture

# Failover under Patroni (full profile); writes tests/ha/results/latest.md, and
# latest-network.md for the primary cut off from etcd on hosts made of network namespaces.
ha: deps
	$(DRIVER_MAKE) all
	$(DRIVER_MAKE) install
	$(MAKE) client
	tests/ha/run.sh --profile full
	tests/ha/run.sh --profile full --network
