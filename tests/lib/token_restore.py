#!/usr/bin/env python3
"""tests/lib/token_restore.py -- the first token of a name above a high reap
floor through crashes, and a restore of an older backup, under fenced grants.

  token_restore.py floor   --port P --dir D [--control]
  token_restore.py restore --port P --dir D [--control]
  token_restore.py carry   --port P --dir D [--control]

floor: the reap floor is raised the way docs/limits.md says to carry tokens
over a DROP EXTENSION (its generation is then at or above the history
position), and rounds of fenced first grants of new names -- exclusive leases
and new semaphores -- end in a crash (immediate stop and SIGKILL in turn). A
name the crash lost must get a token above the lost one. With --control the
server runs with dlock.test_ignore_epoch: the lost token must come back.

restore: a cold backup is taken before a server life's first fenced grant;
two lives with fenced grants of every kind follow, each ended by a crash; the
backup is restored and dlock.after_restore() run. Every name's next token must
be above every token the lost lives handed out for it. With --control the
older documented step (one generation up, the floor set by hand) is run
instead, and some token must come out at or below a lost one.

carry: fenced grants of every kind, the last of them lost by a crash, then
DROP EXTENSION and CREATE EXTENSION with the carry-over of docs/fencing.md
(dlock.highest_token() before the drop, dlock.carry_over() after) before any
grant of the new server life: every name's next token, and a crash and the
next after it, must be above every token handed out. With --control the
highest token the tables show is carried over at the new extension's first
position, without the epoch the crash would move.

Used by tests/suites/23-token-restore.sh, which starts the server with
scripts/pg-cluster.sh and wal_writer_delay = 10s. Prints one line per check,
"ok      ..." or "FAILED  ...".
"""

import argparse
import os
import shutil
import subprocess
import time
import uuid

from psql_session import check, note, psql_lines, results

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLUSTER = os.path.join(ROOT, "scripts", "pg-cluster.sh")
DB = "tokens"


def psql(port, sql, fenced=False, db=DB):
    """The statements' output lines; raises on an error."""
    return psql_lines(port, db, sql, fenced)


def cluster(cmd, directory):
    subprocess.run([CLUSTER, cmd, directory], check=True, stdout=subprocess.DEVNULL)


def copy(src, dst):
    """A data directory copied as it is, owner and modes kept."""
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["cp", "-a", src, dst], check=True)


def crash(directory, life):
    cluster("crash" if life % 2 else "kill", directory)
    cluster("restart", directory)


def grants(port, calls):
    """One session, one statement per call, each committed on its own without
    the flush (fenced); returns each call's token (None when refused)."""
    sql = "\n".join(f"SELECT coalesce((({c})).fencing_token::text, 'refused');" for c in calls)
    rows = psql(port, sql, fenced=True)
    return [None if r == "refused" else int(r) for r in rows]


def current_tokens(port, names):
    """The token each name's row or holder slot shows now (None: no row)."""
    got = dict.fromkeys(names)
    arr = "ARRAY[" + ",".join(f"'{n}'" for n in names) + "]"
    for line in psql(port, f"""
        SELECT lock_name || '|' || max(fencing_token) FROM (
          SELECT lock_name, fencing_token FROM dlock.locks WHERE lock_name = ANY ({arr})
          UNION ALL
          SELECT lock_name, fencing_token FROM dlock.lock_holders WHERE lock_name = ANY ({arr})) t
         GROUP BY lock_name"""):
        name, token = line.split("|")
        got[name] = int(token)
    return got


def floor_run(port, directory, control, rounds):
    # lives with fenced grants move the epoch, and the tokens' generation
    # with it; the carry-over of DROP EXTENSION then gives the new extension,
    # whose epochs start again at 0, a floor in a generation above the
    # history positions of the rounds that follow
    for life in range(rounds + 2):
        grants(port, ["dlock.try_acquire('carry', '1 second')"])
        crash(directory, life)
    psql(port, "SELECT dlock.try_acquire('carry', '1 second');")
    highest = int(psql(port, "SELECT max(fencing_token) FROM dlock.locks;")[0])
    psql(port, f"""DROP EXTENSION pg_dlock; CREATE EXTENSION pg_dlock;
        INSERT INTO dlock.token_floor (reaped_max, reaped_at) VALUES ({highest}, now());""")
    issued = {}      # name -> tokens in the order they were returned
    lost = repeated = below = 0
    for life in range(1, rounds + 1):
        # the life's first fenced grant marks its epoch durably; the rest are not flushed
        grants(port, [f"dlock.try_acquire('warm:{life}', '1 hour')"])
        names = [f"new:{life}:{i}" for i in range(15)]
        sems = [f"sem:{life}:{i}" for i in range(5)]
        calls = [f"dlock.try_acquire('{n}', '1 hour')" for n in names]
        calls += [f"dlock.try_acquire_permit('{n}', 2, '1 hour')" for n in sems]
        for name, token in zip(names + sems, grants(port, calls)):
            issued.setdefault(name, []).append(token)
        crash(directory, life)
        now = current_tokens(port, names + sems)
        gone = [n for n in names + sems if now[n] is None]
        lost += len(gone)
        again = [f"dlock.try_acquire('{n}', '1 hour')" if n.startswith("new:")
                 else f"dlock.try_acquire_permit('{n}', 2, '1 hour')" for n in gone]
        for name, token in zip(gone, grants(port, again) if again else []):
            earlier = issued[name]
            repeated += token in earlier
            below += token <= max(earlier)
            issued[name].append(token)
        note(f"life {life}: {len(gone)} of {len(names + sems)} first grants lost by the crash")
    if control:
        check("control: a lost first token is issued again",
              lost > 0 and repeated > 0, f"{lost} lost, {repeated} issued twice")
        return
    check("the crashes lost first grants", lost > 0, f"{lost} lost")
    check("no first token issued twice above a high floor", repeated == 0, f"{repeated} repeated")
    check("every token after a crash above the token the crash lost", below == 0, f"{below} not above")


