// sql.cpp -- the SQL of the library's calls, and reading the rows they return.
#include "sql.hpp"

#include <charconv>
#include <cstring>
#include <string>

#include <pqxx/except>

namespace dlock::internal {

// A lease row comes back as five columns, all NULL when the lock is busy: the
// lease, and how long the server waited between receiving the statement and
// granting (milliseconds). The extension sets lease_until to its
// clock_timestamp() at the grant plus the ttl, so the grant time is
// lease_until - ttl, and statement_timestamp() is when the statement arrived.
#define DLOCK_LEASE_COLUMNS                                                                                           \
    "SELECT l.lock_name, l.owner_token::text, l.fencing_token, pg_catalog.date_part('epoch', l.lease_until), "        \
    "pg_catalog.date_part('epoch', l.lease_until - $2::bigint * interval '1 millisecond' "                            \
    "- pg_catalog.statement_timestamp()) * 1000 "

namespace sql {
const char* const try_acquire = DLOCK_LEASE_COLUMNS
    "FROM dlock.try_acquire($1, $2::bigint * interval '1 millisecond', $3::uuid, NULLIF($4::text, '')) l";
const char* const acquire = DLOCK_LEASE_COLUMNS
    "FROM dlock.acquire($1, $2::bigint * interval '1 millisecond', $3::bigint * interval '1 millisecond', "
    "$4::uuid, NULLIF($5::text, '')) l";
// The same with the lease policies as named arguments (a duration of 0 is sent as NULL).
const char* const try_acquire_policies = DLOCK_LEASE_COLUMNS
    "FROM dlock.try_acquire($1, $2::bigint * interval '1 millisecond', $3::uuid, NULLIF($4::text, ''), "
    "session_bound => $5::boolean, "
    "max_hold => NULLIF($6::bigint, 0) * interval '1 millisecond', "
    "min_hold => NULLIF($7::bigint, 0) * interval '1 millisecond', "
    "lock_delay => NULLIF($8::bigint, 0) * interval '1 millisecond') l";
const char* const acquire_policies = DLOCK_LEASE_COLUMNS
    "FROM dlock.acquire($1, $2::bigint * interval '1 millisecond', $3::bigint * interval '1 millisecond', "
    "$4::uuid, NULLIF($5::text, ''), "
    "session_bound => $6::boolean, "
    "max_hold => NULLIF($7::bigint, 0) * interval '1 millisecond', "
    "min_hold => NULLIF($8::bigint, 0) * interval '1 millisecond', "
    "lock_delay => NULLIF($9::bigint, 0) * interval '1 millisecond') l";
// lease_until, and the server-side wait before the renewal (as above).
const char* const renew = "SELECT pg_catalog.date_part('epoch', r.lease_until), "
                          "pg_catalog.date_part('epoch', r.lease_until - $3::bigint * interval '1 millisecond' "
                          "- pg_catalog.statement_timestamp()) * 1000 "
                          "FROM dlock.renew($1, $2::uuid, $3::bigint * interval '1 millisecond') AS r(lease_until)";
const char* const release = "SELECT dlock.release($1, $2::uuid)";
// the shared lease's token; no row's columns are NULL when nothing was downgraded
const char* const downgrade = "SELECT d.fencing_token FROM dlock.downgrade($1, $2::uuid) d";
const char* const force_release = "SELECT dlock.force_release($1, $2)";
// Lock kinds: the same parameter positions as try_acquire/acquire; a
// semaphore's permits come last.
const char* const try_acquire_shared = DLOCK_LEASE_COLUMNS
    "FROM dlock.try_acquire_shared($1, $2::bigint * interval '1 millisecond', $3::uuid, NULLIF($4::text, '')) l";
const char* const acquire_shared = DLOCK_LEASE_COLUMNS
    "FROM dlock.acquire_shared($1, $2::bigint * interval '1 millisecond', $3::bigint * interval '1 millisecond', "
    "$4::uuid, NULLIF($5::text, '')) l";
const char* const try_acquire_permit = DLOCK_LEASE_COLUMNS
    "FROM dlock.try_acquire_permit($1, $5::integer, $2::bigint * interval '1 millisecond', $3::uuid, "
    "NULLIF($4::text, '')) l";
const char* const acquire_permit = DLOCK_LEASE_COLUMNS
    "FROM dlock.acquire_permit($1, $6::integer, $2::bigint * interval '1 millisecond', "
    "$3::bigint * interval '1 millisecond', $4::uuid, NULLIF($5::text, '')) l";
// A set's names come as a JSON array (json_quote quotes them).
const char* const try_acquire_all = DLOCK_LEASE_COLUMNS
    "FROM dlock.try_acquire_all(ARRAY(SELECT pg_catalog.json_array_elements_text($1::json)), "
    "$2::bigint * interval '1 millisecond', $3::uuid, NULLIF($4::text, '')) l ORDER BY l.lock_name";
const char* const acquire_all = DLOCK_LEASE_COLUMNS
    "FROM dlock.acquire_all(ARRAY(SELECT pg_catalog.json_array_elements_text($1::json)), "
    "$2::bigint * interval '1 millisecond', $3::bigint * interval '1 millisecond', $4::uuid, "
    "NULLIF($5::text, '')) l ORDER BY l.lock_name";
} // namespace sql

#undef DLOCK_LEASE_COLUMNS

const char* call_result::field::text() const {
    if (is_null()) throw pqxx::conversion_error{"dlock: column " + std::to_string(m_column) + " is null"};
    return PQgetvalue(m_res, m_row, m_column);
}

namespace {

// Parses all of `text` as T, the server's text output of its type.
template <typename T> T parse_number(const char* text) {
    T value{};
    const char* end = text + std::strlen(text);
    const auto [at, ec] = std::from_chars(text, end, value);
    if (ec != std::errc{} || at != end)
        throw pqxx::conversion_error{std::string{"dlock: not a number: \""} + text + "\""};
    return value;
}

} // namespace

template <> std::string call_result::field::as<std::string>() const {
    return text();
}

template <> std::int64_t call_result::field::as<std::int64_t>() const {
    return parse_number<std::int64_t>(text());
}

template <> double call_result::field::as<double>() const {
    return parse_number<double>(text());
}

template <> bool call_result::field::as<bool>() const {
    const char* t = text();
    if (std::strcmp(t, "t") == 0) return true;
    if (std::strcmp(t, "f") == 0) return false;
    throw pqxx::conversion_error{std::string{"dlock: not a boolean: \""} + t + "\""};
}

} // namespace dlock::internal
