// listener.cpp -- lease_listener's defaults (nothing), and the calls of it.
#include "dlock/listener.hpp"

#include "lease_state.hpp"
#include "listener_calls.hpp"

namespace dlock {

void lease_listener::on_grant(const grant_event& /*event*/) {}
void lease_listener::on_renew(const renew_event& /*event*/) {}
void lease_listener::on_loss(const loss_event& /*event*/) {}
void lease_listener::on_release(const release_event& /*event*/) {}

namespace internal {

namespace {

lease_info info_of(const lease_state& lease) noexcept {
    return {lease.name, lease.owner_token, lease.fencing_token};
}

// Runs one call of the listener; what it throws ends here, so that no listener
// can break the lease logic that called it.
template <typename Call> void deliver(const Call& call) noexcept {
    try {
        call();
    } catch (...) { // NOLINT(bugprone-empty-catch): documented in listener.hpp
    }
}

} // namespace

void listener_calls::granted(const grant& lease, steady_clock::duration waited, bool in_transaction) const noexcept {
    if (!m_listener) return;
    deliver([&] {
        m_listener->on_grant({{lease.lock_name, lease.owner_token, lease.fencing_token}, waited, in_transaction});
    });
}

void listener_calls::renewed(const lease_state& lease, steady_clock::duration lateness,
                             steady_clock::duration margin) const noexcept {
    if (!m_listener) return;
    deliver([&] { m_listener->on_renew({info_of(lease), lateness, margin}); });
}

void listener_calls::lost(const lease_state& lease, loss_reason reason) const noexcept {
    if (!m_listener) return;
    deliver([&] { m_listener->on_loss({info_of(lease), reason, steady_clock::now() - lease.granted}); });
}

void listener_calls::released(const lease_state& lease, outcome result) const noexcept {
    if (!m_listener) return;
    deliver([&] { m_listener->on_release({info_of(lease), steady_clock::now() - lease.granted, result}); });
}

} // namespace internal
} // namespace dlock
