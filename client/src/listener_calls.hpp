// listener_calls.hpp -- the one place the library calls the application's
// lease_listener (client_options::listener).
#pragma once

#include <chrono>
#include <memory>
#include <utility>

#include "dlock/listener.hpp"
#include "dlock/options.hpp"
#include "dlock/transaction.hpp"

namespace dlock::internal {

struct lease_state;

/// Calls the client's listener, if it has one: each call is a null test when
/// none is set, is made by the caller with no lock of the library held, and
/// drops any exception the listener throws (the lease logic goes on as if
/// there were no listener). Each kind of event is reported from one place:
/// grants from read_grant (every grant of every kind and call), renewals from
/// lease_state::renewed, losses from the keep-alive's watcher (where on_lost
/// runs), releases from lease::release.
class listener_calls {
public:
    explicit listener_calls(std::shared_ptr<lease_listener> listener) noexcept : m_listener{std::move(listener)} {}

    void granted(const grant& lease, steady_clock::duration waited, bool in_transaction) const noexcept;
    void renewed(const lease_state& lease, steady_clock::duration lateness,
                 steady_clock::duration margin) const noexcept;
    void lost(const lease_state& lease, loss_reason reason) const noexcept;
    void released(const lease_state& lease, outcome result) const noexcept;

private:
    std::shared_ptr<lease_listener> m_listener;
};

} // namespace dlock::internal
