// session.cpp -- the library's own connections, and how a call is sent on one.
#include "session.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/except>

#include "dlock/errors.hpp"
#include "error_mapping.hpp"
#include "timing.hpp"

namespace dlock::internal {

namespace {

// `statement` with its placeholders $1, $2, ... replaced by `literals`, each
// already quoted by the connection (PQescapeLiteral).
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

// How soon the server notices, while a call runs (an acquire waiting), that
// the client went away, and gives up the call.
constexpr std::chrono::milliseconds connection_check_interval{1000};

// The name current_setting() is asked for when the server cannot grant fenced
// leases: its "unrecognized configuration parameter" error is how plain SQL
// refuses; checked() turns it into the library's own error.
constexpr const char* fenced_refused_marker = "dlock.durability fenced is not offered by this server";

// Only pg_dlock 1.4 or later (the C extension) can fence. Where the setting is
// unknown (a placeholder), or the database has the SQL edition before 1.4
// (which may sit on a server whose preloaded pg_dlock defines it), a SET would
// be accepted and ignored: refuse instead, before the statement runs.
std::string fenced_setting(const std::string& scope) {
    return std::string{", pg_catalog.set_config('dlock.durability', CASE WHEN "
                       "pg_catalog.current_setting('dlock.durability', true) IS NOT NULL AND EXISTS (SELECT FROM "
                       "pg_catalog.pg_extension WHERE extname = 'pg_dlock' AND "
                       "pg_catalog.string_to_array(extversion, '.')::integer[] >= '{1,4}') THEN 'fenced' "
                       "ELSE pg_catalog.current_setting('"} +
           fenced_refused_marker + "') END, " + scope + ")";
}

// The SELECT that sets statement_timeout (the call's bound, statement_timeout_of),
// client_connection_check_interval and, for a fenced client, dlock.durability:
// for the session, or `local` to the transaction (set_config with is_local, as
// SET LOCAL). As one SELECT it costs the server less than SET statements. The
// one place the settings of a call are decided; a durable client sends what
// it sent before dlock.durability existed.
std::string settings_select(std::chrono::milliseconds timeout, dlock::durability durability, bool local) {
    const std::string scope = local ? "true" : "false";
    return "SELECT pg_catalog.set_config('statement_timeout', '" + milliseconds_text(statement_timeout_of(timeout)) +
           "', " + scope + "), pg_catalog.set_config('client_connection_check_interval', '" +
           milliseconds_text(connection_check_interval) + "', " + scope + ")" +
           (durability == dlock::durability::fenced ? fenced_setting(scope) : std::string{});
}

// The text of one self-contained call: `statement` with its values as
// literals (with_literals), after the settings for its transaction
// (settings_select) -- one simple query. See call().
std::string call_text(std::chrono::milliseconds timeout, dlock::durability durability, std::string_view statement,
                      const std::vector<std::string>& literals) {
    return settings_select(timeout, durability, true) + "; " + with_literals(statement, literals);
}

} // namespace

std::string bounded_connection_string(const std::string& connection_string,
                                      std::chrono::milliseconds network_timeout) {
    const long long ms = std::max<long long>(1000, network_timeout.count());
    const std::pair<const char*, std::string> bounds[] = {
        {"keepalives", "1"},
        {"keepalives_idle", std::to_string(std::max<long long>(1, ms / 3000))},
        {"keepalives_interval", "1"},
        {"keepalives_count", std::to_string(std::max<long long>(1, ms / 3000))},
        {"tcp_user_timeout", milliseconds_text(std::chrono::milliseconds{ms})},
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

namespace {

// libpq's last error on conn, without its trailing newline.
std::string connection_message(const PGconn* conn) {
    std::string message = PQerrorMessage(conn);
    while (!message.empty() && message.back() == '\n')
        message.pop_back();
    return message;
}

} // namespace

session::session(const std::string& connection_string, std::chrono::milliseconds network_timeout,
                 dlock::pooling pooling, std::chrono::milliseconds call_timeout, dlock::durability durability)
    : m_pooling{pooling}, m_statement_timeout{statement_timeout_of(call_timeout)}, m_durability{durability} {
    m_conn = PQconnectdb(bounded_connection_string(connection_string, network_timeout).c_str());
    if (m_conn == nullptr) throw connection_error{"could not connect: out of memory", {}};
    if (PQstatus(m_conn) != CONNECTION_OK) {
        const std::string message = connection_message(m_conn);
        PQfinish(m_conn);
        m_conn = nullptr;
        throw connection_error{"could not connect: " + message, {}};
    }
    PQsetNoticeReceiver(m_conn, &session::on_notice, this);
}

session::~session() noexcept {
    PQfinish(m_conn);
}

void session::on_notice(void* self, const PGresult* notice) noexcept {
    const char* message = PQresultErrorMessage(notice);
    if (message != nullptr && is_commit_uncertain_notice(message))
        static_cast<session*>(self)->m_commit_uncertain = true;
}

bool session::is_open() const noexcept {
    return m_conn != nullptr && PQstatus(m_conn) == CONNECTION_OK;
}

int session::backend_pid() const noexcept {
    return m_conn == nullptr ? 0 : PQbackendPID(m_conn);
}

void session::throw_broken() const {
    const std::string message = m_conn == nullptr ? "connection closed" : connection_message(m_conn);
    throw pqxx::broken_connection{message.empty() ? "connection lost" : message};
}

call_result session::checked(PGresult* res, const char* statement) {
    call_result result{res};
    const ExecStatusType status = res == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(res);
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) return result;
    if (PQstatus(m_conn) != CONNECTION_OK) throw_broken();
    if (res == nullptr) throw pqxx::broken_connection{PQerrorMessage(m_conn)};
    const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char* message = PQresultErrorMessage(res);
    if (m_durability == dlock::durability::fenced && state != nullptr && std::string_view{state} == "42704" &&
        std::strstr(message, fenced_refused_marker) != nullptr)
        throw pqxx::feature_not_supported{
            "fenced durability was asked for, but this server cannot grant fenced leases: they need the C "
            "extension pg_dlock 1.4 or later in this database, with pg_dlock in shared_preload_libraries (the SQL "
            "edition, pg_dlock_sql, grants durably only)",
            statement, "0A000"};
    throw pqxx::sql_error{message, statement, state};
}

void session::roll_back() noexcept {
    if (!is_open()) return;
    if (PQpipelineStatus(m_conn) != PQ_PIPELINE_OFF || PQtransactionStatus(m_conn) == PQTRANS_ACTIVE) {
        // A pipeline left mid-way: the connection's state is unknown.
        PQfinish(m_conn);
        m_conn = nullptr;
        return;
    }
    if (PQtransactionStatus(m_conn) == PQTRANS_IDLE) return;
    PQclear(PQexec(m_conn, "ROLLBACK"));
    if (PQtransactionStatus(m_conn) != PQTRANS_IDLE) {
        PQfinish(m_conn); // the next call fails as "broken", and the pool drops it
        m_conn = nullptr;
    }
}

session::send session::how_to_send(std::chrono::milliseconds timeout) {
    settle();
    if (m_pooling == dlock::pooling::transaction) return send::self_contained;
    return statement_timeout_of(timeout) == m_statement_timeout ? send::prepared : send::prepared_with_local_timeout;
}

bool session::transaction_pooled() {
    if (!is_open()) throw_broken();
    settle();
    return m_pooling == dlock::pooling::transaction;
}

namespace {

// The TCP port this end of conn has, as an SQL literal, or NULL when it is
// no TCP connection (a Unix-domain socket).
std::string local_port_literal(PGconn* conn) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = PQsocket(conn);
    if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "-1";
    if (address.ss_family == AF_INET) return std::to_string(ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port));
    if (address.ss_family == AF_INET6)
        return std::to_string(ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port));
    return "NULL";
}

} // namespace

