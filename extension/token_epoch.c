/*-------------------------------------------------------------------------
 *
 * token_epoch.c
 *	  The token epoch: what keeps a token that a crash lost from being
 *	  issued again.
 *
 * Under dlock.durability = fenced a grant commits without waiting for the
 * WAL flush, so a crash can lose it after its holder was told its token;
 * the name's row then goes back to its earlier counter, and the next grant
 * would issue the same token again. Tokens therefore carry the epoch in
 * their generation (token.c), and a server life that follows a life with
 * fenced grants grants in a new epoch, above every token of the old one:
 *
 * - dlock.token_epoch holds the epochs used, per cluster (system identifier)
 *   and timeline: a promotion starts a timeline whose history positions are
 *   all above the old one's, and its epochs start again at 0. Rows are only
 *   added, never updated, so the first grants of a life never wait for each
 *   other.
 * - The first fenced grant of a life records (epoch, fenced = true) and
 *   commits durably. Only once that has committed -- it is then published
 *   in shared memory -- may fenced grants commit without the flush.
 * - The first grant of a life, of any mode, reads the newest epoch; if a
 *   life marked it fenced, it records epoch + 1 and commits durably, and
 *   grants in it. A durable grant too: the row it updates may have issued
 *   tokens that the crash lost.
 *
 * What a life is comes from shared memory: it is made anew by every server
 * start and every crash restart, with a random identifier of its own that
 * the rows it records carry, and remembers each database's epoch from its
 * first grant on. A backend that finds no entry reads the table, and moves
 * the epoch only when the newest was marked fenced by another life: first
 * grants that run at once after a restart record the same next epoch, and
 * one that reads a mark of its own life keeps it. Without
 * shared_preload_libraries nothing is fenced (life 0), so a backend keeps
 * the epoch it read for its lifetime.
 *
 * The epochs of a timeline are bounded (DLOCK_EPOCHS); when the last one is
 * reached, fenced grants commit durably instead, with a warning, so the
 * epoch never has to move past it; the next timeline starts again at 0.
 *
 * IDENTIFICATION
 *	  extension/token_epoch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/syscache.h"

#include "dlock.h"
#include "catalog.h"
#include "durability.h"
#include "sql_executor.h"
#include "stats.h"
#include "token.h"
#include "token_epoch.h"

/*
 * Databases whose epoch shared memory remembers. A database that finds no
 * room is not marked: its fenced grants commit durably, so that it never
 * has to move the epoch at each backend's first grant. The entries of
 * dropped databases are given back when the entries run out
 * (reclaim_dropped), so only databases that exist hold one: creating and
 * dropping databases cannot use them up. dlock.test_epoch_entries (tests
 * only, set at server start) uses fewer of them, so that a test can fill
 * them.
 */
#define EPOCH_ENTRIES 1024

static int
epoch_entries(void)
{
	return dlock_test_epoch_entries > 0 ? Min(dlock_test_epoch_entries, EPOCH_ENTRIES) :
		EPOCH_ENTRIES;
}

typedef struct EpochEntry
{
	Oid			dbid;			/* InvalidOid: free */
	Oid			epoch_table;	/* a new extension in the database is a
								 * new table */
	int32		timeline;		/* a promotion starts a new one */
	int32		epoch;
	bool		fenced;			/* marked fenced, durably, in this life */
} EpochEntry;

typedef struct EpochShared
{
	slock_t		mutex;
	int64		life;			/* this server life's identifier, random */
	EpochEntry	entries[EPOCH_ENTRIES];
} EpochShared;

static EpochShared *epoch_shared = NULL;

/* What this backend knows without shared memory, or has yet to publish */
typedef struct EpochState
{
	Oid			epoch_table;	/* InvalidOid: nothing */
	int32		timeline;
	int32		epoch;
	bool		fenced;
} EpochState;

/* without shared memory: the epoch read, kept for the backend's life */
static EpochState local = {InvalidOid, 0, 0, false};

/*
 * What this transaction decided to record: its grants use it. It is
 * written to dlock.token_epoch only by the first grant that is then
 * written (dlock_grant_written), so a refused attempt -- also the first of
 * a server life -- writes nothing, takes no transaction ID and needs no
 * durable commit; recorded_pending says it is not written yet.
 */
