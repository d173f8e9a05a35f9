EXTENSION = pg_dlock
EXTVERSION = $(shell grep default_version $(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")

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
$(OBJS): $(DLOCK_HEADERS)

# ---------------------------------------------------------------------------
# Driver targets: README commands. Each installs what it needs first.
# ---------------------------------------------------------------------------
.PHONY: deps client client-sanitize install-client install-sql-edition test demo bench faults soak ha

BUILD_DIR ?= build

deps:
	scripts/install-deps.sh all

client:
	cmake -S client -B $(BUILD_DIR)/client -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD_DIR)/client -j2

# The library, its tests and dlock under AddressSanitizer + UndefinedBehaviorSanitizer,
# and the keep-alive tests under ThreadSanitizer (tests/suites/31-client-sanitizers.sh).
client-sanitize:
	cmake -S client -B $(BUILD_DIR)/client-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_SANITIZE=address,undefined -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
	cmake --build $(BUILD_DIR)/client-asan -j2
	cmake -S client -B $(BUILD_DIR)/client-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_SANITIZE=thread -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_CLI=OFF >/dev/null
	cmake --build $(BUILD_DIR)/client-tsan -j2 --target keep_alive_test

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
	$(MAKE) all DLOCK_WERROR=1
	$(MAKE) install
	$(MAKE) client
	$(MAKE) client-sanitize
	tests/run-all.sh

demo:
	scripts/install-deps.sh core
	$(MAKE) all DLOCK_WERROR=1
	$(MAKE) install
	scripts/demo.sh

bench: deps
	$(MAKE) all DLOCK_WERROR=1
	$(MAKE) install
	$(MAKE) client
	bench/run.sh $(BENCH_ARGS)

faults: deps
	$(MAKE) all DLOCK_WERROR=1
	$(MAKE) install
	$(MAKE) client
	tests/faults/run.sh --profile full
	model/check.sh --profile full

soak: deps
	$(MAKE) all DLOCK_WERROR=1
	$(MAKE) install
	$(MAKE) client
	tests/faults/run.sh --profile soak

# Failover under Patroni (full profile); writes tests/ha/results/latest.md.
ha: deps
	$(MAKE) all
	$(MAKE) install
	$(MAKE) client
	tests/ha/run.sh --profile full
