// dlock/transaction.hpp -- lock calls inside a transaction the caller owns.
//
// These run in the caller's pqxx transaction, so the lease, the fencing checks
// and the caller's business rows commit or roll back together.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/options.hpp"

namespace pqxx {
class transaction_base;
}

namespace dlock {

/// A lease granted inside a caller's transaction. It exists on the server only
/// once that transaction commits; hand it to client::adopt() afterwards to get a
/// lease object that renews and releases itself.
struct grant {
    std::string lock_name;
    std::string owner_token;
    std::int64_t fencing_token = 0;
    std::chrono::milliseconds ttl{0};
    std::chrono::system_clock::time_point lease_until;
    /// Local deadline, measured from when the acquire was sent plus the time the
    /// server waited before granting (see lease).
    steady_clock::time_point deadline;
};

/// True when fencing_token is the live lease of lock_name; then the lease row is
/// pinned (cannot be taken over) until the transaction ends.
[[nodiscard]] bool holds(pqxx::transaction_base& txn, std::string_view lock_name, std::int64_t fencing_token);

/// Like holds, but throws not_held_error (PD002) when the lease is not live.
void assert_holds(pqxx::transaction_base& txn, std::string_view lock_name, std::int64_t fencing_token);

/// Records fencing_token for resource; throws stale_token_error (PD001) when a
/// higher token was already accepted for it.
void fence(pqxx::transaction_base& txn, std::string_view resource, std::int64_t fencing_token);

/// Commits txn and says whether it surely committed: done, or unknown when the
/// connection broke during COMMIT, libpqxx reports the commit in doubt, or the
/// server canceled its wait for synchronous replication (the commit is then only
/// local). Other errors (the commit was refused) are thrown as usual.
[[nodiscard]] outcome commit(pqxx::transaction_base& txn);

} // namespace dlock