void session::settle() {
    if (m_pooling == dlock::pooling::transaction || m_settled) return;
    // set_config(..., false) is SET; the settings are made only when a row comes
    // back. With pooling::detect the WHERE clause, checked before them, makes
    // them only on a server process whose own client is this very socket: the
    // process id libpq was told at connect (a pooler in between hands out its
    // own) and the peer port the server sees, which is this end's port on a
    // direct TCP connection and none on a direct Unix-domain one. A pooler or
    // proxy that passes the server's process id through still connects from
    // a port of its own. (Anything in between that changes the port, such as
    // NAT, is taken for a pooler too: self-contained calls, which are always
    // right. Only a pooler on Unix-domain sockets at both ends that passes the
    // process id through still looks direct: say pooling::transaction there.)
    std::string text = settings_select(m_statement_timeout, m_durability, false);
    if (m_pooling == dlock::pooling::detect)
        text += " WHERE pg_catalog.pg_backend_pid() = " + std::to_string(PQbackendPID(m_conn)) +
                " AND pg_catalog.inet_client_port() IS NOT DISTINCT FROM " + local_port_literal(m_conn);
    if (exec_simple(text).empty()) {
        m_pooling = dlock::pooling::transaction; // a pooler is in between: self-contained calls from now on
        return;
    }
    m_settled = true;
}

