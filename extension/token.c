/*-------------------------------------------------------------------------
 *
 * token.c
 *	  The timeline part of fencing tokens.
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

#include "pg_dlock.h"

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
