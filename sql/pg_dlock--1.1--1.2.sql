/* pg_dlock 1.1 -> 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.2'" to load this file. \quit

-- Each section below belongs to one piece of work; keep them apart so that
-- changes merge cleanly.

-- Issue 13: fast path (handoff to the head waiter)

-- Issue 14: lock kinds (shared, permits, multi-lock)

-- Issue 15: leader election and lock events

-- Issue 16: lease policies
