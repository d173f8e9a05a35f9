#!/usr/bin/env python3
"""tests/faults/checker.py -- checks one fault-harness run against the invariants.

Input: a run directory written by harness.py
  history/*.jsonl  one file per worker: "invoke" lines and their completions
                   ("ok", "refused", "fail", "unknown"), t = CLOCK_MONOTONIC ns
  events.jsonl     the orchestrator's fault_start / fault_end events (same clock)
  final.json       final database state: write_log rows, resource rows, locks
  scenario.json    the scenario and its extra checks

Invariants:
  1 on each resource, accepted tokens never decrease
      - final write_log, in commit order per resource
      - history: an acknowledged write never has a lower token than a write
        acknowledged before it was invoked
  2 no two holders' writes interleave on a resource guarded by holds()
      - the read-modify-write chain of each g: resource is unbroken (every
        write read the value the previous write left), and the resource row
        ends at the last logged value
  3 no token is ever issued to two different owners for one name, and a
    later grant never gets a lower token than an earlier, finished one
  4 every write acknowledged as committed is in the final state, and no
    write reported refused or failed is
  5 after each fault ends, the time until a worker next acquires the lock
    (recovery time); a fault with no recovery before the run ended is a
    violation (liveness). In an election (check "election"), from each fault
    on the leader to the next grant to another candidate (failover time)
  6 in an election, every observer alive at the end reports the leader (its
    fencing token) the server has, and no observer ever reports a leader
    older than one it reported before

Scenario extras (scenario.json "checks"):
  async_loss          acknowledged writes lost in an asynchronous failover are
                      counted, not flagged (asynchronous replication loses
                      acknowledged commits by definition); the token checks stay
  acquire_bound_ms    acquires on the fault's lock during the fault finish within
                      this bound (lock_timeout plus slack)
  local_belief        no write the worker believed covered by its lease (local
                      clock) was refused because the lease was gone
  converge            every uncertain acquire is resolved by a retry with the
                      same owner token; a retry soon after a reply keeps its token
  min_unknown         the fault must have produced at least this many unknowns
  min_stale_refusals  ... and at least this many late writes refused by the fencing
  election            the candidates' writes are checked as above; recovery is
                      failover (5); observers/*.jsonl and election.json are
                      checked (6)
  min_lost_grants     fenced grants (dlock.durability = fenced) commit without
                      the WAL flush: at least this many acknowledged grants must
                      be unknown to the server after a crash, or the crashes never
                      reached what the scenario tests. The harness reads each
                      name's highest token right after each restart ("recovered"
                      events, before any client goes on); a grant acknowledged
                      before that crash with a higher token was lost
  client_deadline     the keep-alive workers' leases (the client library's
                      deadlines, recorded with each grant and write): no local
                      deadline later than the server's lease_until, and no write
                      the client believed covered invoked after another owner's
                      later grant -- the client reports a lost lease at its
                      deadline, not after (tests/ha/ha_checker.py's belief check,
                      strict)
  session_takeover    session-bound leases: after a holder is SIGKILLed (its
                      session ends), the lock is granted again before the
                      killed lease would have expired (fault_start carries
                      expires_in_ms, the lease's time left at the kill)

Any operation that failed with an error the faults cannot explain (anything
but lost connections, cancels, timeouts, a read-only server or serialization
failures) is flagged too: such an error means the workload itself is broken.

Usage: checker.py RUN_DIR [--json OUT]   exit 0 = no violations
"""

import argparse
import bisect
import glob
import gzip
import json
import os
import statistics
import sys

MS = 1_000_000


# Why the server refuses a fenced write whose lease is over: the evidence that
# a fault reached the fencing.
LATE_WRITE_REFUSALS = ("not_held", "PD001", "PD002")

def load_jsonl(path):
    rows = []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                # A worker killed mid-write leaves a torn last line; ignore it.
                continue
    return rows