def restore_run(port, directory, control):
    names = [f"r:{i}" for i in range(6)]
    # the backup's state: every name granted once, the leases short
    psql(port, "\n".join(f"SELECT dlock.try_acquire('{n}', '1 second');" for n in names) +
         "\nSELECT dlock.try_acquire_shared('rw', '1 second'); "
         "SELECT dlock.try_acquire_permit('sem', 2, '1 second');")
    cluster("stop", directory)
    backup = directory + "/backup"
    copy(directory + "/data", backup)
    cluster("restart", directory)
    time.sleep(1.1)
    issued = {}
    fresh = []
    for life in (1, 2):
        for _ in range(3):
            calls = []
            for n in names:
                o = uuid.uuid4()
                calls.append(f"dlock.try_acquire('{n}', '1 hour', '{o}')")
                calls.append(f"(SELECT l FROM dlock.try_acquire('{n}', '1 hour', '{o}') l "
                             f"WHERE dlock.release('{n}', '{o}'))")
            new = [f"n:{life}:{i}" for i in range(4)]
            fresh += new
            calls += [f"dlock.try_acquire('{n}', '1 hour')" for n in new]
            o = uuid.uuid4()
            calls.append(f"dlock.try_acquire_shared('rw', '1 hour', '{o}')")
            calls.append(f"(SELECT l FROM dlock.try_acquire_shared('rw', '1 hour', '{o}') l "
                         f"WHERE dlock.release('rw', '{o}'))")
            o = uuid.uuid4()
            calls.append(f"dlock.try_acquire_permit('sem', 2, '1 hour', '{o}')")
            calls.append(f"(SELECT l FROM dlock.try_acquire_permit('sem', 2, '1 hour', '{o}') l "
                         f"WHERE dlock.release('sem', '{o}'))")
            who = [n for n in names for _ in (0, 1)] + new + ["rw", "rw", "sem", "sem"]
            for name, token in zip(who, grants(port, calls)):
                if token is not None:
                    issued.setdefault(name, []).append(token)
        crash(directory, life)
        note(f"life {life}: {sum(len(v) for v in issued.values())} tokens handed out so far")
    # the primary is lost; the backup comes back
    cluster("stop", directory)
    copy(backup, directory + "/data")
    cluster("restart", directory)
    if control:
        psql(port, """UPDATE dlock.distributed_lock SET fencing_seq = fencing_seq + (1::bigint << 40);
            INSERT INTO dlock.token_floor (reaped_max, reaped_at)
            SELECT max(fencing_seq), now() FROM dlock.distributed_lock;""")
    else:
        psql(port, "SELECT dlock.after_restore();")
    time.sleep(1.1)
    after = {}
    for _ in range(3):
        calls, who = [], []
        for n in names + fresh:
            o = uuid.uuid4()
            calls.append(f"(SELECT l FROM dlock.try_acquire('{n}', '1 hour', '{o}') l "
                         f"WHERE dlock.release('{n}', '{o}'))")
            who.append(n)
        for kind, call in (("rw", "try_acquire_shared('rw', '1 hour', '{o}')"),
                           ("sem", "try_acquire_permit('sem', 2, '1 hour', '{o}')")):
            o = uuid.uuid4()
            calls.append(f"(SELECT l FROM dlock.{call.format(o=o)} l WHERE dlock.release('{kind}', '{o}'))")
            who.append(kind)
        for name, token in zip(who, grants(port, calls)):
            if token is not None:
                after.setdefault(name, []).append(token)
    not_above = [(n, min(after[n]), max(issued[n])) for n in issued
                 if n in after and min(after[n]) <= max(issued[n])]
    granted = sum(len(v) for v in after.values())
    if control:
        check("control: the one-generation step hands out tokens at or below lost ones",
              len(not_above) > 0, f"{len(not_above)} names, e.g. {not_above[:2]}")
        return
    check("the restored server granted every name again", all(n in after for n in issued),
          f"{granted} grants")
    check("after dlock.after_restore every token is above every token of the lost lives",
          not not_above, f"{len(not_above)} names not above, e.g. {not_above[:2]}")


