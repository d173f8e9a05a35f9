#!/usr/bin/env python3
"""tests/ha/test_ha_checker.py -- the failover checker on synthetic histories.

A clean failover must pass, and each thing ha_checker.py adds (lost grants, a
token issued twice across a failover, a client deadline past the server's, a
lease believed held after a later grant) must be reported -- flagged or
counted as the replication mode says. Run: python3 tests/ha/test_ha_checker.py
(unittest, standard library only).
"""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
import checker  # noqa: E402
import ha_checker  # noqa: E402
from test_checker import MS, History  # noqa: E402

GEN1 = 1 << 40
GEN2 = 2 << 40
# The workers' CLOCK_REALTIME minus CLOCK_MONOTONIC.
REAL_OFFSET_NS = 1_700_000_000 * 10**9


class FailoverHistory(History):
    """A History (tests/faults/test_checker.py) plus what fault_worker --mode
    keep-alive records: the clock pair, the deadlines of grants and writes, the
    final audit log."""

    def __init__(self, sync=False):
        super().__init__()
        self.scenario.update(sync=sync, faults=[])
        self.grants = []
        self.started = set()

    def _start(self, w):
        if w not in self.started:
            self.started.add(w)
            self._add(w, {"t": 0, "w": w, "id": 0, "ev": "start", "impl": "client",
                          "mono_ns": 0, "real_ns": REAL_OFFSET_NS})

    def grant(self, w, t0, t1, lock, token, lost=False, deadline=None, until=None):
        """An acknowledged grant, with its local deadline and server lease_until (ms)."""
        self._start(w)
        i = self.acquire(w, t0, t1, lock, f"owner-{w}-{t0}", token)
        done = self.lines[w][-1]
        done["deadline_ns"] = (deadline if deadline is not None else t1 + 900) * MS
        done["until_ns"] = (until if until is not None else t0 + 1000) * MS + REAL_OFFSET_NS
        if not lost:
            self.grants.append({"lock_name": lock, "fencing_token": token, "holder": w})
        return i

    def held_write(self, w, t0, t1, lock, token, before, after, deadline, until, **kw):
        """A write the worker believed covered by its lease."""
        self._start(w)
        i = self.write(w, t0, t1, lock, token, before, after, local_valid=True, **kw)
        invoke = next(r for r in self.lines[w] if r["id"] == i and r["ev"] == "invoke")
        invoke["owner"] = next(r["owner"] for r in self.lines[w]
                               if r["ev"] == "ok" and r.get("token") == token)
        invoke["deadline_ns"] = deadline * MS
        invoke["until_ns"] = until * MS + REAL_OFFSET_NS
        return i

    def failover(self, t0, t1, fault="kill", rnd=1):
        self.scenario["faults"].append(fault)
        self.events.append({"t": t0 * MS, "ev": "fault_start", "fault": fault, "round": rnd})
        self.events.append({"t": t1 * MS, "ev": "fault_end", "fault": fault, "round": rnd})
        self.events.append({"t": (t0 + 500) * MS, "ev": "new_primary", "node": "n2"})

    def check(self):
        # History.check writes the run directory and calls checker.check_run on it;
        # here the failover checker reads it, with the audit log added to final.json.
        def check_failover_run(run_dir):
            path = os.path.join(run_dir, "final.json")
            with open(path) as f:
                final = json.load(f)
            final["grants"] = self.grants
            with open(path, "w") as f:
                json.dump(final, f)
            return ha_checker.check_ha_run(run_dir)
        original = checker.check_run
        checker.check_run = check_failover_run
        try:
            return super().check()
        finally:
            checker.check_run = original


