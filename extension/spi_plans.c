/*-------------------------------------------------------------------------
 *
 * spi_plans.c
 *	  Every statement pg_dlock runs, prepared once per backend and kept.
 *
 * These are the rare paths (fence, force release, reap, audit records); the
 * lease functions reach their rows through lock_row.c. Every statement runs
 * as the extension owner with search_path pinned to pg_catalog, pg_temp,
 * whoever calls it (see dlock_execute), so it resolves names the same way
 * on every call, and only after checking that "dlock" is still the
 * extension's own schema (schema.c). Values always travel as parameters:
 * lock names are data, never SQL.
 *
 * Expiry is decided with clock_timestamp() inside the statement, never
 * now(): now() is the transaction's start, and a lease judged on it could be
 * live for a caller whose transaction began long ago. Because the WHERE
 * clause calls clock_timestamp() itself, a statement that waited for a row
 * lock re-judges the row at the moment it gets it.
 *
 * IDENTIFICATION
 *	  extension/spi_plans.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "dlock.h"
#include "catalog.h"
#include "schema.h"
#include "spi_plans.h"

typedef struct DlockPlanDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[12];
} DlockPlanDef;

#define FIRST_KIND_PLAN PLAN_HOLDERS_CLEAR_EXPIRED

/*
 * dlock.reap's statement; only_available is a condition on the lock row l
 * that a row must also meet to be reaped. The caller holds the floor lock
 * exclusively (dlock_floor_lock_exclusive), so no new name is being created
 * from the old floor meanwhile. Rows locked by an acquire are skipped, not
 * waited for.
 */
#define REAP_SQL(only_available) \
	"WITH victims AS (" \
	"  SELECT l.lock_name FROM dlock.distributed_lock l" \
	"  WHERE (l.owner_token IS NULL OR l.lease_until <= pg_catalog.clock_timestamp())" \
	"    AND COALESCE(l.lease_until, l.updated_at)" \
	"        < pg_catalog.clock_timestamp() - $1" \
	only_available \
	"  LIMIT $2 FOR UPDATE SKIP LOCKED" \
	"), gone AS (" \
	"  DELETE FROM dlock.distributed_lock l USING victims v" \
	"  WHERE l.lock_name = v.lock_name" \
	"  RETURNING l.fencing_seq" \
	"), raised AS (" \
	"  INSERT INTO dlock.token_floor (reaped_max, reaped_at)" \
	"  SELECT pg_catalog.max(g.fencing_seq), pg_catalog.clock_timestamp() FROM gone g" \
	"  HAVING pg_catalog.count(*) > 0" \
	"  RETURNING 1" \
	") SELECT pg_catalog.count(*)::int8, (SELECT pg_catalog.count(*) FROM raised) FROM gone"

/*
 * dlock.force_release's statement for the exclusive lease; live is the
 * condition on the lock row l that the lease is live.
 */
#define FORCE_RELEASE_SQL(live) \
	"UPDATE dlock.distributed_lock l SET" \
	" owner_token = NULL," \
	" lease_until = pg_catalog.clock_timestamp()," \
	" updated_at = pg_catalog.clock_timestamp()" \
	" WHERE l.lock_name = $1 AND l.owner_token IS NOT NULL" \
	"   AND " live \
	" RETURNING l.fencing_seq, l.holder, l.acquired_at, 'e'::\"char\""

/* the lease functions' own decision on a lock row l (lease_policy.c), from 1.2 on */
#define POLICY_STATE_SQL \
	"dlock.lease_policy_state(l.owner_token IS NOT NULL, l.lease_until," \
	" l.session_id, l.hold_limit, l.min_hold_until, l.lock_delay, l.not_before)"

