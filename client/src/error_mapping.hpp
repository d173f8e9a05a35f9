// error_mapping.hpp -- how a failed call ended (unknown outcome or refusal),
// and the one mapping of server errors to the library's exception types.
#pragma once

#include <atomic>
#include <exception>
#include <string_view>

#include <pqxx/pqxx>

namespace dlock::internal {

/// True for a notice saying a commit canceled its wait for synchronous
/// replication: the COMMIT then reports success although it is only local.
[[nodiscard]] bool is_commit_uncertain_notice(std::string_view message) noexcept;

/// Watches a caller's connection's notices for is_commit_uncertain_notice,
/// passing each on to the caller's own handlers.
class notice_watch final : public pqxx::errorhandler {
public:
    explicit notice_watch(pqxx::connection_base& conn) : pqxx::errorhandler{conn} {}
    bool operator()(const char message[]) noexcept override;
    [[nodiscard]] bool uncertain() const noexcept { return m_uncertain; }

private:
    std::atomic<bool> m_uncertain{false};
};

/// How a failed call ended: the outcome is unknown, or the server refused it.
[[nodiscard]] bool is_unknown_outcome(const std::exception& e) noexcept;

/// Rethrows the exception being handled as a dlock exception: a dlock::error as
/// is, an unknown outcome as unknown_outcome_error, a server error by its
/// SQLSTATE. Call only inside a catch block. The one place SQLSTATEs are mapped.
[[noreturn]] void rethrow_mapped(std::string_view subject, std::string_view owner_token = {});

} // namespace dlock::internal