class Op:
    __slots__ = ("worker", "id", "op", "lock", "owner", "token", "res", "invoke",
                 "complete", "result", "why", "before", "after", "local_valid", "mode")

    def __init__(self, worker, inv):
        self.worker = worker
        self.id = inv["id"]
        self.op = inv.get("op")
        self.lock = inv.get("lock")
        self.owner = inv.get("owner") or None
        self.token = inv.get("token")
        self.res = inv.get("res")
        self.invoke = inv["t"]
        self.complete = None
        self.result = None  # None = never completed (worker stopped or killed)
        self.why = None
        self.before = None
        self.after = None
        self.local_valid = inv.get("local_valid")
        self.mode = inv.get("mode")


def load_history(run_dir):
    """The operations of all workers, the faults the workers made themselves (a
    slow holder's pause, a read-modify-write held open) as fault events, and
    which lock-call implementations the workers used."""
    ops = []
    faults = []
    impls = set()
    for path in sorted(glob.glob(os.path.join(run_dir, "history", "*.jsonl*"))):
        pending = {}
        for rec in load_jsonl(path):
            ev = rec.get("ev")
            if ev == "start":
                impls.add(rec.get("impl", "?"))
            if ev == "note" and rec.get("what") == "slow":
                faults.append({"t": rec["t"], "ev": "fault_start", "fault": "slow holder",
                               "lock": rec.get("lock")})
                faults.append({"t": rec["t"] + rec.get("ms", 0) * MS, "ev": "fault_end",
                               "fault": "slow holder", "lock": rec.get("lock")})
            if ev == "invoke":
                op = Op(rec["w"], rec)
                pending[rec["id"]] = op
                ops.append(op)
                if rec.get("delay_ms"):
                    faults.append({"t": rec["t"], "ev": "fault_start", "fault": "slow write",
                                   "lock": rec.get("lock")})
                    faults.append({"t": rec["t"] + rec["delay_ms"] * MS, "ev": "fault_end",
                                   "fault": "slow write", "lock": rec.get("lock")})
            elif ev in ("ok", "refused", "fail", "unknown"):
                op = pending.pop(rec["id"], None)
                if op is None:
                    continue
                op.complete = rec["t"]
                op.result = ev
                op.why = rec.get("why")
                if op.op == "acquire":
                    if rec.get("token") is not None:
                        op.token = rec["token"]
                    if rec.get("owner"):
                        op.owner = rec["owner"]
                if "before" in rec:
                    op.before = rec["before"]
                    op.after = rec["after"]
    return ops, faults, sorted(impls)


class Result:
    def __init__(self, scenario):
        self.scenario = scenario
        self.violations = {"1": [], "2": [], "3": [], "4": [], "5": [], "6": [], "extra": []}
        self.info = {}

    def flag(self, invariant, message):
        self.violations[invariant].append(message)

    def count(self):
        return sum(len(v) for v in self.violations.values())


def check_tokens_in_final_state(final, res):
    """Invariants 1 and 2 on the final write_log (commit order per resource)."""
    by_resource = {}
    for row in final.get("write_log", []):
        by_resource.setdefault(row["resource"], []).append(row)
    for resource, rows in by_resource.items():
        rows.sort(key=lambda r: r["id"])
        last_token = None
        last_after = None
        for row in rows:
            if last_token is not None and row["token"] < last_token:
                res.flag("1", f"{resource}: token {row['token']} accepted after {last_token} "
                              f"(write_log id {row['id']}, {row['worker']} op {row['op']})")
            if resource.startswith("g:"):
                expected = 0 if last_after is None else last_after
                if row["before"] != expected:
                    res.flag("2", f"{resource}: write {row['worker']} op {row['op']} (token "
                                  f"{row['token']}) read {row['before']} but the previous write "
                                  f"left {expected}: writes interleaved, an update was lost")
            last_token = row["token"] if last_token is None else max(last_token, row["token"])
            last_after = row["after"]
        if resource.startswith("g:"):
            current = final.get("resources", {}).get(resource)
            if current is not None and last_after is not None and current != last_after:
                res.flag("2", f"{resource}: row holds {current}, the last logged write left {last_after}")
    # A guarded resource written without a log row would also show here.
    for resource, current in final.get("resources", {}).items():
        if resource.startswith("g:") and resource not in by_resource and current not in (0, None):
            res.flag("2", f"{resource}: row holds {current} but no write was logged")


