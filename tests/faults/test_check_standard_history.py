#!/usr/bin/env python3
"""tests/faults/test_check_standard_history.py -- the standard history and its checker.

Hand-made standard histories: a clean one must pass, and each kind of
violation (two holders at once, a token going down among accepted writes, a
stale lease's write accepted, one token for two owners, a refusal nothing
explains) must be flagged under its check; unknown outcomes must not raise
false alarms. Then a harness history converted by standard_history.py: the
mapping of outcomes and processes, and a converted history with a late write
accepted is flagged. Run: python3 tests/faults/test_check_standard_history.py
(unittest, standard library only).
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_standard_history  # noqa: E402
import standard_history  # noqa: E402

MS = 1_000_000
TTL_MS = 1000
# The harness's clock is CLOCK_MONOTONIC: its zero is long before a run.
BOOTED_MS = 86_400_000


class Standard:
    """Builds one lock's standard history; times in ms."""

    def __init__(self):
        self.events = []

    def op(self, process, f, t0, t1, value, result="ok", error=None, done_value=None):
        self.events.append({"type": "invoke", "process": process, "time": t0 * MS, "f": f,
                            "value": value})
        if result is None:
            return
        done = {"type": result, "process": process, "time": t1 * MS, "f": f,
                "value": dict(value, **(done_value or {}))}
        if error:
            done["error"] = error
        self.events.append(done)

    def acquire(self, process, t0, t1, owner, token=None, result="ok", error=None):
        self.op(process, "acquire", t0, t1, {"owner": owner, "token": None, "ttl_ms": TTL_MS},
                result, error, {"token": token})

    def write(self, process, t0, t1, token, result="ok", error=None, kind="g", guard="lease"):
        self.op(process, "write", t0, t1, {"resource": f"{kind}:L1", "guard": guard,
                                           "token": token}, result, error)

    def renew(self, process, t0, t1, token, result="ok", error=None):
        self.op(process, "renew", t0, t1, {"token": token}, result, error)

    def release(self, process, t0, t1, token, result="ok", error=None):
        self.op(process, "release", t0, t1, {"token": token}, result, error)

    def fault(self, t0, t1, fault="sigstop"):
        for f, t in (("start", t0), ("stop", t1)):
            self.events.append({"type": "info", "process": "nemesis", "time": t * MS, "f": f,
                                "value": {"fault": fault, "lock": None}})

    def check(self):
        d = tempfile.mkdtemp(prefix="standard-history-")
        try:
            path = os.path.join(d, "L1.jsonl")
            events = sorted(self.events, key=lambda e: e["time"])
            with open(path, "w") as f:
                for i, e in enumerate(events):
                    f.write(json.dumps(dict(e, index=i)) + "\n")
            return check_standard_history.check_paths([d])[path]
        finally:
            shutil.rmtree(d)


def clean():
    """Two owners taking turns, with a pause, late refusals and unknown outcomes."""
    h = Standard()
    h.acquire(0, 0, 10, "a", 1)
    h.write(0, 20, 30, 1)
    h.write(0, 35, 40, 1, kind="t", guard="monotonic")
    h.renew(0, 45, 50, 1)
    h.acquire(1, 5, 15, "b", result="fail", error="busy")
    # Process 0 is paused past its ttl; b takes over.
    h.fault(60, 2500)
    h.acquire(1, 1200, 1210, "b", 2)
    h.write(1, 1220, 1230, 2)
    h.write(1, 1240, 1250, 2, kind="t", guard="monotonic")
    # The paused holder's late writes are refused.
    h.write(0, 2600, 2610, 1, result="fail", error="not-held")
    h.write(0, 2620, 2630, 1, result="fail", error="stale-token", kind="t", guard="monotonic")
    h.release(1, 2700, 2710, 2)
    # An acquire whose outcome is unknown: the worker goes on as process 2.
    h.acquire(1, 2800, 2900, "c", result="info", error="connection")
    h.acquire(2, 3000, 3010, "c", 3)
    # A write of unknown outcome with token 3, then a late writer's with token 2
    # refused stale-token: the unknown one may have been accepted, so it is explained.
    h.write(2, 3020, 3030, 3, result="info", error="connection", kind="f", guard="fence")
    h.write(3, 3025, 3040, 2, result="fail", error="stale-token", kind="f", guard="fence")
    h.release(5, 3050, 3060, 3)  # the same worker, a new process after the info
    # Released at 2710: the next grant comes within b's ttl, rightly.
    h.acquire(4, 3100, 3110, "d", 4)
    return h


