-- Leader election: dlock.leader, and who may turn dlock.events off
\set VERBOSITY terse
\pset null '(null)'

-- nobody leads an election never held: NULL
SELECT dlock.leader('election:scheduler') IS NULL AS no_leader;

-- a candidate wins: its holder, token, since and lease_until, on the server clock
SELECT fencing_token AS token
  FROM dlock.try_acquire('election:scheduler', '1 minute',
                         '00000000-0000-0000-0000-0000000000c1', 'scheduler-1') \gset
SELECT holder, fencing_token = :token AS same_token,
       since <= clock_timestamp() AS since_past,
       lease_until > clock_timestamp() + interval '50 seconds' AS lease_live
  FROM dlock.leader('election:scheduler');

-- another candidate is refused; the leader is unchanged
SELECT fencing_token FROM dlock.try_acquire('election:scheduler', '1 minute',
                                            '00000000-0000-0000-0000-0000000000c2', 'scheduler-2');
SELECT holder FROM dlock.leader('election:scheduler');

-- the leader resigns: no leader, and the next one has a higher token
SELECT dlock.release('election:scheduler', '00000000-0000-0000-0000-0000000000c1');
SELECT dlock.leader('election:scheduler') IS NULL AS no_leader;
SELECT fencing_token > :token AS higher_token
  FROM dlock.try_acquire('election:scheduler', '1 minute',
                         '00000000-0000-0000-0000-0000000000c2', 'scheduler-2');
SELECT e.holder, e.since = l.acquired_at AS since_is_grant
  FROM dlock.leader('election:scheduler') e, dlock.locks l
 WHERE l.lock_name = 'election:scheduler';

-- an expired lease is no leader, even before anyone takes it over
SELECT fencing_token FROM dlock.try_acquire('election:short', '10 milliseconds',
                                            holder => 'short-lived') \gset
SELECT pg_sleep(0.05);
SELECT dlock.leader('election:short') IS NULL AS no_leader;

-- the owner token is never part of the answer
SELECT pg_get_function_arguments('dlock.leader(text)'::regprocedure);

-- refused: NULL, empty and too long names, as for the lease functions
SELECT dlock.leader(NULL);
SELECT dlock.leader('');
SELECT dlock.leader(repeat('x', 201));

-- anyone may ask who leads
CREATE ROLE regress_follower;
SET ROLE regress_follower;
SELECT holder FROM dlock.leader('election:scheduler');
-- refused: dlock.events is for superusers, so a session cannot hide its grants from observers
SET dlock.events = off;
RESET ROLE;
DROP ROLE regress_follower;

-- dlock.events is off unless configured
SHOW dlock.events;
