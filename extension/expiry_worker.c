/*-------------------------------------------------------------------------
 *
 * expiry_worker.c
 *	  The expiry worker: reports leases that ran out without release as
 *	  "expire" events, wakes their waiters, and runs dlock.reap and
 *	  dlock.purge_audit_log on a schedule.
 *
 * An expiry writes nothing by itself, so without this worker nobody would
 * hear of it. Two processes do the work, so that nothing stays connected to
 * a database (which would block DROP DATABASE) or holds a transaction open
 * while it sleeps:
 *
 *	- the launcher, a static background worker registered when pg_dlock is
 *	  in shared_preload_libraries, connected to no database. It sleeps until
 *	  the next lease_until it knows of (transactions that grant a lease post
 *	  theirs when they commit, see dlock_expiry_worker_schedule), at most
 *	  dlock.worker_naptime, then starts
 *	- a run, a dynamic background worker connected to dlock.worker_database.
 *	  In one short transaction it reports every expired lease not reported
 *	  yet, records it in dlock.expiry_reported (so that each expiry is
 *	  reported once, across restarts), wakes waiters, finds the next
 *	  lease_until, and exits. In further transactions it runs the
 *	  maintenance when due.
 *
 * A run finds nothing to do, and says nothing, when the database does not
 * exist or has no pg_dlock 1.1; the launcher tries again after
 * dlock.worker_naptime. The launcher restarts after a crash like any
 * background worker, and starts only once recovery has finished (a standby
 * grants no leases).
 *
 * IDENTIFICATION
 *	  extension/expiry_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "schema.h"
#include "sql_executor.h"
#include "events.h"
#include "report.h"
#include "expiry_worker.h"

PGDLLEXPORT void dlock_expiry_launcher_main(Datum main_arg);
PGDLLEXPORT void dlock_expiry_run_main(Datum main_arg);

/* Expired leases reported per transaction; a full batch runs again at once */
#define EXPIRY_BATCH 1000

/* A run that skipped a locked expired lease tries it again this much later */
#define EXPIRY_RETRY_USECS (1000 * 1000)

/* bgw_main_arg of a run: what to do besides reporting expiries */
#define RUN_MAINTENANCE 0x1

/* "no lease known": the launcher sleeps dlock.worker_naptime */
#define NO_EXPIRY PG_INT64_MAX

typedef struct ExpiryWorkerShared
{
	pg_atomic_uint64 next_expiry;	/* earliest lease_until to report */
	slock_t		mutex;			/* protects the fields below */
	Oid			database;		/* database of the last run */
	Latch	   *launcher_latch; /* NULL while no launcher runs */
} ExpiryWorkerShared;

static ExpiryWorkerShared *expiry_shared = NULL;

static char *worker_database = NULL;
static int	worker_naptime_secs = 60;
static int	maintenance_interval_secs = 0;
static int	reap_idle_for_secs = 86400;
static int	audit_retention_secs = 0;

static dlock_shmem_request_fn prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * Lower the shared next_expiry to "when" if it is later; true if lowered.
 */
static bool
lower_next_expiry(TimestampTz when)
{
	uint64		current = pg_atomic_read_u64(&expiry_shared->next_expiry);

	while ((int64) current > when)
	{
		if (pg_atomic_compare_exchange_u64(&expiry_shared->next_expiry,
										   &current, (uint64) when))
			return true;
	}
	return false;
}

/*
 * A transaction of this backend committed a lease that runs until
 * lease_until: wake the launcher if it planned to sleep longer. Only leases
 * in the worker's database matter.
 */
void
dlock_expiry_worker_schedule(TimestampTz lease_until)
{
	Latch	   *latch;
	Oid			database;

	if (expiry_shared == NULL)
		return;
	SpinLockAcquire(&expiry_shared->mutex);
	database = expiry_shared->database;
	latch = expiry_shared->launcher_latch;
	SpinLockRelease(&expiry_shared->mutex);
	if (database != MyDatabaseId || latch == NULL)
		return;
	if (lower_next_expiry(lease_until))
		SetLatch(latch);
}

/*
 * Expired exclusive leases not reported yet, at most $1, recorded as
 * reported; leases whose row another transaction has locked (an acquire
 * taking them over) are skipped: that transaction reports a takeover, or
 * the next run the expiry. expiry_reported exists from 1.1 on.
 */
