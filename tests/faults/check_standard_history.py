#!/usr/bin/env python3
"""tests/faults/check_standard_history.py -- checks the standard histories against a fenced mutex.

Reads only the standard files (RUN_DIR/standard/<lock>.jsonl, written by
standard_history.py, described in docs/fault-histories.md), never the
harness's own history, so it shows the format carries enough to check. The
model, per lock name: the server grants one lease at a time, each new lease
with a higher fencing token; a lease ends by release, by its ttl or when a
higher token is granted; a resource accepts a write only under its guard.

  token-owner          a granted token belongs to one owner
  token-order          a grant invoked after another owner's grant completed
                       has a higher token
  two-holders          another owner was granted the lock while the earlier
                       lease was surely live: before the ttl from its first
                       attempt could have run out, with no release of it
                       possibly before and no fault in between (a fault may
                       end a lease early: a server clock step, an ended
                       session, a failover)
  stale-accepted       a renew, or a write guarded by the lease alone (guard
                       "lease", or "none" when fencing is off), was accepted
                       although it was invoked after a higher token's grant
                       had completed
  token-decrease       on each resource, an accepted write's token is at least
                       that of every write accepted before it was invoked
  refused-unexplained  a write refused "stale-token" with no higher token
                       possibly accepted on its resource before it ended; a
                       write or renew refused "not-held" with no reason the
                       history shows for the lease to have ended (a higher
                       grant or a release possibly before, the ttl possibly
                       run out, a fault)

Sound with unknown outcomes: only ok operations count as accepted, and an info
operation (or one never completed) may have taken effect at any time after its
invoke, so it can explain a refusal but never counts as accepted.

A file that breaks the format (a completion without its invoke, a process
invoking again while an operation is open or after one ended in info) is an
error, not a verdict.

Usage: check_standard_history.py PATH... [--json OUT]
  PATH = a standard/ directory, a scenario's run directory holding one, or a
  .jsonl file. Exit 0 = no violations, 1 = violations, 2 = unreadable.
"""

import argparse
import bisect
import glob
import json
import math
import os
import sys

CHECKS = ("token-owner", "token-order", "two-holders", "stale-accepted", "token-decrease",
          "refused-unexplained")

# The server measures a lease's ttl with its own clock; this much slower than
# the history's clock is still allowed before a lease surely outlives it.
CLOCK_RATE_ALLOWANCE = 0.05


class Op:
    """One operation: its invoke and its completion (None = never completed)."""

    __slots__ = ("process", "worker", "f", "type", "invoke", "complete", "value", "error", "index",
                 "token", "owner")

    def __init__(self, invoke):
        self.process = invoke["process"]
        self.worker = invoke.get("worker", invoke["process"])
        self.f = invoke["f"]
        self.type = None
        self.invoke = invoke["time"]
        self.complete = math.inf
        self.value = dict(invoke.get("value") or {})
        self.error = None
        self.index = invoke.get("index")
        self.token = self.value.get("token")
        self.owner = self.value.get("owner")

    @property
    def accepted(self):
        return self.type == "ok"

    @property
    def possibly_done(self):
        """ok, info, or no completion: it may have taken effect."""
        return self.type != "fail"

    def __str__(self):
        where = f" on {self.value['resource']}" if "resource" in self.value else ""
        return (f"{self.f}{where} by process {self.process} ({self.worker}) token {self.token}, "
                f"{self.type or 'no completion'} (index {self.index})")


def read_events(path):
    events = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if line:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not JSON: {e}") from None
    return events


