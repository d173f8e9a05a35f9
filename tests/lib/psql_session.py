"""Shared by the token tests (fenced_crash.py, token_restore.py,
token_torture.py): their check lines, and the two ways they talk to a server,
a psql session fed one statement at a time and one psql run per script.

A check prints "ok      name" or "FAILED  name: detail"; the suites count
those lines and the script's last line.
"""

import os
import subprocess
import time

results = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    print(f"{'ok     ' if ok else 'FAILED '} {name}{': ' + detail if detail else ''}", flush=True)
    results["passed" if ok else "failed"] += 1


def note(msg):
    print(f"  {time.strftime('%H:%M:%S')} {msg}", flush=True)


def psql_lines(port, db, sql, fenced=False):
    """The output lines of the statements, run as one psql script; raises on an error."""
    env = dict(os.environ, PGCONNECT_TIMEOUT="10")
    if fenced:
        env["PGOPTIONS"] = "-c dlock.durability=fenced"
    out = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                          "-p", str(port), "-U", "postgres", "-d", db],
                         input=sql, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {out.stderr.strip()}\n{sql}")
    return [line for line in out.stdout.splitlines() if line]


class Session:
    """One client session: a psql process fed one statement at a time, so that
    a crash ends it the way it ends a client's connection. Rows come back with
    columns separated by "|"."""

    def __init__(self, port, db, label="psql", fenced=False, statement_timeout="30s"):
        env = dict(os.environ, PGAPPNAME=label, PGCONNECT_TIMEOUT="10")
        self.p = subprocess.Popen(
            ["psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", db],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.broken = False
        # a safety net: no statement of these workloads takes long
        self.run(f"SET statement_timeout = '{statement_timeout}'")
        if fenced:
            _, err = self.run("SET dlock.durability = fenced")
            if err:
                self.close()
                raise RuntimeError(f"SET dlock.durability = fenced refused: {err}")

    def run(self, sql):
        """(rows, error): the output lines, and the error text or None ("lost"
        when the session ended, as a crash ends it)."""
        if self.broken:
            return [], "lost"
        try:
            self.p.stdin.write(sql.strip().rstrip(";") + ";\n\\echo @@end\n")
            self.p.stdin.flush()
        except OSError:
            self.broken = True
            return [], "lost"
        rows, err = [], None
        while True:
            line = self.p.stdout.readline()
            if not line:
                self.broken = True
                return rows, (err or "lost")
            line = line.rstrip("\n")
            if line == "@@end":
                return (rows if err is None else []), err
            if "ERROR:" in line or "FATAL:" in line:
                err = err or line
            elif line.startswith(("WARNING:", "NOTICE:", "DETAIL:", "HINT:", "CONTEXT:", "LINE ", "psql:")):
                continue
            elif "connection" in line and ("lost" in line or "closed" in line):
                err = err or "lost"
            else:
                rows.append(line)

    def one(self, sql):
        rows, err = self.run(sql)
        return (rows[0] if rows else None), err

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
