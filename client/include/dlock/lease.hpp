// dlock/lease.hpp -- a granted lease that releases itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dlock/options.hpp"
#include "dlock/transaction.hpp"

namespace dlock {

namespace internal {
struct lease_state;
}

/// A lease on a lock name, owned by this object.
///
/// The destructor releases it (never throwing, and bounded in time by the
/// client's call_timeout). The lease knows its deadline on the client's
/// monotonic clock: the time its last acquire or renew request was sent, plus
/// the time the server says it waited before granting (capped at the round
/// trip), plus the ttl, minus the drift allowance and the safety margin. After
/// that instant, or once a renewal was refused, it is lost. A moved-from lease
/// is empty: its getters return empty values and it is neither valid nor lost.
///
/// Thread safety: the observers (valid, lost, time_left, wait_lost, ...) and
/// report_progress may be called from any thread; renew, release, move and
/// destruction from one thread at a time.
class lease {
public:
    lease(lease&& other) noexcept;
    lease& operator=(lease&& other) noexcept;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease() noexcept;

    [[nodiscard]] const std::string& name() const noexcept;
    [[nodiscard]] std::int64_t fencing_token() const noexcept;
    [[nodiscard]] const std::string& owner_token() const noexcept;
    [[nodiscard]] std::chrono::milliseconds ttl() const noexcept;

    /// The last instant (client monotonic clock) at which the lease is surely still held.
    [[nodiscard]] steady_clock::time_point deadline() const noexcept;
    /// Time until deadline(); zero once passed or lost.
    [[nodiscard]] std::chrono::milliseconds time_left() const noexcept;
    /// The server's lease_until from the last grant or renewal (server wall clock;
    /// for display only -- decisions use deadline()).
    [[nodiscard]] std::chrono::system_clock::time_point lease_until() const noexcept;

    /// Held: not released, not lost, deadline not passed.
    [[nodiscard]] bool valid() const noexcept;
    /// Marked lost or deadline passed (and not released by us).
    [[nodiscard]] bool lost() const noexcept;
    /// Why the lease was marked lost, if it was.
    [[nodiscard]] std::optional<loss_reason> loss() const noexcept;
    /// Blocks until the lease is lost or released, or the timeout passes; true when lost.
    [[nodiscard]] bool wait_lost(std::chrono::milliseconds timeout) const;

    /// Tells the keep-alive the work is still making progress (see
    /// lease_options::renew_only_on_progress).
    void report_progress() noexcept;
    /// Stops background renewal; the lease then runs out at its deadline (and is
    /// reported lost then). Irreversible.
    void stop_keep_alive() noexcept;

    /// Renews now on the client's connection. done moves the deadline; refused
    /// marks the lease lost; unknown (connection broken, call timeout) leaves it
    /// as valid as it was, until its deadline.
    [[nodiscard]] outcome renew();
    /// Releases now. done: this call ended the lease; refused: it was no longer held;
    /// unknown: not confirmed (connection broken, call timeout: the lease then
    /// ends at its ttl at the latest).
    [[nodiscard]] outcome release() noexcept;

    /// Turns this exclusive lease into a shared lease in one step
    /// (dlock.downgrade): the same owner token and end, a new and higher
    /// fencing token, which fencing_token() returns from then on (the old one
    /// no longer passes holds()); no writer can take the lock in between, and
    /// the keep-alive goes on renewing the shared lease. done: downgraded;
    /// refused: this owner holds no live exclusive lease of the name (already
    /// shared, released or lost; the lease is left as it was); unknown: not
    /// confirmed (connection broken, call timeout): which token is live is not
    /// known, so release the lease. A lease granted with session_bound,
    /// max_hold or min_hold throws server_error (0A000): shared leases carry no
    /// policy. There is no upgrade.
    [[nodiscard]] outcome downgrade();

    /// Gives the lease up without releasing it: stops the keep-alive and returns
    /// what is needed to renew or release it later by owner token (e.g. from
    /// another process). The lease then runs out at its ttl unless renewed.
    [[nodiscard]] grant detach() noexcept;

private:
    friend class client;
    explicit lease(std::shared_ptr<internal::lease_state> state) noexcept;
    std::shared_ptr<internal::lease_state> m_state;
};

} // namespace dlock
