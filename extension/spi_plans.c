/*-------------------------------------------------------------------------
 *
 * spi_plans.c
 *	  Every statement pg_dlock runs, prepared once per backend and kept.
 *
 * Callers are SQL functions declared SECURITY DEFINER with search_path
 * pinned to pg_catalog, pg_temp, so these statements run as the extension
 * owner and resolve names the same way on every call. Each execution first
 * checks that "dlock" is still the extension's own schema (schema.c). Values always travel
 * as parameters: lock names are data, never SQL.
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
#include "utils/snapmgr.h"

#include "pg_dlock.h"

/*
 * The first token of a name (README "Fencing tokens"), after the reap floor
 * "floor": the counter carries on above the floor, in generation $5 (the
 * server's timeline) unless the floor is in a later generation already.
 */
#define FIRST_TOKEN(floor) \
	"CASE WHEN (" floor " >> 40) >= $5 THEN " floor " + 1" \
	" ELSE ($5 << 40) | ((" floor " & 1099511627775) + 1) END"

/*
 * The next token of an existing row: one more, in a later generation
 * whenever the server's timeline differs from the row's grant_timeline.
 *
 * Within one cluster's history timelines only grow, and each switch adds
 * (new timeline - old timeline) generations, so generation minus timeline
 * is the same for every grant of the history: a promoted standby's tokens
 * are above every token issued before the promotion, even ones it never
 * received. A grant_timeline above the server's means the row comes from
 * another history (restore or pg_upgrade into a new cluster, which starts
 * on timeline 1): the generation then goes up by the whole timeline ID, so
 * the new history starts above the old one and each of its timelines stays
 * above the one before, on a server that received the row's later grants
 * or one that did not.
 */
#define NEXT_TOKEN \
	"CASE WHEN $5 = l.grant_timeline THEN l.fencing_seq + 1" \
	" ELSE (((l.fencing_seq >> 40)" \
	"        + CASE WHEN $5 > l.grant_timeline THEN $5 - l.grant_timeline ELSE $5 END) << 40)" \
	"      | ((l.fencing_seq & 1099511627775) + 1) END"

/* Same owner, lease still live: an acquire being retried */
/*
 * Advisory lock key ("dlock" in ASCII) that orders dlock.reap against the
 * creation of new names; see PLAN_ACQUIRE_NEW and PLAN_REAP.
 */
#define DLOCK_FLOOR_LOCK_KEY "431198038891"

/*
 * End of a lease of "usecs" microseconds (the parameter given by
 * dlock_arg_ttl) from "clock": exact microseconds, no calendar arithmetic,
 * so the lease is as long as the ttl that was checked.
 */
#define LEASE_END(clock, usecs) \
	"(" clock " + " usecs " * '1 microsecond'::pg_catalog.interval)"

#define IS_RETRY "(l.owner_token = $3 AND l.lease_until > pg_catalog.clock_timestamp())"

typedef struct DlockPlanDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[6];
} DlockPlanDef;

