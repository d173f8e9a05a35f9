#!/usr/bin/env python3
"""tests/ha/ha.py -- failover under Patroni, checked by the fault checker.

For each run: start a throwaway three-node Patroni cluster with a one-member
etcd (the Patroni back-end of tests/faults/cluster.py), create the fault
harness's resource tables, start workers (tests/faults' fault_worker in its
keep-alive mode: C++ client, multi-host connection string with
target_session_attrs=read-write, keep-alive leases, fenced writes), inject the
faults, capture the final state from the last primary and hand the run to
tests/ha/ha_checker.py. The faults, in each round:

  kill      SIGKILL to the primary's postmaster; Patroni (primary_start_timeout
            0) fails over to a replica and the old primary rejoins as a replica
  isolate   SIGKILL to the primary's Patroni: the leader key expires after its
            ttl and a replica is promoted, while the old primary keeps running
            unmanaged (a split brain: clients connected to it stay there).
            3 s after the new primary is writable the old postmaster gets
            SIGKILL (what a watchdog would have done, late) and Patroni starts
            again, rewinds it and rejoins it as a replica.

Not run by default (--faults), because Debian 12's Patroni 3.0.2 loses
acknowledged commits in them even in synchronous_mode:
  isolate-restart  as isolate, but Patroni is started again with the old
            primary still running. It first rewrites postgresql.conf without
            synchronous_standby_names and reloads, which releases the commits
            waiting for the promoted standby (they are acknowledged), and only
            then shuts the server down and rewinds it.
  isolate-stop  SIGSTOP / SIGCONT instead of kill and restart. When it
            continues, Patroni 3.0.2 overwrites the new leader's key (its etcd3
            update_leader puts the key without checking who holds it; fixed in
            Patroni 3.0.3, patroni/patroni#2689), so the old primary takes the
            cluster back and the new primary is rewound: what it committed
            meanwhile is gone, and its timeline ID is free again. The next
            promotion took that ID again in a run, bringing back the token
            generation of the lost grants; a name that only the rewound
            primary granted would then see its lost tokens issued again.

Beside them, readers and a writer of one name and holders of a semaphore's
permits (tests/faults/kinds_worker.py, psycopg2) renew and make fenced writes
through the same faults; tests/faults/kinds_check.py judges them (no token
twice per name, no reader beside a writer, no permit over the size) and a run
passes only when both checkers find nothing.

Runs: sync (synchronous_mode), async, and N1, a negative control: async with
the timeline left out of tokens (dlock.test_ignore_timeline), which the
checker must catch handing out tokens twice.

With --network (root), instead: net-etcd-cut-sync and net-etcd-cut-async, on
hosts made of network namespaces (tests/faults/netns.py: n1, n2, n3, etcd and
the clients each on its own address), one fault:
  etcd-cut  the primary's host cut off from etcd's (both ways; the clients
            still reach every node) until a replica is writable plus 3 s.
            Measured: when the old primary stops being a writable primary
            (Patroni demotes it when it cannot update the leader key), its
            last grant, the new primary and the first grant of the new
            generation.

Usage: ha.py --worker PATH [--profile quick|full] [--only NAME,...] [--keep]
Run through tests/ha/run.sh, which builds the worker first. Results:
tests/ha/results/latest.md (the table) and latest.json; run directories in
tests/ha/results/run-*/ (not committed).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
import cluster  # noqa: E402
from cluster import PatroniNode  # noqa: E402
import ha_checker  # noqa: E402
from netns import Topology  # noqa: E402
from harness import (FENCING_TRIGGERS, FINAL_STATE, KINDS_SCHEMA, KINDS_WRITES, LOCKS, SCHEMA,  # noqa: E402
                     SYSTEM_PYTHON, await_live_holders, compress_histories, machine_name)
import kinds_check  # noqa: E402

PROFILES = {
    # workers, lease ttl, rounds of (kill, isolate) per run, workload before the
    # first fault and after the last one (s)
    "quick": {"workers": 4, "ttl_ms": 2000, "rounds": 1, "warmup": 4, "cooldown": 5},
    "full": {"workers": 6, "ttl_ms": 2000, "rounds": 3, "warmup": 8, "cooldown": 8},
}

# the lock-kinds workers of every run: role, name, how many; a semaphore of 2
KINDS_WORKERS = [("permit", "S1", 3), ("reader", "RW1", 2), ("writer", "RW1", 1)]
KINDS_PERMITS = 2

RUNS = [
    {"name": "sync", "title": "Patroni synchronous_mode", "sync": True},
    {"name": "async", "title": "Patroni asynchronous replication", "sync": False},
    {"name": "N1-no-timeline", "title": "negative control: async, timeline left out of tokens",
     "sync": False, "ignore_timeline": True, "negative_control": True, "faults": ["isolate"],
     "expect_violations": ["3"]},
    # Hosts made of network namespaces (tests/faults/netns.py; root), only with --network:
    # the primary's host cut off from etcd's, every node, etcd and the clients on their own.
    {"name": "net-etcd-cut-sync", "title": "primary cut off from etcd (network namespaces), synchronous_mode",
     "sync": True, "network": True, "faults": ["etcd-cut"]},
    {"name": "net-etcd-cut-async", "title": "primary cut off from etcd (network namespaces), asynchronous",
     "sync": False, "network": True, "faults": ["etcd-cut"]},
]

# Bounds of every wait (s).
FAILOVER_BOUND = 60
REJOIN_BOUND = 120
SPLIT_BRAIN_EXTRA = 3.0  # isolation goes on this long after the new primary is writable

GRANTS = """
SELECT coalesce(json_agg(json_build_object('lock_name', lock_name, 'fencing_token', fencing_token,
                                           'holder', holder)),
                '[]'::json)
  FROM dlock.audit_log WHERE event IN ('acquire', 'takeover')
