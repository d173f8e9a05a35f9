#!/usr/bin/env python3
"""tests/ha/ha_checker.py -- checks one Patroni failover run (tests/ha/ha.py).

Reads the same run directory format as tests/faults/checker.py (histories,
events.jsonl, final.json, scenario.json) and reuses its invariant checks. What
a managed failover adds:

  lost grants   acknowledged grants that the surviving history does not have
                (final.json "grants": every grant the final primary's
                dlock.audit_log holds; the run sets dlock.audit = all, which
                writes the audit row in the grant's own transaction). A
                failover to an asynchronous standby may lose the last grants,
                and an isolated primary (its Patroni stopped) goes on granting
                until it is demoted; both are counted per fault, never
                flagged in asynchronous mode, and flagged in synchronous mode.
  no token issued twice
                over every acknowledged grant, lost ones included: a lost
                grant's token must never be handed to another owner.
  ordering      invariants 1 and 3 in real time (faults checker) over the
                operations that survive: the isolated primary's acknowledged
                grants and writes vanish with its timeline, so they take no
                part in the order of the history that remains.
  belief        no lease believed held by a client past its server deadline:
                (a) the client's deadline is never later than the lease_until
                the server reported for the same grant or renewal, and
                (b) no write the client believed covered by its lease was
                invoked after another owner's later grant (higher token) had
                completed. (b) can only happen when a failover lost the
                grant or a renewal -- counted in asynchronous mode, flagged in
                synchronous mode; a guarded write ("g:") made under such a
                belief must never be in the surviving state (an isolated
                primary may acknowledge it, and then it vanishes with that
                primary's timeline).
  recovery      time from each fault (the kill, or the start of the
                isolation) to the first grant of a new token generation
                (the new primary's timeline), and to Patroni's new primary;
                after a kill, a new generation must be granted.

Usage: ha_checker.py RUN_DIR [--json OUT]   exit 0 = no violations
"""

import argparse
import bisect
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
import checker  # noqa: E402

MS = checker.MS
GENERATION_SHIFT = 40
# Clock readings and the ns/ms conversions in the history: allow 1 ms.
CLOCK_TOLERANCE_NS = 1_000_000


def load_extras(run_dir):
    """Per worker, the clock pair of its start line; per (worker, op id), the
    deadline_ns / until_ns of grants (completion line) and writes (invoke line)."""
    clocks = {}
    deadlines = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "history", "*.jsonl*"))):
        for rec in checker.load_jsonl(path):
            if rec.get("ev") == "start" and "mono_ns" in rec:
                clocks[rec["w"]] = rec["real_ns"] - rec["mono_ns"]
            elif "deadline_ns" in rec and "until_ns" in rec:
                deadlines[(rec["w"], rec["id"])] = (rec["deadline_ns"], rec["until_ns"])
    return clocks, deadlines


def find_lost(ops, final):
    """Acknowledged grants missing from the final audit log, and acknowledged
    writes missing from the final write_log."""
    # The worker id is the lease's holder text: with it, a grant lost and the same
    # token granted again to another worker (the negative control) still counts.
    granted = {(g["lock_name"], g["fencing_token"], g.get("holder")) for g in final.get("grants", [])}
    logged = {(row["worker"], row["op"]) for row in final.get("write_log", [])}
    lost_grants = [o for o in ops if o.op == "acquire" and o.result == "ok"
                   and (o.lock, o.token, o.worker) not in granted]
    lost_writes = [o for o in ops if o.op == "write" and o.result == "ok"
                   and (o.worker, o.id) not in logged]
    return lost_grants, lost_writes


def check_tokens_unique(ops, res):
    """No token issued twice: one owner per (lock, token) over every acknowledged
    grant, including grants the failover lost."""
    owners = {}
    for o in ops:
        if o.op == "acquire" and o.result == "ok" and o.token is not None:
            owners.setdefault((o.lock, o.token), set()).add(o.owner)
    for (lock, token), who in sorted(owners.items()):
        if len(who) > 1:
            res.flag("3", f"{lock}: token {token} issued to {len(who)} owners "
                          f"(lost grants included)")


