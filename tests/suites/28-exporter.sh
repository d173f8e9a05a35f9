#!/usr/bin/env bash
# docs/postgres_exporter.yaml against the test server: every query runs, and
# returns a column with a number for every metric the file declares (the
# exporter would drop a metric it cannot find). Negative control: a file
# declaring a metric its query does not return is caught.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh

check_yaml() {
	python3 - "$1" <<'PY'
import subprocess, sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))
bad = 0
for name, entry in spec.items():
    r = subprocess.run(["psql", "-X", "-q", "-A", "-F", "\t", "-P", "footer=off", "-v", "ON_ERROR_STOP=1",
                        "-c", entry["query"]], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"{name}: query failed: {r.stderr.strip()}")
        bad += 1
        continue
    lines = r.stdout.strip().splitlines()
    header, rows = lines[0].split("\t"), [l.split("\t") for l in lines[1:]]
    for metric in entry["metrics"]:
        column = next(iter(metric))
        if column not in header:
            print(f"{name}: metric {column} is not a column of the query")
            bad += 1
            continue
        for row in rows:
            value = row[header.index(column)]
            try:
                float(value)
            except ValueError:
                print(f"{name}: metric {column} is not a number: {value!r}")
                bad += 1
sys.exit(1 if bad else 0)
PY
}

psql -X -q -c "SELECT dlock.try_acquire('exporter:held', '1 minute')" >/dev/null
check "every query of docs/postgres_exporter.yaml runs and returns all its metrics as numbers" \
	check_yaml docs/postgres_exporter.yaml

broken=$(mktemp)
sed 's/- lock_rows: {usage: GAUGE/- lock_rowz: {usage: GAUGE/' docs/postgres_exporter.yaml >"$broken"
fails_quietly() { ! "$@" >/dev/null; }
check "negative control: a metric the query does not return is caught" fails_quietly check_yaml "$broken"
rm -f "$broken"
psql -X -q -c "DELETE FROM dlock.distributed_lock WHERE lock_name = 'exporter:held'" >/dev/null
finish
