/*-------------------------------------------------------------------------
 *
 * attempt.c
 *	  Running a lock attempt so that a refusal leaves no row lock behind.
 *
 * When an UPDATE or SELECT ... FOR SHARE finds that the row changed since
 * its snapshot, PostgreSQL (in READ COMMITTED) locks the newest version of
 * the row and then re-checks the WHERE clause on it. If the re-check fails,
 * the statement returns no row but the lock stays until the transaction
 * ends. For pg_dlock that would let a refused acquire -- or a waiter in
 * dlock.acquire, or a failed holds() -- block the current holder's renew and
 * release. So each attempt runs in a subtransaction, which is rolled back
 * when the attempt was refused after taking such a lock.
 *
 * IDENTIFICATION
 *	  extension/attempt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "pg_dlock.h"

/*
 * Run body(arg) in a subtransaction and return its result. When it returns
 * false and the subtransaction took a transaction ID (it locked or wrote a
 * row), the subtransaction is rolled back; otherwise it is kept. Errors roll
 * it back and propagate. Caller has an SPI connection; body's allocations in
 * the caller's memory context survive.
 */
bool
dlock_attempt(bool (*body) (void *arg), void *arg)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	bool		kept;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		kept = body(arg);
		if (!kept && TransactionIdIsValid(GetCurrentTransactionIdIfAny()))
			RollbackAndReleaseCurrentSubTransaction();
		else
			ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		ReThrowError(edata);
	}
	PG_END_TRY();

	return kept;
}
