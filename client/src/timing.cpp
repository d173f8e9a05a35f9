// timing.cpp -- durations as sent, server epochs as read, lease deadlines.
#include "timing.hpp"

#include <algorithm>

namespace dlock::internal {

std::string milliseconds_text(std::chrono::milliseconds value) {
    return std::to_string(static_cast<long long>(value.count()));
}

std::chrono::system_clock::time_point from_epoch(double seconds) noexcept {
    return std::chrono::system_clock::time_point{
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>{seconds})};
}

// The deadline counts from the grant, not from the send: a request that waited
// in the server (dlock.acquire, or a row lock) would otherwise come back with
// a lease that is already past its local deadline. The server tells how long
// it waited: its grant time (lease_until - ttl, both from clock_timestamp())
// minus statement_timestamp() (when the statement arrived). The statement
// arrived after `sent`, so sent + waited is not after the grant -- as long as
// the server's wall clock did not step forward during the wait. A forward
// step would inflate `waited`; capping it at the round trip this client
// measured on its monotonic clock bounds that error by the reply's travel
// time. A backward step only shrinks `waited` (never below zero), which makes
// the deadline earlier, never later. The drift allowance covers the whole
// stretch from the send, waited + ttl.
steady_clock::time_point deadline_for(const client_options& options, steady_clock::time_point sent,
                                      steady_clock::time_point received, double server_waited_ms,
                                      std::chrono::milliseconds ttl) noexcept {
    const auto round_trip = std::chrono::duration<double, std::milli>{received - sent}.count();
    const double waited = std::clamp(server_waited_ms, 0.0, std::max(0.0, round_trip));
    const double span = waited + static_cast<double>(ttl.count());
    const double local = span - span * options.drift_allowance - static_cast<double>(options.safety_margin.count());
    return sent + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double, std::milli>{local});
}

} // namespace dlock::internal
