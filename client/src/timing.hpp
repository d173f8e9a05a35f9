// timing.hpp -- time as the library sends and reads it: durations as text for
// SQL and statement_timeout, server epochs, and the local deadline of a lease.
#pragma once

#include <chrono>
#include <string>

#include "dlock/options.hpp"

namespace dlock::internal {

/// A duration as the library sends it: whole milliseconds as decimal text.
/// Its SQL reads it as $n::bigint * interval '1 millisecond', and it is
/// statement_timeout's unit. The one place a duration becomes text.
[[nodiscard]] std::string milliseconds_text(std::chrono::milliseconds value);

/// A call's bound as the statement_timeout that enforces it: at least 1 ms,
/// as 0 would turn the timeout off.
[[nodiscard]] inline std::chrono::milliseconds statement_timeout_of(std::chrono::milliseconds timeout) noexcept {
    return timeout.count() < 1 ? std::chrono::milliseconds{1} : timeout;
}

/// A server epoch (seconds, as date_part('epoch', ...) returns it) on the
/// system clock.
[[nodiscard]] std::chrono::system_clock::time_point from_epoch(double seconds) noexcept;

/// Local deadline of a lease of `ttl` the server granted `server_waited_ms`
/// after receiving the request that was sent at `sent` and answered at
/// `received`, with the client's drift allowance and safety margin taken off.
[[nodiscard]] steady_clock::time_point deadline_for(const client_options& options, steady_clock::time_point sent,
                                                    steady_clock::time_point received, double server_waited_ms,
                                                    std::chrono::milliseconds ttl) noexcept;

} // namespace dlock::internal