static DlockStatement expiry_report_stmt = {
	.sql =
	"WITH expired AS ("
	"  SELECT l.lock_name, l.fencing_seq, l.holder, l.lease_until, l.acquired_at"
	"    FROM dlock.distributed_lock l"
	"    LEFT JOIN dlock.expiry_reported r ON r.lock_name = l.lock_name"
	"   WHERE l.owner_token IS NOT NULL"
	"     AND l.lease_until <= pg_catalog.clock_timestamp()"
	"     AND r.fencing_token IS DISTINCT FROM l.fencing_seq"
	"   ORDER BY l.lease_until LIMIT $1"
	"   FOR SHARE OF l SKIP LOCKED"
	"), recorded AS ("
	"  INSERT INTO dlock.expiry_reported AS r (lock_name, fencing_token)"
	"  SELECT e.lock_name, e.fencing_seq FROM expired e"
	"  ON CONFLICT (lock_name) DO UPDATE SET fencing_token = EXCLUDED.fencing_token"
	") SELECT e.lock_name, e.fencing_seq, e.holder, e.lease_until, e.acquired_at"
	"    FROM expired e ORDER BY e.lease_until",
	.nargs = 1,
	.argtypes = {INT4OID},
};

/*
 * The same on holder slots (1.4 on): expired shared leases and permits,
 * with the slot's kind as a sixth column.
 */
static DlockStatement holder_expiry_report_stmt = {
	.sql =
	"WITH expired AS ("
	"  SELECT h.lock_name, h.slot, h.fencing_seq, h.holder, h.lease_until,"
	"         h.acquired_at, h.kind"
	"    FROM dlock.lock_holder h"
	"    LEFT JOIN dlock.holder_expiry_reported r"
	"      ON r.lock_name = h.lock_name AND r.slot = h.slot"
	"   WHERE h.owner_token IS NOT NULL"
	"     AND h.lease_until <= pg_catalog.clock_timestamp()"
	"     AND r.fencing_token IS DISTINCT FROM h.fencing_seq"
	"   ORDER BY h.lease_until LIMIT $1"
	"   FOR SHARE OF h SKIP LOCKED"
	"), recorded AS ("
	"  INSERT INTO dlock.holder_expiry_reported AS r (lock_name, slot, fencing_token)"
	"  SELECT e.lock_name, e.slot, e.fencing_seq FROM expired e"
	"  ON CONFLICT (lock_name, slot) DO UPDATE SET fencing_token = EXCLUDED.fencing_token"
	") SELECT e.lock_name, e.fencing_seq, e.holder, e.lease_until, e.acquired_at, e.kind"
	"    FROM expired e ORDER BY e.lease_until",
	.nargs = 1,
	.argtypes = {INT4OID},
};

/* The columns of both */
#define EXPIRED_COL_LOCK_NAME 1
#define EXPIRED_COL_TOKEN 2
#define EXPIRED_COL_HOLDER 3
#define EXPIRED_COL_LEASE_UNTIL 4
#define EXPIRED_COL_ACQUIRED_AT 5
#define EXPIRED_COL_KIND 6		/* holder slots only */

/* reported expiries whose lease has been taken or released since */
static DlockStatement expiry_forget_stmt = {
	.sql =
	"DELETE FROM dlock.expiry_reported r WHERE NOT EXISTS"
	" (SELECT 1 FROM dlock.distributed_lock l"
	"   WHERE l.lock_name = r.lock_name"
	"     AND l.fencing_seq = r.fencing_token"
	"     AND l.owner_token IS NOT NULL)",
};

/* reported expiries whose slot has been granted or released since */
static DlockStatement holder_expiry_forget_stmt = {
	.sql =
	"DELETE FROM dlock.holder_expiry_reported r WHERE NOT EXISTS"
	" (SELECT 1 FROM dlock.lock_holder h"
	"   WHERE h.lock_name = r.lock_name AND h.slot = r.slot"
	"     AND h.fencing_seq = r.fencing_token"
	"     AND h.owner_token IS NOT NULL)",
};

/*
 * Report up to EXPIRY_BATCH expired leases not reported yet, by statement
 * stmt: exclusive leases (expiry_report_stmt) or, with slots, shared
 * leases and permits (holder_expiry_report_stmt); true when the batch was
 * full.
 */