def check_tokens_in_history(ops, res):
    """Invariant 1 in real time: acknowledged writes per resource."""
    by_resource = {}
    for op in ops:
        if op.op == "write" and op.result == "ok":
            by_resource.setdefault(op.res, []).append(op)
    for resource, writes in by_resource.items():
        done = sorted(writes, key=lambda o: o.complete)
        done_times = [o.complete for o in done]
        prefix_max = []
        best = None
        for o in done:
            best = o if best is None or o.token > best.token else best
            prefix_max.append(best)
        for o in writes:
            i = bisect.bisect_left(done_times, o.invoke)
            if i == 0:
                continue
            earlier = prefix_max[i - 1]
            if earlier.token > o.token:
                res.flag("1", f"{resource}: write with token {o.token} ({o.worker} op {o.id}) "
                              f"acknowledged after a write with token {earlier.token} "
                              f"({earlier.worker} op {earlier.id}) had been acknowledged")


def check_token_issue(ops, final, res, scenario):
    """Invariant 3: one owner per (lock, token); later grants get higher tokens."""
    owners = {}
    grants = {}
    for op in ops:
        if op.op != "acquire" or op.token is None:
            continue
        # Only confirmed grants: an uncertain acquire's token may never have
        # committed (the transaction died before COMMIT), and then the server
        # rightly hands the same number to the next owner.
        if op.result != "ok":
            continue
        owners.setdefault((op.lock, op.token), set()).add(op.owner)
        grants.setdefault(op.lock, []).append(op)
    for (lock, token), who in sorted(owners.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(who) > 1:
            res.flag("3", f"{lock}: token {token} issued to {len(who)} owners")
    for lock, got in grants.items():
        done = sorted(got, key=lambda o: o.complete)
        done_times = [o.complete for o in done]
        prefix_max = []
        best = None
        for o in done:
            best = o if best is None or o.token > best.token else best
            prefix_max.append(best)
        for o in got:
            i = bisect.bisect_left(done_times, o.invoke)
            if i == 0:
                continue
            earlier = prefix_max[i - 1]
            if earlier.owner != o.owner and o.token <= earlier.token:
                res.flag("3", f"{lock}: token {o.token} granted to {o.worker} after token "
                              f"{earlier.token} had been granted to another owner")
    if not scenario.get("checks", {}).get("async_loss"):
        final_tokens = {l["lock_name"]: l["fencing_token"] for l in final.get("locks", [])}
        for lock, got in grants.items():
            top = max(o.token for o in got)
            if lock in final_tokens and final_tokens[lock] is not None and final_tokens[lock] < top:
                res.flag("3", f"{lock}: the server's token went back to {final_tokens[lock]} "
                              f"after {top} was granted")


def check_durability(ops, final, res, scenario):
    """Invariant 4: acknowledged writes are present; refused ones are absent."""
    logged = {(row["worker"], row["op"]): row for row in final.get("write_log", [])}
    lost = 0
    for op in ops:
        if op.op != "write":
            continue
        row = logged.get((op.worker, op.id))
        if op.result == "ok":
            if row is None:
                if scenario.get("checks", {}).get("async_loss"):
                    lost += 1
                else:
                    res.flag("4", f"{op.res}: write {op.worker} op {op.id} (token {op.token}) "
                                  f"was acknowledged but is not in the final state")
            elif row["token"] != op.token or row["after"] != op.after:
                res.flag("4", f"{op.res}: write {op.worker} op {op.id} logged as token "
                              f"{row['token']}/{row['after']}, acknowledged as "
                              f"{op.token}/{op.after}")
        elif op.result in ("refused", "fail") and row is not None:
            res.flag("4", f"{op.res}: write {op.worker} op {op.id} was reported {op.result} "
                          f"({op.why}) but committed")
    res.info["lost_acknowledged_writes"] = lost


def recovery_times(ops, events, res, end_of_run, ttl_ms):
    """Invariant 5: time from each fault's end to the next successful acquire.
    A fault that ended too close to the end of the run to see a recovery (less
    than 2 ttl + 1 s) is skipped, not flagged; so is one after which nobody
    asked for the lock once 2 ttl had passed (a lease the fault left behind
    has surely ended by then): with workers choosing among several locks, and
    slow ones, a lock may simply not be asked for again before the run ends."""
    acquired = sorted((o.complete, o.lock) for o in ops
                      if o.op == "acquire" and o.result == "ok")
    asked = sorted((o.invoke, o.lock) for o in ops if o.op == "acquire")
    times = []
    for ev in events:
        if ev.get("ev") != "fault_end":
            continue
        lock = ev.get("lock")
        t_end = ev["t"]
        first = None
        i = bisect.bisect_left(acquired, (t_end, ""))
        for t, l in acquired[i:]:
            if lock is None or l == lock:
                first = t
                break
        if first is None and end_of_run - t_end < (2 * ttl_ms + 1000) * MS:
            res.info["faults_too_late_to_judge"] = res.info.get("faults_too_late_to_judge", 0) + 1
            continue
        if first is None and not any(lock is None or l == lock for _, l in
                                     asked[bisect.bisect_left(asked, (t_end + 2 * ttl_ms * MS, "")):]):
            res.info["faults_not_asked_after"] = res.info.get("faults_not_asked_after", 0) + 1
            continue
        if first is None:
            res.flag("5", f"no acquire{' of ' + lock if lock else ''} succeeded after "
                          f"{ev.get('fault')} ended ({(end_of_run - t_end) / 1e9:.1f} s before the "
                          f"end of the run)")
            continue
        times.append((first - t_end) / MS)
    res.info["recovery_ms"] = times


def failover_times(ops, events, res, end_of_run, ttl_ms):
    """Invariant 5 in an election: from each fault on a leader (its start) to
    the next grant of the election to another candidate. A fault with no new
    leader before the run ended is a violation, unless it started too close to
    the end (less than 2 ttl + 1 s) to judge."""
    grants = sorted((o.complete, o.worker, o.lock) for o in ops
                    if o.op == "acquire" and o.result == "ok")
    times = []
    for ev in events:
        if ev.get("ev") != "fault_start" or not ev.get("worker"):
            continue
        t_start = ev["t"]
        first = None
        for t, worker, lock in grants[bisect.bisect_left(grants, (t_start, "", "")):]:
            if worker != ev["worker"] and (ev.get("lock") is None or lock == ev["lock"]):
                first = t
                break
        if first is None and end_of_run - t_start < (2 * ttl_ms + 1000) * MS:
            res.info["faults_too_late_to_judge"] = res.info.get("faults_too_late_to_judge", 0) + 1
            continue
        if first is None:
            res.flag("5", f"no other candidate became leader after {ev.get('fault')} of "
                          f"{ev['worker']} ({(end_of_run - t_start) / 1e9:.1f} s before the end)")
            continue
        times.append((first - t_start) / MS)
    res.info["recovery_ms"] = times


def check_observers(run_dir, res):
    """Invariant 6: observers/*.jsonl against election.json, the server's leader
    read just before and just after the observers were asked to stop."""
    path = os.path.join(run_dir, "election.json")
    if not os.path.exists(path):
        res.flag("6", "the end of the election was not recorded (election.json)")
        return
    with open(path, encoding="utf-8") as f:
        end = json.load(f)
    if end["before"] != end["after"]:
        res.flag("extra", f"the leader changed (token {end['before']} -> {end['after']}) while the "
                          f"observers stopped: their final views cannot be judged")
    judged = 0
    finals = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "observers", "*.jsonl*"))):
        name = os.path.basename(path).split(".")[0]
        highest = 0
        for rec in load_jsonl(path):
            if rec.get("ev") == "view":
                if rec["token"] and rec["token"] < highest:
                    res.flag("6", f"observer {name} reported token {rec['token']} after {highest}")
                highest = max(highest, rec["token"])
            elif rec.get("ev") == "final":
                finals[name] = rec
    for name in end.get("observers", []):
        final = finals.get(name)
        if final is None:
            res.flag("6", f"observer {name} gave no final view")
            continue
        judged += 1
        if final["token"] != end["after"]:
            res.flag("6", f"observer {name} ends believing token {final['token'] or 'none'} "
                          f"({final.get('holder') or 'no leader'}), the server's leader is "
                          f"{end.get('leader') or 'nobody'} with token {end['after'] or 'none'}")
    res.info["observers_judged"] = judged
    if judged == 0:
        res.flag("6", "no observer was alive at the end")


