#!/usr/bin/env python3
"""tests/faults/test_checker.py -- the checker on synthetic histories.

Each case builds a small run directory by hand: a clean history must pass, and
each kind of violation must be reported under the right invariant. Run:
python3 tests/faults/test_checker.py (unittest, standard library only).
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402

MS = 1_000_000


class History:
    """Writes worker histories, events and the final state of a synthetic run."""

    def __init__(self, checks=None):
        self.dir = tempfile.mkdtemp(prefix="faults-checker-")
        os.makedirs(os.path.join(self.dir, "history"))
        self.lines = {}
        self.ids = {}
        self.events = []
        self.write_log = []
        self.resources = {}
        self.locks = {}
        self.scenario = {"name": "synthetic", "ttl_ms": 1000, "checks": checks or {}}
        self.observers = {}
        self.election = None

    def _next(self, w):
        self.ids[w] = self.ids.get(w, 0) + 1
        return self.ids[w]

    def _add(self, w, rec):
        self.lines.setdefault(w, []).append(rec)

    def acquire(self, w, t0, t1, lock, owner, token=None, result="ok", why=None, mode="try"):
        i = self._next(w)
        self._add(w, {"t": t0 * MS, "w": w, "id": i, "ev": "invoke", "op": "acquire",
                      "lock": lock, "owner": owner, "mode": mode})
        done = {"t": t1 * MS, "w": w, "id": i, "ev": result, "owner": owner}
        if token is not None:
            done["token"] = token
            self.locks[lock] = max(self.locks.get(lock, 0), token)
        if why:
            done["why"] = why
        self._add(w, done)
        return i

    def write(self, w, t0, t1, lock, token, before, after, result="ok", kind="g",
              commit=True, local_valid=True, why=None):
        """A write; commit=True puts it in the final write_log (what the server did)."""
        i = self._next(w)
        res = f"{kind}:{lock}"
        self._add(w, {"t": t0 * MS, "w": w, "id": i, "ev": "invoke", "op": "write", "lock": lock,
                      "res": res, "owner": "o", "token": token, "local_valid": local_valid})
        done = {"t": t1 * MS, "w": w, "id": i, "ev": result, "before": before, "after": after}
        if why:
            done["why"] = why
        self._add(w, done)
        if commit:
            self.write_log.append({"id": len(self.write_log) + 1, "resource": res, "token": token,
                                   "worker": w, "op": i, "before": before, "after": after})
            self.resources[res] = after
        return i

    def fault(self, t0, t1, fault="pause", lock=None, worker=None):
        extra = {"worker": worker} if worker else {}
        self.events.append({"t": t0 * MS, "ev": "fault_start", "fault": fault, "lock": lock, **extra})
        self.events.append({"t": t1 * MS, "ev": "fault_end", "fault": fault, "lock": lock, **extra})

    def view(self, observer, t, token, event="view"):
        """An observer reports the leader with this token (0: none)."""
        self.observers.setdefault(observer, []).append(
            {"t": t * MS, "w": observer, "id": 0, "ev": event, "token": token, "holder": ""})

    def election_end(self, before, after, observers):
        self.election = {"before": before, "after": after, "leader": "c", "observers": observers}

    def check(self):
        for w, recs in self.lines.items():
            with open(os.path.join(self.dir, "history", f"{w}.jsonl"), "w") as f:
                for rec in recs:
                    f.write(json.dumps(rec) + "\n")
        with open(os.path.join(self.dir, "events.jsonl"), "w") as f:
            for ev in self.events:
                f.write(json.dumps(ev) + "\n")
        with open(os.path.join(self.dir, "final.json"), "w") as f:
            json.dump({"write_log": self.write_log, "resources": self.resources,
                       "locks": [{"lock_name": k, "fencing_token": v} for k, v in self.locks.items()]},
                      f)
        with open(os.path.join(self.dir, "scenario.json"), "w") as f:
            json.dump(self.scenario, f)
        if self.observers:
            os.makedirs(os.path.join(self.dir, "observers"))
        for name, recs in self.observers.items():
            with open(os.path.join(self.dir, "observers", f"{name}.jsonl"), "w") as f:
                for rec in recs:
                    f.write(json.dumps(rec) + "\n")
        if self.election:
            with open(os.path.join(self.dir, "election.json"), "w") as f:
                json.dump(self.election, f)
        try:
            return checker.check_run(self.dir)
        finally:
            shutil.rmtree(self.dir)


def clean_history(checks=None):
    """Two workers taking turns on L1, a pause fault, recovery after it."""
    h = History(checks)
    h.acquire("w1", 0, 2, "L1", "a", 1)
    h.write("w1", 3, 5, "L1", 1, 0, 1)
    h.write("w1", 6, 8, "L1", 1, 0, 1, kind="t")
    h.acquire("w2", 1, 3, "L1", "b", result="refused", why="busy")
    h.fault(10, 20)
    h.acquire("w2", 21, 25, "L1", "c", 2)
    h.write("w2", 26, 28, "L1", 2, 1, 2)
    # The paused holder's late write is refused and never committed.
    h.write("w1", 22, 30, "L1", 1, None, None, result="refused", why="not_held", commit=False,
            local_valid=False)
    return h


class CheckerTest(unittest.TestCase):
    def assertOnly(self, summary, invariant):
        counts = summary["violations_by_invariant"]
        self.assertGreater(counts[invariant], 0, summary)
        for other, n in counts.items():
            if other != invariant:
                self.assertEqual(n, 0, (other, summary))

    def test_clean_history_passes(self):
        s = clean_history().check()
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["faults"], 1)
        self.assertEqual(s["recovery_median_ms"], 5.0)

    def test_token_decrease_in_final_state(self):
        h = clean_history()
        h.write("w2", 29, 30, "L1", 2, 1, 2, kind="t")
        # A stale holder's write committed after the new holder's.
        h.write("w1", 31, 33, "L1", 1, 2, 3, kind="t")
        s = h.check()
        self.assertGreater(s["violations_by_invariant"]["1"], 0, s)

    def test_interleaved_read_modify_write(self):
        h = History()
        h.acquire("w1", 0, 1, "L1", "a", 1)
        h.acquire("w2", 2, 3, "L1", "b", 2)
        # Both read 0 and both wrote 1: a lost update, tokens in order.
        h.write("w2", 4, 6, "L1", 2, 0, 1)
        h.write("w1", 3, 7, "L1", 2, 0, 1)
        h.acquire("w1", 10, 11, "L1", "c", 3)
        s = h.check()
        self.assertOnly(s, "2")

    def test_token_issued_twice(self):
        h = History()
        h.acquire("w1", 0, 1, "L1", "a", 5)
        h.write("w1", 2, 3, "L1", 5, 0, 1)
        h.acquire("w2", 10, 11, "L1", "b", 5)
        s = h.check()
        self.assertGreater(s["violations_by_invariant"]["3"], 0, s)

    def test_token_goes_down_between_grants(self):
        h = History(checks={"async_loss": True})
        h.acquire("w1", 0, 1, "L1", "a", 7)
        h.write("w1", 2, 3, "L1", 7, 0, 1, commit=False)  # lost in the failover
        h.acquire("w2", 10, 11, "L1", "b", 6)
        h.write("w2", 12, 13, "L1", 6, 0, 1)
        s = h.check()
        self.assertGreater(s["violations_by_invariant"]["3"], 0, s)
        self.assertGreater(s["violations_by_invariant"]["1"], 0, s)
        self.assertEqual(s["violations_by_invariant"]["4"], 0, s)
        self.assertEqual(s["info"]["lost_acknowledged_writes"], 1)

    def test_acknowledged_write_lost(self):
        h = clean_history()
        h.write("w2", 31, 32, "L1", 2, 2, 3, kind="t", commit=False)
        s = h.check()
        self.assertOnly(s, "4")

    def test_refused_write_committed(self):
        h = clean_history()
        h.write("w2", 31, 32, "L1", 2, 0, 1, kind="f", result="refused", why="PD001")
        s = h.check()
        self.assertGreater(s["violations_by_invariant"]["4"], 0, s)

    def test_no_recovery_is_a_liveness_violation(self):
        h = clean_history()
        h.fault(40, 50, lock="L1")
        # asked for well after the fault (2 ttl), and refused until the end
        h.acquire("w1", 4000, 4001, "L1", "y", result="refused", why="busy")
        h.acquire("w2", 5000, 5001, "L2", "z", 1)  # the run goes on long enough
        s = h.check()
        self.assertOnly(s, "5")

    def test_a_lock_nobody_asks_for_again_is_not_judged(self):
        h = clean_history()
        h.fault(40, 50, lock="L1")
        # L1 refused once while a paused holder's lease may still be live,
        # then never asked for again: no evidence either way
        h.acquire("w1", 60, 61, "L1", "y", result="refused", why="busy")
        h.acquire("w2", 5000, 5001, "L2", "z", 1)
        s = h.check()
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["info"]["faults_not_asked_after"], 1, s)

    def test_unknown_outcomes_are_allowed(self):
        h = clean_history()
        h.write("w2", 31, 32, "L1", 2, 2, 3, result="unknown", commit=False)
        h.acquire("w1", 33, 34, "L1", "d", result="unknown", why="connection")
        h.acquire("w1", 35, 36, "L1", "d", 3)
        s = h.check()
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["unknown"], 2)

    def test_local_belief(self):
        h = clean_history(checks={"local_belief": True})
        h.write("w2", 31, 32, "L1", 2, None, None, result="refused", why="not_held",
                commit=False, local_valid=True)
        s = h.check()
        self.assertEqual(s["info"]["local_belief_wrong"], 1)
        self.assertOnly(s, "extra")

    def test_acquire_bound(self):
        h = clean_history(checks={"acquire_bound_ms": 5})
        h.fault(40, 60, fault="idle", lock="L1")
        h.acquire("w2", 41, 43, "L1", "x", result="refused", why="55P03")
        h.acquire("w2", 44, 55, "L1", "y", result="refused", why="55P03")
        h.acquire("w2", 61, 62, "L1", "z", 3)
        s = h.check()
        self.assertOnly(s, "extra")
        self.assertEqual(s["violations_by_invariant"]["extra"], 1)

    def test_converge(self):
        h = clean_history(checks={"converge": True, "min_unknown": 1})
        h.acquire("w1", 31, 32, "L2", "u", 9, result="unknown", why="warning")
        h.acquire("w1", 33, 34, "L2", "u", 9)
        self.assertEqual(h.check()["violations"], 0)
        h = clean_history(checks={"converge": True})
        h.acquire("w1", 31, 32, "L2", "u", 9, result="unknown", why="warning")
        h.acquire("w1", 33, 34, "L2", "u", 10)
        self.assertOnly(h.check(), "extra")

    def test_unexplained_error(self):
        h = clean_history()
        h.acquire("w2", 31, 32, "L1", "q", result="fail", why="26000")
        h.acquire("w2", 33, 34, "L1", "r", result="fail", why="57P01")
        self.assertEqual(h.check()["violations_by_invariant"]["extra"], 1)

    def test_uncertain_token_reused(self):
        # The uncertain grant never committed; the next owner gets the number.
        h = clean_history()
        h.acquire("w1", 31, 32, "L2", "u", 4, result="unknown", why="commit")
        h.acquire("w2", 33, 34, "L2", "v", 4)
        self.assertEqual(h.check()["violations"], 0)

    def test_min_stale_refusals(self):
        self.assertEqual(clean_history(checks={"min_stale_refusals": 1}).check()["violations"], 0)
        h = History(checks={"min_stale_refusals": 1})
        h.acquire("w1", 0, 1, "L1", "a", 1)
        h.write("w1", 2, 3, "L1", 1, 0, 1)
        self.assertOnly(h.check(), "extra")

    def test_converge_gave_up(self):
        h = clean_history(checks={"converge": True})
        h.acquire("w1", 31, 32, "L2", "u", 9, result="unknown", why="warning")
        h.acquire("w1", 33, 34, "L2", "u", result="fail", why="connect")
        h.acquire("w1", 35, 36, "L3", "other", 1)
        h.acquire("w2", 9000, 9001, "L3", "late", 2)  # the run went on long enough
        s = h.check()
        self.assertOnly(s, "extra")
        self.assertIn("never resolved", s["examples"]["extra"][0])

    def test_min_unknown(self):
        s = clean_history(checks={"min_unknown": 1}).check()
        self.assertOnly(s, "extra")

    def fenced_crash(self, reissued_token, recovered_token=6):
        """A fenced grant of token 7 on L2 just before a crash; the restarted
        server knows L2 up to recovered_token; then another owner's grant."""
        h = clean_history(checks={"min_lost_grants": 1})
        h.acquire("h", 40, 41, "L2", "lost", 7)
        h.fault(45, 60, fault="crash")
        h.events.append({"t": 55 * MS, "ev": "recovered", "fault": "crash", "lock": None,
                         "since": 45 * MS, "tokens": {"L1": 2, "L2": recovered_token}})
        h.acquire("w2", 61, 62, "L2", "next", reissued_token)
        return h.check()

    def test_lost_fenced_grant(self):
        s = self.fenced_crash(reissued_token=1 << 40 | 7)
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["info"]["lost_grants"], 1)

    def test_lost_fenced_grant_issued_again(self):
        # what dlock.test_ignore_epoch lets happen: the lost grant's token again
        self.assertOnly(self.fenced_crash(reissued_token=7), "3")

    def test_no_fenced_grant_lost(self):
        s = self.fenced_crash(reissued_token=8, recovered_token=7)
        self.assertOnly(s, "extra")
        self.assertIn("never reached the fenced grants", s["examples"]["extra"][0])

    def test_session_takeover(self):
        # The killed holder's lease had 1000 ms left: a grant 20 ms after the
        # kill passes; one only after the lease would have expired is flagged.
        h = clean_history(checks={"session_takeover": True})
        h.acquire("w1", 40, 41, "L2", "k", 5)
        h.events.append({"t": 50 * MS, "ev": "fault_start", "fault": "sigkill", "lock": "L2",
                         "worker": "w1", "expires_in_ms": 1000})
        h.events.append({"t": 51 * MS, "ev": "fault_end", "fault": "sigkill", "lock": "L2"})
        h.acquire("w2", 60, 70, "L2", "n", 6)
        s = h.check()
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["info"]["session_takeover_ms"], [20.0])
        h = clean_history(checks={"session_takeover": True})
        h.acquire("w1", 40, 41, "L2", "k", 5)
        h.events.append({"t": 50 * MS, "ev": "fault_start", "fault": "sigkill", "lock": "L2",
                         "worker": "w1", "expires_in_ms": 1000})
        h.events.append({"t": 51 * MS, "ev": "fault_end", "fault": "sigkill", "lock": "L2"})
        h.acquire("w2", 1040, 1060, "L2", "n", 6)
        self.assertOnly(h.check(), "extra")
        # a kill that never hit a lease with time left is a fault without effect
        self.assertOnly(clean_history(checks={"session_takeover": True}).check(), "extra")