class CheckTest(unittest.TestCase):
    def assertOnly(self, report, check):
        flagged = {c for c, n in report["by_check"].items() if n}
        self.assertEqual(flagged, {check}, report["examples"])

    def test_clean_history_passes(self):
        report = clean().check()
        self.assertEqual(report["violations"], 0, report["examples"])

    def test_two_holders(self):
        h = clean()
        # e is granted 300 ms after d, d's lease (1 s) still running, no release, no fault.
        h.acquire(5, 3300, 3410, "e", 5)
        self.assertOnly(h.check(), "two-holders")

    def test_two_holders_not_judged_across_a_fault_or_a_release(self):
        h = clean()
        h.fault(3200, 3250, "server clock +2 ttl")
        h.acquire(5, 3300, 3410, "e", 5)
        self.assertEqual(h.check()["violations"], 0)
        h = clean()
        h.release(4, 3200, 3350, 4, result="info", error="connection")
        h.acquire(5, 3300, 3410, "e", 5)
        self.assertEqual(h.check()["violations"], 0)

    def test_token_going_down_among_accepted_writes(self):
        h = clean()
        h.write(4, 3150, 3160, 4, kind="t", guard="monotonic")
        h.write(9, 3200, 3210, 2, kind="t", guard="monotonic")
        self.assertOnly(h.check(), "token-decrease")

    def test_stale_lease_write_accepted(self):
        h = clean()
        # The paused holder's write with token 1 goes through after token 2's grant.
        h.write(0, 2640, 2650, 1, kind="g")
        report = h.check()
        self.assertGreater(report["by_check"]["stale-accepted"], 0)
        self.assertGreater(report["by_check"]["token-decrease"], 0)

    def test_unfenced_write_judged_by_the_lease(self):
        h = clean()
        h.write(0, 2640, 2650, 1, kind="t", guard="none")
        self.assertGreater(h.check()["by_check"]["stale-accepted"], 0)

    def test_stale_renew_accepted(self):
        h = clean()
        h.renew(0, 2640, 2650, 1)
        self.assertOnly(h.check(), "stale-accepted")

    def test_one_token_two_owners(self):
        h = clean()
        h.acquire(9, 5000, 5010, "z", 4)
        report = h.check()
        self.assertGreater(report["by_check"]["token-owner"], 0)
        self.assertGreater(report["by_check"]["token-order"], 0)

    def test_unexplained_refusals(self):
        h = Standard()
        h.acquire(0, 0, 10, "a", 1)
        h.write(0, 20, 30, 1, kind="t", guard="monotonic")
        # Within a's ttl, nobody else asked, nothing was written above token 1.
        h.write(0, 40, 50, 1, result="fail", error="not-held")
        h.write(0, 60, 70, 1, result="fail", error="stale-token", kind="t", guard="monotonic")
        report = h.check()
        self.assertOnly(report, "refused-unexplained")
        self.assertEqual(report["violations"], 2)

    def test_not_held_explained_by_an_uncertain_grant(self):
        h = Standard()
        h.acquire(0, 0, 10, "a", 1)
        # An acquire of unknown outcome may have taken the lock at any time since.
        h.acquire(1, 20, 30, "b", result="info", error="connection")
        h.write(0, 40, 50, 1, result="fail", error="not-held")
        self.assertEqual(h.check()["violations"], 0)

    def test_process_after_info_is_refused(self):
        h = clean()
        h.renew(2, 3070, 3080, 3)  # process 2's write ended in info: it is crashed
        with self.assertRaises(ValueError):
            h.check()

    def test_uncertain_write_never_counts_as_accepted(self):
        h = clean()
        h.write(9, 3200, 3210, 2, result="info", error="connection", kind="f", guard="fence")
        self.assertEqual(h.check()["violations"], 0)


