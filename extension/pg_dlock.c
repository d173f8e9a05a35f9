/*-------------------------------------------------------------------------
 *
 * pg_dlock.c
 *	  Module entry point: settings and shared memory set-up.
 *
 * pg_dlock works without shared_preload_libraries. Preloading adds the
 * shared memory that holds server-wide counters (stats.c) and the condition
 * variables that wake waiters in dlock.acquire when a lease is released
 * (wait.c). Without it, counters are not kept and waiters poll.
 *
 * IDENTIFICATION
 *	  extension/pg_dlock.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "pg_dlock.h"

PG_MODULE_MAGIC;

#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

int			dlock_max_ttl_seconds = 86400;
int			dlock_audit_level = DLOCK_AUDIT_FORCE;
bool		dlock_test_ignore_timeline = false;

/* True once this backend has attached to pg_dlock's shared memory */
bool		dlock_shmem_ready = false;

static const struct config_enum_entry audit_level_options[] = {
	{"none", DLOCK_AUDIT_NONE, false},
	{"force", DLOCK_AUDIT_FORCE, false},
	{"all", DLOCK_AUDIT_ALL, false},
	{NULL, 0, false}
};

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

/*
 * Reserve the shared memory that stats.c and wait.c lay out.
 */
static void
dlock_shmem_request(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(add_size(add_size(dlock_stats_shmem_size(),
											 dlock_wait_shmem_size()),
									dlock_policy_shmem_size()));
}

/*
 * Create or attach to the shared structures, once per process.
 */
static void
dlock_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	dlock_stats_shmem_init();
	dlock_wait_shmem_init();
	dlock_policy_shmem_init();
	LWLockRelease(AddinShmemInitLock);
	dlock_shmem_ready = true;
}

/*
 * Module load: define settings; when preloaded, hook shared memory.
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("dlock.max_ttl",
							gettext_noop("Longest lease that acquire and renew accept."),
							gettext_noop("A longer ttl is refused with invalid_parameter_value."),
							&dlock_max_ttl_seconds,
							86400, 1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("dlock.audit",
							 gettext_noop("Which lease events are written to dlock.audit_log."),
							 gettext_noop("none: nothing; force: force releases; all: also every acquisition, takeover, release and refused renewal."),
							 &dlock_audit_level,
							 DLOCK_AUDIT_FORCE,
							 audit_level_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * A fault injection for the negative controls of the recovery suite and
	 * the fault harness: they must show that the failover checks catch
	 * repeated tokens with the very library that ships, so this is a setting
	 * rather than a compile-time switch. It is hidden from SHOW ALL,
	 * pg_settings and the sample file, and only a superuser can set it.
	 */
	DefineCustomBoolVariable("dlock.test_ignore_timeline",
							 gettext_noop("Leaves the timeline ID out of new fencing tokens (tests only)."),
							 gettext_noop("Turning this on breaks the token guarantee across failover; it exists so the tests can prove that they detect that."),
							 &dlock_test_ignore_timeline,
							 false,
							 PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	dlock_holds_init();
	dlock_policy_init();

	dlock_events_init();
	dlock_expiry_worker_init();

	MarkGUCPrefixReserved("dlock");

	dlock_durability_init();
	dlock_wait_init();

	if (!process_shared_preload_libraries_in_progress)
		return;

#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dlock_shmem_request;
#else
	dlock_shmem_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dlock_shmem_startup;
}