def clean_election():
    """c1 leads, is paused; c2 takes over; two observers follow, one restarted."""
    h = History({"election": True})
    h.acquire("c1", 0, 1, "E", "a", 1, mode="wait")
    h.write("c1", 2, 3, "E", 1, 0, 1)
    h.view("o1", 1, 1)
    h.view("o2", 1, 1)
    h.fault(10, 30, fault="sigstop leader", lock="E", worker="c1")
    h.acquire("c2", 5, 21, "E", "b", 2, mode="wait")
    h.write("c2", 22, 23, "E", 2, 1, 2)
    # the paused leader's write after it resumed is refused
    h.write("c1", 31, 32, "E", 1, None, None, result="refused", why="not_held", commit=False)
    h.view("o1", 21, 2)
    h.view("o1", 40, 2, event="final")
    h.view("o3", 35, 2)
    h.view("o3", 40, 2, event="final")
    h.election_end(2, 2, ["o1", "o3"])
    return h


class ElectionCheckerTest(unittest.TestCase):
    def assertOnly(self, summary, invariant):
        CheckerTest.assertOnly(self, summary, invariant)

    def test_clean_election_passes(self):
        s = clean_election().check()
        self.assertEqual(s["violations"], 0, s)
        self.assertEqual(s["recovery_median_ms"], 11.0)  # fault start to c2's grant
        self.assertEqual(s["info"]["observers_judged"], 2)

    def test_observer_with_a_stale_final_view(self):
        h = clean_election()
        h.view("o4", 36, 0, event="final")  # restarted, trusted notifications, heard none
        h.election["observers"].append("o4")
        self.assertOnly(h.check(), "6")

    def test_observer_going_back(self):
        h = clean_election()
        h.view("o1", 25, 1)
        self.assertOnly(h.check(), "6")

    def test_observer_without_a_final_view(self):
        h = clean_election()
        h.election["observers"].append("o9")
        self.assertOnly(h.check(), "6")

    def test_no_failover_after_a_fault_on_the_leader(self):
        h = clean_election()
        h.fault(50, 51, fault="sigkill leader", lock="E", worker="c2")
        h.acquire("c2", 5000, 5001, "E", "c", 3, mode="wait")  # only the killed one, much later
        self.assertOnly(h.check(), "5")

    def test_leader_changed_while_observers_stopped(self):
        h = clean_election()
        h.election["after"] = 3
        s = h.check()
        self.assertGreater(s["violations_by_invariant"]["extra"], 0, s)


if __name__ == "__main__":
    unittest.main()