def operations(events):
    """Pairs each process's invoke with its next completion; faults as windows."""
    ops = []
    open_ops = {}
    crashed = set()  # processes whose last operation ended in info
    windows = []
    open_faults = {}
    for ev in events:
        if ev["process"] == "nemesis":
            key = json.dumps(ev.get("value"), sort_keys=True)
            if ev["f"] == "start":
                open_faults.setdefault(key, []).append(ev["time"])
            else:
                starts = open_faults.get(key)
                windows.append((starts.pop(0) if starts else -math.inf, ev["time"]))
            continue
        if ev["type"] == "invoke":
            if ev["process"] in open_ops or ev["process"] in crashed:
                raise ValueError(f"process {ev['process']} invokes again with an operation "
                                 f"open or in doubt (index {ev.get('index')})")
            op = Op(ev)
            open_ops[ev["process"]] = op
            ops.append(op)
            continue
        op = open_ops.pop(ev["process"], None)
        if op is None:
            raise ValueError(f"completion without an invoke (index {ev.get('index')})")
        op.type = ev["type"]
        if op.type == "info":
            crashed.add(op.process)
        op.complete = ev["time"]
        op.value.update({k: v for k, v in (ev.get("value") or {}).items() if v is not None})
        op.error = ev.get("error")
        op.token = op.value.get("token")
        op.owner = op.value.get("owner")
    windows += [(t, math.inf) for starts in open_faults.values() for t in starts]
    return ops, windows


class Verdict:
    def __init__(self, name):
        self.name = name
        self.found = {c: [] for c in CHECKS}

    def flag(self, check, message):
        self.found[check].append(message)

    def count(self):
        return sum(len(v) for v in self.found.values())


def fault_between(windows, start, end):
    return any(ws < end and we > start for ws, we in windows)


def check_grants(grants, releases, first_attempt, windows, verdict):
    owners = {}
    for g in grants:
        owners.setdefault(g.token, set()).add(g.owner)
    for token, who in sorted(owners.items()):
        if len(who) > 1:
            verdict.flag("token-owner", f"token {token} granted to {len(who)} owners")

    by_complete = sorted(grants, key=lambda g: g.complete)
    for b in grants:
        # The highest token granted to another owner before b was invoked.
        earlier = [a for a in by_complete if a.complete < b.invoke and a.owner != b.owner]
        top = max(earlier, key=lambda a: a.token, default=None)
        if top is not None and b.token <= top.token:
            verdict.flag("token-order", f"{b} after {top}")

    # The earliest moment a release of each token may have taken effect.
    released = {}
    for r in releases:
        released[r.token] = min(released.get(r.token, math.inf), r.invoke)
    for a in grants:
        start = first_attempt.get(a.owner, a.invoke)
        surely_live_until = start + a.value.get("ttl_ms", 0) * 1e6 * (1 - CLOCK_RATE_ALLOWANCE)
        for b in grants:
            if b.owner == a.owner or b.token <= a.token or b.complete >= surely_live_until:
                continue
            if released.get(a.token, math.inf) < b.complete:
                continue
            if fault_between(windows, start, b.complete):
                continue
            verdict.flag("two-holders", f"{b} while {a} was live (its ttl runs to "
                                        f"{surely_live_until / 1e9:.3f} s at the earliest)")


def check_accepted(grants, ops, verdict):
    by_complete = sorted(grants, key=lambda g: g.complete)
    times = [g.complete for g in by_complete]
    top = []
    for g in by_complete:
        top.append(g if not top or g.token > top[-1].token else top[-1])
    for op in ops:
        lease_only = op.f == "renew" or (op.f == "write" and op.value.get("guard") in ("lease", "none"))
        if not (op.accepted and lease_only):
            continue
        i = bisect.bisect_left(times, op.invoke)
        if i and top[i - 1].token > op.token:
            verdict.flag("stale-accepted", f"{op} accepted after {top[i - 1]}")


