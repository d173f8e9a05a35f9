// dlock/client.hpp -- connection to a pg_dlock server, the entry point.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/errors.hpp"
#include "dlock/lease.hpp"
#include "dlock/metrics.hpp"
#include "dlock/options.hpp"
#include "dlock/transaction.hpp"

namespace pqxx {
class transaction_base;
}

namespace dlock {

namespace internal {
struct client_core;
}

/// A client of the pg_dlock extension.
///
/// It owns one connection for the caller's calls (acquire, release, explicit
/// renew) and, once it grants a lease, a keep-alive made of two threads: a
/// renewer with a second connection of its own (renewals never wait behind the
/// caller's queries and never share a libpqxx connection with another thread),
/// and a watcher that reports a lease lost at its deadline even while a renewal
/// is stuck on the network.
///
/// Thread safety: a client may be shared between threads. Each call takes a
/// caller connection from a small pool (one per concurrent call, up to four
/// kept idle), so a call waiting in the server holds up no other thread. Leases keep what they need alive, so a lease
/// may outlive the client object that granted it.
class client {
public:
    /// Connects lazily (on first use) with options.connection_string or the PG* environment.
    explicit client(client_options options = {});
    /// Shorthand for a client with just a connection string.
    explicit client(std::string connection_string);
    client(client&&) noexcept;
    client& operator=(client&&) noexcept;
    client(const client&) = delete;
    client& operator=(const client&) = delete;
    ~client() noexcept;

    /// Takes the lock if it is free or its lease expired; nullopt when another owner
    /// holds a live lease. An unknown outcome is retried with the same owner token
    /// (client_options::retry); when retries run out, throws unknown_outcome_error.
    [[nodiscard]] std::optional<lease> try_acquire(std::string_view lock_name, const lease_options& options = {});

    /// Like try_acquire, but the server waits up to `wait` for the lock; throws
    /// busy_error when the wait runs out.
    [[nodiscard]] lease acquire(std::string_view lock_name, std::chrono::milliseconds wait,
                                const lease_options& options = {});

    /// A shared lease (read-write lock): granted while no exclusive lease is live
    /// and no exclusive acquirer waits; any number of shared leases at once. The
    /// lease is renewed and released like an exclusive one. nullopt when busy.
    [[nodiscard]] std::optional<lease> try_acquire_shared(std::string_view lock_name,
                                                          const lease_options& options = {});
    /// Like try_acquire_shared, waiting up to `wait`; throws busy_error when it runs out.
    [[nodiscard]] lease acquire_shared(std::string_view lock_name, std::chrono::milliseconds wait,
                                       const lease_options& options = {});

    /// One of `permits` permits of a counting semaphore, as its own lease (own
    /// owner and fencing token, renewed and released alone). nullopt when all
    /// are held; invalid_argument_error when `permits` disagrees with the live permits'.
    [[nodiscard]] std::optional<lease> try_acquire_permit(std::string_view semaphore_name, int permits,
                                                          const lease_options& options = {});
    /// Like try_acquire_permit, waiting up to `wait`; throws busy_error when it runs out.
    [[nodiscard]] lease acquire_permit(std::string_view semaphore_name, int permits,
                                       std::chrono::milliseconds wait, const lease_options& options = {});

    /// Exclusive leases on every name or on none, one owner token for the set;
    /// one lease per name (in name order), each kept alive and released on its
    /// own. nullopt when a name is held by another owner. No retry on an
    /// unknown outcome: call again with the same owner_token (idempotent).
    [[nodiscard]] std::optional<std::vector<lease>> try_acquire_all(const std::vector<std::string>& lock_names,
                                                                    const lease_options& options = {});
    /// Like try_acquire_all, waiting up to `wait` in all; throws busy_error when it runs out.
    [[nodiscard]] std::vector<lease> acquire_all(const std::vector<std::string>& lock_names,
                                                 std::chrono::milliseconds wait, const lease_options& options = {});

    /// try_acquire inside the caller's transaction: the lease exists only if txn
    /// commits. No retries (the caller owns the transaction). nullopt when busy.
    [[nodiscard]] std::optional<grant> try_acquire(pqxx::transaction_base& txn, std::string_view lock_name,
                                                   const lease_options& options = {});

    /// Turns a committed grant into a lease object (keep-alive, release on scope exit).
    [[nodiscard]] lease adopt(const grant& granted, const lease_options& options = {});

    /// Renews a lease known only by name and owner token (e.g. one acquired by
    /// another process and detached). nullopt when it is not held; the grant has
    /// no fencing token (0). Throws unknown_outcome_error when the outcome is unknown.
    [[nodiscard]] std::optional<grant> renew(std::string_view lock_name, std::string_view owner_token,
                                             std::chrono::milliseconds ttl);

    /// Releases a lease known only by name and owner token.
    [[nodiscard]] outcome release(std::string_view lock_name, std::string_view owner_token) noexcept;

    /// Ends the current lease of lock_name whoever holds it, recording reason in
    /// dlock.audit_log; false when nothing was held. Needs a grant on
    /// dlock.force_release (else permission_error).
    [[nodiscard]] bool force_release(std::string_view lock_name, std::string_view reason);

    /// Counters since this client was created.
    [[nodiscard]] dlock::metrics metrics() const;

    /// The holder text stored with this client's leases.
    [[nodiscard]] const std::string& holder() const noexcept;

    /// The server process id of the caller connection (connects if needed).
    [[nodiscard]] int backend_pid();
    /// The server process id of the keep-alive connection, 0 when not connected.
    [[nodiscard]] int keep_alive_backend_pid() const;

private:
    std::optional<std::vector<lease>> acquire_set(const std::vector<std::string>& lock_names,
                                                  std::optional<std::chrono::milliseconds> wait,
                                                  const lease_options& options);
    std::shared_ptr<internal::client_core> m_core;
};

} // namespace dlock
