/*-------------------------------------------------------------------------
 *
 * event_queue.h
 *	  The queue that hands committed events to a sender (event_queue.c).
 *
 * IDENTIFICATION
 *	  extension/event_queue.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_EVENT_QUEUE_H
#define DLOCK_EVENT_QUEUE_H

#include "dlock.h"

/* event_queue.c: hands committed events to a sender per database */

/* The channel lock events are sent on */
#define DLOCK_EVENT_CHANNEL "dlock_events"

extern bool dlock_event_queue_ready(void);
extern int64 dlock_event_queue_reserve(const char *payloads, Size len, int nevents);
extern void dlock_event_queue_finish(int64 pos, bool committed);
extern void dlock_event_queue_log_dropped(int nevents);
extern void dlock_event_queue_init(void);

#endif							/* DLOCK_EVENT_QUEUE_H */
