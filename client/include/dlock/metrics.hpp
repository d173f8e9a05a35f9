// dlock/metrics.hpp -- client-side counters, read with client::metrics().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace dlock {

/// A snapshot of one client's counters since it was created.
struct metrics {
    /// Upper bounds (inclusive) of the wait-time histogram buckets; the last bucket
    /// counts everything above the last bound.
    static constexpr std::array<std::chrono::milliseconds, 6> wait_bucket_bounds{
        std::chrono::milliseconds{1},    std::chrono::milliseconds{10},    std::chrono::milliseconds{100},
        std::chrono::milliseconds{1000}, std::chrono::milliseconds{10000}, std::chrono::milliseconds{60000}};

    std::uint64_t acquisitions = 0;     ///< leases granted (try_acquire, acquire, in a transaction)
    std::uint64_t busy = 0;             ///< acquires refused because another owner held the lock
    std::uint64_t waits = 0;            ///< acquire calls with a wait limit (server-side wait)
    std::uint64_t wait_timeouts = 0;    ///< of those, how many ran out of time
    std::uint64_t renewals = 0;         ///< confirmed renewals (keep-alive and explicit)
    std::uint64_t renewals_refused = 0; ///< renewals the server refused
    std::uint64_t releases = 0;         ///< releases the server confirmed
    std::uint64_t lost = 0;             ///< leases marked lost
    std::uint64_t unknown_outcomes = 0; ///< calls whose outcome was unknown
    std::uint64_t retries = 0;          ///< retries of acquires with an unknown outcome
    /// Time spent in acquire calls with a wait limit, by wait_bucket_bounds.
    std::array<std::uint64_t, wait_bucket_bounds.size() + 1> wait_histogram{};
};

} // namespace dlock
