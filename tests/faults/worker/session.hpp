// tests/faults/worker/session.hpp -- one database connection of a worker, and the
// three-valued outcome every recorded operation ends with.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include <pqxx/pqxx>

namespace faults {

/// How an operation ended, as the history records it.
enum class result_kind {
    ok,      ///< the server confirmed the effect
    refused, ///< the server confirmed there was no effect (busy, not held, stale token)
    fail,    ///< surely no effect, but not a refusal (error before commit, no connection)
    unknown, ///< may or may not have taken effect
};

[[nodiscard]] const char* to_string(result_kind kind) noexcept;

struct op_result {
    result_kind kind = result_kind::fail;
    std::string why;        ///< SQLSTATE or a short word; empty for ok
    std::int64_t token = 0; ///< fencing token of an acquire (ok, or unknown with a reply)
    std::string owner;      ///< owner token used by an acquire
};

/// A libpq connection that is made on first use and dropped when it breaks.
/// Counts WARNING notices so a commit that only succeeded locally (canceled
/// synchronous-replication wait) can be reported as unknown.
class db_session {
public:
    db_session(std::string conninfo, const std::string& application_name);
    db_session(const db_session&) = delete;
    db_session& operator=(const db_session&) = delete;
    db_session(db_session&&) = delete;
    db_session& operator=(db_session&&) = delete;
    ~db_session() noexcept;

    /// The open connection; connects first if needed (throws pqxx::broken_connection).
    [[nodiscard]] pqxx::connection& conn();
    [[nodiscard]] bool connected() const noexcept { return m_conn != nullptr; }
    /// Forgets the connection (after it broke or reached the wrong server).
    void reset() noexcept;

    void clear_warnings() noexcept { m_warnings = 0; }
    [[nodiscard]] int warnings() const noexcept { return m_warnings; }
    void note_warning() noexcept { ++m_warnings; }

private:
    class warning_counter;
    std::string m_conninfo;
    std::unique_ptr<pqxx::connection> m_conn;
    std::unique_ptr<warning_counter> m_handler;
    int m_warnings = 0;
};

/// Maps an exception thrown by an operation to its outcome. may_have_committed
/// says whether the effect could already be durable (an autocommit call in
/// flight, or COMMIT sent). Drops the session's connection when it is unusable.
[[nodiscard]] op_result classify(const std::exception_ptr& error, bool may_have_committed, db_session& session);

} // namespace faults
