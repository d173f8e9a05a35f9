#!/usr/bin/env python3
"""tests/faults/kinds_check.py -- checks a run of the lock-kinds failover scenario.

Input: a run directory of harness.py's s_kinds_failover
  kinds_writes.json  the committed fenced writes, as the last primary has them:
                     name, role, worker, token, started, ended (server clock, us)
  history/*.jsonl    the workers' outcomes (kinds_worker.py; tests/ha keeps them
                     in history-kinds/)
  events.jsonl       the harness's faults, with the leases live at each, and
                     the promotions (fault_end of a failover, or tests/ha's
                     new_primary)
  scenario.json      permits, checks

Invariants:
  T  no fencing token of a name was granted twice: every granted acquisition
     (a new owner each) of a name has a token of its own, across crash restarts
     and the promotion
  S  at most "permits" fenced writes under the semaphore's permits were in
     progress at any one time (their [started, ended] never overlap deeper)
  RW no fenced write under a reader's lease overlaps one under a writer's
     lease of the same name, and no two writers' writes overlap
Extras: each kind made progress, before and after the failover; every fault
was injected (immediate stop, SIGKILL of the postmaster, promotion); readers
and permits were live at a fault (what the scenario exists for).

Usage: kinds_check.py RUN_DIR   exit 0 = no violations
"""

import glob
import json
import os
import sys

from semaphore_check import max_overlap


def load_jsonl(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut off by a killed worker
    return out


def overlapping(a, b):
    return a["started"] < b["ended"] and b["started"] < a["ended"]


def check_kinds(run_dir, history="history"):
    with open(os.path.join(run_dir, "scenario.json"), encoding="utf-8") as f:
        scenario = json.load(f)
    permits = scenario["permits"]
    path = os.path.join(run_dir, "kinds_writes.json")
    writes = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            writes = json.load(f) or []
    ops = []
    for h in sorted(glob.glob(os.path.join(run_dir, history, "*.jsonl"))):
        ops += load_jsonl(h)
    events_path = os.path.join(run_dir, "events.jsonl")
    events = load_jsonl(events_path) if os.path.exists(events_path) else []
    violations = {"T": [], "S": [], "RW": [], "extra": []}

    # T: one token, one acquisition (each acquisition has an owner of its own)
    granted = [o for o in ops if o["op"] == "acquire" and o["result"] == "ok"]
    seen = {}
    for o in granted:
        key = (o["name"], o["token"])
        first = seen.setdefault(key, o)
        if first["owner"] != o["owner"]:
            violations["T"].append(
                f"{o['name']} token {o['token']} granted to {first['worker']} ({first['role']}) "
                f"and to {o['worker']} ({o['role']})")

    # S: the semaphore's writes
    sem = [w for w in writes if w["role"] == "permit"]
    deepest, at = max_overlap(sem)
    if deepest > permits:
        over = [w for w in sem if w["started"] <= at < w["ended"]]
        violations["S"].append(
            f"{deepest} fenced writes under permits at once (permits {permits}) at {at}: "
            + ", ".join(f"{w['worker']}/{w['token']}" for w in over))

    # RW: readers beside a writer, or two writers
    rw = [w for w in writes if w["role"] in ("reader", "writer")]
    writers = [w for w in rw if w["role"] == "writer"]
    for wr in writers:
        for other in rw:
            if other is wr or not overlapping(wr, other) or other["name"] != wr["name"]:
                continue
            if other["role"] == "writer" and other["started"] < wr["started"]:
                continue  # the pair is reported once
            violations["RW"].append(
                f"{wr['name']}: writer {wr['worker']}/{wr['token']} beside "
                f"{other['role']} {other['worker']}/{other['token']}")

    faults = [e for e in events if e.get("ev") == "fault_start"]
    kinds_of_fault = {e.get("how") or e.get("fault") for e in faults}
    for how in scenario.get("checks", {}).get("faults", []):
        if how not in kinds_of_fault:
            violations["extra"].append(f"no {how} was injected")
    live = {"shared": 0, "permit": 0}
    for e in faults:
        for kind, n in (e.get("live") or {}).items():
            if kind in live:
                live[kind] = max(live[kind], n)
    for kind, n in live.items():
        if n == 0:
            violations["extra"].append(f"no {kind} lease was live at any fault")
    promoted = [e["t"] for e in events if (e.get("ev") == "fault_end" and e.get("fault") == "failover")
                or e.get("ev") == "new_primary"]
    by_role = {}
    for o in granted:
        slot = by_role.setdefault(o["role"], [0, 0])
        slot[1 if promoted and o["t"] > promoted[-1] else 0] += 1
    for role in ("permit", "reader", "writer"):
        before, after = by_role.get(role, [0, 0])
        if before == 0 or (promoted and after == 0):
            violations["extra"].append(
                f"no progress of the {role}s ({before} grants before the promotion, {after} after)")
        if not any(w["role"] == role for w in writes):
            violations["extra"].append(f"no fenced write of a {role} committed")

    return {
        "scenario": scenario.get("name"),
        "title": scenario.get("title"),
        "negative_control": bool(scenario.get("negative_control")),
        "operations": len(ops),
        "acquired": len(granted),
        "writes_ok": len(writes),
        "writes_refused": sum(1 for o in ops if o["op"] == "write" and o["result"] == "refused"),
        "faults": len(faults),
        "unknown": 0,
        "violations": sum(len(v) for v in violations.values()),
        "violations_by_invariant": {k: len(v) for k, v in violations.items()},
        "examples": {k: v[:5] for k, v in violations.items() if v},
        "recovery_median_ms": None,
        "recovery_worst_ms": None,
        "info": {"max_concurrent_permit_writes": deepest, "permits": permits,
                 "most_live_at_a_fault": live, "grants_by_role": by_role},
        "lock_calls": "sql",
    }


def main():
    summary = check_kinds(sys.argv[1])
    print(json.dumps(summary, indent=2))
    return 0 if summary["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
