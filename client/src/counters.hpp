// counters.hpp -- the counters behind dlock::metrics.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "dlock/metrics.hpp"

namespace dlock::internal {

/// One client's counters, updated by any thread; client::metrics() reads a snapshot.
struct counters {
    std::atomic<std::uint64_t> acquisitions{0}, busy{0}, waits{0}, wait_timeouts{0}, renewals{0}, renewals_refused{0},
        releases{0}, lost{0}, unknown_outcomes{0}, retries{0};
    std::array<std::atomic<std::uint64_t>, metrics::wait_bucket_bounds.size() + 1> wait_histogram{};

    void record_wait(std::chrono::steady_clock::duration waited) noexcept;
    [[nodiscard]] metrics snapshot() const noexcept;
};

} // namespace dlock::internal