static EpochState recorded = {InvalidOid, 0, 0, false};
static bool recorded_pending = false;

/* what this transaction wrote, published when it commits */
static EpochState written = {InvalidOid, 0, 0, false};

/* the subtransactions that decided and wrote them: undone if those roll back */
static SubTransactionId recorded_in = InvalidSubTransactionId;
static SubTransactionId written_in = InvalidSubTransactionId;

Size
dlock_epoch_shmem_size(void)
{
	return MAXALIGN(sizeof(EpochShared));
}

void
dlock_epoch_shmem_init(void)
{
	bool		found;

	epoch_shared = ShmemInitStruct("pg_dlock token epochs", sizeof(EpochShared), &found);
	if (!found)
	{
		SpinLockInit(&epoch_shared->mutex);
		memset(epoch_shared->entries, 0, sizeof(epoch_shared->entries));
		do
		{
			if (!pg_strong_random(&epoch_shared->life, sizeof(epoch_shared->life)))
				elog(ERROR, "pg_dlock: could not generate a server life identifier");
		} while (epoch_shared->life == 0);
	}
}

/*
 * The entry of the current database, or a free one to take: probed from
 * the database's OID on, so a lookup usually reads one entry. NULL when
 * every entry belongs to another database. Caller holds the mutex.
 */
static EpochEntry *
database_entry(void)
{
	int			n = epoch_entries();

	for (int i = 0; i < n; i++)
	{
		EpochEntry *entry = &epoch_shared->entries[(MyDatabaseId + i) % n];

		if (entry->dbid == MyDatabaseId || entry->dbid == InvalidOid)
			return entry;
	}
	return NULL;
}

/*
 * The epoch this life uses for epoch_table on timeline, if known.
 */
static bool
known_epoch(Oid epoch_table, int32 timeline, EpochState *state)
{
	EpochEntry *entry;
	bool		found = false;

	if (recorded.epoch_table == epoch_table && recorded.timeline == timeline)
	{
		*state = recorded;
		return true;
	}
	if (epoch_shared == NULL)
	{
		*state = local;
		return local.epoch_table == epoch_table && local.timeline == timeline;
	}
	SpinLockAcquire(&epoch_shared->mutex);
	entry = database_entry();
	if (entry != NULL && entry->dbid == MyDatabaseId && entry->epoch_table == epoch_table &&
		entry->timeline == timeline)
	{
		state->epoch_table = epoch_table;
		state->timeline = timeline;
		state->epoch = entry->epoch;
		state->fenced = entry->fenced;
		found = true;
	}
	SpinLockRelease(&epoch_shared->mutex);
	return found;
}

/*
 * Free the entries of databases that no longer exist (their OIDs are not in
 * pg_database). The OIDs are looked up without the mutex held; an entry is
 * freed only if it still belongs to the dropped database then. A database
 * created later with a recycled OID finds an entry of another epoch table
 * and replaces it, as a new extension in a database does. Called inside a
 * transaction.
 */
static void
reclaim_dropped(void)
{
	int			n = epoch_entries();
	Oid		   *dbids = palloc(sizeof(Oid) * n);

	SpinLockAcquire(&epoch_shared->mutex);
	for (int i = 0; i < n; i++)
		dbids[i] = epoch_shared->entries[i].dbid;
	SpinLockRelease(&epoch_shared->mutex);
	for (int i = 0; i < n; i++)
		if (OidIsValid(dbids[i]) && dbids[i] != MyDatabaseId &&
			SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbids[i])))
			dbids[i] = InvalidOid;	/* still there: keep its entry */
	SpinLockAcquire(&epoch_shared->mutex);
	for (int i = 0; i < n; i++)
		if (OidIsValid(dbids[i]) && dbids[i] != MyDatabaseId &&
			epoch_shared->entries[i].dbid == dbids[i])
			memset(&epoch_shared->entries[i], 0, sizeof(EpochEntry));
	SpinLockRelease(&epoch_shared->mutex);
	pfree(dbids);
}

/*
 * Whether shared memory has room to remember this database's epoch; when
 * every entry is taken, the entries of dropped databases are freed first.
 */
