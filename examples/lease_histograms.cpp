// lease_histograms.cpp -- wait and hold times of a lock from a lease listener.
//
// Several workers, each with its own client sharing one listener, take turns
// on one lock: each waits for it, holds it a little while, and lets it go. The
// listener (dlock::lease_listener, set in client_options::listener) counts
// every grant by its wait and every release by its hold time, in the buckets a
// Prometheus histogram would have; at the end the program prints both. A
// service would feed its metrics library (or traces, or logs) from the same
// four calls; the library itself depends on none of them.
//
// Usage: lease_histograms [NAME [WORKERS [ROUNDS]]]   (connection from PG*)
// Exit status: 0 every lease granted and released, 1 otherwise, 2 error.
#include <dlock/dlock.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

// Upper bounds (inclusive) of the buckets; the last bucket has no bound.
constexpr std::array<std::chrono::milliseconds, 6> bucket_bounds{1ms, 10ms, 50ms, 100ms, 500ms, 1000ms};

/// Counts of durations by bucket, updated from any thread.
class histogram {
public:
    void add(std::chrono::steady_clock::duration value) noexcept {
        std::size_t bucket = 0;
        while (bucket < bucket_bounds.size() && value > bucket_bounds[bucket])
            ++bucket;
        ++m_counts[bucket];
        ++m_total;
    }
    [[nodiscard]] std::uint64_t total() const noexcept { return m_total; }

    void print(const std::string& title) const {
        std::cout << title << " (" << m_total << ")\n";
        for (std::size_t i = 0; i < m_counts.size(); ++i) {
            const std::string label = i < bucket_bounds.size()
                                          ? "<= " + std::to_string(bucket_bounds[i].count()) + " ms"
                                          : " > " + std::to_string(bucket_bounds.back().count()) + " ms";
            const auto n = m_counts[i].load();
            std::cout << "  " << label << std::string(12 - label.size(), ' ') << std::to_string(n) << "\t"
                      << std::string(static_cast<std::size_t>(std::min<std::uint64_t>(n, 60)), '#') << "\n";
        }
    }

private:
    std::array<std::atomic<std::uint64_t>, bucket_bounds.size() + 1> m_counts{};
    std::atomic<std::uint64_t> m_total{0};
};

/// The listener: waits and holds into histograms, renewals and losses counted.
/// Short and thread safe, as the library asks (it is called from the workers'
/// threads and from the keep-alives').
class histogram_listener : public dlock::lease_listener {
public:
    histogram waits;
    histogram holds;
    std::atomic<std::uint64_t> renewals{0};
    std::atomic<std::uint64_t> losses{0};

    void on_grant(const dlock::grant_event& event) override { waits.add(event.waited); }
    void on_renew(const dlock::renew_event&) override { ++renewals; }
    void on_loss(const dlock::loss_event&) override { ++losses; }
    void on_release(const dlock::release_event& event) override {
        if (event.result == dlock::outcome::done) holds.add(event.held);
    }
};

} // namespace

int main(int argc, char** argv) {
    const std::string name = argc > 1 ? argv[1] : "example:histograms:" + std::to_string(getpid());
    const int workers = argc > 2 ? std::atoi(argv[2]) : 4;
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
    if (workers < 1 || rounds < 1) {
        std::cerr << "usage: lease_histograms [NAME [WORKERS [ROUNDS]]]\n";
        return 2;
    }
    const auto listener = std::make_shared<histogram_listener>();
    std::atomic<int> errors{0};
    std::atomic<int> unconfirmed{0}; // releases not done
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
        threads.emplace_back([&, w] {
            try {
                dlock::client_options options;
                options.listener = listener; // one listener may serve many clients
                dlock::client locks{options};
                for (int r = 0; r < rounds; ++r) {
                    dlock::lease_options lease_options;
                    lease_options.ttl = 10s;
                    dlock::lease lease = locks.acquire(name, 30s, lease_options);
                    std::this_thread::sleep_for(std::chrono::milliseconds{20 + 15 * ((w + r) % 4)}); // the work
                    if (lease.release() != dlock::outcome::done) ++unconfirmed;
                }
            } catch (const std::exception& e) {
                std::cerr << "worker " << w << ": " << e.what() << "\n";
                ++errors;
            }
        });
    }
    for (auto& t : threads)
        t.join();

    listener->waits.print("wait for " + name);
    listener->holds.print("hold of " + name);
    std::cout << "grants " << listener->waits.total() << ", releases " << listener->holds.total() << ", renewals "
              << listener->renewals.load() << ", losses " << listener->losses.load() << "\n";
    const auto expected = static_cast<std::uint64_t>(workers) * static_cast<std::uint64_t>(rounds);
    if (errors > 0) return 2;
    const bool all_counted = listener->waits.total() == expected && listener->holds.total() == expected;
    return all_counted && unconfirmed == 0 && listener->losses == 0 ? 0 : 1;
}
