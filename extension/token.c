/*-------------------------------------------------------------------------
 *
 * token.c
 *	  Fencing tokens and owner tokens: the rules every lock kind issues
 *	  them by.
 *
 * A token is (generation << 40) | per-name counter. The counter is kept in
 * the lock's row and raised by the same UPDATE that grants the lease, so it
 * is exactly as durable as the grant (sequences are not: their values can be
 * handed out again after a crash). The generation follows the history
 * position of the grant, (timeline ID - 1) * DLOCK_EPOCHS + epoch + 1, kept
 * in the row's grant_timeline:
 *
 * - The timeline ID covers failover: a promoted standby always runs on a
 *   timeline above its primary's, so its tokens are above every token the
 *   old primary issued, including grants the standby never received, in
 *   whatever epoch.
 * - The token epoch (token_epoch.c) covers the grants a crash lost: under
 *   dlock.durability = fenced a grant does not wait for the WAL flush, and
 *   the first grant after the crash is in a later epoch, so above them.
 *
 * The generation moves whenever the position differs from the row's,
 * including a row restored from another cluster's later timeline.
 *
 * IDENTIFICATION
 *	  extension/token.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/uuid.h"

#include "dlock.h"
#include "args.h"
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

/* Generations a token can carry: those that keep it a positive bigint */
#define MAX_GENERATION ((INT64CONST(1) << (63 - DLOCK_COUNTER_BITS)) - 1)

/*
 * The history position of a grant made on "timeline" in token epoch
 * "epoch": one step per epoch, and every epoch of a timeline below every
 * position of the next timeline. Epoch 0 of timeline 1 is 1, the value tokens of 1.3
 * and before carried for timeline 1.
 */
int32
dlock_token_history(int32 timeline, int32 epoch)
{
	Assert(epoch >= 0 && epoch < DLOCK_EPOCHS);
	return (timeline - 1) * DLOCK_EPOCHS + epoch + 1;
}

/*
 * The token "counter" above the start of "generation". A counter past its
 * 40 bits carries into the generation (it is added, never OR-ed in, so a
 * name at the top of its counter goes on upwards); a generation that no
 * longer fits a bigint is refused rather than wrapped, which would issue
 * negative tokens below every earlier one.
 */
static int64
make_token(int64 generation, int64 counter)
{
	generation += counter >> DLOCK_COUNTER_BITS;
	counter &= TOKEN_COUNTER_MASK;
	if (generation > MAX_GENERATION)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("fencing tokens of this lock are exhausted"),
				 errdetail("The token's generation would be %lld; at most %lld fit in a bigint.",
						   (long long) generation, (long long) MAX_GENERATION)));
	return (generation << DLOCK_COUNTER_BITS) + counter;
}

/*
 * The token rule: the next token after a state (token, grant_history,
 * grant_system) -- a lock row's last grant, a holder counter, or the reap
 * floor, which stands for every row it deleted -- issued now at history
 * position "history" by a server of cluster "system". Nothing (a name that
 * never had a row, an empty floor) is the state (0, 0, 0).
 *
 * One more, and a generation up whenever the position differs. In the
 * same cluster at the same or a later position (a new epoch or a
 * promotion since), up by the positions crossed, so generation minus
 * position stays the same for every grant of the cluster's history: a
 * promoted standby, or the first grant after a crash, issues tokens above
 * every token issued before, even ones it never received or that the crash
 * lost. Any other state -- restored by pg_dump or pg_upgrade into a new
 * cluster, whose timelines start again at 1, from before 1.1, a floor of
 * unknown history (0), or granted at a later epoch by a backend that read
 * the epoch first -- goes up by the whole position, which puts it on the
 * same footing: a later promotion of a standby that missed this grant
 * still lands above it.
 *
 * Both editions implement this rule; regress/token_rule_vectors.csv holds
 * the cases both are checked against (dlock.next_fencing_token).
 */
int64
dlock_token_rule(int64 token, int32 grant_history, int64 grant_system, int32 history,
				 int64 system)
{
	int64		generation = token >> DLOCK_COUNTER_BITS;
	bool		same_history = grant_system != 0 && grant_system == system &&
		history >= grant_history;

	generation += same_history ? history - grant_history : history;
	return make_token(generation, (token & TOKEN_COUNTER_MASK) + 1);
}

