#!/usr/bin/env python3
"""tests/faults/test_kinds_check.py -- kinds_check.py on synthetic runs.

A clean run must pass; a token granted twice, a reader's write beside a
writer's, two writers at once, three permit writes under two permits, a
missing fault and a kind without progress must each be reported under its
invariant. Run: python3 tests/faults/test_kinds_check.py (standard library).
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kinds_check  # noqa: E402

FAULTS = ["immediate stop", "SIGKILL of the postmaster", "promotion"]


class Run:
    """A run directory: grants, committed writes and faults, written by hand."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="faults-kinds-")
        os.makedirs(os.path.join(self.dir, "history"))
        self.ops = []
        self.writes = []
        self.events = []
        self.owner = 0

    def grant(self, t, role, token, name=None, owner=None):
        self.owner += 1
        self.ops.append({"t": t, "worker": f"{role[0]}1", "role": role,
                         "name": name or ("S1" if role == "permit" else "RW1"), "op": "acquire",
                         "result": "ok", "owner": owner or f"o{self.owner}", "token": token})

    def write(self, role, token, started, ended, worker=None):
        self.writes.append({"name": "S1" if role == "permit" else "RW1", "role": role,
                            "worker": worker or f"{role[0]}1", "token": token,
                            "started": started, "ended": ended})

    def fault(self, t, how, live=None, fault="crash"):
        self.events.append({"t": t, "ev": "fault_start", "fault": fault, "how": how,
                            "live": live or {}})
        self.events.append({"t": t + 1, "ev": "fault_end", "fault": fault, "how": how})

    def clean(self):
        """Every kind granted before and after the promotion, each writing alone."""
        self.fault(100, "immediate stop", {"shared": 2, "permit": 2})
        self.fault(200, "SIGKILL of the postmaster")
        self.fault(300, "promotion", fault="failover")
        token = 0
        for t in (50, 400):
            for role in ("permit", "reader", "writer"):
                token += 1
                self.grant(t, role, token)
        self.write("permit", 1, 0, 10)
        self.write("permit", 4, 5, 15, worker="p2")
        self.write("reader", 2, 20, 30)
        self.write("reader", 5, 25, 35, worker="r2")
        self.write("writer", 3, 40, 50)
        self.write("writer", 6, 60, 70)
        return self

    def check(self):
        with open(os.path.join(self.dir, "history", "all.jsonl"), "w") as f:
            for o in self.ops:
                f.write(json.dumps(o) + "\n")
        with open(os.path.join(self.dir, "kinds_writes.json"), "w") as f:
            json.dump(self.writes, f)
        with open(os.path.join(self.dir, "events.jsonl"), "w") as f:
            for e in self.events:
                f.write(json.dumps(e) + "\n")
        with open(os.path.join(self.dir, "scenario.json"), "w") as f:
            json.dump({"name": "synthetic", "permits": 2, "checks": {"faults": FAULTS}}, f)
        try:
            return kinds_check.check_kinds(self.dir)["violations_by_invariant"]
        finally:
            shutil.rmtree(self.dir)


class KindsCheckTest(unittest.TestCase):
    def test_clean_run_passes(self):
        self.assertEqual(sum(Run().clean().check().values()), 0)

    def test_token_granted_twice(self):
        r = Run().clean()
        r.grant(500, "reader", 2)  # a reader's token again, to a new owner
        self.assertEqual(r.check()["T"], 1)

    def test_same_owner_again_is_one_grant(self):
        r = Run().clean()
        r.grant(500, "reader", 2, owner="o2")
        self.assertEqual(r.check()["T"], 0)

    def test_reader_beside_writer(self):
        r = Run().clean()
        r.write("reader", 7, 45, 48, worker="r3")
        self.assertEqual(r.check()["RW"], 1)

    def test_two_writers(self):
        r = Run().clean()
        r.write("writer", 8, 65, 80, worker="x2")
        self.assertEqual(r.check()["RW"], 1)

    def test_permits_over_the_size(self):
        r = Run().clean()
        r.write("permit", 9, 8, 12, worker="p3")
        self.assertEqual(r.check()["S"], 1)

    def test_touching_writes_do_not_overlap(self):
        r = Run().clean()
        r.write("reader", 10, 50, 60, worker="r3")  # ends as the next writer starts
        r.write("permit", 11, 15, 20, worker="p3")
        self.assertEqual(sum(r.check().values()), 0)

    def test_missing_fault_and_no_progress(self):
        r = Run().clean()
        r.events = [e for e in r.events if e.get("how") != "promotion"]
        r.ops = [o for o in r.ops if o["role"] != "writer"]
        self.assertGreaterEqual(r.check()["extra"], 2)

    def test_no_reader_live_at_a_fault(self):
        r = Run().clean()
        for e in r.events:
            e.pop("live", None)
        self.assertEqual(r.check()["extra"], 2)


if __name__ == "__main__":
    unittest.main()