static const DlockPlanDef plan_defs[FIRST_KIND_PLAN] = {
	[PLAN_FENCE] = {
		"INSERT INTO dlock.resource_fence AS f (resource, fencing_token, updated_at)"
		" VALUES ($1, $2, pg_catalog.clock_timestamp())"
		" ON CONFLICT (resource) DO UPDATE"
		"   SET fencing_token = EXCLUDED.fencing_token, updated_at = EXCLUDED.updated_at"
		"   WHERE f.fencing_token <= EXCLUDED.fencing_token"
		" RETURNING f.fencing_token",
		2, {TEXTOID, INT8OID}
	},
	[PLAN_FENCE_CURRENT] = {
		"SELECT f.fencing_token FROM dlock.resource_fence f WHERE f.resource = $1",
		1, {TEXTOID}
	},
	/* before 1.2: no lease policies */
	[PLAN_FORCE_RELEASE] = {
		FORCE_RELEASE_SQL("l.lease_until > pg_catalog.clock_timestamp()"),
		1, {TEXTOID}
	},

	/* before 1.2: no lease policies */
	[PLAN_REAP] = {
		REAP_SQL(""),
		2, {INTERVALOID, INT4OID}
	},
	/* keep only the highest floor row */
	[PLAN_FLOOR_COMPACT] = {
		"WITH old AS (DELETE FROM dlock.token_floor RETURNING reaped_max, reaped_at)"
		" INSERT INTO dlock.token_floor"
		" SELECT pg_catalog.max(reaped_max), pg_catalog.max(reaped_at) FROM old"
		" HAVING pg_catalog.count(*) > 0",
		0, {0}
	},
	[PLAN_PURGE_AUDIT] = {
		"WITH gone AS (DELETE FROM dlock.audit_log a"
		"  WHERE a.logged_at < pg_catalog.clock_timestamp() - $1 RETURNING 1)"
		" SELECT pg_catalog.count(*)::int8 FROM gone",
		1, {INTERVALOID}
	},
	[PLAN_PURGE_FENCE] = {
		"WITH gone AS (DELETE FROM dlock.resource_fence f"
		"  WHERE f.updated_at < pg_catalog.clock_timestamp() - $1 RETURNING 1)"
		" SELECT pg_catalog.count(*)::int8 FROM gone",
		1, {INTERVALOID}
	},
	[PLAN_AUDIT] = {
		"INSERT INTO dlock.audit_log (event, lock_name, fencing_token, holder, role_name, reason)"
		" VALUES ($1, $2, $3, $4, $5, $6)",
		6, {TEXTOID, TEXTOID, INT8OID, TEXTOID, NAMEOID, TEXTOID}
	},

	/*
	 * The expiry worker's statements. Expired leases not reported yet, at
	 * most $1, recorded as reported; leases whose row another transaction
	 * has locked (an acquire taking them over) are skipped: that
	 * transaction reports a takeover, or the next run the expiry.
	 */
	[PLAN_EXPIRY_REPORT] = {
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
		1, {INT4OID}
	},
	/* reported expiries whose lease has been taken or released since */
	[PLAN_EXPIRY_FORGET] = {
		"DELETE FROM dlock.expiry_reported r WHERE NOT EXISTS"
		" (SELECT 1 FROM dlock.distributed_lock l"
		"   WHERE l.lock_name = r.lock_name"
		"     AND l.fencing_seq = r.fencing_token"
		"     AND l.owner_token IS NOT NULL)",
		0, {0}
	},
	/* the earliest lease_until still to report */
	[PLAN_EXPIRY_NEXT] = {
		"SELECT pg_catalog.min(l.lease_until)"
		"  FROM dlock.distributed_lock l"
		"  LEFT JOIN dlock.expiry_reported r ON r.lock_name = l.lock_name"
		" WHERE l.owner_token IS NOT NULL"
		"   AND r.fencing_token IS DISTINCT FROM l.fencing_seq",
		0, {0}
	},
	/* forget lock $1's expiry of token $2 if reported: true when it was */
	[PLAN_EXPIRY_FORGET_ONE] = {
		"DELETE FROM dlock.expiry_reported r"
		" WHERE r.lock_name = $1 AND r.fencing_token = $2 RETURNING 1",
		2, {TEXTOID, INT8OID}
	},
	[PLAN_WORKER_REAP] = {
		"SELECT dlock.reap($1)",
		1, {INTERVALOID}
	},
	[PLAN_WORKER_PURGE_AUDIT] = {
		"SELECT dlock.purge_audit_log($1)",
		1, {INTERVALOID}
	},
	/* leader.c: the live lease of an election */
	[PLAN_LEADER] = {
		"SELECT l.holder, l.fencing_seq, l.acquired_at, l.lease_until"
		"  FROM dlock.distributed_lock l"
		" WHERE l.lock_name = $1 AND l.owner_token IS NOT NULL"
		"   AND l.lease_until > pg_catalog.clock_timestamp()",
		1, {TEXTOID}
	},
};

