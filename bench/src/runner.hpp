// Runs one workload on N client threads: warm-up, measured window, stop.
#pragma once

#include "systems.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace bench {

// Nanoseconds on the monotonic clock since the driver started.
[[nodiscard]] std::int64_t now_ns() noexcept;

// Percentile (0..1) of samples in nanoseconds, returned in microseconds; the
// vector is sorted in place. NaN when empty.
[[nodiscard]] double percentile_us(std::vector<std::int64_t>& samples, double q);

struct worker {
    int id = 0;
    std::unique_ptr<lock_session> session;
    std::mt19937_64 rng;
    std::vector<std::int64_t> lat_a;                             // acquire (or whole operation) latency, ns
    std::vector<std::int64_t> lat_b;                             // release latency, ns
    std::vector<std::pair<std::int64_t, std::int64_t>> sections; // contended: entered, left
    std::vector<lease> leases;                                   // keep-alive
    std::unique_ptr<pg_conn> extra;                              // business-write: PostgreSQL next to Redis
    std::size_t cursor = 0;
    std::uint64_t ops = 0;  // operations started in the measured window
    std::uint64_t busy = 0; // acquires that found the lock taken
    std::string error;
};

using body_fn = std::function<void(worker&, bool measuring)>;

struct run_result {
    double seconds = 0; // length of the measured window
    std::uint64_t ops = 0;
    int errors = 0; // threads that stopped on an exception
    std::string first_error;
};

// Runs body in a loop on every worker's thread. ops counts bodies started in
// the measured window; a thread that throws stops and counts as an error.
// window, when given, is called with true as the measured window opens and
// with false as it closes.
run_result run_workers(std::vector<worker>& workers, double warmup_s, double duration_s, const body_fn& body,
                       const std::function<void(bool)>& window = {});

// CPU time the server processes of a set of workers (their PostgreSQL
// backends, or redis-server) and this driver spend in measured windows.
class cpu_meter {
public:
    explicit cpu_meter(std::vector<worker>& workers);
    void operator()(bool opening);
    [[nodiscard]] double server_seconds() const noexcept { return m_server; }
    [[nodiscard]] double driver_seconds() const noexcept { return m_driver; }

private:
    [[nodiscard]] double server_now() const;
    std::vector<int> m_pids;
    double m_server = 0;
    double m_driver = 0;
    double m_server_at = 0;
    double m_driver_at = 0;
};

// Opens one session per client (in parallel); throws the first failure.
std::vector<worker> open_workers(const std::string& system, int clients, const system_options& base);

// Results go to a TSV file (case, system, clients, metric, value) and a
// readable line on stdout.
class sink {
public:
    explicit sink(const std::string& path);
    sink(const sink&) = delete;
    sink& operator=(const sink&) = delete;
    sink(sink&&) = delete;
    sink& operator=(sink&&) = delete;
    ~sink() noexcept;
    void put(const std::string& case_id, const std::string& system, long clients, const std::string& metric,
             double value);
    void note(const std::string& case_id, const std::string& system, const std::string& text);

private:
    std::FILE* m_file = nullptr;
};

} // namespace bench
