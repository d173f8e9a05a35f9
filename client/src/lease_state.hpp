// lease_state.hpp -- the state of one lease, shared by the lease object and
// the keep-alive.
//
// A lease object marks itself released and removes its state from the
// keep-alive (waiting, bounded, for a renewal in flight) before it releases,
// so no renewal is sent after a release, and one still in flight is refused
// by the server.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "dlock/options.hpp"
#include "session.hpp"

namespace dlock::internal {

struct client_core;

/// What a renewal came back with.
struct renewal {
    outcome result = outcome::unknown;
    std::chrono::system_clock::time_point lease_until; ///< when done
    steady_clock::time_point deadline;                 ///< when done
    std::string error;                                 ///< why, when unknown
};

/// The state of one lease, shared by the lease object and the keep-alive.
struct lease_state {
    std::shared_ptr<client_core> core;
    std::string name;
    std::string owner_token;
    /// changed by a downgrade while other threads may read it
    std::atomic<std::int64_t> fencing_token{0};
    std::chrono::milliseconds ttl{0};
    std::chrono::milliseconds renew_every{0};
    bool keep_alive = true;
    bool renew_only_on_progress = false;
    std::function<void(const lost_lease&)> on_lost;
    /// lease_options::max_hold, and when the grant was requested (client clock):
    /// a refused renewal after acquired + max_hold is the planned end.
    std::chrono::milliseconds max_hold{0};
    steady_clock::time_point acquired;
    /// When the grant arrived (client clock): the hold time of the listener's
    /// loss and release events counts from here.
    steady_clock::time_point granted;
    /// The connection a session-bound lease was granted on: kept open until the
    /// lease is released (closing it ends the lease on the server).
    std::unique_ptr<session> bound_session;

    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    steady_clock::time_point deadline; // guarded by mutex
    std::chrono::system_clock::time_point lease_until;
    steady_clock::time_point next_renew;
    /// When the next renewal is due by plan: next_renew, but not moved by the
    /// retries after an unknown outcome (a renewal's lateness counts from it).
    steady_clock::time_point renew_planned;
    std::optional<loss_reason> loss;
    bool loss_reported = false;
    bool released = false;
    bool keep_alive_stopped = false;
    std::atomic<bool> progress{false};

    /// Marks the lease lost (first reason wins); wakes waiters and, when
    /// wake_keep_alive, the keep-alive thread so it runs on_lost.
    void mark_lost(loss_reason reason, bool wake_keep_alive) noexcept;
    /// Takes a confirmed renewal's lease_until and deadline.
    void renewed(const renewal& confirmed) noexcept;
    /// A renewal was refused: lost, with loss_reason::max_hold when the lease
    /// had been held for its max_hold by then.
    void renewal_refused(bool wake_keep_alive) noexcept;
};

} // namespace dlock::internal