/*
 * The next token of a state, granted now by this server at "history".
 */
int64
dlock_next_token(int64 token, int32 grant_history, int64 grant_system, int32 history)
{
	return dlock_token_rule(token, grant_history, grant_system, history,
							(int64) GetSystemIdentifier());
}

/*
 * The state a reap leaves behind for the rows it deleted, whose best next
 * token at "history" is best_next: the token just below it, at that
 * position, so that the floor's next token at every later position of the
 * cluster is what the best of those rows would have given.
 */
int64
dlock_floor_token(int64 best_next)
{
	return best_next - 1;
}

/*
 * How far dlock.after_restore moves every token: a whole timeline of
 * history positions per timeline the lost server may have used after the
 * backup, counted in tokens. highest is the highest token it moves: one
 * that would no longer fit is refused before anything moves.
 */
int64
dlock_restore_shift(int32 lost_timelines, int64 highest)
{
	int64		generations = (int64) lost_timelines *
		(dlock_token_history(2, 0) - dlock_token_history(1, 0));

	(void) make_token((highest >> DLOCK_COUNTER_BITS) + generations, highest & TOKEN_COUNTER_MASK);
	return generations << DLOCK_COUNTER_BITS;
}

/*
 * dlock.next_fencing_token(prev, prev_history, prev_system, history, system)
 * returns bigint: the token rule as a function, for the shared test vectors
 * and for tools; NULL prev is the state of nothing.
 */
PG_FUNCTION_INFO_V1(dlock_next_fencing_token);
Datum
dlock_next_fencing_token(PG_FUNCTION_ARGS)
{
	int64		prev = PG_ARGISNULL(0) ? 0 : PG_GETARG_INT64(0);
	int32		prev_history = PG_ARGISNULL(0) || PG_ARGISNULL(1) ? 0 : PG_GETARG_INT32(1);
	int64		prev_system = PG_ARGISNULL(0) || PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2);

	dlock_require_arg(fcinfo, 3, "history");
	dlock_require_arg(fcinfo, 4, "system");
	if (prev < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("prev must not be negative")));
	if (prev_history < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("prev_history must not be negative")));
	if (PG_GETARG_INT32(3) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("history must be positive")));
	PG_RETURN_INT64(dlock_token_rule(prev, prev_history, prev_system, PG_GETARG_INT32(3),
									 PG_GETARG_INT64(4)));
}

/*
 * Random bytes for owner tokens, drawn from pg_strong_random a batch at a
 * time: each call into it costs about as much as the rest of a grant's
 * argument checks, and a batch of OWNER_TOKEN_BATCH tokens costs one call.
 * The bytes belong to the process that drew them (owner_token_pid): a child
 * forked afterwards must not hand out its parent's tokens again.
 */
#define OWNER_TOKEN_BATCH 64

static uint8 owner_token_bytes[OWNER_TOKEN_BATCH * UUID_LEN];
static int	owner_tokens_left = 0;
static pid_t owner_token_pid = 0;

/*
 * A random (version 4) owner token, for callers that did not bring one.
 */
pg_uuid_t *
dlock_new_owner_token(void)
{
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));
	uint8	   *next;

	if (owner_tokens_left == 0 || owner_token_pid != MyProcPid)
	{
		if (!pg_strong_random(owner_token_bytes, sizeof(owner_token_bytes)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random owner token")));
		owner_tokens_left = OWNER_TOKEN_BATCH;
		owner_token_pid = MyProcPid;
	}
	owner_tokens_left--;
	next = &owner_token_bytes[owner_tokens_left * UUID_LEN];
	memcpy(uuid->data, next, UUID_LEN);
	/* keep no copy of a token once it is issued */
	memset(next, 0, UUID_LEN);
	uuid->data[6] = (uuid->data[6] & 0x0f) | 0x40;
	uuid->data[8] = (uuid->data[8] & 0x3f) | 0x80;
	return uuid;
}
