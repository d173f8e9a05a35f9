// Runs one workload on N client threads; see runner.hpp.
#include "runner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

namespace bench {

namespace {
const auto process_start = std::chrono::steady_clock::now();
}

std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - process_start)
        .count();
}

double percentile_us(std::vector<std::int64_t>& samples, double q) {
    if (samples.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::sort(samples.begin(), samples.end());
    auto idx = static_cast<std::size_t>(std::floor(q * static_cast<double>(samples.size() - 1)));
    return static_cast<double>(samples[idx]) / 1000.0;
}

run_result run_workers(std::vector<worker>& workers, double warmup_s, double duration_s, const body_fn& body,
                       const std::function<void(bool)>& window) {
    std::atomic<int> phase{0}; // 0 warm-up, 1 measured, 2 stop
    std::vector<std::thread> threads;
    threads.reserve(workers.size());
    for (auto& w : workers) {
        threads.emplace_back([&phase, &body, &w] {
            for (;;) {
                int p = phase.load(std::memory_order_acquire);
                if (p == 2) break;
                try {
                    body(w, p == 1);
                } catch (const std::exception& e) {
                    w.error = e.what();
                    break;
                }
                if (p == 1) ++w.ops;
            }
        });
    }
    auto seconds = [](double s) { return std::chrono::duration<double>(s); };
    std::this_thread::sleep_for(seconds(warmup_s));
    if (window) window(true);
    std::int64_t t0 = now_ns();
    phase.store(1, std::memory_order_release);
    std::this_thread::sleep_for(seconds(duration_s));
    phase.store(2, std::memory_order_release);
    std::int64_t t1 = now_ns();
    if (window) window(false);
    for (auto& t : threads)
        t.join();

    run_result r;
    r.seconds = static_cast<double>(t1 - t0) / 1e9;
    for (auto& w : workers) {
        r.ops += w.ops;
        if (!w.error.empty()) {
            if (r.errors == 0) r.first_error = w.error;
            ++r.errors;
        }
    }
    return r;
}

cpu_meter::cpu_meter(std::vector<worker>& workers) {
    for (auto& w : workers) {
        int pid = w.session ? w.session->server_pid() : 0;
        if (pid > 0 && std::find(m_pids.begin(), m_pids.end(), pid) == m_pids.end()) m_pids.push_back(pid);
    }
}

double cpu_meter::server_now() const {
    double sum = 0;
    for (int pid : m_pids)
        sum += process_cpu_seconds(pid);
    return m_pids.empty() ? NAN : sum;
}

void cpu_meter::operator()(bool opening) {
    if (opening) {
        m_server_at = server_now();
        m_driver_at = own_cpu_seconds();
    } else {
        m_server += server_now() - m_server_at;
        m_driver += own_cpu_seconds() - m_driver_at;
    }
}

std::vector<worker> open_workers(const std::string& system, int clients, const system_options& base) {
    std::vector<worker> workers(static_cast<std::size_t>(clients));
    std::vector<std::string> errors(workers.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        threads.emplace_back([&, i] {
            system_options opts = base;
            opts.slot = static_cast<int>(i);
            opts.seed = base.seed * 7919 + i + 1;
            workers[i].id = static_cast<int>(i);
            workers[i].rng.seed(opts.seed);
            try {
                workers[i].session = make_session(system, opts);
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        });
    }
    for (auto& t : threads)
        t.join();
    for (const auto& e : errors)
        if (!e.empty()) throw std::runtime_error(std::string(system).append(": ").append(e));
    return workers;
}

sink::sink(const std::string& path) {
    if (!path.empty()) {
        m_file = std::fopen(path.c_str(), "a");
        if (m_file == nullptr) throw std::runtime_error("could not open " + path);
    }
}

sink::~sink() noexcept {
    if (m_file != nullptr) std::fclose(m_file);
}

void sink::put(const std::string& case_id, const std::string& system, long clients, const std::string& metric,
               double value) {
    if (m_file != nullptr) {
        std::fprintf(m_file, "%s\t%s\t%ld\t%s\t%.6g\n", case_id.c_str(), system.c_str(), clients, metric.c_str(),
                     value);
        std::fflush(m_file);
    }
    std::printf("  case %-3s %-22s %8ld  %-22s %.6g\n", case_id.c_str(), system.c_str(), clients, metric.c_str(),
                value);
    std::fflush(stdout);
}

void sink::note(const std::string& case_id, const std::string& system, const std::string& text) {
    std::string clean = text;
    std::replace(clean.begin(), clean.end(), '\t', ' ');
    std::replace(clean.begin(), clean.end(), '\n', ' ');
    if (m_file != nullptr) {
        std::fprintf(m_file, "%s\t%s\t0\tnote\t%s\n", case_id.c_str(), system.c_str(), clean.c_str());
        std::fflush(m_file);
    }
    std::printf("  case %-3s %-22s note: %s\n", case_id.c_str(), system.c_str(), clean.c_str());
    std::fflush(stdout);
}

} // namespace bench
