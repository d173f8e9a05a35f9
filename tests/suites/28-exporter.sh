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
        label = metric[column].get("usage") == "LABEL"
        for row in rows:
            value = row[header.index(column)]
            if label:
                if not value:
                    print(f"{name}: label {column} is empty")
                    bad += 1
                continue
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
# --- through a real postgres_exporter (Debian's prometheus-postgres-exporter) ---
# A wait and a hold of known length first, so that the histograms have counts.
psql -X -q -c "SELECT dlock.stats_reset()" >/dev/null
psql -X -q -At -c "SELECT dlock.try_acquire('exporter:hold', '1 minute', '00000000-0000-0000-0000-0000000000e1')" >/dev/null
psql -X -q -At -c "SELECT pg_sleep(0.3)" >/dev/null
psql -X -q -At -c "SELECT dlock.release('exporter:hold', '00000000-0000-0000-0000-0000000000e1')" >/dev/null
exporter=/usr/bin/prometheus-postgres-exporter
if [ -x "$exporter" ]; then
	. tests/lib/ports.sh
	port=$(free_ports 1)
	log=$(mktemp)
	DATA_SOURCE_NAME="host=${PGHOST:-localhost} port=${PGPORT:-5432} user=${PGUSER:-postgres} dbname=${PGDATABASE:-postgres} sslmode=disable" \
		"$exporter" --web.listen-address="127.0.0.1:$port" --extend.query-path=docs/postgres_exporter.yaml \
		--disable-default-metrics --disable-settings-metrics >"$log" 2>&1 &
	exporter_pid=$!
	metrics=
	for _ in $(seq 1 100); do
		metrics=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null) && [ -n "$metrics" ] && break
		sleep 0.1
	done
	kill "$exporter_pid" 2>/dev/null
	wait "$exporter_pid" 2>/dev/null
	bucket_series() { grep -E "^$1\\{" <<<"$metrics" | grep "kind=\"$2\"" | grep "le=\"$3\"" | awk '{ print $NF }'; }
	check "postgres_exporter serves the hold histogram: one exclusive hold within 1 s" \
		test "$(bucket_series dlock_hold_histogram_holds exclusive 1)" = 1
	check "postgres_exporter: no exclusive hold within 0.1 s" \
		test "$(bucket_series dlock_hold_histogram_holds exclusive 0.1)" = 0
	check "postgres_exporter: the +Inf bucket counts every hold" \
		test "$(bucket_series dlock_hold_histogram_holds exclusive +Inf)" = 1
	check "postgres_exporter serves the wait histogram, 16 buckets per kind" \
		test "$(grep -cE '^dlock_wait_histogram_waits\{.*kind="shared"' <<<"$metrics")" = 16
	check "postgres_exporter serves the waiters gauge" grep -qE '^dlock_waiters_waiters(\{.*\})? 0$' <<<"$metrics"
	[ "$failed" -eq 0 ] || { head -n 20 "$log"; grep '^dlock_' <<<"$metrics" | head -n 20; }
	rm -f "$log"
else
	check "postgres_exporter is installed (scripts/install-deps.sh installs it)" false
fi
psql -X -q -c "DELETE FROM dlock.distributed_lock WHERE lock_name LIKE 'exporter:%'" >/dev/null
finish