static bool
database_has_entry(void)
{
	bool		room;

	if (epoch_shared == NULL)
		return false;
	SpinLockAcquire(&epoch_shared->mutex);
	room = database_entry() != NULL;
	SpinLockRelease(&epoch_shared->mutex);
	if (!room)
	{
		reclaim_dropped();
		SpinLockAcquire(&epoch_shared->mutex);
		room = database_entry() != NULL;
		SpinLockRelease(&epoch_shared->mutex);
	}
	return room;
}

/*
 * Remember state as this life's epoch for the database: a later epoch, or
 * the fenced mark of the same one, replaces what is there. An entry of an
 * older table of the database is reused.
 */
static void
publish(const EpochState *state)
{
	EpochEntry *slot;

	if (epoch_shared == NULL)
	{
		local = *state;
		return;
	}
	SpinLockAcquire(&epoch_shared->mutex);
	slot = database_entry();
	if (slot != NULL &&
		(slot->dbid != MyDatabaseId || slot->epoch_table != state->epoch_table ||
		 state->timeline > slot->timeline ||
		 (state->timeline == slot->timeline &&
		  (state->epoch > slot->epoch ||
		   (state->epoch == slot->epoch && state->fenced)))))
	{
		slot->dbid = MyDatabaseId;
		slot->epoch_table = state->epoch_table;
		slot->timeline = state->timeline;
		slot->epoch = state->epoch;
		slot->fenced = state->fenced;
	}
	SpinLockRelease(&epoch_shared->mutex);
}

/* The number of this server life, as recorded with the epochs it marks */
static int64
this_life(void)
{
	return epoch_shared != NULL ? epoch_shared->life : 0;
}

/* rows are only added, so that first grants of a life never wait */
static DlockStatement epoch_record_stmt = {
	.sql =
	"INSERT INTO dlock.token_epoch"
	" (system_identifier, timeline, epoch, fenced, server_life)"
	" VALUES ($1, $2, $3, $4, $5)",
	.nargs = 5,
	.argtypes = {INT8OID, INT4OID, INT4OID, BOOLOID, INT8OID},
};

/*
 * Decide to add (epoch, fenced) to dlock.token_epoch in this transaction:
 * the grants of the transaction use it from now on, and the first one
 * written writes it (write_recorded_epoch); the transaction must then
 * commit durably, and publishes it when it commits.
 */
static void
record_epoch(Oid epoch_table, int32 timeline, int32 epoch, bool fenced)
{
	recorded.epoch_table = epoch_table;
	recorded.timeline = timeline;
	recorded.epoch = epoch;
	recorded.fenced = fenced;
	recorded_pending = true;
	recorded_in = GetCurrentSubTransactionId();
}

/*
 * A grant decided on the epoch recorded in this transaction was written:
 * write the epoch's row too, if not written yet, and commit durably.
 */
static void
write_recorded_epoch(void)
{
	Datum		values[5];

	if (!recorded_pending || !OidIsValid(recorded.epoch_table))
		return;
	values[0] = Int64GetDatum((int64) GetSystemIdentifier());
	values[1] = Int32GetDatum(recorded.timeline);
	values[2] = Int32GetDatum(recorded.epoch);
	values[3] = BoolGetDatum(recorded.fenced);
	values[4] = Int64GetDatum(this_life());
	dlock_sql_connect();
	(void) dlock_execute(&epoch_record_stmt, values, NULL, 0);
	dlock_sql_finish();
	dlock_require_durable_commit();
	recorded_pending = false;
	written = recorded;
	written_in = GetCurrentSubTransactionId();
}

/* the newest epoch, with the server life that marked it fenced if one did */
static DlockStatement epoch_newest_stmt = {
	.sql =
	"SELECT e.epoch, e.fenced, e.server_life FROM dlock.token_epoch e"
	" WHERE e.system_identifier = $1 AND e.timeline = $2"
	" ORDER BY e.epoch DESC, e.fenced DESC LIMIT 1",
	.nargs = 2,
	.argtypes = {INT8OID, INT4OID},
};
#define EPOCH_NEWEST_COL_EPOCH 1
#define EPOCH_NEWEST_COL_FENCED 2
#define EPOCH_NEWEST_COL_LIFE 3

/*
 * The first grant of a life on timeline: the newest epoch of the cluster's
 * timeline (none: 0), or the next one if another life granted in it
 * without the flush.
 */
