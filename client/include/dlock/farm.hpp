// dlock/farm.hpp -- a client of a PL/Proxy lock farm that talks to each partition directly.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/options.hpp"

namespace dlock {

/// A client of a lock farm (docs/farm.md) that skips the proxy: it holds one
/// dlock::client per partition of client_options::partitions and sends each
/// call for a name to the partition hashtext(name) & (N - 1) -- the one the
/// farm's proxy routes the name to and dlock.partition_of names -- so that a
/// lease's fencing token can be checked (assert_holds, the fencing trigger)
/// beside the business rows on that partition.
///
/// The partition list must be the farm's, in its order: the client cannot tell
/// a list that disagrees with the proxy's (after a reshard, give the new list).
/// Thread safety and leases are those of dlock::client; each partition's client
/// connects lazily, so a partition that is down fails only its own names.
class farm_client {
public:
    /// Checks options.partitions: not empty, a power of two of them
    /// (invalid_argument_error otherwise). Connects nothing yet.
    explicit farm_client(client_options options);

    /// N, the number of partitions.
    [[nodiscard]] std::size_t partition_count() const noexcept;
    /// The partition that owns a name: hashtext(name) & (N - 1).
    [[nodiscard]] std::size_t partition_of(std::string_view lock_name) const noexcept;
    /// The connection string of that partition (what dlock.partition_of gives,
    /// less the link bounds the proxy adds).
    [[nodiscard]] const std::string& connection_string_of(std::string_view lock_name) const;
    /// The client of one partition (0 .. N - 1), e.g. for a call in the caller's transaction.
    [[nodiscard]] client& partition(std::size_t index);
    /// The client of the partition that owns a name.
    [[nodiscard]] client& client_for(std::string_view lock_name);
    /// The one partition that owns every name of lock_names (0 when empty);
    /// names of more than one partition are refused (invalid_argument_error,
    /// SQLSTATE 0A000, as the proxy refuses a multi-lock across partitions).
    [[nodiscard]] std::size_t partition_of_all(const std::vector<std::string>& lock_names) const;

    /// As dlock::client's calls, on the partition that owns the name.
    [[nodiscard]] std::optional<lease> try_acquire(std::string_view lock_name, const lease_options& options = {});
    [[nodiscard]] lease acquire(std::string_view lock_name, std::chrono::milliseconds wait,
                                const lease_options& options = {});
    [[nodiscard]] std::optional<lease> try_acquire_shared(std::string_view lock_name,
                                                          const lease_options& options = {});
    [[nodiscard]] lease acquire_shared(std::string_view lock_name, std::chrono::milliseconds wait,
                                       const lease_options& options = {});
    [[nodiscard]] std::optional<lease> try_acquire_permit(std::string_view semaphore_name, int permits,
                                                          const lease_options& options = {});
    [[nodiscard]] lease acquire_permit(std::string_view semaphore_name, int permits,
                                       std::chrono::milliseconds wait, const lease_options& options = {});
    [[nodiscard]] std::optional<grant> renew(std::string_view lock_name, std::string_view owner_token,
                                             std::chrono::milliseconds ttl);
    [[nodiscard]] outcome release(std::string_view lock_name, std::string_view owner_token) noexcept;
    [[nodiscard]] bool force_release(std::string_view lock_name, std::string_view reason);

    /// Multi-locks take every name on one partition in one transaction; names
    /// that fall on more than one partition are refused before anything is
    /// sent (invalid_argument_error, SQLSTATE 0A000, as the proxy refuses them).
    [[nodiscard]] std::optional<std::vector<lease>> try_acquire_all(const std::vector<std::string>& lock_names,
                                                                    const lease_options& options = {});
    [[nodiscard]] std::vector<lease> acquire_all(const std::vector<std::string>& lock_names,
                                                 std::chrono::milliseconds wait, const lease_options& options = {});

private:
    std::vector<std::string> m_connection_strings;
    std::vector<client> m_clients;
};

} // namespace dlock
