/*-------------------------------------------------------------------------
 *
 * events.h
 *	  Lock events (events.c).
 *
 * IDENTIFICATION
 *	  extension/events.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_EVENTS_H
#define DLOCK_EVENTS_H

#include "dlock.h"
#include "event_queue.h"

/* events.c: lock events (README "Lock events and leader election") */
extern bool dlock_events_enabled;
extern void dlock_event(const char *event, text *lock_name, int64 token,
						text *holder, TimestampTz lease_until);
extern void dlock_events_init(void);
extern TimestampTz dlock_events_xact_end(XactEvent event);
extern void dlock_events_subxact_end(SubXactEvent event);

#endif							/* DLOCK_EVENTS_H */