"""


def now_ns():
    return time.monotonic_ns()


class Run:
    def __init__(self, args, profile, spec, run_root):
        self.args = args
        self.p = profile
        self.spec = spec
        self.dir = os.path.join(run_root, spec["name"])
        os.makedirs(os.path.join(self.dir, "history"), exist_ok=True)
        self.events = open(os.path.join(self.dir, "events.jsonl"), "w")
        self.topo = None
        if spec.get("network"):
            self.topo = Topology(list(cluster.NODES) + ["etcd", "client"]).create()
        self.cluster = cluster.PatroniCluster(sync=spec["sync"], topology=self.topo)
        self.stop_file = os.path.join(self.cluster.dir, "stop-workers")
        self.workers = {}

    def event(self, ev, **fields):
        rec = {"t": now_ns(), "ev": ev}
        rec.update(fields)
        self.events.write(json.dumps(rec) + "\n")
        self.events.flush()
        print(f"    {ev} {' '.join(f'{k}={v}' for k, v in fields.items())}", flush=True)

    def setup(self):
        c = self.cluster
        c.start()
        leader = c.leader()
        leader.psql("CREATE DATABASE faults")
        settings = ["ALTER DATABASE faults SET dlock.audit = 'all'"]
        if self.spec.get("ignore_timeline"):
            settings.append("ALTER DATABASE faults SET dlock.test_ignore_timeline = on")
        schema = SCHEMA.format(extension="pg_dlock", locks=",".join(f"'{l}'" for l in LOCKS),
                               lock_timeout=800)
        leader.psql(schema + FENCING_TRIGGERS + KINDS_SCHEMA + ";".join(settings), db="faults")
        c.wait_healthy(time.monotonic() + 60)

    def start_workers(self):
        conninfo = self.cluster.conninfo("faults_app", "faults")
        for i in range(1, self.p["workers"] + 1):
            wid = f"w{i}"
            args = (self.topo.exec_args("client") if self.topo else []) + [self.args.worker, "--mode", "keep-alive", "--id", wid, "--conninfo", conninfo,
                    "--history", os.path.join(self.dir, "history", f"{wid}.jsonl"),
                    "--locks", ",".join(LOCKS), "--duration-ms", str(900 * 1000),
                    "--ttl-ms", str(self.p["ttl_ms"]), "--hold-ms", str(self.p["ttl_ms"]),
                    "--seed", str(self.args.seed * 100 + i), "--stop-file", self.stop_file]
            self.workers[wid] = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, f"worker-{wid}.log"), "w"))
        kinds_history = os.path.join(self.dir, "history-kinds")
        os.makedirs(kinds_history, exist_ok=True)
        seq = 0
        for role, name, count in KINDS_WORKERS:
            for i in range(1, count + 1):
                seq += 1
                wid = f"{role[0]}{i}"
                args = [SYSTEM_PYTHON, os.path.join(HERE, "..", "faults", "kinds_worker.py"), "--id", wid,
                        "--role", role, "--name", name, "--conninfo", conninfo,
                        "--history", os.path.join(kinds_history, f"{wid}.jsonl"),
                        "--permits", str(KINDS_PERMITS), "--ttl-ms", str(self.p["ttl_ms"]),
                        "--duration-ms", str(900 * 1000), "--seed", str(self.args.seed * 100 + 50 + seq),
                        "--stop-file", self.stop_file]
                self.workers[wid] = subprocess.Popen(
                    args, stdout=subprocess.DEVNULL,
                    stderr=open(os.path.join(self.dir, f"worker-{wid}.log"), "w"))

    def live(self, node):
        """The leases live on node by kind, once readers and permits are (kinds_check.py)."""
        return await_live_holders(lambda sql: node.psql(sql, db="faults"))

    def wait_new_primary(self, old):
        deadline = time.monotonic() + FAILOVER_BOUND
        while time.monotonic() < deadline:
            node = self.cluster.writable_primary(exclude=(old,))
            if node is not None:
                self.event("new_primary", node=node.name)
                return node
            time.sleep(0.05)
        raise RuntimeError(f"no new primary within {FAILOVER_BOUND} s after the fault on {old.name}")

    def wait_rejoined(self):
        self.cluster.wait_healthy(time.monotonic() + REJOIN_BOUND)
        self.event("healthy", leader=self.cluster.leader().name)

    def fault_kill(self, rnd):
        old = self.cluster.leader()
        self.event("fault_start", fault="kill", round=rnd, node=old.name, lock=None, live=self.live(old))
        old.kill_postmaster()
        # The kill is instantaneous; the fault's end is the kill itself.
        self.event("fault_end", fault="kill", round=rnd, node=old.name, lock=None)
        self.wait_new_primary(old)
        self.wait_rejoined()

    def isolate(self, rnd, fault, stop, bring_back):
        """The primary's Patroni stops (stop(node)); once a replica is writable and
        3 s more of split brain have passed, bring_back(node)."""
        old = self.cluster.leader()
        self.event("fault_start", fault=fault, round=rnd, node=old.name, lock=None, live=self.live(old))
        stop(old)
        try:
            self.wait_new_primary(old)
            time.sleep(SPLIT_BRAIN_EXTRA)
        finally:
            bring_back(old)
        self.event("fault_end", fault=fault, round=rnd, node=old.name, lock=None)
        self.wait_rejoined()

    def fault_isolate(self, rnd):
        # What a watchdog would do, late: the orphaned primary dies before its
        # Patroni comes back (which then rewinds it and rejoins it as a replica).
        def bring_back(node):
            node.kill_postmaster()
            node.start()
        self.isolate(rnd, "isolate", PatroniNode.kill_patroni, bring_back)

    def fault_etcd_cut(self, rnd):
        """The primary's host cut off from etcd's, both ways, until a replica is
        writable plus 3 s; the clients still reach every node. Recorded: when the
        old primary stops being a writable primary (old_primary_read_only), and
        when the new one answers /primary."""
        old = self.cluster.leader()
        self.event("fault_start", fault="etcd-cut", round=rnd, node=old.name, lock=None)
        self.topo.cut(old.name, "etcd")
        try:
            deadline = time.monotonic() + FAILOVER_BOUND
            read_only = new = None
            while time.monotonic() < deadline and (read_only is None or new is None):
                if read_only is None and old.psql_try("SELECT pg_is_in_recovery()", timeout=2) != "f":
                    read_only = self.event("old_primary_read_only", node=old.name) or True
                if new is None:
                    new = self.cluster.writable_primary(exclude=(old,))
                    if new is not None:
                        self.event("new_primary", node=new.name)
                time.sleep(0.05)
            if new is None:
                raise RuntimeError(f"no new primary within {FAILOVER_BOUND} s after cutting {old.name} off etcd")
            time.sleep(SPLIT_BRAIN_EXTRA)
        finally:
            dropped = self.topo.drops()
            self.topo.heal()
        self.event("fault_end", fault="etcd-cut", round=rnd, node=old.name, lock=None, dropped=dropped)
        self.wait_rejoined()

    def fault_isolate_restart(self, rnd):
        self.isolate(rnd, "isolate-restart", PatroniNode.kill_patroni, PatroniNode.start)

    def fault_isolate_stop(self, rnd):
        self.isolate(rnd, "isolate-stop", PatroniNode.pause_patroni, PatroniNode.resume_patroni)

    def run(self):
        self.setup()
        self.start_workers()
        time.sleep(self.p["warmup"])
        for rnd in range(1, self.p["rounds"] + 1):
            for fault in self.faults():
                getattr(self, "fault_" + fault.replace("-", "_"))(rnd)
                time.sleep(2)
        time.sleep(self.p["cooldown"])
        self.stop_workers()
        self.capture()

    def faults(self):
        return self.args.faults.split(",") if self.args.faults else self.spec.get("faults", ["kill", "isolate"])

    def stop_workers(self):
        open(self.stop_file, "w").close()
        # A worker ends within one iteration (a hold of at most ttl, plus a retry loop).
        for p in self.workers.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def capture(self):
        primary = None
        deadline = time.monotonic() + 60
        while primary is None and time.monotonic() < deadline:
            primary = self.cluster.writable_primary()
            time.sleep(0.2)
        if primary is None:
            raise RuntimeError("no primary to read the final state from")
        final = json.loads(primary.psql(FINAL_STATE, db="faults"))
        final["grants"] = json.loads(primary.psql(GRANTS, db="faults"))
        with open(os.path.join(self.dir, "kinds_writes.json"), "w") as f:
            f.write(primary.psql(KINDS_WRITES, db="faults") or "[]")
        with open(os.path.join(self.dir, "final.json"), "w") as f:
            json.dump(final, f)
        info = {k: v for k, v in self.spec.items()}
        info.update(ttl_ms=self.p["ttl_ms"], profile=self.args.profile, permits=KINDS_PERMITS,
                    faults=[f for _ in range(self.p["rounds"]) for f in self.faults()])
        with open(os.path.join(self.dir, "scenario.json"), "w") as f:
            json.dump(info, f)

    def cleanup(self):
        for p in self.workers.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        self.events.close()
        self.cluster.stop(remove=not self.args.keep, keep_logs_in=os.path.join(self.dir, "logs"))
        if self.topo:
            self.topo.close()


def run_one(args, profile, spec, run_root):
    print(f"--- {spec['name']}: {spec['title']}", flush=True)
    t0 = time.monotonic()
    run = Run(args, profile, spec, run_root)
    error = None
    try:
        run.run()
    except Exception:  # noqa: BLE001 -- reported as the run's failure
        error = traceback.format_exc()
        with open(os.path.join(run.dir, "harness-error.txt"), "w") as f:
            f.write(error)
    finally:
        run.cleanup()
    seconds = round(time.monotonic() - t0, 1)
    if error:
        print(error, file=sys.stderr)
        return {"scenario": spec["name"], "title": spec["title"], "error": error.strip().splitlines()[-1],
                "negative_control": bool(spec.get("negative_control")), "passed": False, "seconds": seconds}
    summary = ha_checker.check_ha_run(run.dir)
    kinds = kinds_check.check_kinds(run.dir, history="history-kinds")
    summary["kinds"] = kinds
    summary["violations"] += kinds["violations"]
    for inv, n in kinds["violations_by_invariant"].items():
        summary["violations_by_invariant"]["kinds " + inv] = n
    for inv, examples in (kinds.get("examples") or {}).items():
        summary.setdefault("examples", {})["kinds " + inv] = examples
    with open(os.path.join(run.dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    compress_histories(run.dir)
    if spec.get("negative_control"):
        summary["passed"] = sum(summary["violations_by_invariant"][k] for k in spec["expect_violations"]) > 0
    else:
        summary["passed"] = summary["violations"] == 0
    summary["seconds"] = seconds
    verdict = "PASS" if summary["passed"] else "FAIL"
    print(f"{verdict} {spec['name']} ({seconds} s): {summary['operations']} ops, "
          f"{summary['lost_grants']} lost grants, {summary['violations']} violations; kinds: "
          f"{kinds['acquired']} grants, {kinds['writes_ok']} fenced writes, most live at a fault "
          f"{kinds['info']['most_live_at_a_fault']}", flush=True)
    for f in summary["faults"]:
        print(f"      {f['fault']} round {f['round']}: new primary {f['to_new_primary_ms']} ms, "
              f"first new grant {f['to_first_new_grant_ms']} ms, lost grants {f['lost_grants']}")
    for inv, examples in (summary.get("examples") or {}).items():
        for e in examples[:3]:
            print(f"      [{inv}] {e}")
    return summary


def fmt(v):
    return "-" if v is None else str(v)


def table(results, profile, network=False):
    lines = [
        f"# Failover under Patroni ({profile} profile)",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine_name()};",
        f"Patroni {patroni_version()}, etcd {etcd_version()} (one member), three PostgreSQL nodes "
        f"{'and etcd on hosts of their own (network namespaces)' if network else 'on loopback'};",
        "leader key ttl 10 s, loop_wait 1 s, primary_start_timeout 0; lease ttl "
        f"{PROFILES[profile]['ttl_ms']} ms, {PROFILES[profile]['workers']} workers (C++ client, keep-alive, "
        "multi-host connection string with target_session_attrs=read-write).",
        "",
        "kill = SIGKILL to the primary's postmaster; isolate = SIGKILL to the primary's Patroni, its",
        "PostgreSQL left running until a replica is writable plus 3 s (split brain), then SIGKILL to",
        "the old postmaster and Patroni started again (see tests/ha/ha.py for isolate-restart and",
        "isolate-stop, which Patroni 3.0.2 fails).",
        "New primary = fault to Patroni's new primary answering /primary; first new grant = fault to",
        "the first grant with a token of a new generation (the new timeline). Lost grants =",
        "acknowledged grants missing from the surviving history (final dlock.audit_log). Beliefs",
        "overtaken = writes a client believed covered by its lease after another owner's later",
        "grant (only possible when a failover lost a grant or a renewal); accepted = of those, writes",
        "the server took (never on a holds()-guarded resource).",
        "",
        "etcd-cut (--network) = the primary's host cut off from etcd's host (network namespaces) until",
        "a replica is writable plus 3 s. Old read-only = fault to the old primary no longer answering",
        "as a writable primary; last old grant = fault to the last grant of the old generation.",
        "",
        "| run | fault | round | on | old read-only ms | last old grant ms | new primary ms | first new grant ms | lost grants | lost writes | leader after |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        for f in r.get("faults", []):
            after = fmt(f["leader_after"])
            if f["leader_after"] == f["node"]:
                after += " (took the leader key back)"
            lines.append(f"| {r['scenario']} | {f['fault']} | {f['round']} | {f['node']} | "
                         f"{fmt(f.get('to_old_read_only_ms'))} | {fmt(f.get('to_last_old_grant_ms'))} | "
                         f"{fmt(f['to_new_primary_ms'])} | {fmt(f['to_first_new_grant_ms'])} | "
                         f"{f['lost_grants']} | {f['lost_writes']} | {after} |")
    lines += [
        "",
        "| run | operations | grants | writes ok | writes refused | unknown | lost grants | "
        "beliefs overtaken (accepted) | violations | result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        name = f"{r['scenario']} {r['title']}"
        if "error" in r:
            lines.append(f"| {name} | - | - | - | - | - | - | - | - | FAIL: harness error: {r['error']} |")
            continue
        v = str(r["violations"])
        if r["violations"]:
            v += " (" + ", ".join(f"{k}:{n}" for k, n in r["violations_by_invariant"].items() if n) + ")"
        if r["negative_control"]:
            verdict = "PASS (violations detected)" if r["passed"] else "FAIL (not detected)"
        else:
            verdict = "PASS" if r["passed"] else "FAIL"
        lines.append(f"| {name} | {r['operations']} | {r['acquired']} | {r['writes_ok']} | "
                     f"{r['writes_refused']} | {r['unknown']} | {r['lost_grants']} | "
                     f"{r['overtaken_beliefs']} ({r['overtaken_writes_accepted']}) | {v} | {verdict} |")
    return "\n".join(lines) + "\n"


def patroni_version():
    r = subprocess.run([cluster.PATRONI, "--version"], capture_output=True, text=True)
    return r.stdout.split()[-1] if r.returncode == 0 and r.stdout.split() else "?"


def etcd_version():
    r = subprocess.run([cluster.ETCD, "--version"], capture_output=True, text=True)
    first = r.stdout.splitlines()[0] if r.stdout else ""
    return first.split()[-1] if first else "?"


def prune_old_runs(results_dir, keep=4):
    runs = sorted(d for d in os.listdir(results_dir) if d.startswith("run-"))
    for d in runs[:-keep]:
        shutil.rmtree(os.path.join(results_dir, d), ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", required=True)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    ap.add_argument("--only", default="", help="comma-separated run names (substrings)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults", default="", help="comma-separated faults per round instead of each run's "
                                                 "(kill, isolate, isolate-restart, isolate-stop)")
    ap.add_argument("--keep", action="store_true", help="keep the clusters' directories")
    ap.add_argument("--network", action="store_true",
                    help="the runs on hosts made of network namespaces (root) instead of the others")
    ap.add_argument("--results", default=os.path.join(HERE, "results"),
                    help="where latest.md / latest.json go")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(args.results, exist_ok=True)
    run_root = os.path.join(args.results, f"run-{time.strftime('%Y%m%d-%H%M%S')}-{args.profile}")
    only = [o for o in args.only.split(",") if o]
    profile = PROFILES[args.profile]
    results = []
    for spec in RUNS:
        if bool(spec.get("network")) != args.network:
            continue
        if only and not any(o in spec["name"] for o in only):
            continue
        results.append(run_one(args, profile, spec, run_root))
    text = table(results, args.profile, args.network)
    latest = "latest-network" if args.network else "latest"
    with open(os.path.join(args.results, f"{latest}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.results, f"{latest}.json"), "w") as f:
        json.dump(results, f, indent=2)
    prune_old_runs(args.results)
    print(text)
    failed = sum(1 for r in results if not r["passed"])
    print(f"{len(results) - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
