// internal.hpp -- shared state of clients, leases and the keep-alive thread.
//
// Ownership: a client object and every lease it granted hold a shared_ptr to
// one client_core. The core owns the caller connection (guarded by its mutex)
// and the keep_alive, which owns its own connection and thread. The keep-alive
// holds the lease_states registered with it; a lease object removes its state
// (waiting for a renewal in flight) before it releases, so no renewal is ever
// sent after a release.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "dlock/errors.hpp"
#include "dlock/metrics.hpp"
#include "dlock/options.hpp"

namespace dlock::internal {

/// Prepared statement names and texts used on the library's own connections.
namespace stmt {
inline constexpr const char* try_acquire = "dlock_try_acquire";
inline constexpr const char* acquire = "dlock_acquire";
inline constexpr const char* renew = "dlock_renew";
inline constexpr const char* release = "dlock_release";
inline constexpr const char* force_release = "dlock_force_release";
} // namespace stmt

/// SQL of an acquire in the caller's transaction (run with exec_params, which
/// leaves the caller's prepared-statement namespace alone).
extern const char* const try_acquire_sql;

/// True for a notice saying a commit canceled its wait for synchronous
/// replication: the COMMIT then reports success although it is only local.
[[nodiscard]] bool is_commit_uncertain_notice(std::string_view message) noexcept;

/// Watches a connection's notices for is_commit_uncertain_notice.
class notice_watch final : public pqxx::errorhandler {
public:
    notice_watch(pqxx::connection_base& conn, bool swallow) : pqxx::errorhandler{conn}, m_swallow{swallow} {}
    bool operator()(const char message[]) noexcept override;
    void reset() noexcept { m_uncertain = false; }
    [[nodiscard]] bool uncertain() const noexcept { return m_uncertain; }

private:
    bool m_swallow;
    std::atomic<bool> m_uncertain{false};
};

/// One of the library's own connections, with its statements prepared.
class session {
public:
    /// Connects; throws connection_error.
    explicit session(const std::string& connection_string);
    session(const session&) = delete;
    session& operator=(const session&) = delete;
    session(session&&) = delete;
    session& operator=(session&&) = delete;
    ~session() noexcept;

    [[nodiscard]] pqxx::connection& conn() noexcept { return *m_conn; }
    [[nodiscard]] notice_watch& notices() noexcept { return *m_watch; }

private:
    std::unique_ptr<pqxx::connection> m_conn;
    std::unique_ptr<notice_watch> m_watch; // destroyed before m_conn
};

/// How a failed call ended: the outcome is unknown, or the server refused it.
[[nodiscard]] bool is_unknown_outcome(const std::exception& e) noexcept;

/// Rethrows the exception being handled as a dlock exception: a dlock::error as
/// is, an unknown outcome as unknown_outcome_error, a server error by its
/// SQLSTATE. Call only inside a catch block. The one place SQLSTATEs are mapped.
[[noreturn]] void rethrow_mapped(std::string_view subject, std::string_view owner_token = {});

/// The counters behind dlock::metrics.
struct counters {
    std::atomic<std::uint64_t> acquisitions{0}, busy{0}, waits{0}, wait_timeouts{0}, renewals{0}, renewals_refused{0},
        releases{0}, lost{0}, unknown_outcomes{0}, retries{0};
    std::array<std::atomic<std::uint64_t>, metrics::wait_bucket_bounds.size() + 1> wait_histogram{};

    void record_wait(std::chrono::steady_clock::duration waited) noexcept;
    [[nodiscard]] metrics snapshot() const noexcept;
};

struct client_core;

/// The state of one lease, shared by the lease object and the keep-alive.
struct lease_state {
    std::shared_ptr<client_core> core;
    std::string name;
    std::string owner_token;
    std::int64_t fencing_token = 0;
    std::chrono::milliseconds ttl{0};
    std::chrono::milliseconds renew_every{0};
    bool keep_alive = true;
    bool renew_only_on_progress = false;
    std::function<void(const lost_lease&)> on_lost;

    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    steady_clock::time_point deadline; // guarded by mutex
    std::chrono::system_clock::time_point lease_until;
    steady_clock::time_point next_renew;
    std::optional<loss_reason> loss;
    bool loss_reported = false;
    bool released = false;
    bool keep_alive_stopped = false;
    std::atomic<bool> progress{false};