static bool
report_expiries(DlockStatement *stmt, bool slots)
{
	Datum		values[1] = {Int32GetDatum(EXPIRY_BATCH)};
	uint64		n;

	n = dlock_execute(stmt, values, NULL, 0);

	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		text	   *lock_name = DatumGetTextPP(dlock_sql_value(i, EXPIRED_COL_LOCK_NAME, &isnull));
		TimestampTz lease_until = DatumGetTimestampTz(dlock_sql_value(i, EXPIRED_COL_LEASE_UNTIL, &isnull));
		DlockEndedLease lease = dlock_result_ended_lease(i, EXPIRED_COL_TOKEN, EXPIRED_COL_HOLDER,
														 EXPIRED_COL_ACQUIRED_AT,
														 slots ? EXPIRED_COL_KIND : 0);

		dlock_report_expiry(lock_name, &lease, lease_until);
	}
	return n == EXPIRY_BATCH;
}

/* the earliest lease_until still to report, of a lease and of a slot */
static DlockStatement expiry_next_stmt = {
	.sql =
	"SELECT pg_catalog.min(l.lease_until)"
	"  FROM dlock.distributed_lock l"
	"  LEFT JOIN dlock.expiry_reported r ON r.lock_name = l.lock_name"
	" WHERE l.owner_token IS NOT NULL"
	"   AND r.fencing_token IS DISTINCT FROM l.fencing_seq",
};

static DlockStatement holder_expiry_next_stmt = {
	.sql =
	"SELECT pg_catalog.min(h.lease_until)"
	"  FROM dlock.lock_holder h"
	"  LEFT JOIN dlock.holder_expiry_reported r"
	"    ON r.lock_name = h.lock_name AND r.slot = h.slot"
	" WHERE h.owner_token IS NOT NULL"
	"   AND r.fencing_token IS DISTINCT FROM h.fencing_seq",
};
#define EXPIRY_NEXT_COL_UNTIL 1

/*
 * The earliest lease_until still to report, NO_EXPIRY if none; one that
 * has passed already (skipped because locked) is retried a little later.
 */
static TimestampTz
next_expiry_to_report(bool holders)
{
	TimestampTz earliest = NO_EXPIRY;
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < (holders ? 2 : 1); i++)
	{
		bool		isnull;
		Datum		until;

		(void) dlock_execute(i == 0 ? &expiry_next_stmt : &holder_expiry_next_stmt,
							 NULL, NULL, 0);
		until = dlock_sql_value(0, EXPIRY_NEXT_COL_UNTIL, &isnull);
		if (!isnull)
			earliest = Min(earliest, DatumGetTimestampTz(until));
	}
	if (earliest == NO_EXPIRY)
		return NO_EXPIRY;
	if (earliest <= now)
		return now + EXPIRY_RETRY_USECS;
	return earliest;
}

/*
 * True when this database has pg_dlock with the expiry_reported table
 * (version 1.1 or later). Caller is in a run's transaction.
 */
static bool
extension_ready(void)
{
	if (!OidIsValid(get_extension_oid("pg_dlock", true)))
		return false;
	return OidIsValid(get_relname_relid("expiry_reported", dlock_require_own_schema()));
}

/*
 * True when the expiries of shared leases and permits are recorded too
 * (version 1.4 or later). Caller checked extension_ready.
 */
static bool
holder_expiries_ready(void)
{
	return OidIsValid(get_relname_relid("holder_expiry_reported", dlock_require_own_schema()));
}