const std::string& session::prepared(const char* statement) {
    auto it = m_prepared.find(statement);
    if (it != m_prepared.end()) return it->second;
    // Named after the function it calls ("dlock.acquire", then "dlock.acquire
    // 2" for the next statement that calls it), so that pg_stat_activity names
    // the function.
    const std::string_view text{statement};
    const auto at = text.find("dlock.");
    const auto end = text.find('(', at);
    std::string name{at == std::string_view::npos ? "dlock" : text.substr(at, end - at)};
    const auto same = std::count_if(m_prepared.begin(), m_prepared.end(), [&](const auto& p) {
        return p.second == name || p.second.rfind(name + " ", 0) == 0;
    });
    if (same > 0) name += " " + std::to_string(same + 1);
    checked(PQprepare(m_conn, name.c_str(), statement, 0, nullptr), statement);
    return m_prepared.emplace(statement, std::move(name)).first->second;
}

namespace {

std::vector<const char*> value_pointers(const std::vector<std::string>& values) {
    std::vector<const char*> pointers;
    pointers.reserve(values.size());
    for (const auto& v : values)
        pointers.push_back(v.c_str());
    return pointers;
}

// Statement-local statement_timeout, sent ahead of a call in its pipeline.
const char* const local_statement_timeout = "SELECT pg_catalog.set_config('statement_timeout', $1, true)";

} // namespace

call_result session::run(std::chrono::milliseconds timeout, const char* statement,
                         const std::vector<std::string>& values) {
    m_commit_uncertain = false;
    if (!is_open()) throw_broken();
    switch (how_to_send(timeout)) {
    case send::prepared: return exec_prepared(statement, values);
    case send::prepared_with_local_timeout:
        return exec_pipeline(timeout, statement, values);
    case send::self_contained: break;
    }
    std::vector<std::string> literals;
    literals.reserve(values.size());
    for (const auto& v : values) {
        char* quoted = PQescapeLiteral(m_conn, v.c_str(), v.size());
        if (quoted == nullptr) throw pqxx::argument_error{PQerrorMessage(m_conn)};
        literals.emplace_back(quoted);
        PQfreemem(quoted);
    }
    const std::string text = call_text(timeout, m_durability, statement, literals);
    return exec_simple(text);
}

call_result session::exec_simple(const std::string& text) {
    return checked(PQexec(m_conn, text.c_str()), text.c_str());
}

call_result session::exec_prepared(const char* statement, const std::vector<std::string>& values) {
    const std::string& name = prepared(statement);
    const auto pointers = value_pointers(values);
    return checked(PQexecPrepared(m_conn, name.c_str(), static_cast<int>(pointers.size()), pointers.data(), nullptr,
                                  nullptr, 0),
                   statement);
}

call_result session::exec_pipeline(std::chrono::milliseconds timeout, const char* statement,
                                   const std::vector<std::string>& values) {
    const std::string& set_timeout = prepared(local_statement_timeout);
    const std::string& name = prepared(statement);
    const std::string timeout_text = milliseconds_text(statement_timeout_of(timeout));
    const char* timeout_value = timeout_text.c_str();
    const auto pointers = value_pointers(values);
    if (PQenterPipelineMode(m_conn) != 1 ||
        PQsendQueryPrepared(m_conn, set_timeout.c_str(), 1, &timeout_value, nullptr, nullptr, 0) != 1 ||
        PQsendQueryPrepared(m_conn, name.c_str(), static_cast<int>(pointers.size()), pointers.data(), nullptr,
                            nullptr, 0) != 1 ||
        PQpipelineSync(m_conn) != 1)
        throw_broken();
    // The set_config's result, then the call's, each ended by a null, then the
    // sync. After an error the rest of the pipeline comes back aborted; the
    // first error is the one reported.
    call_result answer;
    call_result failure;
    for (int query = 0; query < 2; ++query) {
        PGresult* res = PQgetResult(m_conn);
        if (res == nullptr || PQstatus(m_conn) != CONNECTION_OK) {
            PQclear(res);
            throw_broken();
        }
        const ExecStatusType status = PQresultStatus(res);
        if (status == PGRES_FATAL_ERROR && !failure.has_result())
            failure = call_result{res};
        else if (query == 1 && status == PGRES_TUPLES_OK)
            answer = call_result{res};
        else
            PQclear(res);
        if (PGresult* extra = PQgetResult(m_conn); extra != nullptr) {
            PQclear(extra);
            throw_broken(); // more than one result for one query: not one of ours
        }
    }
    PGresult* sync = PQgetResult(m_conn);
    const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (!synced || PQexitPipelineMode(m_conn) != 1) throw_broken();
    if (failure.has_result()) return checked(failure.release(), statement);
    if (!answer.has_result()) throw_broken();
    return answer;
}

} // namespace dlock::internal