def carry_run(port, directory, control, rounds):
    names = [f"c:{i}" for i in range(8)]
    issued = {}
    lost = top_lost = 0
    life = 0
    # the control judges only once a crash lost the top name's last grant:
    # more lives, up to a bound, until one did
    while life < rounds or (control and top_lost == 0 and life < 4 * rounds):
        life += 1
        grants(port, [f"dlock.try_acquire('warm:{life}', '1 hour')"])
        calls, who = [], []
        for n in names:
            o = uuid.uuid4()
            calls.append(f"(SELECT l FROM dlock.try_acquire('{n}', '1 hour', '{o}') l WHERE dlock.release('{n}', '{o}'))")
            who.append(n)
        o = uuid.uuid4()
        calls.append(f"(SELECT l FROM dlock.try_acquire_shared('c:rw', '1 hour', '{o}') l WHERE dlock.release('c:rw', '{o}'))")
        who.append("c:rw")
        fresh = [f"c:new:{life}:{i}" for i in range(4)]
        calls += [f"dlock.try_acquire('{n}', '1 hour')" for n in fresh]
        who += fresh
        # last, the name with the most grants and so the highest token: the
        # crash loses the tail of the burst
        for _ in range(20):
            o = uuid.uuid4()
            calls.append(f"(SELECT l FROM dlock.try_acquire('c:top', '1 hour', '{o}') l WHERE dlock.release('c:top', '{o}'))")
            who.append("c:top")
        for name, token in zip(who, grants(port, calls)):
            if token is not None:
                issued.setdefault(name, []).append(token)
        crash(directory, life)
        now = current_tokens(port, fresh + ["c:top"])
        lost += sum(1 for n in fresh if now[n] is None)
        top = now["c:top"] is None or now["c:top"] < max(issued.get("c:top", [0]))
        lost += top
        top_lost += top
        # the carry-over, before any grant of the new server life
        if control:
            # the highest token the tables show, at the new extension's first
            # position: the epoch that the crash would move is not carried
            highest = psql(port, """SELECT max(t) FROM (SELECT max(fencing_token) FROM dlock.locks
                UNION ALL SELECT max(fencing_token) FROM dlock.lock_holders) m(t)""")[0]
            psql(port, f"DROP EXTENSION pg_dlock; CREATE EXTENSION pg_dlock; SELECT dlock.carry_over({highest}, 1);")
        else:
            token, history = psql(port, "SELECT fencing_token, history FROM dlock.highest_token()")[0].split("|")
            psql(port, f"DROP EXTENSION pg_dlock; CREATE EXTENSION pg_dlock; SELECT dlock.carry_over({token}, {history});")
        note(f"life {life}: carried over, {lost} new names lost so far")
    after = {}
    for name in issued:
        call = (f"dlock.try_acquire_shared('{name}', '1 hour')" if name == "c:rw"
                else f"dlock.try_acquire('{name}', '1 hour')")
        token = grants(port, [call])[0]
        if token is not None:
            after[name] = token
    not_above = [(n, after[n], max(issued[n])) for n in after if after[n] <= max(issued[n])]
    # every token of a name returned above every one returned before it, in every life
    not_above += [(n, t, max(ts[:i])) for n, ts in issued.items() for i, t in enumerate(ts)
                  if i and t <= max(ts[:i])]
    if control:
        check("control: the highest visible token carried over without the epoch: a token at or below a lost one",
              top_lost > 0 and len(not_above) > 0,
              f"{len(not_above)} names, e.g. {not_above[:2]}, after {life} lives, the top name's grant lost in {top_lost}")
        return
    check("the crashes before the carry-overs lost grants", lost > 0, f"{lost} lost")
    check("every name granted again after the carry-overs", len(after) == len(issued), f"{len(after)} of {len(issued)}")
    check("after DROP EXTENSION and dlock.carry_over every token is above every earlier one",
          not not_above, f"{len(not_above)} names not above, e.g. {not_above[:2]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["floor", "restore", "carry"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--control", action="store_true")
    a = ap.parse_args()
    if a.mode == "floor":
        floor_run(a.port, a.dir, a.control, a.rounds)
    elif a.mode == "carry":
        carry_run(a.port, a.dir, a.control, a.rounds)
    else:
        restore_run(a.port, a.dir, a.control)
    print(f"token_restore: {results['passed']} passed, {results['failed']} failed")


if __name__ == "__main__":
    main()