def clean_failover(sync=False):
    """w1 holds L1 and writes; the primary is killed at 100 ms; w2 gets L1 on the
    new timeline at 1500 ms and writes."""
    h = FailoverHistory(sync)
    h.grant("w1", 0, 2, "L1", GEN1 | 1, deadline=900, until=1000)
    h.held_write("w1", 10, 12, "L1", GEN1 | 1, 0, 1, deadline=900, until=1000)
    h.failover(100, 100)
    h.grant("w2", 1400, 1500, "L1", GEN2 | 2, deadline=2300, until=2400)
    h.held_write("w2", 1510, 1520, "L1", GEN2 | 2, 1, 2, deadline=2300, until=2400)
    return h


class FailoverCheckerTest(unittest.TestCase):
    def test_clean_failover_passes(self):
        s = clean_failover().check()
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["lost_grants"], 0)
        self.assertEqual(s["faults"][0]["to_first_new_grant_ms"], 1400)
        self.assertEqual(s["faults"][0]["to_new_primary_ms"], 500)

    def test_lost_grant_counted_in_async_flagged_in_sync(self):
        for sync in (False, True):
            h = clean_failover(sync)
            h.grant("w3", 50, 60, "L2", GEN1 | 7, lost=True)
            s = h.check()
            self.assertEqual(s["lost_grants"], 1)
            self.assertEqual(s["faults"][0]["lost_grants"], 1)
            self.assertEqual(s["violations_by_invariant"]["4"], 1 if sync else 0, s)

    def test_lost_token_granted_again(self):
        # Negative control: the new primary hands a lost grant's token to another owner.
        h = clean_failover()
        h.grant("w3", 50, 60, "L2", GEN1 | 7, lost=True)
        h.grant("w1", 1600, 1610, "L2", GEN1 | 7)
        s = h.check()
        self.assertGreater(s["violations_by_invariant"]["3"], 0, s)

    def test_isolated_primary_grants_leave_the_order(self):
        # An isolated old primary grants a lower token after the new primary's grant;
        # both lost with its timeline: counted, not an ordering violation.
        h = clean_failover()
        h.grant("w3", 1600, 1610, "L1", GEN1 | 3, lost=True)
        h.write("w3", 1620, 1630, "L1", GEN1 | 3, 1, 2, commit=False)
        s = h.check()
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["lost_grants"], 1)
        self.assertEqual(s["lost_writes"], 1)

    def test_client_deadline_after_server_deadline(self):
        h = clean_failover()
        h.grant("w3", 3000, 3002, "L3", GEN2 | 1, deadline=4100, until=4000)
        s = h.check()
        self.assertEqual(s["violations_by_invariant"]["extra"], 1, s)

    def test_belief_overtaken(self):
        # w1's renewal was lost: it still believes its lease valid at 1530 ms,
        # after w2 was granted a higher token at 1500 ms.
        for sync in (False, True):
            h = clean_failover(sync)
            h.held_write("w1", 1530, 1540, "L1", GEN1 | 1, None, None, deadline=1800, until=1900,
                         result="refused", why="not_held", commit=False)
            s = h.check()
            self.assertEqual(s["overtaken_beliefs"], 1)
            self.assertEqual(s["violations_by_invariant"]["extra"], 1 if sync else 0, s)

    def test_overtaken_guarded_write_survives(self):
        h = clean_failover()
        h.held_write("w1", 1530, 1540, "L1", GEN1 | 1, 2, 3, deadline=1800, until=1900)
        s = h.check()
        self.assertGreater(s["violations_by_invariant"]["2"], 0, s)

    def test_kill_without_new_generation(self):
        # After a kill the grants must come from a new timeline; after an
        # isolation the old primary may win the leader key back.
        for fault, flagged in (("kill", 1), ("isolate", 0)):
            h = FailoverHistory()
            h.grant("w1", 0, 2, "L1", GEN1 | 1)
            h.failover(100, 200, fault=fault)
            h.grant("w2", 1400, 1500, "L1", GEN1 | 2)
            h.write("w2", 1510, 1520, "L1", GEN1 | 2, 0, 1)
            s = h.check()
            self.assertEqual(s["violations_by_invariant"]["5"], flagged, s)


if __name__ == "__main__":
    unittest.main()