static void
begin_run_transaction(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	dlock_sql_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

static void
end_run_transaction(void)
{
	dlock_sql_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* the maintenance, through the SQL functions */
static DlockStatement worker_reap_stmt = {
	.sql = "SELECT dlock.reap($1)",
	.nargs = 1,
	.argtypes = {INTERVALOID},
};
#define WORKER_REAP_COL_REAPED 1

static DlockStatement worker_purge_audit_stmt = {
	.sql = "SELECT dlock.purge_audit_log($1)",
	.nargs = 1,
	.argtypes = {INTERVALOID},
};

/*
 * dlock.reap until it finds nothing more, and dlock.purge_audit_log, each
 * call in its own transaction.
 */
static void
run_maintenance(void)
{
	Datum		values[1];

	values[0] = PointerGetDatum(palloc0(sizeof(Interval)));
	((Interval *) DatumGetPointer(values[0]))->time = (int64) reap_idle_for_secs * USECS_PER_SEC;
	for (int round = 0; round < 100; round++)
	{
		bool		isnull;
		int64		reaped;

		begin_run_transaction("pg_dlock expiry worker: dlock.reap");
		(void) dlock_execute(&worker_reap_stmt, values, NULL, 0);
		reaped = DatumGetInt64(dlock_sql_value(0, WORKER_REAP_COL_REAPED, &isnull));
		end_run_transaction();
		if (reaped == 0)
			break;
	}

	if (audit_retention_secs > 0)
	{
		((Interval *) DatumGetPointer(values[0]))->time = (int64) audit_retention_secs * USECS_PER_SEC;
		begin_run_transaction("pg_dlock expiry worker: dlock.purge_audit_log");
		(void) dlock_execute(&worker_purge_audit_stmt, values, NULL, 0);
		end_run_transaction();
	}
}

/*
 * Entry point of a run (a dynamic background worker): the database OID is
 * in bgw_extra, what to do in main_arg.
 */
void
dlock_expiry_run_main(Datum main_arg)
{
	Oid			database;
	bool		ready;
	bool		more = true;

	memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);

	/* never wait long for a row or table another session holds */
	SetConfigOption("lock_timeout", "5s", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * The database's owner chooses its settings, and this process is the
	 * bootstrap superuser: nothing it runs may resolve a name through them.
	 * Every statement also pins this path itself (dlock_execute).
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	SpinLockAcquire(&expiry_shared->mutex);
	expiry_shared->database = MyDatabaseId;
	SpinLockRelease(&expiry_shared->mutex);

	while (more)
	{
		TimestampTz next = NO_EXPIRY;

		begin_run_transaction("pg_dlock expiry worker: expiries");
		ready = extension_ready();
		more = false;
		/*
		 * Recorded even while dlock.events is off, so that turning it on
		 * later does not report long-past expiries.
		 */
		if (ready)
		{
			bool		holders = holder_expiries_ready();

			more = report_expiries(&expiry_report_stmt, false);
			(void) dlock_execute(&expiry_forget_stmt, NULL, NULL, 0);
			if (holders)
			{
				more |= report_expiries(&holder_expiry_report_stmt, true);
				(void) dlock_execute(&holder_expiry_forget_stmt, NULL, NULL, 0);
			}
			next = next_expiry_to_report(holders);
		}
		end_run_transaction();

		/*
		 * With events off there is nobody to tell: look again after the
		 * naptime rather than at every expiry.
		 */
		if (!more && next != NO_EXPIRY && dlock_events_enabled)
			(void) lower_next_expiry(next);
	}

	if (ready && (DatumGetInt32(main_arg) & RUN_MAINTENANCE))
		run_maintenance();
}

/*
 * Start a run for "database" and wait until it has exited.
 */
static void
launch_run(Oid database, bool maintenance)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_dlock");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "dlock_expiry_run_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_dlock expiry run");
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_dlock expiry run");
	worker.bgw_main_arg = Int32GetDatum(maintenance ? RUN_MAINTENANCE : 0);
	memcpy(worker.bgw_extra, &database, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(WARNING,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start a pg_dlock expiry run"),
				 errhint("Raise max_worker_processes.")));
		return;
	}

	/*
	 * Not WaitForBackgroundWorkerStartup/Shutdown: they ignore our shutdown
	 * request, and a run never started once the postmaster is shutting down
	 * would keep the launcher -- and the shutdown -- waiting.
	 */
	while (GetBackgroundWorkerPid(handle, &pid) != BGWH_STOPPED)
	{
		if (ShutdownRequestPending)
		{
			TerminateBackgroundWorker(handle);
			return;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * OID of dlock.worker_database, InvalidOid when it is empty or does not
 * exist. The launcher is connected to no database, so it reads the shared
 * catalog pg_database with a sequential scan (as the autovacuum launcher
 * does) in a short transaction: its indexes are not usable before a
 * backend has written the shared relcache init file.
 */
static Oid
worker_database_oid(void)
{
	Oid			database = InvalidOid;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;

	if (worker_database == NULL || worker_database[0] == '\0')
		return InvalidOid;
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tuple);

		if (strcmp(NameStr(db->datname), worker_database) == 0)
		{
			database = db->oid;
			break;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	return database;
}

static void
launcher_detach(int code, Datum arg)
{
	SpinLockAcquire(&expiry_shared->mutex);
	expiry_shared->launcher_latch = NULL;
	SpinLockRelease(&expiry_shared->mutex);
}

/*
 * Entry point of the launcher (a static background worker).
 */
void
dlock_expiry_launcher_main(Datum main_arg)
{
	TimestampTz last_maintenance;
	TimestampTz nap_until = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	SpinLockAcquire(&expiry_shared->mutex);
	expiry_shared->launcher_latch = MyLatch;
	SpinLockRelease(&expiry_shared->mutex);
	before_shmem_exit(launcher_detach, (Datum) 0);

	last_maintenance = GetCurrentTimestamp();
	while (!ShutdownRequestPending)
	{
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz wake;
		TimestampTz maintenance_at = maintenance_interval_secs > 0 ?
			last_maintenance + (int64) maintenance_interval_secs * USECS_PER_SEC : NO_EXPIRY;
		long		sleep_ms;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			nap_until = 0;		/* dlock.worker_database may have changed */
		}

		if (now >= nap_until ||
			now >= (TimestampTz) pg_atomic_read_u64(&expiry_shared->next_expiry) ||
			now >= maintenance_at)
		{
			Oid			database = worker_database_oid();
			bool		maintenance = now >= maintenance_at;

			/* the run recomputes it; commits from now on lower it again */
			pg_atomic_write_u64(&expiry_shared->next_expiry, NO_EXPIRY);
			if (OidIsValid(database))
				launch_run(database, maintenance);
			if (maintenance)
				last_maintenance = now;
			nap_until = now + (int64) worker_naptime_secs * USECS_PER_SEC;
			continue;
		}

		wake = Min(nap_until, (TimestampTz) pg_atomic_read_u64(&expiry_shared->next_expiry));
		wake = Min(wake, maintenance_at);
		sleep_ms = (long) Min((wake - now + 999) / 1000, (int64) INT_MAX);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	proc_exit(0);
}

static void
expiry_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(ExpiryWorkerShared)));
}