/*
 * Statements on objects of 1.2: the lock kinds (holder_lease.c),
 * whose $n timestamptz parameters are the caller's one clock reading, the
 * force release of holders and the reap that knows the lease policies.
 */
static const DlockPlanDef kind_plan_defs[] = {
	/*
	 * Waits for pins (holds) on expired holders, then frees their slots;
	 * the clock is read in the WHERE clause, so a slot waited for is judged
	 * again as it is when its lock is granted.
	 */
	[PLAN_HOLDERS_CLEAR_EXPIRED - FIRST_KIND_PLAN] = {
		"UPDATE dlock.lock_holder h SET owner_token = NULL, updated_at = pg_catalog.clock_timestamp()"
		" WHERE h.lock_name = $1 AND h.owner_token IS NOT NULL"
		"   AND h.lease_until <= pg_catalog.clock_timestamp()",
		1, {TEXTOID}
	},
	/* the same without waiting: pinned slots are left as they are */
	[PLAN_HOLDERS_CLEAR_EXPIRED_UNPINNED - FIRST_KIND_PLAN] = {
		"UPDATE dlock.lock_holder h SET owner_token = NULL, updated_at = pg_catalog.clock_timestamp()"
		"  FROM (SELECT e.slot FROM dlock.lock_holder e"
		"         WHERE e.lock_name = $1 AND e.owner_token IS NOT NULL"
		"           AND e.lease_until <= pg_catalog.clock_timestamp()"
		"           FOR UPDATE SKIP LOCKED) x"
		" WHERE h.lock_name = $1 AND h.slot = x.slot",
		1, {TEXTOID}
	},
	/* this owner's slot of the name, locked for a renewal or release */
	[PLAN_HOLDER_OWN_LOCK - FIRST_KIND_PLAN] = {
		"SELECT h.slot, h.lease_until FROM dlock.lock_holder h"
		" WHERE h.lock_name = $1 AND h.owner_token = $2"
		" ORDER BY h.lease_until DESC"
		"   FOR NO KEY UPDATE",
		2, {TEXTOID, UUIDOID}
	},
	/*
	 * The name's last exclusive token and its generation (columns 1-4;
	 * found is NULL without a row) and its holder slots (5-10), one row per
	 * slot, or one row with NULL slot columns when it has none; read by
	 * holder_lease.c, read_holder_state (NAME_COL_* and SLOT_COL_*).
	 */
	[PLAN_NAME_AND_HOLDERS - FIRST_KIND_PLAN] = {
		"SELECT n.found, n.fencing_seq, n.grant_timeline, n.grant_system,"
		"       h.slot, h.kind, h.permits, h.owner_token, h.lease_until,"
		"       h.owner_token IS NOT NULL AND h.lease_until > $2"
		"  FROM (SELECT 1) v"
		"  LEFT JOIN LATERAL ("
		"    SELECT true AS found, l.fencing_seq, l.grant_timeline, l.grant_system"
		"      FROM dlock.distributed_lock l WHERE l.lock_name = $1) n ON true"
		"  LEFT JOIN dlock.lock_holder h ON h.lock_name = $1"
		" ORDER BY h.slot",
		2, {TEXTOID, TIMESTAMPTZOID}
	},
	/* a free or expired slot, unless another transaction has it (a grant, a pin) */
	[PLAN_HOLDER_LOCK - FIRST_KIND_PLAN] = {
		"SELECT h.fencing_seq, h.block_end, h.grant_timeline, h.grant_system"
		"  FROM dlock.lock_holder h"
		" WHERE h.lock_name = $1 AND h.slot = $2"
		"   AND (h.owner_token IS NULL OR h.lease_until <= $3)"
		"   FOR UPDATE SKIP LOCKED",
		3, {TEXTOID, INT4OID, TIMESTAMPTZOID}
	},
	[PLAN_HOLDER_INSERT - FIRST_KIND_PLAN] = {
		"INSERT INTO dlock.lock_holder AS h (lock_name, slot, kind, fencing_seq, block_end,"
		"                                  updated_at, grant_timeline, grant_system)"
		" VALUES ($1, $2, $3, 0, 0, $4, 0, 0) ON CONFLICT DO NOTHING"
		" RETURNING h.fencing_seq, h.block_end, h.grant_timeline, h.grant_system",
		4, {TEXTOID, INT4OID, CHAROID, TIMESTAMPTZOID}
	},
	[PLAN_HOLDER_GRANT - FIRST_KIND_PLAN] = {
		"UPDATE dlock.lock_holder h SET kind = $3, permits = $4, owner_token = $5,"
		"       fencing_seq = $6, block_end = $7, lease_until = $8, holder = $9,"
		"       acquired_at = $10, updated_at = $10, renewals = 0,"
		"       grant_timeline = $11, grant_system = $12"
		" WHERE h.lock_name = $1 AND h.slot = $2",
		12, {TEXTOID, INT4OID, CHAROID, INT4OID, UUIDOID, INT8OID, INT8OID,
			 TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, INT4OID, INT8OID}
	},
	/* renew ($4 true) or release the holder lease of slot $2, locked and decided on */
	[PLAN_HOLDER_CHANGE - FIRST_KIND_PLAN] = {
		"UPDATE dlock.lock_holder h"
		"   SET owner_token = CASE WHEN $4 THEN h.owner_token END, lease_until = $3,"
		"       updated_at = $5, renewals = h.renewals + CASE WHEN $4 THEN 1 ELSE 0 END"
		" WHERE h.lock_name = $1 AND h.slot = $2"
		" RETURNING h.fencing_seq, h.holder, h.lease_until, h.kind, h.slot, h.acquired_at",
		5, {TEXTOID, INT4OID, TIMESTAMPTZOID, BOOLOID, TIMESTAMPTZOID}
	},
	[PLAN_HOLDER_PIN - FIRST_KIND_PLAN] = {
		"SELECT 1 FROM dlock.lock_holder h"
		" WHERE h.lock_name = $1 AND h.fencing_seq = $2"
		"   AND h.owner_token IS NOT NULL AND h.lease_until > pg_catalog.clock_timestamp()"
		"   FOR SHARE",
		2, {TEXTOID, INT8OID}
	},
	[PLAN_COUNTER_LOCK - FIRST_KIND_PLAN] = {
		"SELECT c.fencing_seq, c.grant_timeline, c.grant_system"
		"  FROM dlock.holder_counter c WHERE c.lock_name = $1 FOR UPDATE",
		1, {TEXTOID}
	},
	[PLAN_COUNTER_INSERT - FIRST_KIND_PLAN] = {
		"INSERT INTO dlock.holder_counter (lock_name, fencing_seq, grant_timeline, grant_system)"
		" VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
		4, {TEXTOID, INT8OID, INT4OID, INT8OID}
	},
	[PLAN_COUNTER_UPDATE - FIRST_KIND_PLAN] = {
		"UPDATE dlock.holder_counter c SET fencing_seq = $2, grant_timeline = $3,"
		"       grant_system = $4 WHERE c.lock_name = $1",
		4, {TEXTOID, INT8OID, INT4OID, INT8OID}
	},
	[PLAN_SEMAPHORE_RESIZE - FIRST_KIND_PLAN] = {
		"UPDATE dlock.lock_holder h SET permits = $2"
		" WHERE h.lock_name = $1 AND h.kind = 'p' AND h.owner_token IS NOT NULL"
		"   AND h.lease_until > pg_catalog.clock_timestamp()",
		2, {TEXTOID, INT4OID}
	},
	/* admin.c: dlock.force_release of a name's shared leases or permits, all of them */
	[PLAN_HOLDERS_FORCE_RELEASE - FIRST_KIND_PLAN] = {
		"UPDATE dlock.lock_holder h SET owner_token = NULL,"
		"       lease_until = pg_catalog.clock_timestamp(), updated_at = pg_catalog.clock_timestamp()"
		" WHERE h.lock_name = $1 AND h.owner_token IS NOT NULL"
		"   AND h.lease_until > pg_catalog.clock_timestamp()"
		" RETURNING h.fencing_seq, h.holder, h.acquired_at, h.kind",
		1, {TEXTOID}
	},
	/* multi_lock.c: is a name of the set held by another owner, in any kind? */
	[PLAN_SET_BUSY - FIRST_KIND_PLAN] = {
		"SELECT EXISTS (SELECT 1 FROM dlock.distributed_lock l"
		"                WHERE l.lock_name = ANY ($1) AND l.owner_token IS NOT NULL"
		"                  AND l.owner_token <> $2"
		"                  AND l.lease_until > pg_catalog.clock_timestamp())"
		"    OR EXISTS (SELECT 1 FROM dlock.lock_holder h"
		"                WHERE h.lock_name = ANY ($1) AND h.owner_token IS NOT NULL"
		"                  AND h.lease_until > pg_catalog.clock_timestamp())",
		2, {TEXTARRAYOID, UUIDOID}
	},
	/*
	 * dlock.reap from 1.2 on: a name not yet available to a new owner (a
	 * release inside its min_hold, a lock delay still running) is not idle,
	 * whatever idle_for says; deleting its row would make the name free.
	 */
	[PLAN_REAP_AVAILABLE - FIRST_KIND_PLAN] = {
		REAP_SQL("    AND (" POLICY_STATE_SQL ").available_at IS NULL"),
		2, {INTERVALOID, INT4OID}
	},
	/*
	 * dlock.force_release from 1.2 on: only a lease the lease functions
	 * call live (not one whose session already ended)
	 */
	[PLAN_FORCE_RELEASE_LIVE - FIRST_KIND_PLAN] = {
		FORCE_RELEASE_SQL("(" POLICY_STATE_SQL ").live"),
		1, {TEXTOID}
	},
	/*
	 * dlock.reap: holder slots idle for longer than $1, at most $2. The
	 * name's counter stays, so a slot made again later takes a new block
	 * of tokens above every token the deleted slots issued.
	 */
	[PLAN_REAP_HOLDER_SLOTS - FIRST_KIND_PLAN] = {
		"WITH victims AS ("
		"  SELECT h.lock_name, h.slot FROM dlock.lock_holder h"
		"   WHERE (h.owner_token IS NULL OR h.lease_until <= pg_catalog.clock_timestamp())"
		"     AND COALESCE(h.lease_until, h.updated_at) < pg_catalog.clock_timestamp() - $1"
		"   LIMIT $2 FOR UPDATE SKIP LOCKED"
		"), gone AS ("
		"  DELETE FROM dlock.lock_holder h USING victims v"
		"   WHERE h.lock_name = v.lock_name AND h.slot = v.slot RETURNING 1"
		") SELECT pg_catalog.count(*)::int8 FROM gone",
		2, {INTERVALOID, INT4OID}
	},
	/* lease_policy.c: a force release starts the lease's lock delay */
	[PLAN_LOCK_DELAY_FORCED - FIRST_KIND_PLAN] = {
		"UPDATE dlock.distributed_lock l"
		"   SET not_before = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) l.lock_delay"
		" WHERE l.lock_name = $1 AND l.lock_delay IS NOT NULL",
		1, {TEXTOID}
	},
	/*
	 * token_epoch.c: the newest epoch, with the server life that marked it
	 * fenced if one did
	 */
	[PLAN_EPOCH_NEWEST - FIRST_KIND_PLAN] = {
		"SELECT e.epoch, e.fenced, e.server_life FROM dlock.token_epoch e"
		" ORDER BY e.epoch DESC, e.fenced DESC LIMIT 1",
		0, {InvalidOid}
	},
	/* rows are only added, so that first grants of a life never wait */
	[PLAN_EPOCH_RECORD - FIRST_KIND_PLAN] = {
		"INSERT INTO dlock.token_epoch (epoch, fenced, server_life) VALUES ($1, $2, $3)",
		3, {INT4OID, BOOLOID, INT8OID}
	},
	/*
	 * The expiry worker on holder slots, as PLAN_EXPIRY_REPORT on lock
	 * rows: expired shared leases and permits not reported yet, at most $1,
	 * recorded as reported; slots another transaction has locked are left
	 * to the next run.
	 */
	[PLAN_HOLDER_EXPIRY_REPORT - FIRST_KIND_PLAN] = {
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
		1, {INT4OID}
	},
	/* reported expiries whose slot has been granted or released since */
	[PLAN_HOLDER_EXPIRY_FORGET - FIRST_KIND_PLAN] = {
		"DELETE FROM dlock.holder_expiry_reported r WHERE NOT EXISTS"
		" (SELECT 1 FROM dlock.lock_holder h"
		"   WHERE h.lock_name = r.lock_name AND h.slot = r.slot"
		"     AND h.fencing_seq = r.fencing_token"
		"     AND h.owner_token IS NOT NULL)",
		0, {InvalidOid}
	},
	/* the earliest lease_until of a slot still to report */
	[PLAN_HOLDER_EXPIRY_NEXT - FIRST_KIND_PLAN] = {
		"SELECT pg_catalog.min(h.lease_until)"
		"  FROM dlock.lock_holder h"
		"  LEFT JOIN dlock.holder_expiry_reported r"
		"    ON r.lock_name = h.lock_name AND r.slot = h.slot"
		" WHERE h.owner_token IS NOT NULL"
		"   AND r.fencing_token IS DISTINCT FROM h.fencing_seq",
		0, {InvalidOid}
	},
};

