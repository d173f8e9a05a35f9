/*-------------------------------------------------------------------------
 *
 * token.c
 *	  Fencing tokens and owner tokens: the rules every lock kind issues
 *	  them by.
 *
 * A token is (timeline ID << 40) | per-name counter. The counter is kept in
 * the lock's row and raised by the same UPDATE that grants the lease, so it
 * is exactly as durable as the grant (sequences are not: their values can be
 * handed out again after a crash). The timeline ID covers failover: a
 * promoted standby always runs on a timeline above its primary's, so its
 * tokens are above every token the old primary issued, including grants the
 * standby never received. The generation moves whenever the server's
 * timeline differs from the row's grant_timeline, including a row restored
 * from another cluster's later timeline (NEXT_TOKEN in spi_plans.c).
 *
 * IDENTIFICATION
 *	  extension/token.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "utils/uuid.h"

#include "dlock.h"
#include "token.h"

/*
 * Timeline ID to put in new tokens. Caller must have checked that the server
 * is not in recovery: a standby issues no tokens.
 */
int32
dlock_token_timeline(void)
{
	if (dlock_test_ignore_timeline)
		return 1;
#if PG_VERSION_NUM >= 150000
	return (int32) GetWALInsertionTimeLine();
#else
	return (int32) ThisTimeLineID;
#endif
}

/* The per-name counter part of a token */
#define TOKEN_COUNTER_MASK ((INT64CONST(1) << DLOCK_COUNTER_BITS) - 1)

/*
 * The first token of a new name, above the reap floor: the counter carries
 * on above the floor, in generation "timeline" unless the floor is in a
 * later generation already.
 */
int64
dlock_first_token(int64 floor, int32 timeline)
{
	if ((floor >> DLOCK_COUNTER_BITS) >= timeline)
		return floor + 1;
	return ((int64) timeline << DLOCK_COUNTER_BITS) | ((floor & TOKEN_COUNTER_MASK) + 1);
}

/*
 * The next token of a row last granted on grant_timeline by a server of
 * cluster grant_system (its system identifier; 0 when unknown), granted now
 * on "timeline": one more, and a generation up whenever the history differs.
 *
 * In the same cluster on the same or a later timeline (a promotion since),
 * up by the timelines crossed, so generation minus timeline stays the same
 * for every grant of the cluster's history and a promoted standby issues
 * tokens above every token issued before, even ones it never received. Any
 * other row -- restored by pg_dump or pg_upgrade into a new cluster, whose
 * timelines start again at 1, or from before 1.1 -- goes up by the whole
 * timeline, which puts it on the same footing: a later promotion of a
 * standby that missed this grant still lands above it, whatever the row's
 * old timeline was.
 */
int64
dlock_next_token(int64 token, int32 grant_timeline, int64 grant_system, int32 timeline)
{
	int64		generation = token >> DLOCK_COUNTER_BITS;
	bool		same_history = grant_system == (int64) GetSystemIdentifier() &&
		timeline >= grant_timeline;

	if (same_history && timeline == grant_timeline)
		return token + 1;
	generation += same_history ? timeline - grant_timeline : timeline;
	return (generation << DLOCK_COUNTER_BITS) | ((token & TOKEN_COUNTER_MASK) + 1);
}

/*
 * A random (version 4) owner token, for callers that did not bring one.
 */
pg_uuid_t *
dlock_new_owner_token(void)
{
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

	if (!pg_strong_random(uuid->data, UUID_LEN))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random owner token")));
	uuid->data[6] = (uuid->data[6] & 0x0f) | 0x40;
	uuid->data[8] = (uuid->data[8] & 0x3f) | 0x80;
	return uuid;
}