def check_resources(writes, verdict):
    by_resource = {}
    for w in writes:
        by_resource.setdefault(w.value.get("resource"), []).append(w)
    for resource, on_it in sorted(by_resource.items()):
        accepted = sorted((w for w in on_it if w.accepted), key=lambda w: w.complete)
        times = [w.complete for w in accepted]
        top = []
        for w in accepted:
            top.append(w if not top or w.token > top[-1].token else top[-1])
        for w in accepted:
            i = bisect.bisect_left(times, w.invoke)
            if i and top[i - 1].token > w.token:
                verdict.flag("token-decrease", f"{w} accepted after {top[i - 1]}")
        for w in on_it:
            if w.type == "fail" and w.error == "stale-token":
                if not any(o.possibly_done and o.token > w.token and o.invoke < w.complete
                           for o in on_it):
                    verdict.flag("refused-unexplained",
                                 f"{w} refused stale-token, but no higher token could have been "
                                 f"accepted on {resource} before")


def check_not_held(ops, grants, releases, acquires, first_attempt, windows, verdict):
    grant_of = {g.token: g for g in grants}
    for op in ops:
        if not (op.type == "fail" and op.error == "not-held" and op.f in ("write", "renew")):
            continue
        g = grant_of.get(op.token)
        if g is None:
            continue  # its grant is not in this history: nothing to judge by
        start = first_attempt.get(g.owner, g.invoke)
        if op.complete >= start + g.value.get("ttl_ms", 0) * 1e6 * (1 - CLOCK_RATE_ALLOWANCE):
            continue  # the ttl may have run out
        if fault_between(windows, start, op.complete):
            continue
        if any(a.possibly_done and a.invoke < op.complete and a.owner != g.owner
               and (a.token is None or a.token > op.token) for a in acquires):
            continue
        if any(r.possibly_done and r.token == op.token and r.invoke < op.complete
               for r in releases):
            continue
        verdict.flag("refused-unexplained",
                     f"{op} refused not-held within the ttl of {g}, with no other grant, "
                     f"release or fault that could have ended the lease")


def check_lock(name, events):
    verdict = Verdict(name)
    ops, windows = operations(events)
    acquires = [o for o in ops if o.f == "acquire"]
    grants = [o for o in acquires if o.accepted and o.token is not None]
    releases = [o for o in ops if o.f == "release" and o.possibly_done]
    writes = [o for o in ops if o.f == "write"]
    first_attempt = {}
    for a in acquires:
        if a.owner is not None:
            first_attempt[a.owner] = min(first_attempt.get(a.owner, math.inf), a.invoke)
    check_grants(grants, releases, first_attempt, windows, verdict)
    check_accepted(grants, ops, verdict)
    check_resources(writes, verdict)
    check_not_held(ops, grants, releases, acquires, first_attempt, windows, verdict)
    return verdict, len(ops)


def history_files(path):
    if path.endswith(".jsonl"):
        return [path]
    if os.path.isdir(os.path.join(path, "standard")):
        path = os.path.join(path, "standard")
    return sorted(glob.glob(os.path.join(path, "*.jsonl")))


def check_paths(paths):
    """{file: {"operations": n, "violations": n, "by_check": {...}, "examples": {...}}}"""
    report = {}
    for path in paths:
        files = history_files(path)
        if not files:
            raise ValueError(f"{path}: no standard history files")
        for file in files:
            verdict, n = check_lock(file, read_events(file))
            report[file] = {
                "operations": n,
                "violations": verdict.count(),
                "by_check": {c: len(v) for c, v in verdict.found.items()},
                "examples": {c: v[:3] for c, v in verdict.found.items() if v},
            }
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", help="write the report here")
    args = ap.parse_args()
    try:
        report = check_paths(args.paths)
    except (OSError, ValueError) as e:
        print(f"check_standard_history.py: {e}", file=sys.stderr)
        return 2
    for file, r in report.items():
        counts = ", ".join(f"{c} {n}" for c, n in r["by_check"].items() if n)
        print(f"{file}: {r['operations']} operations, {r['violations']} violations"
              + (f" ({counts})" if counts else ""))
        for check, examples in r["examples"].items():
            for e in examples:
                print(f"    [{check}] {e}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return 0 if all(r["violations"] == 0 for r in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