def check_acquire_bound(ops, events, res, bound_ms, ttl_ms):
    windows = []
    starts = {}
    for ev in events:
        key = (ev.get("fault"), ev.get("lock"))
        if ev.get("ev") == "fault_start":
            starts[key] = ev["t"]
        elif ev.get("ev") == "fault_end" and key in starts:
            windows.append((starts.pop(key), ev["t"], ev.get("lock")))
    blocked = 0
    for op in ops:
        if op.op != "acquire" or op.complete is None:
            continue
        for start, end, lock in windows:
            if start <= op.invoke <= end and (lock is None or op.lock == lock):
                took = (op.complete - op.invoke) / MS
                if op.result != "ok":
                    blocked += 1
                # An acquire that waits in the server may use its wait (ttl / 2) too.
                limit = bound_ms + (ttl_ms / 2 if op.mode == "wait" else 0)
                if took > limit:
                    res.flag("extra", f"{op.lock}: acquire by {op.worker} op {op.id} took "
                                      f"{took:.0f} ms during the fault (bound {limit:.0f} ms)")
    res.info["acquires_refused_in_fault"] = blocked
    if windows and blocked == 0:
        res.flag("extra", "no acquire was refused while the row lock was held: the fault had no effect")


# A kill is judged when its lease had at least this long left; the takeover
# must come this much before that expiry (generous: a loaded machine).
SESSION_JUDGE_MIN_MS = 400
SESSION_MARGIN_MS = 150