StaticAssertDecl(lengthof(kind_plan_defs) == NUM_DLOCK_PLANS - FIRST_KIND_PLAN,
				 "a plan of 1.2 or later is missing");

static SPIPlanPtr plans[NUM_DLOCK_PLANS];

/*
 * The kept plan of statement "id", prepared on first use.
 */
static SPIPlanPtr
dlock_plan(DlockPlanId id)
{
	if (plans[id] == NULL)
	{
		const DlockPlanDef *def = id < FIRST_KIND_PLAN ? &plan_defs[id] :
			&kind_plan_defs[id - FIRST_KIND_PLAN];
		SPIPlanPtr	plan = SPI_prepare(def->sql, def->nargs, (Oid *) def->argtypes);

		if (plan == NULL)
			elog(ERROR, "pg_dlock: SPI_prepare failed for plan %d: %s",
				 (int) id, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "pg_dlock: SPI_keepplan failed for plan %d", (int) id);
		plans[id] = plan;
	}
	return plans[id];
}

/*
 * Run prepared statement "id" with the given parameters inside an SPI
 * connection the caller opened; returns the number of rows processed and
 * leaves them in SPI_tuptable. nulls follows SPI_execute_plan ('n' = NULL).
 *
 * The lease functions run with the caller's privileges (they reach their
 * rows without the executor), so a statement they need -- an audit record
 * -- switches to the extension owner and a pinned search_path for its
 * duration, as a SECURITY DEFINER function would. The search_path is pinned
 * even when the caller already is the owner: the expiry worker connects as
 * the bootstrap superuser under the database's own settings, which the
 * database owner chooses, and an operator it shadowed in an earlier schema
 * would otherwise run with those rights.
 */
