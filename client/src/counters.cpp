// counters.cpp -- the counters behind dlock::metrics.
#include "counters.hpp"

namespace dlock::internal {

void counters::record_wait(std::chrono::steady_clock::duration waited) noexcept {
    std::size_t bucket = 0;
    while (bucket < metrics::wait_bucket_bounds.size() && waited > metrics::wait_bucket_bounds[bucket])
        ++bucket;
    ++wait_histogram[bucket];
}

metrics counters::snapshot() const noexcept {
    metrics m;
    m.acquisitions = acquisitions;
    m.busy = busy;
    m.waits = waits;
    m.wait_timeouts = wait_timeouts;
    m.renewals = renewals;
    m.renewals_refused = renewals_refused;
    m.releases = releases;
    m.lost = lost;
    m.unknown_outcomes = unknown_outcomes;
    m.retries = retries;
    for (std::size_t i = 0; i < m.wait_histogram.size(); ++i)
        m.wait_histogram[i] = wait_histogram[i];
    return m;
}

} // namespace dlock::internal
