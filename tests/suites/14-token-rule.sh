#!/usr/bin/env bash
# The one token rule: every case of regress/token_rule_vectors.csv gives the
# same token through the C extension's dlock.next_fencing_token (the SQL
# edition runs the same file in 16-sql-edition); a copy of the file with one
# expected token changed, and one with an expected error turned into a token,
# must be caught (negative controls). Uses the shared test server.
set -uo pipefail
cd "$DLOCK_ROOT"
. tests/lib/check.sh
. tests/lib/token_vectors.sh

scratch=$(mktemp -d "$DLOCK_SCRATCH/token-rule.XXXXXX")
vectors=regress/token_rule_vectors.csv

token_vector_mismatches "$PGDATABASE" >"$scratch/c.out" 2>&1
cat "$scratch/c.out"
check "every vector holds in the C extension" grep -qx 'mismatches 0' "$scratch/c.out"
check "the file has at least 20 vectors" \
	awk '/^vectors /{ exit !($2 >= 20) } END { }' "$scratch/c.out"

# negative controls: a changed expectation is seen
awk -F, 'BEGIN { OFS = "," } /^"the same position: one more"/ { $NF = $NF + 1 } { print }' \
	"$vectors" >"$scratch/off-by-one.csv"
token_vector_mismatches "$PGDATABASE" "$scratch/off-by-one.csv" >"$scratch/off-by-one.out" 2>&1
check "control: a token off by one is caught" grep -qx 'mismatches 1' "$scratch/off-by-one.out"
sed 's/,error:54000$/,9223372036854775807/' "$vectors" >"$scratch/no-error.csv"
token_vector_mismatches "$PGDATABASE" "$scratch/no-error.csv" >"$scratch/no-error.out" 2>&1
check "control: a refusal expected as a token is caught" \
	grep -qx "mismatches $(grep -c ',error:54000$' "$vectors")" "$scratch/no-error.out"
check "the refusals are there to catch" test "$(grep -c ',error:54000$' "$vectors")" -ge 2

# bad arguments are refused with the argument named
out=$(psql -X -q -At -d "$PGDATABASE" -c '\set VERBOSITY default' \
	-c "SELECT dlock.next_fencing_token(1, 1, 1, 0, 1)" 2>&1)
check "history 0 refused, named" grep -q 'history must be positive' <<<"$out"
out=$(psql -X -q -At -d "$PGDATABASE" -c "SELECT dlock.next_fencing_token(-1, 1, 1, 1, 1)" 2>&1)
check "a negative prev refused, named" grep -q 'prev must not be negative' <<<"$out"

finish