def check_session_takeover(ops, events, res):
    acquired = sorted((o.complete, o.lock) for o in ops
                      if o.op == "acquire" and o.result == "ok")
    judged = 0
    takeover_ms = []
    for ev in events:
        if ev.get("ev") != "fault_start" or ev.get("fault") != "sigkill":
            continue
        left = ev.get("expires_in_ms")
        if left is None or left < SESSION_JUDGE_MIN_MS:
            continue
        judged += 1
        lock = ev.get("lock")
        i = bisect.bisect_left(acquired, (ev["t"], ""))
        first = next((t for t, l in acquired[i:] if l == lock), None)
        took = None if first is None else (first - ev["t"]) / MS
        if took is None or took > left - SESSION_MARGIN_MS:
            res.flag("extra", f"{lock}: after its holder {ev.get('worker')} was killed, the next "
                              f"grant came {'never' if took is None else f'after {took:.0f} ms'}; "
                              f"the lease had {left:.0f} ms left (session-bound: expected at once)")
        else:
            takeover_ms.append(took)
    res.info["session_kills_judged"] = judged
    res.info["session_takeover_ms"] = sorted(takeover_ms)
    if judged == 0:
        res.flag("extra", f"no holder was killed with at least {SESSION_JUDGE_MIN_MS} ms of its "
                          f"lease left: the fault had no effect")