void
dlock_owner_scope_begin(DlockOwnerScope *scope)
{
	Oid			owner = dlock_catalog()->owner;

	GetUserIdAndSecContext(&scope->userid, &scope->sec_context);
	if (scope->userid != owner)
		SetUserIdAndSecContext(owner, scope->sec_context | SECURITY_LOCAL_USERID_CHANGE);
	scope->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
dlock_owner_scope_end(DlockOwnerScope *scope)
{
	AtEOXact_GUC(true, scope->nestlevel);
	SetUserIdAndSecContext(scope->userid, scope->sec_context);
}

/*
 * dlock_execute, and dlock_owner_scope_begin/end for a caller that runs
 * several statements in a row (the switch of user and search_path is then
 * made once): an error inside the scope needs no cleanup, transaction or
 * subtransaction abort restores both, as for a SECURITY DEFINER function.
 */
int
dlock_execute(DlockPlanId id, Datum *values, const char *nulls, long count)
{
	DlockOwnerScope scope;
	int			ret;

	dlock_owner_scope_begin(&scope);
	(void) dlock_require_own_schema();
	(void) dlock_plan(id);
	ret = SPI_execute_plan(plans[id], values, nulls, false, count);
	if (ret < 0)
		elog(ERROR, "pg_dlock: statement %d failed: %s",
			 (int) id, SPI_result_code_string(ret));
	dlock_owner_scope_end(&scope);
	return (int) SPI_processed;
}