class Internal:
    """A harness run directory with the workers' own history format."""

    def __init__(self, fencing=True):
        self.dir = tempfile.mkdtemp(prefix="standard-history-run-")
        os.makedirs(os.path.join(self.dir, "history"))
        self.lines = {}
        self.events = []
        self.scenario = {"name": "synthetic", "ttl_ms": TTL_MS, "fencing": fencing}

    def op(self, w, t0, t1, result, invoke, done=None):
        recs = self.lines.setdefault(w, [])
        i = len([r for r in recs if r["ev"] == "invoke"]) + 1
        recs.append(dict({"t": (BOOTED_MS + t0) * MS, "w": w, "id": i, "ev": "invoke"}, **invoke))
        if result:
            recs.append(dict({"t": (BOOTED_MS + t1) * MS, "w": w, "id": i, "ev": result},
                             **(done or {})))

    def convert(self):
        for w, recs in self.lines.items():
            with open(os.path.join(self.dir, "history", f"{w}.jsonl"), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in recs)
        with open(os.path.join(self.dir, "events.jsonl"), "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in self.events)
        with open(os.path.join(self.dir, "scenario.json"), "w") as f:
            json.dump(self.scenario, f)
        return standard_history.write_standard_history(self.dir)

    def cleanup(self):
        shutil.rmtree(self.dir)


def internal_run(fencing=True, late_write="refused"):
    r = Internal(fencing)
    r.op("w1", 0, 10, "ok", {"op": "acquire", "lock": "L1", "owner": "a", "mode": "try"},
         {"token": 1, "owner": "a"})
    r.op("w1", 20, 30, "ok", {"op": "write", "lock": "L1", "res": "g:L1", "owner": "a",
                              "token": 1}, {"before": 0, "after": 1})
    r.op("w2", 5, 15, "refused", {"op": "acquire", "lock": "L1", "owner": "b", "mode": "try"},
         {"why": "busy"})
    r.events += [{"t": (BOOTED_MS + 40) * MS, "ev": "fault_start", "fault": "sigstop", "lock": "L1"},
                 {"t": (BOOTED_MS + 2500) * MS, "ev": "fault_end", "fault": "sigstop", "lock": "L1"}]
    r.op("w2", 1200, 1210, "ok", {"op": "acquire", "lock": "L1", "owner": "b", "mode": "try"},
         {"token": 2, "owner": "b"})
    r.op("w2", 1220, 1230, "ok", {"op": "write", "lock": "L1", "res": "g:L1", "owner": "b",
                                  "token": 2}, {"before": 1, "after": 2})
    late = {"why": "not_held"} if late_write == "refused" else {"before": 2, "after": 3}
    r.op("w1", 2600, 2610, late_write, {"op": "write", "lock": "L1", "res": "g:L1",
                                        "owner": "a", "token": 1}, late)
    r.op("w2", 2700, 2800, "unknown", {"op": "release", "lock": "L1", "owner": "b", "token": 2},
         {"why": "connection"})
    r.op("w2", 2900, None, None, {"op": "acquire", "lock": "L2", "owner": "c", "mode": "wait"})
    return r


class ConversionTest(unittest.TestCase):
    def test_mapping(self):
        r = internal_run()
        try:
            out = r.convert()
            self.assertEqual(sorted(os.listdir(out)), ["L1.jsonl", "L2.jsonl"])
            with open(os.path.join(out, "L1.jsonl")) as f:
                events = [json.loads(line) for line in f]
            self.assertEqual([e["index"] for e in events], list(range(len(events))))
            self.assertEqual(events[0]["time"], 0)  # the run's first event
            self.assertEqual(next(e["time"] for e in events if e["type"] == "ok"), 10 * MS)
            self.assertEqual(events[-1]["type"], "info")  # the sigstop's end
            ops = [e for e in events if e["process"] != "nemesis"]
            refused = [e for e in ops if e.get("error") == "busy"]
            self.assertEqual([e["type"] for e in refused], ["fail"])
            late = [e for e in ops if e.get("error") == "not-held"]
            self.assertEqual([(e["type"], e["value"]["guard"]) for e in late], [("fail", "lease")])
            grant = next(e for e in ops if e["f"] == "acquire" and e["type"] == "ok")
            self.assertEqual(grant["value"]["token"], 1)
            release = [e for e in ops if e["f"] == "release"]
            self.assertEqual([e["type"] for e in release], ["invoke", "info"])
            with open(os.path.join(out, "L2.jsonl")) as f:
                l2 = [json.loads(line) for line in f]
            # The acquire never completed: info; w2 is a new process after the release in doubt.
            self.assertEqual([e["type"] for e in l2], ["invoke", "info"])
            self.assertEqual(l2[1]["error"], "no-completion")
            self.assertNotEqual(l2[0]["process"], release[0]["process"])
            for path in (os.path.join(out, "L1.jsonl"), os.path.join(out, "L2.jsonl")):
                self.assertEqual(check_standard_history.check_paths([path])[path]["violations"], 0)
        finally:
            r.cleanup()

    def test_converted_late_write_accepted_is_flagged(self):
        r = internal_run(fencing=False, late_write="ok")
        try:
            report = check_standard_history.check_paths([r.convert()])
            l1 = next(v for k, v in report.items() if k.endswith("L1.jsonl"))
            self.assertGreater(l1["by_check"]["stale-accepted"], 0)
            self.assertGreater(l1["by_check"]["token-decrease"], 0)
        finally:
            r.cleanup()


if __name__ == "__main__":
    unittest.main()
