// dlock/listener.hpp -- what happens to a client's leases, told to the
// application (for its metrics, traces or logs) without the library depending
// on any of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "dlock/options.hpp"

namespace dlock {

/// The lease an event is about. The texts are valid only during the call.
struct lease_info {
    std::string_view lock_name;
    std::string_view owner_token;
    std::int64_t fencing_token = 0;
};

/// A lease was granted.
struct grant_event {
    lease_info lease;
    /// From the start of the acquire call to the arrival of the grant: the
    /// wait for a busy lock (in the server or polling), retries of unknown
    /// outcomes and the round trips.
    steady_clock::duration waited{};
    /// Granted inside the caller's transaction (client::try_acquire(txn, ...)):
    /// it exists only if that transaction commits. client::adopt() of it later
    /// reports no second grant.
    bool in_transaction = false;
};

/// A renewal of a lease was confirmed (by the keep-alive, or lease::renew()).
struct renew_event {
    lease_info lease;
    /// How long after its planned time (the last grant or renewal plus
    /// renew_every) the renewal was confirmed; zero when it came earlier (as an
    /// explicit lease::renew() usually does). Grows with a slow server or
    /// network, and with renewals retried after unknown outcomes.
    steady_clock::duration lateness{};
    /// How much of the lease was left when the renewal was confirmed: the
    /// local deadline before it minus the time of confirmation. The closer to
    /// zero, the closer the lease came to being lost.
    steady_clock::duration margin{};
};

/// A lease was marked lost: a renewal was refused (the lease had expired, was
/// forced away or taken over), its deadline passed without a confirmed
/// renewal, or it reached max_hold. Reported once per lease, by the
/// keep-alive's watcher thread just before it runs lease_options::on_lost; not
/// for a lease released before the watcher got to it (its release event then
/// says refused).
struct loss_event {
    lease_info lease;
    loss_reason reason = loss_reason::expired;
    /// From the arrival of the grant to the loss.
    steady_clock::duration held{};
};

/// A lease object was released (lease::release(), its destructor, a move
/// assignment over it, election::resign()). Once per lease; not for
/// lease::detach(), which leaves the lease running.
struct release_event {
    lease_info lease;
    /// From the arrival of the grant to the release (for an adopted grant, from
    /// its deadline minus its ttl).
    steady_clock::duration held{};
    /// done; refused when it was no longer held (lost, whether reported or
    /// not); unknown when not confirmed (the lease then ends at its ttl).
    outcome result = outcome::unknown;
};

/// Receives the events of every lease of a client (client_options::listener).
///
/// The library calls it on the thread where the event happens: the caller's
/// thread for grants, explicit renewals and releases, the keep-alive's threads
/// for its renewals and for losses, so several calls may run at once: an
/// implementation must be thread safe. Keep the calls short (a counter, a
/// histogram, a queue): a slow one delays the keep-alive's renewals of the
/// client's other leases. An exception thrown by a call is caught and dropped,
/// so it cannot break the lease logic (the lease is granted, renewed, lost or
/// released all the same). The calls are made with no lock of the library
/// held, so a listener may use the client. Without a listener nothing of this
/// costs more than a null-pointer test.
class lease_listener {
public:
    lease_listener() = default;
    lease_listener(const lease_listener&) = default;
    lease_listener& operator=(const lease_listener&) = default;
    lease_listener(lease_listener&&) = default;
    lease_listener& operator=(lease_listener&&) = default;
    virtual ~lease_listener() = default;

    virtual void on_grant(const grant_event& event);
    virtual void on_renew(const renew_event& event);
    virtual void on_loss(const loss_event& event);
    virtual void on_release(const release_event& event);
};

} // namespace dlock
