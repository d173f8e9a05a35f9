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

#include "dlock.h"
#include "stats.h"
#include "durability.h"
#include "token_epoch.h"
#include "wait.h"
#include "events.h"
#include "lease_policy.h"
#include "holds.h"
#include "lease.h"
#include "expiry_worker.h"

PG_MODULE_MAGIC;

int			dlock_max_ttl_seconds = 86400;
int			dlock_audit_level = DLOCK_AUDIT_FORCE;
bool		dlock_test_ignore_timeline = false;
bool		dlock_test_handoff_past_size = false;
bool		dlock_test_ignore_epoch = false;
int			dlock_test_epoch_entries = 0;
int			dlock_durability = DLOCK_DURABILITY_DURABLE;

/* True once this backend has attached to pg_dlock's shared memory */
static bool dlock_shmem_ready = false;

static const struct config_enum_entry audit_level_options[] = {
	{"none", DLOCK_AUDIT_NONE, false},
	{"force", DLOCK_AUDIT_FORCE, false},
	{"all", DLOCK_AUDIT_ALL, false},
	{NULL, 0, false}
};

static const struct config_enum_entry durability_options[] = {
	{"durable", DLOCK_DURABILITY_DURABLE, false},
	{"fenced", DLOCK_DURABILITY_FENCED, false},
	{NULL, 0, false}
};

static dlock_shmem_request_fn prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

/*
 * The one transaction-end callback: each part's work at the end of a
 * transaction, in the order written here (extension/README, "Commit
 * time"), not in the order of registration.
 *  1. the wait queue settles the wake-ups of the transaction's releases and
 *     grants (at commit or abort; nothing before), and sends them once the
 *     transaction's locks are released (dlock_wait_resource_release);
 *  2. at pre-commit, releases hand their leases to the next waiters: each
 *     handoff is a grant, with its lease event, and needs a durable commit;
 *  3. durability chooses the commit's synchronous_commit, so it must follow
 *     the handoffs; the token epoch the transaction recorded is published
 *     once the commit is durable;
 *  4. the events of the transaction, the handoffs' included, are reserved
 *     their place in the event queue at pre-commit and handed over at
 *     commit; the earliest lease granted is then posted to the expiry
 *     worker, whose scan can see it only once committed;
 *  5. the pins taken by holds() stop being timed.
 */
static void
dlock_xact_end(XactEvent event, void *arg)
{
	TimestampTz granted_until;

	dlock_wait_xact_end(event);
	if (event == XACT_EVENT_PRE_COMMIT)
	{
		int			cursor = 0;
		text	   *released;

		while ((released = dlock_wait_next_handoff(&cursor)) != NULL)
			dlock_hand_off(released);
	}
	dlock_durability_xact_end(event);
	dlock_epoch_xact_end(event);
	granted_until = dlock_events_xact_end(event);
	if (granted_until != 0)
		dlock_expiry_worker_schedule(granted_until);
	dlock_holds_xact_end(event);
}

/*
 * The one subtransaction-end callback: a subtransaction's wake-ups and
 * events move to its parent when it commits, and are undone when it rolls
 * back.
 */
static void
dlock_subxact_end(SubXactEvent event, SubTransactionId subxid,
				  SubTransactionId parent_subxid, void *arg)
{
	dlock_wait_subxact_end(event);
	dlock_events_subxact_end(event);
	dlock_epoch_subxact_end(event, subxid);
}

/*
 * Reserve the shared memory that stats.c and wait.c lay out.
 */
static void
dlock_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(add_size(dlock_stats_shmem_size(),
													  dlock_wait_shmem_size()),
											 dlock_policy_shmem_size()),
									dlock_epoch_shmem_size()));
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
	dlock_epoch_shmem_init();
	LWLockRelease(AddinShmemInitLock);
	dlock_shmem_ready = true;
	dlock_fenced_available = true;
}

/*
 * dlock.durability = fenced relies on the token epoch of the server life,
 * which only shared memory knows. Without preloading, a SET in the session
 * is refused. A stored setting is kept, as the server may preload pg_dlock
 * after its next restart: ALTER ROLE or DATABASE ... SET warns when it
 * knows (the library is loaded in that session; otherwise PostgreSQL cannot
 * ask), and grants under it commit durably with a warning
 * (dlock_grants_fenced), so SHOW and the commits never disagree silently.
 */
static bool
check_durability(int *newval, void **extra, GucSource source)
{
	if (*newval == DLOCK_DURABILITY_FENCED && !dlock_shmem_ready &&
		!process_shared_preload_libraries_in_progress)
	{
		if (source == PGC_S_TEST)
		{
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("dlock.durability = fenced needs pg_dlock in shared_preload_libraries"),
					 errdetail("Until the server preloads it, leases under this setting commit durably, with a warning.")));
			return true;
		}
		if (source < PGC_S_INTERACTIVE)
			return true;
		GUC_check_errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
		GUC_check_errmsg("dlock.durability = fenced needs pg_dlock in shared_preload_libraries");
		return false;
	}
	return true;
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

	/* the negative control of 28-kinds-handoff, as dlock.test_ignore_timeline */
	DefineCustomBoolVariable("dlock.test_handoff_past_size",
							 gettext_noop("Lets a release hand one permit more than the semaphore's size (tests only)."),
							 gettext_noop("Turning this on breaks the bound on live permits; it exists so the tests can prove that they detect that."),
							 &dlock_test_handoff_past_size,
							 false,
							 PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("dlock.durability",
							 gettext_noop("Whether a grant waits for the WAL flush before it returns."),
							 gettext_noop("durable: a grant survives any crash; fenced: a crash may lose a grant, its token is never issued again, and fencing keeps a lost grant's holder out."),
							 &dlock_durability,
							 DLOCK_DURABILITY_DURABLE,
							 durability_options,
							 PGC_USERSET,
							 0,
							 check_durability, NULL, NULL);

	/* the negative control of the crash tests, as dlock.test_ignore_timeline */
	DefineCustomBoolVariable("dlock.test_ignore_epoch",
							 gettext_noop("Never moves the token epoch (tests only)."),
							 gettext_noop("Turning this on lets a crash that lost a fenced grant issue its token again; it exists so the tests can prove that they detect that."),
							 &dlock_test_ignore_epoch,
							 false,
							 PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	/*
	 * Tests only: how many of the shared entries that remember each
	 * database's token epoch are used (0: all), so that a test can fill
	 * them with a few databases. Fixed at server start, so only defined
	 * when preloading (shared memory has the entries only then).
	 */
if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("dlock.test_epoch_entries",
								gettext_noop("Uses only this many of the token epoch entries of shared memory (tests only)."),
								gettext_noop("0 uses all of them."),
								&dlock_test_epoch_entries,
								0, 0, INT_MAX,
								PGC_POSTMASTER,
								GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
								NULL, NULL, NULL);

	dlock_holds_init();
	dlock_policy_init();

	dlock_events_init();
	dlock_expiry_worker_init();

	MarkGUCPrefixReserved("dlock");

	RegisterXactCallback(dlock_xact_end, NULL);
	RegisterSubXactCallback(dlock_subxact_end, NULL);
	RegisterResourceReleaseCallback(dlock_wait_resource_release, NULL);

	if (!process_shared_preload_libraries_in_progress)
		return;

	dlock_request_shmem(&prev_shmem_request_hook, dlock_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dlock_shmem_startup;
}
