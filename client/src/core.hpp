// core.hpp -- what a client and its leases share: the pool of caller
// connections, the counters, the keep-alive, and the one implementation of
// each lease operation (acquire, renew, release).
//
// Ownership: a client object and every lease it granted hold a shared_ptr to
// one client_core. The core owns the pool of caller connections (guarded by
// its mutex) and the keep_alive, whose two threads share its state (and the
// renewer's own connection) with it, so either may outlive the core. The
// keep-alive holds the lease_states registered with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "counters.hpp"
#include "dlock/options.hpp"
#include "dlock/transaction.hpp"
#include "keep_alive.hpp"
#include "lease_state.hpp"
#include "listener_calls.hpp"
#include "session.hpp"
#include "timing.hpp"

namespace dlock::internal {

/// Which kind of lease an acquire asks for (docs/lock-kinds.md, "Lock kinds").
struct lease_kind {
    enum class mode { exclusive, shared, permit } what = mode::exclusive;
    int permits = 0; ///< the semaphore's size, for mode::permit
};

/// True when the lease options ask for any lease policy (then the acquire
/// statement names them; without, it is the statement of 1.1).
[[nodiscard]] inline bool has_policies(const lease_options& o) noexcept {
    return o.session_bound || o.max_hold.count() != 0 || o.min_hold.count() != 0 || o.lock_delay.count() != 0;
}

/// Everything a client and its leases share.
struct client_core {
    explicit client_core(client_options opts);
    client_core(const client_core&) = delete;
    client_core& operator=(const client_core&) = delete;
    client_core(client_core&&) = delete;
    client_core& operator=(client_core&&) = delete;
    ~client_core() noexcept;

    client_options options;
    std::string holder;
    counters stats;
    listener_calls notify; // options.listener

    std::mutex mutex;                           // guards idle
    std::vector<std::unique_ptr<session>> idle; // caller sessions not in use

    std::mutex rng_mutex;
    std::mt19937_64 rng;
    [[nodiscard]] std::string new_owner_token();
    [[nodiscard]] std::chrono::milliseconds backoff(int retry);
    /// A sleep between two tries of a client-side wait: uniform in [bound/2, bound] ms.
    [[nodiscard]] std::chrono::milliseconds poll_sleep(std::int64_t bound);

    /// Acquire with retries; nullptr when busy (try) -- see client::try_acquire/acquire.
    std::shared_ptr<lease_state> acquire(std::string_view name, std::optional<std::chrono::milliseconds> wait,
                                         const lease_options& opts, lease_kind kind = {});
    /// Whether an acquire with a wait waits in the client (wait_mode::poll)
    /// rather than in the server: the one place wait_mode::automatic is
    /// decided (see options.hpp). Under pooling::detect it asks a caller
    /// session (transaction_pooled), once more on a fresh one when that
    /// fails, and polls when that fails too. Throws connection_error when no
    /// session can be connected.
    [[nodiscard]] bool waits_in_client();
    /// One acquire (server-side wait when wait is set), retried with the same
    /// owner while its outcome is unknown.
    std::shared_ptr<lease_state> acquire_once(const std::string& name, std::optional<std::chrono::milliseconds> wait,
                                              const lease_options& opts, const std::string& owner,
                                              steady_clock::time_point started, lease_kind kind = {});
    /// Fills in the per-lease settings and starts watching it.
    void attach(const std::shared_ptr<lease_state>& lease, const lease_options& opts);

    keep_alive watcher; // last: stopped first
};

/// A caller session checked out of the client's pool for one call, so calls
/// from several threads do not wait for each other (a waiting acquire does
/// not hold up a release). It goes back to the pool when destroyed, unless
/// discarded after it broke.
class checked_out {
public:
    /// Takes an idle session or connects a new one; throws connection_error.
    explicit checked_out(client_core& core);
    /// The session slot itself (a call may discard or replace it).
    [[nodiscard]] std::unique_ptr<session>& slot() noexcept { return m_session; }
    checked_out(const checked_out&) = delete;
    checked_out& operator=(const checked_out&) = delete;
    checked_out(checked_out&&) = delete;
    checked_out& operator=(checked_out&&) = delete;
    ~checked_out() noexcept;

    [[nodiscard]] session& operator*() noexcept { return *m_session; }
    [[nodiscard]] session* operator->() noexcept { return m_session.get(); }
    void discard() noexcept { m_session.reset(); }

private:
    client_core& m_core;
    std::unique_ptr<session> m_session;
};

/// The one renewal implementation (lease::renew, client::renew, the
/// keep-alive): refused when the server says the owner holds no live lease;
/// unknown when it could not be confirmed (broken connection, timeout, commit
/// in doubt) -- the lease is then as valid as before, until its deadline.
/// Discards the session when it broke. Throws only mapped dlock errors for
/// refusals of the arguments (invalid_argument_error, permission_error).
[[nodiscard]] renewal renew_lease(client_core& core, std::unique_ptr<session>& s, const std::string& name,
                                  const std::string& owner_token, std::chrono::milliseconds ttl,
                                  std::chrono::milliseconds timeout);

/// dlock.downgrade: done with the shared lease's token, refused when the
/// owner holds no live exclusive lease of the name (nor the shared lease an
/// earlier downgrade gave it), unknown when the outcome was not seen twice:
/// an outcome not seen is asked again once on a fresh connection, and the
/// server answers a retry with the shared lease the first try gave. Throws mapped dlock errors for refusals of the call
/// itself (a lease policy a shared lease cannot keep: server_error 0A000).
struct downgrading {
    outcome result = outcome::unknown;
    std::int64_t fencing_token = 0; ///< when done
};
[[nodiscard]] downgrading downgrade_lease(client_core& core, const std::string& name,
                                          const std::string& owner_token);

/// The one release implementation (lease::release, client::release): done,
/// refused (the owner held no live lease), or unknown (not confirmed within
/// the call timeout, connection broken). Never throws.
[[nodiscard]] outcome release_lease(client_core& core, const std::string& name, const std::string& owner_token) noexcept;

/// The grant in one row of a lease statement (sql.cpp): lock_name,
/// owner_token, fencing_token, lease_until in epoch seconds, and the
/// milliseconds the server waited before granting. Row is a call_result row
/// or a pqxx::row: both read as row[column].as<T>(). Every grant of every kind
/// and call is read here, and reported here to the client's listener, with
/// the time since the acquire call `started`.
template <typename Row>
[[nodiscard]] grant read_grant(const client_core& core, const Row& row, steady_clock::time_point started,
                               steady_clock::time_point sent, steady_clock::time_point received,
                               std::chrono::milliseconds ttl, bool in_transaction = false) {
    grant g;
    g.lock_name = row[0].template as<std::string>();
    g.owner_token = row[1].template as<std::string>();
    g.fencing_token = row[2].template as<std::int64_t>();
    g.ttl = ttl;
    g.lease_until = from_epoch(row[3].template as<double>());
    g.deadline = deadline_for(core.options, sent, received, row[4].template as<double>(), ttl);
    core.notify.granted(g, received - started, in_transaction);
    return g;
}

/// Copies a grant into a lease's state (attach() adds the settings).
void set_grant(lease_state& state, const grant& granted);

} // namespace dlock::internal