def check_beliefs(ops, clocks, deadlines, res, strict, surviving_writes):
    """(a) client deadline <= server lease_until; (b) no believed-held write after
    another owner's later grant. Returns (overtaken writes, of which accepted)."""
    for o in ops:
        key = (o.worker, o.id)
        if key not in deadlines or o.worker not in clocks:
            continue
        if o.op == "write" and not o.local_valid:
            continue
        if o.op == "acquire" and o.result != "ok":
            continue
        local_ns, until_real_ns = deadlines[key]
        until_ns = until_real_ns - clocks[o.worker]
        if local_ns > until_ns + CLOCK_TOLERANCE_NS:
            res.flag("extra", f"{o.lock}: {o.worker} op {o.id} ({o.op}) had a local deadline "
                              f"{(local_ns - until_ns) / MS:.1f} ms after the server's lease_until")
    grants = {}
    for o in ops:
        if o.op == "acquire" and o.result == "ok" and o.token is not None:
            grants.setdefault(o.lock, []).append(o)
    for got in grants.values():
        got.sort(key=lambda g: g.complete)
    overtaken = []
    for w in ops:
        if w.op != "write" or not w.local_valid or w.token is None:
            continue
        got = grants.get(w.lock, [])
        i = bisect.bisect_left([g.complete for g in got], w.invoke)
        later = [g for g in got[:i] if g.token > w.token and g.owner != w.owner]
        if not later:
            continue
        overtaken.append(w)
        g = min(later, key=lambda x: x.complete)
        message = (f"{w.lock}: {w.worker} op {w.id} believed its lease (token {w.token}) held "
                   f"{(w.invoke - g.complete) / MS:.0f} ms after {g.worker} was granted token {g.token}")
        if strict:
            res.flag("extra", message)
        if w.result == "ok" and w.res.startswith("g:") and id(w) in surviving_writes:
            res.flag("2", message + ", and its guarded write was accepted")
    accepted = sum(1 for w in overtaken if w.result == "ok")
    return overtaken, accepted


def fault_windows(events):
    """(name, start, end, extra) of each fault, in order."""
    starts = {}
    out = []
    for ev in events:
        key = (ev.get("fault"), ev.get("round"))
        if ev.get("ev") == "fault_start":
            starts[key] = ev
        elif ev.get("ev") == "fault_end" and key in starts:
            s = starts.pop(key)
            out.append((ev.get("fault"), s["t"], ev["t"], s))
    return out


def recovery(ops, events, windows):
    """Per fault: ms from its start to the first grant of a generation above every
    generation granted before it, and to Patroni's new primary."""
    grants = sorted((o.complete, o.token >> GENERATION_SHIFT) for o in ops
                    if o.op == "acquire" and o.result == "ok" and o.token is not None)
    promoted = [e for e in events if e.get("ev") == "new_primary"]
    read_only = [e for e in events if e.get("ev") == "old_primary_read_only"]
    healthy = [e for e in events if e.get("ev") == "healthy"]
    out = []
    for name, start, end, info in windows:
        before = max([gen for t, gen in grants if t < start], default=0)
        first = next((t for t, gen in grants if t >= start and gen > before), None)
        # The old primary's last grant after the fault began (its generation or older).
        last_old = max([t for t, gen in grants if t >= start and gen <= before], default=None)
        demoted = next((e["t"] for e in read_only if e["t"] >= start), None)
        new_primary = next((e["t"] for e in promoted if e["t"] >= start), None)
        settled = next((e for e in healthy if e["t"] >= end), {})
        out.append({
            "fault": name,
            "round": info.get("round"),
            "node": info.get("node"),
            "to_new_primary_ms": None if new_primary is None else round((new_primary - start) / MS),
            "to_first_new_grant_ms": None if first is None else round((first - start) / MS),
            "to_last_old_grant_ms": None if last_old is None else round((last_old - start) / MS),
            "to_old_read_only_ms": None if demoted is None else round((demoted - start) / MS),
            "leader_after": settled.get("leader"),
        })
    return out