static const DlockPlanDef plan_defs[NUM_DLOCK_PLANS] = {
	[PLAN_ACQUIRE_EXISTING] = {
		"UPDATE dlock.distributed_lock l SET"
		" fencing_seq = CASE WHEN " IS_RETRY " THEN l.fencing_seq ELSE " NEXT_TOKEN " END,"
		" grant_timeline = CASE WHEN " IS_RETRY " THEN l.grant_timeline ELSE $5 END,"
		" acquisitions = l.acquisitions + CASE WHEN " IS_RETRY " THEN 0 ELSE 1 END,"
		" renewals = CASE WHEN " IS_RETRY " THEN l.renewals + 1 ELSE 0 END,"
		" taken_over = CASE WHEN " IS_RETRY " THEN l.taken_over"
		"   ELSE l.owner_token IS NOT NULL END,"
		" takeovers = l.takeovers + CASE WHEN l.owner_token IS NOT NULL AND NOT " IS_RETRY " THEN 1 ELSE 0 END,"
		" acquired_at = CASE WHEN " IS_RETRY " THEN l.acquired_at ELSE pg_catalog.clock_timestamp() END,"
		" owner_token = $3,"
		" holder = $4,"
		" lease_until = " LEASE_END("pg_catalog.clock_timestamp()", "$2") ","
		" updated_at = pg_catalog.clock_timestamp()"
		" WHERE l.lock_name = $1"
		"   AND (l.owner_token IS NULL OR l.owner_token = $3"
		"        OR l.lease_until <= pg_catalog.clock_timestamp())"
		" RETURNING l.lock_name, l.owner_token, l.fencing_seq, l.lease_until,"
		"   l.renewals = 0 AS new_lease, l.taken_over",
		5, {TEXTOID, INT8OID, UUIDOID, TEXTOID, INT8OID}
	},
	/*
	 * A new name starts above every reaped token: $6 is the floor, read by
	 * PLAN_FLOOR_READ while the caller holds the floor lock in shared mode.
	 */
	[PLAN_ACQUIRE_NEW] = {
		"INSERT INTO dlock.distributed_lock AS l"
		" (lock_name, owner_token, fencing_seq, lease_until, updated_at, acquired_at,"
		"  holder, renewals, acquisitions, takeovers, grant_timeline)"
		" VALUES ($1, $3, " FIRST_TOKEN("$6") ","
		"  " LEASE_END("pg_catalog.clock_timestamp()", "$2") ", pg_catalog.clock_timestamp(),"
		"  pg_catalog.clock_timestamp(), $4, 0, 1, 0, $5)"
		" ON CONFLICT (lock_name) DO NOTHING"
		" RETURNING l.lock_name, l.owner_token, l.fencing_seq, l.lease_until,"
		"   true AS new_lease, false AS taken_over",
		6, {TEXTOID, INT8OID, UUIDOID, TEXTOID, INT8OID, INT8OID}
	},
	/* run with the latest snapshot: see dlock_execute_latest */
	[PLAN_FLOOR_READ] = {
		"SELECT COALESCE(pg_catalog.max(t.reaped_max), 0) FROM dlock.token_floor t",
		0, {0}
	},
	[PLAN_FLOOR_SHARED] = {
		"SELECT pg_catalog.pg_advisory_xact_lock_shared(" DLOCK_FLOOR_LOCK_KEY ")",
		0, {0}
	},
	[PLAN_FLOOR_EXCLUSIVE] = {
		"SELECT pg_catalog.pg_try_advisory_xact_lock(" DLOCK_FLOOR_LOCK_KEY ")",
		0, {0}
	},
	[PLAN_LEASE_EXPIRY] = {
		"SELECT l.lease_until, l.owner_token IS NOT NULL"
		"   AND l.lease_until > pg_catalog.clock_timestamp() AS live, l.fencing_seq"
		" FROM dlock.distributed_lock l WHERE l.lock_name = $1",
		1, {TEXTOID}
	},
	[PLAN_RENEW] = {
		"UPDATE dlock.distributed_lock l SET"
		" lease_until = " LEASE_END("pg_catalog.clock_timestamp()", "$3") ","
		" renewals = l.renewals + 1,"
		" updated_at = pg_catalog.clock_timestamp()"
		" WHERE l.lock_name = $1 AND l.owner_token = $2"
		"   AND l.lease_until > pg_catalog.clock_timestamp()"
		" RETURNING l.lease_until",
		3, {TEXTOID, UUIDOID, INT8OID}
	},
	[PLAN_RELEASE] = {
		"UPDATE dlock.distributed_lock l SET"
		" owner_token = NULL,"
		" lease_until = pg_catalog.clock_timestamp(),"
		" updated_at = pg_catalog.clock_timestamp()"
		" WHERE l.lock_name = $1 AND l.owner_token = $2"
		"   AND l.lease_until > pg_catalog.clock_timestamp()"
		" RETURNING l.fencing_seq, l.holder",
		2, {TEXTOID, UUIDOID}
	},
	/* FOR SHARE conflicts with the UPDATE of a takeover, release or force release */
	[PLAN_HOLDS] = {
		"SELECT 1 FROM dlock.distributed_lock l"
		" WHERE l.lock_name = $1 AND l.fencing_seq = $2"
		"   AND l.owner_token IS NOT NULL"
		"   AND l.lease_until > pg_catalog.clock_timestamp()"
		" FOR SHARE",
		2, {TEXTOID, INT8OID}
	},
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
	[PLAN_FORCE_RELEASE] = {
		"UPDATE dlock.distributed_lock l SET"
		" owner_token = NULL,"
		" lease_until = pg_catalog.clock_timestamp(),"
		" updated_at = pg_catalog.clock_timestamp()"
		" WHERE l.lock_name = $1 AND l.owner_token IS NOT NULL"
		"   AND l.lease_until > pg_catalog.clock_timestamp()"
		" RETURNING l.fencing_seq, l.holder",
		1, {TEXTOID}
	},

	/*
	 * Caller holds the floor lock exclusively (PLAN_FLOOR_EXCLUSIVE), so no
	 * new name is being created from the old floor meanwhile. Rows locked by
	 * an acquire are skipped, not waited for.
	 */
	[PLAN_REAP] = {
		"WITH victims AS ("
		"  SELECT l.lock_name FROM dlock.distributed_lock l"
		"  WHERE (l.owner_token IS NULL OR l.lease_until <= pg_catalog.clock_timestamp())"
		"    AND COALESCE(l.lease_until, l.updated_at)"
		"        < pg_catalog.clock_timestamp() - $1"
		"  LIMIT $2 FOR UPDATE SKIP LOCKED"
		"), gone AS ("
		"  DELETE FROM dlock.distributed_lock l USING victims v"
		"  WHERE l.lock_name = v.lock_name"
		"  RETURNING l.fencing_seq"
		"), raised AS ("
		"  INSERT INTO dlock.token_floor (reaped_max, reaped_at)"
		"  SELECT pg_catalog.max(g.fencing_seq), pg_catalog.clock_timestamp() FROM gone g"
		"  HAVING pg_catalog.count(*) > 0"
		"  RETURNING 1"
		") SELECT pg_catalog.count(*)::int8, (SELECT pg_catalog.count(*) FROM raised) FROM gone",
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
};

static SPIPlanPtr plans[NUM_DLOCK_PLANS];

/*
 * The kept plan of statement "id", prepared on first use.
 */
static SPIPlanPtr
dlock_plan(DlockPlanId id)
{
	if (plans[id] == NULL)
	{
		const DlockPlanDef *def = &plan_defs[id];
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
 */
int
dlock_execute(DlockPlanId id, Datum *values, const char *nulls, long count)
{
	int			ret;

	(void) dlock_require_own_schema();
	(void) dlock_plan(id);
	ret = SPI_execute_plan(plans[id], values, nulls, false, count);
	if (ret < 0)
		elog(ERROR, "pg_dlock: statement %d failed: %s",
			 (int) id, SPI_result_code_string(ret));
	return (int) SPI_processed;
}

/*
 * Like dlock_execute for a read-only statement, but with the latest
 * snapshot instead of the transaction's: in REPEATABLE READ and SERIALIZABLE
 * the transaction snapshot may predate a reap that the caller has just
 * waited for, and the floor must include it.
 */
int
dlock_execute_latest(DlockPlanId id, Datum *values, const char *nulls, long count)
{
	int			ret;

	(void) dlock_require_own_schema();
	(void) dlock_plan(id);
	ret = SPI_execute_snapshot(plans[id], values, nulls, GetLatestSnapshot(),
							   InvalidSnapshot, true, false, count);
	if (ret < 0)
		elog(ERROR, "pg_dlock: statement %d failed: %s",
			 (int) id, SPI_result_code_string(ret));
	return (int) SPI_processed;
}
