// session.cpp -- the library's own connections and the SQL of its calls.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "internal.hpp"

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
const char* const try_acquire_all = DLOCK_LEASE_COLUMNS
    "FROM dlock.try_acquire_all($1::text[], $2::bigint * interval '1 millisecond', $3::uuid, "
    "NULLIF($4::text, '')) l ORDER BY l.lock_name";
const char* const acquire_all = DLOCK_LEASE_COLUMNS
    "FROM dlock.acquire_all($1::text[], $2::bigint * interval '1 millisecond', "
    "$3::bigint * interval '1 millisecond', $4::uuid, NULLIF($5::text, '')) l ORDER BY l.lock_name";
} // namespace sql

#undef DLOCK_LEASE_COLUMNS

std::string with_literals(std::string_view statement, const std::vector<std::string>& literals) {
    std::string text;
    for (std::size_t i = 0; i < statement.size(); ++i) {
        if (statement[i] != '$' || i + 1 >= statement.size() || statement[i + 1] < '1' || statement[i + 1] > '9') {
            text += statement[i];
            continue;
        }
        // The library's statements number at most nine placeholders.
        const auto index = static_cast<std::size_t>(statement[++i] - '1');
        if (index >= literals.size()) throw std::logic_error("dlock: a statement has more placeholders than values");
        text += literals[index];
    }
    return text;
}

std::string call_text(std::chrono::milliseconds timeout, std::string_view statement,
                      const std::vector<std::string>& literals) {
    // set_config(..., true) is SET LOCAL; as one SELECT it costs the server
    // less than two SET statements.
    return "SELECT pg_catalog.set_config('statement_timeout', '" +
           std::to_string(std::max<long long>(1, timeout.count())) +
           "', true), pg_catalog.set_config('client_connection_check_interval', '1000', true); " +
           with_literals(statement, literals);
}

std::string execute_text(std::chrono::milliseconds timeout, const std::string& name,
                         const std::vector<std::string>& literals) {
    // The server arms each statement's timeout when the statement starts, so
    // the EXECUTE runs under the new value; it ends with the transaction.
    std::string text = "SET LOCAL statement_timeout = " + std::to_string(std::max<long long>(1, timeout.count())) +
                       "; EXECUTE \"" + name + "\"";
    for (std::size_t i = 0; i < literals.size(); ++i)
        text += (i == 0 ? "(" : ", ") + literals[i];
    return literals.empty() ? text : text + ")";
}

std::string bounded_connection_string(const std::string& connection_string,
                                      std::chrono::milliseconds network_timeout) {
    const long long ms = std::max<long long>(1000, network_timeout.count());
    const std::pair<const char*, std::string> bounds[] = {
        {"keepalives", "1"},
        {"keepalives_idle", std::to_string(std::max<long long>(1, ms / 3000))},
        {"keepalives_interval", "1"},
        {"keepalives_count", std::to_string(std::max<long long>(1, ms / 3000))},
        {"tcp_user_timeout", std::to_string(ms)},
        {"connect_timeout", std::to_string(std::max<long long>(2, ms / 1000))},
    };
    const bool uri = connection_string.rfind("postgresql://", 0) == 0 || connection_string.rfind("postgres://", 0) == 0;
    std::string result = connection_string;
    for (const auto& [key, value] : bounds) {
        // The caller's own setting wins (also one from PGCONNECT_TIMEOUT etc.:
        // libpq lets the string override the environment, so only add what
        // neither sets).
        const std::string pattern = std::string{key} + "=";
        bool set = false;
        for (std::size_t at = result.find(pattern); at != std::string::npos; at = result.find(pattern, at + 1)) {
            const char before = at == 0 ? ' ' : result[at - 1];
            if (before == ' ' || before == '?' || before == '&') set = true;
        }
        if (set) continue;
        if (std::string{key} == "connect_timeout" && std::getenv("PGCONNECT_TIMEOUT") != nullptr) continue;
        if (uri)
            result += (result.find('?') == std::string::npos ? "?" : "&") + pattern + value;
        else
            result += (result.empty() ? "" : " ") + pattern + value;
    }
    return result;
}

session::session(const std::string& connection_string, std::chrono::milliseconds network_timeout,
                 dlock::pooling pooling, std::chrono::milliseconds call_timeout)
    : m_pooling{pooling}, m_statement_timeout{std::max<long long>(1, call_timeout.count())} {
    try {
        m_conn = std::make_unique<pqxx::connection>(bounded_connection_string(connection_string, network_timeout));
    } catch (const std::exception& e) {
        throw connection_error{std::string{"could not connect: "} + e.what(), {}};
    }
    m_watch = std::make_unique<notice_watch>(*m_conn, true);
}

void session::roll_back() noexcept {
    try {
        if (!m_conn->is_open()) return;
        pqxx::nontransaction tx{*m_conn};
        tx.exec("ROLLBACK");
    } catch (...) {
        try {
            m_conn->disconnect(); // the next use fails as "broken", and the pool drops it
        } catch (...) { // NOLINT(bugprone-empty-catch)
        }
    }
}

session::send session::how_to_send(std::chrono::milliseconds timeout) {
    if (m_pooling == dlock::pooling::transaction) return send::self_contained;
    const long long ms = std::max<long long>(1, timeout.count());
    const int pid = m_conn->backendpid();
    const send settled = ms == m_statement_timeout ? send::prepared : send::execute_with_local_timeout;
    if (pid != 0 && pid == m_settled_pid) return settled;
    m_settled_pid = 0; // unknown until the server confirms
    // set_config(..., false) is SET; the settings are made only when a row comes
    // back. With pooling::detect the WHERE clause, checked before them, makes
    // them only on the server process libpq connected to.
    std::string text = "SELECT pg_catalog.set_config('statement_timeout', '" + std::to_string(m_statement_timeout) +
                       "', false), pg_catalog.set_config('client_connection_check_interval', '1000', false)";
    if (m_pooling == dlock::pooling::detect) text += " WHERE pg_catalog.pg_backend_pid() = " + std::to_string(pid);
    pqxx::nontransaction tx{*m_conn};
    if (tx.exec(text).empty()) {
        m_pooling = dlock::pooling::transaction; // a pooler is in between: self-contained calls from now on
        return send::self_contained;
    }
    m_settled_pid = pid;
    return settled;
}

const std::string& session::prepared(const char* statement, bool now) {
    auto it = m_prepared.find(statement);
    if (it == m_prepared.end()) {
        // Named after the function it calls ("dlock.acquire", then "dlock.acquire
        // 2" for the next statement that calls it), so that pg_stat_activity
        // names the function also for an EXECUTE (execute_text).
        const std::string_view text{statement};
        const auto at = text.find("dlock.");
        const auto end = text.find('(', at);
        std::string name{at == std::string_view::npos ? "dlock" : text.substr(at, end - at)};
        const auto same = std::count_if(m_prepared.begin(), m_prepared.end(), [&](const auto& p) {
            return p.second == name || p.second.rfind(name + " ", 0) == 0;
        });
        if (same > 0) name += " " + std::to_string(same + 1);
        m_conn->prepare(name, statement);
        it = m_prepared.emplace(statement, std::move(name)).first;
    }
    if (now) m_conn->prepare_now(it->second);
    return it->second;
}

session::~session() noexcept {
    try {
        m_watch.reset();
        m_conn.reset();
    } catch (...) { // NOLINT(bugprone-empty-catch): closing must not throw
    }
}

} // namespace dlock::internal