static void
start_life(Oid epoch_table, int32 timeline, EpochState *state)
{
	bool		isnull;
	bool		marked_here = false;
	Datum		values[2] = {Int64GetDatum((int64) GetSystemIdentifier()),
	Int32GetDatum(timeline)};

	dlock_sql_connect();
	state->epoch_table = epoch_table;
	state->timeline = timeline;
	state->epoch = 0;
	state->fenced = false;
	if (dlock_execute(&epoch_newest_stmt, values, NULL, 1) == 1)
	{
		state->epoch = DatumGetInt32(dlock_sql_value(0, EPOCH_NEWEST_COL_EPOCH, &isnull));
		state->fenced = DatumGetBool(dlock_sql_value(0, EPOCH_NEWEST_COL_FENCED, &isnull));
		marked_here = DatumGetInt64(dlock_sql_value(0, EPOCH_NEWEST_COL_LIFE, &isnull)) == this_life();
	}
	if (state->fenced && !marked_here && !dlock_test_ignore_epoch)
	{
		/* marking refuses the last epoch, so there is a next one */
		state->epoch++;
		state->fenced = false;
		record_epoch(epoch_table, timeline, state->epoch, false);	/* written with the grant */
	}
	else
	{
		(void) database_has_entry();	/* room for it, if dropped databases left any */
		publish(state);
	}
	dlock_sql_finish();
}

/*
 * The first fenced grant of a life in epoch state->epoch: mark it, and
 * commit durably; true when marked. The last epoch of a timeline is not
 * marked, nor one shared memory has no room for: false, and the grant is
 * to commit durably instead.
 */
static bool
mark_fenced(EpochState *state)
{
	if (!database_has_entry())
	{
		ereport(WARNING,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("dlock.durability = fenced is not available in this database"),
				 errdetail("pg_dlock's shared memory remembers the token epochs of %d databases, all in use; the grant commits durably.",
						   epoch_entries())));
		return false;
	}
	if (state->epoch >= DLOCK_EPOCHS - 1)
	{
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("dlock.durability = fenced is not available on this timeline any more"),
				 errdetail("Its last token epoch, %d, is in use; the grant commits durably.",
						   state->epoch),
				 errhint("The epochs start again on a new timeline, after a failover.")));
		return false;
	}
	record_epoch(state->epoch_table, state->timeline, state->epoch, true);	/* written with the grant */
	state->fenced = true;
	return true;
}

/*
 * The history position of a grant made now (token.c): the first grant of a
 * server life may have to move the epoch, a first fenced grant to mark it.
 * *fenced says whether the grant is to commit without the flush, and is
 * cleared where it cannot: before 1.4, whose rows hold the timeline ID as
 * the position, or when the epoch cannot be marked. The durable commit
 * then follows from the grant's write, not from an attempt that is
 * refused.
 */
static int32
grant_history(bool *fenced)
{
	Oid			epoch_table = dlock_catalog()->epoch_table;
	int32		timeline = dlock_token_timeline();
	EpochState	state;

	if (!OidIsValid(epoch_table))
	{
		*fenced = false;
		return timeline;
	}
	if (!known_epoch(epoch_table, timeline, &state))
		start_life(epoch_table, timeline, &state);
	if (*fenced && !state.fenced)
		*fenced = mark_fenced(&state);
	return dlock_token_history(timeline, state.epoch);
}

/*
 * The history position grants are at now, as far as can be known without
 * granting: this life's epoch, else the newest recorded one (the next
 * grant may move past it, never below). For a floor left by a reap, whose
 * position must not be above any later grant's.
 */
int32
dlock_history_now(void)
{
	Oid			epoch_table = dlock_catalog()->epoch_table;
	int32		timeline = dlock_token_timeline();
	EpochState	state;
	int32		epoch = 0;

	if (!OidIsValid(epoch_table))
		return timeline;
	if (known_epoch(epoch_table, timeline, &state))
		epoch = state.epoch;
	else
	{
		Datum		values[2] = {Int64GetDatum((int64) GetSystemIdentifier()),
		Int32GetDatum(timeline)};
		bool		isnull;

		dlock_sql_connect();
		if (dlock_execute(&epoch_newest_stmt, values, NULL, 1) == 1)
			epoch = DatumGetInt32(dlock_sql_value(0, EPOCH_NEWEST_COL_EPOCH, &isnull));
		dlock_sql_finish();
	}
	return dlock_token_history(timeline, epoch);
}

