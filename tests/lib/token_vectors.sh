# Shared by the suites that check the token rule (regress/token_rule_vectors.csv)
# against an edition: token_vector_mismatches DB [CSV] prints one line per
# vector whose dlock.next_fencing_token result differs from the file
# (an expected error:SQLSTATE must raise that SQLSTATE), then "mismatches N"
# and "vectors N" on the last two lines.
token_vector_mismatches() {
	local db=$1 csv=${2:-$DLOCK_ROOT/regress/token_rule_vectors.csv}
	grep -v '^#' "$csv" | psql -X -q -At -d "$db" -v ON_ERROR_STOP=1 -f <(cat <<'SQL'
CREATE TEMP TABLE token_vector (case_name text, prev bigint, prev_history integer,
	prev_system bigint, history integer, system bigint, next text);
\copy token_vector FROM pstdin WITH (FORMAT csv, HEADER true)
CREATE FUNCTION pg_temp.rule_result(v token_vector) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN dlock.next_fencing_token(v.prev, v.prev_history, v.prev_system, v.history, v.system)::text;
EXCEPTION WHEN OTHERS THEN
	RETURN 'error:' || SQLSTATE;
END
$$;
SELECT pg_catalog.format('mismatch: %s: expected %s, got %s', v.case_name, v.next, r.got)
  FROM token_vector v, LATERAL (SELECT pg_temp.rule_result(v) AS got) r
 WHERE r.got IS DISTINCT FROM v.next;
SELECT 'mismatches ' || pg_catalog.count(*) FROM token_vector v
 WHERE pg_temp.rule_result(v) IS DISTINCT FROM v.next;
SELECT 'vectors ' || pg_catalog.count(*) FROM token_vector;
SQL
)
}
