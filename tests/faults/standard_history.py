#!/usr/bin/env python3
"""tests/faults/standard_history.py -- a run's history in the shape outside checkers read.

Converts the workers' histories of one run directory (read with checker.py's
reader) and the orchestrator's fault events into Jepsen-style JSON lines, one
file per lock name: RUN_DIR/standard/<lock>.jsonl. docs/fault-histories.md
describes the format field by field; check_standard_history.py checks it.

Each operation becomes an "invoke" event and one completion:
  ok       the server confirmed the effect
  fail     surely no effect: a refusal (busy, not-held, stale-token ...) or an
           error before anything could commit
  info     unknown: it may or may not have taken effect, at any time after its
           invoke (a lost connection, a commit in doubt, no completion recorded)
A process is one worker until one of its operations ends in info: as in
Jepsen, a process with an operation in doubt never invokes again, so the
worker goes on under a new process number.

Usage: standard_history.py RUN_DIR   (the harness calls write_standard_history)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402

# How each resource kind of the workload is guarded when fencing is on (see
# worker/resource.cpp and the harness's schema): "lease" = dlock.holds() pins
# the lease for the write's transaction; "monotonic" = the enforce_fencing
# trigger refuses a lower token than the row's; "fence" = dlock.fence()
# refuses a lower token than the highest the resource accepted; the file store
# outside the database (x) does the same as "fence".
GUARD_BY_RESOURCE_KIND = {"g": "lease", "t": "monotonic", "f": "fence", "x": "fence"}

# The project's refusal reasons as errors of the standard history.
REFUSAL_ERRORS = {
    "busy": "busy",            # acquire: the lock is held by someone else
    "not_held": "not-held",    # renew, release, holds(): the token's lease is not live
    "PD002": "not-held",       # strict enforce_fencing: the same, from the trigger
    "PD001": "stale-token",    # the resource already accepted a higher token
    "55P03": "lock-timeout",   # the lease row was locked for longer than lock_timeout
    "25006": "read-only",      # reached a standby
}

# Jepsen's fields first, then the harness's ids.
FIELD_ORDER = ("index", "type", "process", "time", "f", "value", "error", "worker", "op")

COMPLETION_TYPE = {"ok": "ok", "refused": "fail", "fail": "fail", "unknown": "info", None: "info"}


def op_value(op, ttl_ms, fencing):
    """The operation's arguments and, once complete, its results."""
    if op.op == "write":
        kind = (op.res or "?:").split(":", 1)[0]
        value = {"resource": op.res, "guard": GUARD_BY_RESOURCE_KIND.get(kind, "none")
                 if fencing else "none", "token": op.token, "owner": op.owner}
        if op.before is not None:
            value["before"] = op.before
            value["after"] = op.after
        return value
    value = {"owner": op.owner, "token": op.token}
    if op.op == "acquire":
        value["ttl_ms"] = ttl_ms
        value["mode"] = op.mode
    return value


def op_value_at_invoke(op, ttl_ms, fencing):
    """What the caller knew when it called: no results yet."""
    value = op_value(op, ttl_ms, fencing)
    value.pop("before", None)
    value.pop("after", None)
    if op.op == "acquire":
        value["token"] = None  # an acquire learns its token from the reply
    return value


def error_of(op):
    if op.result == "refused":
        return REFUSAL_ERRORS.get(op.why, op.why or "refused")
    if op.result is None:
        return "no-completion"
    return op.why


def standard_events(ops, faults, ttl_ms, fencing):
    """lock name -> its events in time order (dicts without index)."""
    origin = min([o.invoke for o in ops] + [f["t"] for f in faults], default=0)
    end = max([o.complete or o.invoke for o in ops] + [f["t"] for f in faults], default=origin)
    by_lock = {}
    process_of_worker = {}
    next_process = 0
    for op in ops:
        if op.worker not in process_of_worker:
            process_of_worker[op.worker] = next_process
            next_process += 1
        process = process_of_worker[op.worker]
        completion_type = COMPLETION_TYPE[op.result]
        if completion_type == "info":
            # A Jepsen process with an operation in doubt is crashed for good.
            process_of_worker[op.worker] = next_process
            next_process += 1
        common = {"process": process, "f": op.op, "worker": op.worker, "op": op.id}
        events = by_lock.setdefault(op.lock, [])
        invoke = dict(common, type="invoke", time=op.invoke - origin,
                      value=op_value_at_invoke(op, ttl_ms, fencing))
        done = dict(common, type=completion_type,
                    time=(op.complete if op.complete is not None else end) - origin,
                    value=op_value(op, ttl_ms, fencing))
        error = error_of(op) if completion_type != "ok" else None
        if error:
            done["error"] = error
        events.append(invoke)
        events.append(done)
    for fault in faults:
        nemesis = {"type": "info", "process": "nemesis", "time": fault["t"] - origin,
                   "f": "start" if fault["ev"] == "fault_start" else "stop",
                   "value": {"fault": fault.get("fault"), "lock": fault.get("lock")}}
        for lock, events in by_lock.items():
            if fault.get("lock") in (None, lock):
                events.append(nemesis)
    # Invokes before completions at the same instant: equal times never order
    # two operations one after the other.
    rank = {"invoke": 0, "ok": 1, "fail": 1, "info": 1}
    for events in by_lock.values():
        events.sort(key=lambda e: (e["time"], rank.get(e["type"], 1) if e["process"] != "nemesis"
                                   else 2))
    return by_lock


def write_standard_history(run_dir):
    """Writes RUN_DIR/standard/<lock>.jsonl; returns the directory."""
    with open(os.path.join(run_dir, "scenario.json"), encoding="utf-8") as f:
        scenario = json.load(f)
    ops, worker_faults, _ = checker.load_history(run_dir)
    events_path = os.path.join(run_dir, "events.jsonl")
    faults = checker.load_jsonl(events_path) if os.path.exists(events_path) else []
    faults = sorted([e for e in faults + worker_faults
                     if e.get("ev") in ("fault_start", "fault_end")], key=lambda e: e["t"])
    by_lock = standard_events(ops, faults, scenario.get("ttl_ms", 1000),
                              scenario.get("fencing", True))
    out_dir = os.path.join(run_dir, "standard")
    os.makedirs(out_dir, exist_ok=True)
    for lock, events in sorted(by_lock.items()):
        with open(os.path.join(out_dir, f"{lock}.jsonl"), "w", encoding="utf-8") as f:
            for index, event in enumerate(events):
                event = dict(event, index=index)
                f.write(json.dumps({k: event[k] for k in FIELD_ORDER if k in event}) + "\n")
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    print(write_standard_history(sys.argv[1]))
