#!/usr/bin/env python3
"""tests/faults/semaphore_check.py -- checks a semaphore scenario run.

Input: a run directory of the semaphore scenario (harness.py s_semaphore)
  sem_writes.json  the committed fenced writes: worker, token, started, ended
                   (server clock, microseconds)
  history/*.jsonl  the workers' outcomes (semaphore_worker.py)
  events.jsonl     the harness's faults
  scenario.json    permits, checks

Invariants:
  S  at most "permits" fenced writes were in progress at any one time: the
     committed writes' [started, ended] intervals never overlap more than
     "permits" deep
  T  a fencing token was never used by two different workers
Extras: the workload made progress, and (min_stale_refusals) the faults
reached the fencing, so late writes were refused.

Usage: semaphore_check.py RUN_DIR   exit 0 = no violations
"""

import glob
import json
import os
import sys


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def max_overlap(writes):
    """Deepest overlap of the writes' intervals, and the moment it happened."""
    points = []
    for w in writes:
        points.append((w["started"], 1))
        points.append((w["ended"], -1))
    # an end and a start at the same microsecond do not overlap
    points.sort(key=lambda p: (p[0], p[1]))
    depth = deepest = 0
    at = None
    for t, d in points:
        depth += d
        if depth > deepest:
            deepest, at = depth, t
    return deepest, at


def check_semaphore(run_dir):
    with open(os.path.join(run_dir, "scenario.json"), encoding="utf-8") as f:
        scenario = json.load(f)
    permits = scenario["permits"]
    checks = scenario.get("checks", {})
    path = os.path.join(run_dir, "sem_writes.json")
    writes = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            writes = json.load(f) or []
    ops = []
    for h in sorted(glob.glob(os.path.join(run_dir, "history", "*.jsonl"))):
        ops += load_jsonl(h)
    events_path = os.path.join(run_dir, "events.jsonl")
    events = load_jsonl(events_path) if os.path.exists(events_path) else []
    violations = {"S": [], "T": [], "extra": []}

    deepest, at = max_overlap(writes)
    if deepest > permits:
        over = [w for w in writes if w["started"] <= at < w["ended"] or w["started"] == at]
        violations["S"].append(
            f"{deepest} fenced writes at once (permits {permits}) at {at}: "
            + ", ".join(f"{w['worker']}/{w['token']}" for w in over))
    by_token = {}
    for w in writes:
        other = by_token.setdefault(w["token"], w["worker"])
        if other != w["worker"]:
            violations["T"].append(f"token {w['token']} used by {other} and {w['worker']}")

    acquired = sum(1 for o in ops if o["op"] == "acquire" and o["result"] == "ok")
    refused = sum(1 for o in ops if o["op"] == "write" and o["result"] == "refused")
    if not writes or acquired == 0:
        violations["extra"].append(f"no progress ({acquired} acquires, {len(writes)} writes)")
    if refused < checks.get("min_stale_refusals", 0):
        violations["extra"].append("no late write was refused: the faults never reached the fencing")
    return {
        "scenario": scenario.get("name"),
        "title": scenario.get("title"),
        "negative_control": bool(scenario.get("negative_control")),
        "operations": len(ops),
        "acquired": acquired,
        "writes_ok": len(writes),
        "writes_refused": refused,
        "faults": sum(1 for e in events if e.get("ev") == "fault_start"),
        "unknown": 0,
        "violations": sum(len(v) for v in violations.values()),
        "violations_by_invariant": {k: len(v) for k, v in violations.items()},
        "examples": {k: v[:5] for k, v in violations.items() if v},
        "recovery_median_ms": None,
        "recovery_worst_ms": None,
        "info": {"max_concurrent_writes": deepest, "permits": permits},
        "lock_calls": "sql",
    }


def main():
    summary = check_semaphore(sys.argv[1])
    print(json.dumps(summary, indent=2))
    return 0 if summary["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