def check_lost_grants(ops, events, res, minimum):
    """min_lost_grants: grants acknowledged before a crash that the restarted
    server has no record of; whether their tokens came back is invariant 3's
    business."""
    recovered = sorted((e for e in events if e.get("ev") == "recovered"), key=lambda e: e["since"])
    starts = [e["since"] for e in recovered]
    lost = []
    for op in ops:
        if op.op != "acquire" or op.result != "ok" or op.token is None:
            continue
        i = bisect.bisect_left(starts, op.complete)
        if i < len(recovered) and op.token > recovered[i]["tokens"].get(op.lock, 0):
            lost.append(f"{op.lock} token {op.token} ({op.worker} op {op.id})")
    res.info["lost_grants"] = len(lost)
    res.info["lost_grant_examples"] = lost[:5]
    if len(lost) < minimum:
        res.flag("extra", f"only {len(lost)} acknowledged grants were lost by the crashes (at least "
                          f"{minimum} expected): the fault never reached the fenced grants")


def check_local_belief(ops, res):
    wrong = 0
    for op in ops:
        if op.op == "write" and op.local_valid and op.result == "refused" \
                and op.why in LATE_WRITE_REFUSALS:
            wrong += 1
            res.flag("extra", f"{op.res}: {op.worker} op {op.id} believed its lease valid "
                              f"(client clock) but the server had ended it ({op.why})")
    res.info["local_belief_wrong"] = wrong


def check_client_deadline(run_dir, ops, res):
    # The one belief check, the failover harness's (a keep-alive history has the same shape).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ha"))
    import ha_checker
    clocks, deadlines = ha_checker.load_extras(run_dir)
    if not deadlines:
        res.flag("extra", "no grant or write recorded its deadlines: no keep-alive worker ran")
    writes = {id(o) for o in ops if o.op == "write"}
    overtaken, _ = ha_checker.check_beliefs(ops, clocks, deadlines, res, True, writes)
    res.info["deadline_checked"] = len(deadlines)
    res.info["writes_believed_lost"] = sum(1 for o in ops if o.op == "write" and (o.worker, o.id) in deadlines
                                           and not o.local_valid)


def check_converge(ops, res, ttl_ms, end_of_run):
    by_worker = {}
    for op in ops:
        if op.op == "acquire":
            by_worker.setdefault(op.worker, []).append(op)
    unresolved = 0
    resolved = 0
    for worker, acquires in by_worker.items():
        acquires.sort(key=lambda o: o.id)
        for i, op in enumerate(acquires):
            if op.result != "unknown":
                continue
            j = i + 1
            while j < len(acquires) and acquires[j].owner == op.owner \
                    and acquires[j].result in ("unknown", "fail"):
                j += 1
            # The retry is the next settled acquire with the same owner token; a
            # different owner means the worker gave the uncertain acquire up.
            gave_up = j < len(acquires) and acquires[j].owner != op.owner
            if j >= len(acquires) or acquires[j].result is None or gave_up:
                if op.complete is not None and end_of_run - op.complete > 3 * ttl_ms * MS:
                    unresolved += 1
                    res.flag("extra", f"{op.lock}: uncertain acquire {worker} op {op.id} was never "
                                      f"resolved by a retry with the same owner")
                continue
            retry = acquires[j]
            resolved += 1
            if op.token is not None and retry.result == "ok" and retry.token != op.token \
                    and retry.invoke - op.complete < ttl_ms * MS / 2:
                res.flag("extra", f"{op.lock}: retry of {worker} op {op.id} got token "
                                  f"{retry.token}, the uncertain reply said {op.token}")
    res.info["unknown_acquires_resolved"] = resolved


# Errors the injected faults explain; anything else is a broken workload.
EXPLAINED_ERRORS = {"connection", "connect", "in_doubt", "exception", "unknown_outcome", "commit",
                    "57014", "55P03", "25006", "25P03", "40001", "40P01", "53300"}


def check_errors(ops, res):
    unexplained = {}
    for op in ops:
        if op.result != "fail" or op.why is None:
            continue
        if op.why in EXPLAINED_ERRORS or op.why.startswith("08") or op.why.startswith("57P0"):
            continue
        unexplained[op.why] = unexplained.get(op.why, 0) + 1
    for why, n in sorted(unexplained.items()):
        res.flag("extra", f"{n} operations failed with an error no fault explains (SQLSTATE {why})")