def check_ha_run(run_dir):
    with open(os.path.join(run_dir, "scenario.json"), encoding="utf-8") as f:
        scenario = json.load(f)
    final = {}
    final_path = os.path.join(run_dir, "final.json")
    if os.path.exists(final_path):
        with open(final_path, encoding="utf-8") as f:
            final = json.load(f) or {}
    events_path = os.path.join(run_dir, "events.jsonl")
    events = checker.load_jsonl(events_path) if os.path.exists(events_path) else []
    events.sort(key=lambda e: e["t"])
    ops, _, implementations = checker.load_history(run_dir)
    clocks, deadlines = load_extras(run_dir)
    sync = bool(scenario.get("sync"))
    res = checker.Result(scenario)
    end_of_run = max([o.complete or o.invoke for o in ops] + [e["t"] for e in events] + [0])

    if not final:
        res.flag("4", "no final database state was captured")
    lost_grants, lost_writes = find_lost(ops, final)
    lost_ids = {id(o) for o in lost_grants + lost_writes}
    surviving = [o for o in ops if id(o) not in lost_ids]

    check_tokens_unique(ops, res)
    checker.check_tokens_in_final_state(final, res)
    checker.check_tokens_in_history(surviving, res)
    checker.check_token_issue(surviving, final, res, {"checks": {}})
    # Acknowledged writes that vanished are counted above; this checks the rest
    # (logged with the acknowledged token and value; refused ones absent).
    checker.check_durability(surviving, final, res, scenario)
    checker.recovery_times(ops, events, res, end_of_run, scenario.get("ttl_ms", 1000))
    checker.check_errors(ops, res)
    overtaken, overtaken_accepted = check_beliefs(ops, clocks, deadlines, res, sync,
                                                  {id(o) for o in surviving if o.op == "write"})
    if sync:
        for o in lost_grants:
            res.flag("4", f"{o.lock}: grant of token {o.token} to {o.worker} op {o.id} was "
                          f"acknowledged but is not in the final audit log (synchronous mode)")
        for o in lost_writes:
            res.flag("4", f"{o.res}: write {o.worker} op {o.id} (token {o.token}) was "
                          f"acknowledged but is not in the final state (synchronous mode)")

    windows = fault_windows(events)
    per_fault = recovery(ops, events, windows)
    # A loss belongs to the last fault that started before it (an isolated primary
    # goes on acknowledging until its Patroni demotes it, after the fault's end).
    starts = [start for _, start, _, _ in windows]
    for entry in per_fault:
        entry["lost_grants"] = entry["lost_writes"] = 0
    for kind, lost in (("lost_grants", lost_grants), ("lost_writes", lost_writes)):
        for o in lost:
            if per_fault:
                per_fault[max(0, bisect.bisect_right(starts, o.complete) - 1)][kind] += 1
    completed = [o for o in ops if o.result is not None]
    acquired = sum(1 for o in completed if o.op == "acquire" and o.result == "ok")
    writes_ok = sum(1 for o in completed if o.op == "write" and o.result == "ok")
    if acquired == 0 or writes_ok == 0:
        res.flag("extra", f"the workload made no progress ({acquired} acquires, {writes_ok} writes)")
    if len(windows) < len(scenario.get("faults", [])):
        res.flag("extra", f"only {len(windows)} of {len(scenario['faults'])} faults were injected")
    # A killed primary cannot come back as the leader, so a new generation must be
    # granted; an isolated one can win the leader key back when its Patroni
    # resumes (then the replica's short reign left no grant that survived).
    for entry in per_fault:
        if entry["fault"] == "kill" and entry["to_first_new_grant_ms"] is None \
                and not scenario.get("negative_control"):
            res.flag("5", f"no grant of a new token generation after the kill "
                          f"(round {entry['round']})")
    late_refused = sum(1 for o in completed if o.op == "write" and o.result == "refused")
    rec = res.info.get("recovery_ms", [])
    return {
        "scenario": scenario.get("name"),
        "title": scenario.get("title"),
        "sync": sync,
        "negative_control": bool(scenario.get("negative_control")),
        "operations": len(completed),
        "acquired": acquired,
        "writes_ok": writes_ok,
        "writes_refused": late_refused,
        "unknown": sum(1 for o in completed if o.result == "unknown"),
        "lost_grants": len(lost_grants),
        "lost_writes": len(lost_writes),
        "overtaken_beliefs": len(overtaken),
        "overtaken_writes_accepted": overtaken_accepted,
        "faults": per_fault,
        "violations": res.count(),
        "violations_by_invariant": {k: len(v) for k, v in res.violations.items()},
        "examples": {k: v[:5] for k, v in res.violations.items() if v},
        "recovery_median_ms": statistics.median(rec) if rec else None,
        "info": {k: v for k, v in res.info.items() if k != "recovery_ms"},
        "lock_calls": ",".join(implementations),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args()
    summary = check_ha_run(args.run_dir)
    text = json.dumps(summary, indent=2)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0 if summary["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