/*
 * Before a grant of any kind reads its row and writes: how it will commit,
 * and the history position of its token.
 */
void
dlock_grant_prepare(DlockGrantCommit *commit)
{
	commit->fenced = dlock_grants_fenced();
	commit->writes_only = dlock_lease_writes_only();
	commit->history = grant_history(&commit->fenced);
}

/*
 * The same, for a grant that replaces a lease its owner holds (a
 * downgrade): it commits durably in every mode. Lost in a crash, it would
 * leave the owner believing in a lease the server does not have, while the
 * lease it replaced lives on and renews, and nothing would tell the owner.
 */
void
dlock_grant_prepare_durable(DlockGrantCommit *commit)
{
	commit->fenced = false;
	commit->writes_only = dlock_lease_writes_only();
	commit->history = grant_history(&commit->fenced);
}

/*
 * The history position of a grant made now, for dlock.highest_token: the
 * life's epoch started as a grant would start it (a crash since the last
 * fenced grants moves it, durably), so that the state carried over a DROP
 * EXTENSION is above every token such a crash lost.
 */
int32
dlock_history_for_carry_over(void)
{
	bool		fenced = false;
	int32		history = grant_history(&fenced);

	write_recorded_epoch();
	return history;
}

/*
 * dlock.carry_over: the new extension's epochs go on from the position the
 * old one's grants were at (history), when that is on this timeline, so
 * that its positions never repeat the old extension's. Caller is connected.
 */
void
dlock_epoch_carry_over(int32 history)
{
	Oid			epoch_table = dlock_catalog()->epoch_table;
	int32		timeline = dlock_token_timeline();
	int32		history_timeline = (history - 1) / DLOCK_EPOCHS + 1;

	if (history_timeline > timeline)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("history %d is beyond this server's timeline %d", history, timeline)));
	if (!OidIsValid(epoch_table) || history_timeline < timeline)
		return;
	record_epoch(epoch_table, timeline, (history - 1) % DLOCK_EPOCHS, false);
	write_recorded_epoch();
}

/*
 * After the grant wrote its row.
 */
void
dlock_grant_written(const DlockGrantCommit *commit)
{
	write_recorded_epoch();
	dlock_lease_written(commit->writes_only, !commit->fenced);
}

/*
 * At commit, publish what the transaction recorded: it is durable now.
 */
void
dlock_epoch_xact_end(XactEvent event)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (OidIsValid(written.epoch_table))
				publish(&written);
			recorded.epoch_table = InvalidOid;
			written.epoch_table = InvalidOid;
			recorded_pending = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			recorded.epoch_table = InvalidOid;
			written.epoch_table = InvalidOid;
			recorded_pending = false;
			break;
		default:
			break;
	}
}

/*
 * A subtransaction that rolls back takes back what it, or one begun inside
 * it, recorded: subtransactions are numbered in the order they begin.
 */
void
dlock_epoch_subxact_end(SubXactEvent event, SubTransactionId subxid)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (OidIsValid(recorded.epoch_table) && recorded_in >= subxid)
	{
		recorded.epoch_table = InvalidOid;
		recorded_pending = false;
	}
	if (OidIsValid(written.epoch_table) && written_in >= subxid)
	{
		written.epoch_table = InvalidOid;
		/* what the transaction decided was undone with it: decide again */
		recorded.epoch_table = InvalidOid;
		recorded_pending = false;
	}
}

/*
 * dlock.durability_stats() returns record: this server life's token epoch
 * in the current database (NULL until its first grant), whether fenced
 * grants were marked in it, and how the transactions that changed leases
 * committed since the counters were reset.
 */
PG_FUNCTION_INFO_V1(dlock_durability_stats);
Datum
dlock_durability_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	EpochState	state;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_dlock: return type must be a row type");
	if (!RecoveryInProgress() &&
		known_epoch(dlock_catalog()->epoch_table, dlock_token_timeline(), &state))
	{
		values[0] = Int32GetDatum(state.epoch);
		values[1] = BoolGetDatum(state.fenced);
	}
	else
		nulls[0] = nulls[1] = true;
	values[2] = Int64GetDatum((int64) dlock_counter_value(STAT_DURABLE_COMMITS));
	values[3] = Int64GetDatum((int64) dlock_counter_value(STAT_UNFLUSHED_COMMITS));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
