// session.hpp -- the library's own connections, and call(), which sends one of
// its statements on one.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include <libpq-fe.h>

#include "dlock/options.hpp"
#include "sql.hpp"
#include "timing.hpp"

namespace dlock::internal {

/// The connection string with the library's network bounds added (TCP
/// keepalives, tcp_user_timeout, connect_timeout), unless it sets them itself.
[[nodiscard]] std::string bounded_connection_string(const std::string& connection_string,
                                                    std::chrono::milliseconds network_timeout);

/// One of the library's own connections, on libpq itself: a call is then one
/// message out and one result back, where a libpqxx transaction object adds
/// a poll of the socket before and after each (docs/client.md, "C++ client").
///
/// How it sends calls follows client_options::pooling. Without a transaction
/// pooler it keeps state: the library's statements are prepared by name, and
/// statement_timeout (the call timeout) and client_connection_check_interval
/// are session settings, made on the first call. With pooling::detect that
/// call finds out, in the same statement that makes the settings: they are
/// made only when pg_backend_pid() is the process id libpq got at connect,
/// which a pooler in between does not pass on (PgBouncer makes up its own), so
/// behind a pooler nothing is left in a server session that another client
/// may get next. A session whose connection broke stays broken: its calls
/// throw pqxx::broken_connection, and the pool drops it.
class session {
public:
    /// Connects with bounded_connection_string; throws connection_error.
    /// `call_timeout` is the statement_timeout the session keeps (when it keeps
    /// state); calls with another bound set theirs local to their transaction.
    /// `durability` goes with the settings (settings_select in session.cpp).
    session(const std::string& connection_string, std::chrono::milliseconds network_timeout, dlock::pooling pooling,
            std::chrono::milliseconds call_timeout, dlock::durability durability);
    session(const session&) = delete;
    session& operator=(const session&) = delete;
    session(session&&) = delete;
    session& operator=(session&&) = delete;
    ~session() noexcept;

    /// Runs `statement` (one of sql::) with `values` (text) as a transaction of
    /// its own, bounded by statement_timeout `timeout`; see call().
    [[nodiscard]] call_result run(std::chrono::milliseconds timeout, const char* statement,
                                  const std::vector<std::string>& values);
    /// Ends a transaction a failed call left open, so the session can be used
    /// again; closes the connection when even that fails.
    void roll_back() noexcept;
    [[nodiscard]] bool is_open() const noexcept;
    [[nodiscard]] int backend_pid() const noexcept;
    /// Whether this session sends its calls as behind a transaction pooler:
    /// pooling::transaction, or what pooling::detect found. Under
    /// pooling::detect a session that has not made a call yet finds out now,
    /// in the round trip its first call would make anyway (how_to_send);
    /// throws as run() does when that fails.
    [[nodiscard]] bool transaction_pooled();
    /// Whether a notice since the last call said its commit is only local
    /// (is_commit_uncertain_notice).
    [[nodiscard]] bool commit_uncertain() const noexcept { return m_commit_uncertain; }

private:
    /// How run() sends a call on this session.
    enum class send {
        self_contained, ///< a simple query that sets everything local to its transaction
        prepared,       ///< the prepared statement: the session's settings are the call's
        prepared_with_local_timeout, ///< a pipeline: set statement_timeout locally, then the prepared statement
    };
    /// How to send a call bounded by `timeout`. Makes the session settings
    /// (settle) when it has none yet.
    [[nodiscard]] send how_to_send(std::chrono::milliseconds timeout);
    /// Makes the session settings (statement_timeout the session's call
    /// timeout) in a round trip of its own unless made, or known to be left
    /// out (pooling::transaction); with pooling::detect finding out whether it
    /// is a pooler's (then m_pooling becomes pooling::transaction: calls are
    /// self-contained from now on).
    void settle();
    /// The name `statement` is prepared under on this connection; prepares it on
    /// first use (a round trip of its own).
    [[nodiscard]] const std::string& prepared(const char* statement);
    [[nodiscard]] call_result exec_prepared(const char* statement, const std::vector<std::string>& values);
    [[nodiscard]] call_result exec_pipeline(std::chrono::milliseconds timeout, const char* statement,
                                            const std::vector<std::string>& values);
    [[nodiscard]] call_result exec_simple(const std::string& text);
    /// `res` when it succeeded; else clears it and throws as libpqxx would
    /// (pqxx::sql_error with the SQLSTATE, or pqxx::broken_connection).
    call_result checked(PGresult* res, const char* statement);
    [[noreturn]] void throw_broken() const;
    static void on_notice(void* self, const PGresult* notice) noexcept;

    PGconn* m_conn = nullptr;
    dlock::pooling m_pooling;
    bool m_settled = false; // the session settings are made
    bool m_commit_uncertain = false;
    std::chrono::milliseconds m_statement_timeout; // the statement_timeout it keeps (the call timeout)
    dlock::durability m_durability;
    std::unordered_map<const char*, std::string> m_prepared;
};

/// A call's value as the text it is sent as.
[[nodiscard]] inline std::string value_text(const std::string& v) { return v; }
[[nodiscard]] inline std::string value_text(long long v) { return std::to_string(v); }
[[nodiscard]] inline std::string value_text(int v) { return std::to_string(v); }
[[nodiscard]] inline std::string value_text(bool v) { return v ? "true" : "false"; }
[[nodiscard]] inline std::string value_text(std::chrono::milliseconds v) { return milliseconds_text(v); }

/// Runs one statement of the library as a transaction of its own on s, bounded
/// by statement_timeout `timeout` and client_connection_check_interval (and
/// with dlock.durability = fenced for a fenced client), in one round trip. On
/// a session that keeps state the statement runs prepared by name (the
/// settings are the session's); a call bounded by another timeout than the
/// session's sends, in one pipeline, a prepared set_config of
/// statement_timeout local to the transaction and then the statement: the
/// server runs both in one implicit transaction, and arms each one's timeout
/// when it starts. Else (a transaction pooler may give the next transaction
/// another server connection) every setting is local to the call's
/// transaction: one simple query sets them and then runs the statement, its
/// values as literals quoted by the connection (PQescapeLiteral), as a
/// statement prepared on one server connection may not exist on the next.
/// Throws what libpqxx would throw (the caller maps it), after rolling back
/// what a failure may have left open.
template <typename... Args>
call_result call(session& s, std::chrono::milliseconds timeout, const char* statement, const Args&... args) {
    try {
        return s.run(timeout, statement, {value_text(args)...});
    } catch (...) {
        s.roll_back();
        throw;
    }
}

} // namespace dlock::internal