static void
expiry_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	expiry_shared = ShmemInitStruct("pg_dlock expiry worker",
									sizeof(ExpiryWorkerShared), &found);
	if (!found)
	{
		pg_atomic_init_u64(&expiry_shared->next_expiry, NO_EXPIRY);
		SpinLockInit(&expiry_shared->mutex);
		expiry_shared->database = InvalidOid;
		expiry_shared->launcher_latch = NULL;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Define the worker's settings; when preloaded, reserve its shared memory
 * and register the launcher. Called once from _PG_init.
 */
void
dlock_expiry_worker_init(void)
{
	BackgroundWorker worker;

	DefineCustomStringVariable("dlock.worker_database",
							   gettext_noop("Database whose leases the pg_dlock expiry worker watches."),
							   gettext_noop("An empty string stops the worker from connecting anywhere."),
							   &worker_database,
							   "postgres",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.worker_naptime",
							gettext_noop("Longest time the pg_dlock expiry worker sleeps between two looks at the leases."),
							gettext_noop("It wakes earlier at the next lease_until it knows of."),
							&worker_naptime_secs,
							60, 1, 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.maintenance_interval",
							gettext_noop("How often the pg_dlock expiry worker runs dlock.reap and dlock.purge_audit_log."),
							gettext_noop("0 turns the scheduled maintenance off."),
							&maintenance_interval_secs,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.reap_idle_for",
							gettext_noop("The idle_for argument of the scheduled dlock.reap."),
							NULL,
							&reap_idle_for_secs,
							86400, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.audit_retention",
							gettext_noop("Age of audit records the scheduled maintenance deletes with dlock.purge_audit_log."),
							gettext_noop("0 keeps every record."),
							&audit_retention_secs,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	if (!process_shared_preload_libraries_in_progress)
		return;

	dlock_request_shmem(&prev_shmem_request_hook, expiry_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = expiry_shmem_startup;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_dlock");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "dlock_expiry_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_dlock expiry worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_dlock expiry worker");
	RegisterBackgroundWorker(&worker);
}
