// keep_alive.hpp -- background renewal and deadline watch for the leases of
// one client (the design notes are at the top of keep_alive.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <thread>

namespace dlock::internal {

struct lease_state;

/// Background renewal and deadline watch for the leases of one client: one
/// thread renews (on its own connection), another watches deadlines and runs
/// on_lost, so a renewal stuck on the network cannot delay the loss report.
/// The threads share only `shared` with this object, never the object itself:
/// the last owner of a client may drop it on one of these threads (inside
/// on_lost, or when a renewal held the last reference), and the thread then
/// finishes on state it owns.
class keep_alive {
public:
    keep_alive();
    keep_alive(const keep_alive&) = delete;
    keep_alive& operator=(const keep_alive&) = delete;
    keep_alive(keep_alive&&) = delete;
    keep_alive& operator=(keep_alive&&) = delete;
    ~keep_alive() noexcept;

    void add(std::shared_ptr<lease_state> lease);
    /// Stops watching the lease; returns after a renewal or on_lost call of it
    /// in flight finished, or after `bound` (a renewal that lands later is
    /// refused by the server once the lease is released).
    void remove(const lease_state* lease, std::chrono::milliseconds bound) noexcept;
    void wake() noexcept;
    [[nodiscard]] int backend_pid() const noexcept;

    struct shared;

private:
    std::shared_ptr<shared> m_shared;
    std::thread m_renewer;
    std::thread m_watcher;
};

} // namespace dlock::internal