    /// Marks the lease lost (first reason wins); wakes waiters and, when
    /// wake_keep_alive, the keep-alive thread so it runs on_lost.
    void mark_lost(loss_reason reason, bool wake_keep_alive) noexcept;
    /// Moves the deadline after a renewal sent at `sent` was confirmed.
    void renewed(steady_clock::time_point sent, double server_epoch) noexcept;
};

/// Background renewal and deadline watch for the leases of one client: one
/// thread renews (on its own connection), another watches deadlines and runs
/// on_lost, so a renewal stuck on the network cannot delay the loss report.
class keep_alive {
public:
    explicit keep_alive(client_core& core) noexcept : m_core{core} {}
    keep_alive(const keep_alive&) = delete;
    keep_alive& operator=(const keep_alive&) = delete;
    keep_alive(keep_alive&&) = delete;
    keep_alive& operator=(keep_alive&&) = delete;
    ~keep_alive() noexcept;

    void add(std::shared_ptr<lease_state> lease);
    /// Stops watching the lease; returns after a renewal or on_lost call of it
    /// in flight finished.
    void remove(const lease_state* lease) noexcept;
    void wake() noexcept;
    [[nodiscard]] int backend_pid() const noexcept { return m_backend_pid; }

private:
    void renew_loop() noexcept;
    void watch_loop() noexcept;
    void renew_one(lease_state& lease) noexcept;
    [[nodiscard]] bool on_own_thread() const noexcept;

    client_core& m_core;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::vector<std::shared_ptr<lease_state>> m_leases;
    const lease_state* m_renewing = nullptr;  // renewal in flight
    const lease_state* m_reporting = nullptr; // on_lost call in flight
    bool m_stop = false;
    std::thread m_renewer;
    std::thread m_watcher;
    std::unique_ptr<session> m_session; // used by the renewer thread only
    std::atomic<int> m_backend_pid{0};
};

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

    std::mutex mutex;                           // guards idle
    std::vector<std::unique_ptr<session>> idle; // caller sessions not in use

    std::mutex rng_mutex;
    std::mt19937_64 rng;
    [[nodiscard]] std::string new_owner_token();
    [[nodiscard]] std::chrono::milliseconds backoff(int retry);

    /// Local deadline of a lease of `ttl` whose request was sent at `sent`.
    [[nodiscard]] steady_clock::time_point deadline_for(steady_clock::time_point sent,
                                                        std::chrono::milliseconds ttl) const noexcept;

    /// Acquire with retries; nullptr when busy (try) -- see client::try_acquire/acquire.
    std::shared_ptr<lease_state> acquire(std::string_view name, std::optional<std::chrono::milliseconds> wait,
                                         const lease_options& opts);
    /// Fills in the per-lease settings and starts watching it.
    void attach(const std::shared_ptr<lease_state>& lease, const lease_options& opts);

    keep_alive watcher{*this}; // last: stopped first
};

/// A caller session checked out of the client's pool for one call, so calls
/// from several threads do not wait for each other (a waiting acquire does
/// not hold up a release). It goes back to the pool when destroyed, unless
/// discarded after it broke.
class checked_out {
public:
    /// Takes an idle session or connects a new one; throws connection_error.
    explicit checked_out(client_core& core);
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

/// Converts a server epoch (seconds) to a system_clock time point.
[[nodiscard]] std::chrono::system_clock::time_point from_epoch(double seconds) noexcept;

} // namespace dlock::internal