def check_run(run_dir):
    with open(os.path.join(run_dir, "scenario.json"), encoding="utf-8") as f:
        scenario = json.load(f)
    final_path = os.path.join(run_dir, "final.json")
    final = {}
    if os.path.exists(final_path):
        with open(final_path, encoding="utf-8") as f:
            final = json.load(f) or {}
    events_path = os.path.join(run_dir, "events.jsonl")
    events = load_jsonl(events_path) if os.path.exists(events_path) else []
    ops, worker_faults, implementations = load_history(run_dir)
    events = sorted(events + worker_faults, key=lambda e: e["t"])
    res = Result(scenario)
    end_of_run = max([o.complete or o.invoke for o in ops] + [e["t"] for e in events] + [0])
    checks = scenario.get("checks", {})

    if not final:
        res.flag("4", "no final database state was captured")
    check_tokens_in_final_state(final, res)
    check_tokens_in_history(ops, res)
    check_token_issue(ops, final, res, scenario)
    check_durability(ops, final, res, scenario)
    if checks.get("election"):
        failover_times(ops, events, res, end_of_run, scenario.get("ttl_ms", 1000))
        check_observers(run_dir, res)
    else:
        recovery_times(ops, events, res, end_of_run, scenario.get("ttl_ms", 1000))
    check_errors(ops, res)
    if "acquire_bound_ms" in checks:
        check_acquire_bound(ops, events, res, checks["acquire_bound_ms"],
                            scenario.get("ttl_ms", 1000))
    if checks.get("local_belief"):
        check_local_belief(ops, res)
    if checks.get("client_deadline"):
        check_client_deadline(run_dir, ops, res)
    if checks.get("session_takeover"):
        check_session_takeover(ops, events, res)
    if "min_lost_grants" in checks:
        check_lost_grants(ops, events, res, checks["min_lost_grants"])
    if checks.get("converge"):
        check_converge(ops, res, scenario.get("ttl_ms", 1000), end_of_run)

    completed = [o for o in ops if o.result is not None]
    unknown = sum(1 for o in completed if o.result == "unknown")
    if unknown < checks.get("min_unknown", 0):
        res.flag("extra", f"only {unknown} unknown outcomes; the fault did not bite "
                          f"(at least {checks['min_unknown']} expected)")
    late_refused = sum(1 for o in completed if o.op == "write" and o.result == "refused"
                       and o.why in LATE_WRITE_REFUSALS)
    if late_refused < checks.get("min_stale_refusals", 0):
        res.flag("extra", "no late write was refused: the fault never reached the fencing")
    acquired = sum(1 for o in completed if o.op == "acquire" and o.result == "ok")
    writes_ok = sum(1 for o in completed if o.op == "write" and o.result == "ok")
    if acquired == 0 or writes_ok == 0:
        res.flag("extra", f"the workload made no progress ({acquired} acquires, {writes_ok} writes)")
    rec = res.info.get("recovery_ms", [])
    summary = {
        "scenario": scenario.get("name"),
        "title": scenario.get("title"),
        "negative_control": bool(scenario.get("negative_control")),
        "operations": len(completed),
        "acquired": acquired,
        "writes_ok": writes_ok,
        "writes_refused": late_refused,
        "faults": sum(1 for e in events if e.get("ev") == "fault_start"),
        "unknown": unknown,
        "violations": res.count(),
        "violations_by_invariant": {k: len(v) for k, v in res.violations.items()},
        "examples": {k: v[:5] for k, v in res.violations.items() if v},
        "recovery_median_ms": statistics.median(rec) if rec else None,
        "recovery_worst_ms": max(rec) if rec else None,
        "info": {k: v for k, v in res.info.items() if k != "recovery_ms"},
        "lock_calls": ",".join(implementations),
    }
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args()
    summary = check_run(args.run_dir)
    text = json.dumps(summary, indent=2)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0 if summary["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
