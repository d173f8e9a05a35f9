// tests/faults/worker/keep_alive.cpp -- fault_worker --mode keep-alive: one
// worker of the Patroni failover scenario (tests/ha).
//
// Holds leases through the C++ client library (dlock::client, keep-alive on)
// on a multi-host connection string (target_session_attrs=read-write), and
// makes fenced writes while it holds them, until its duration runs out. Every
// call goes to the history file in the fault harness's format
// (tests/faults/worker/history.hpp), whose writer, outcome classification and
// fenced writes this worker shares; the checker is tests/faults/checker.py
// plus tests/ha/ha_checker.py.
//
// What this worker adds to the fault worker's history: each grant and each
// write records the lease's two deadlines, so the checker can prove that the
// client never believed a lease held past the server's deadline:
//   deadline_ns  the client's local deadline (CLOCK_MONOTONIC, like "t")
//   until_ns     the server's lease_until (CLOCK_REALTIME of the same machine)
// and the "start" line records both clocks read together, to map one onto the
// other.
//
// Usage: fault_worker --mode keep-alive --id w1 --conninfo "..." --history FILE
//          [--locks L1,L2,L3] [--duration-ms N] [--ttl-ms N] [--hold-ms N] [--seed N]
//          [--stop-file PATH]   ends early (between iterations) once PATH exists
// (the options and defaults of the workload mode, faults::worker_options; the
// others are not used here).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <iostream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dlock/dlock.hpp>

#include "history.hpp"
#include "modes.hpp"
#include "resource.hpp"
#include "session.hpp"

namespace {

using faults::op_result;
using faults::record;
using faults::result_kind;
using std::chrono::milliseconds;

using options = faults::worker_options;

std::int64_t realtime_ns() noexcept {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

template <class TimePoint> std::int64_t to_ns(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// The lease's local deadline and server lease_until, read so that both come
/// from the same grant or renewal (the keep-alive may renew in between).
struct deadlines {
    std::int64_t local_ns;
    std::int64_t server_ns;
};

deadlines read_deadlines(const dlock::lease& lease) {
    for (;;) {
        const auto until = lease.lease_until();
        const auto local = lease.deadline();
        if (lease.lease_until() == until) return {to_ns(local), to_ns(until)};
    }
}

/// Chance, per write, that the holder stalls past its lease first.
constexpr double slow_holder_chance = 0.05;

class worker {
public:
    explicit worker(const options& o)
        : m_opt(o), m_history(o.history), m_client(client_settings(o)), m_data(o.conninfo, "ha-" + o.id + "-data"),
          m_rng(o.seed ? o.seed : std::random_device{}()) {}

    void run() {
        // Both clocks, read back to back: the checker maps until_ns onto "t" with them.
        const std::int64_t mono = faults::history_clock_ns();
        const std::int64_t real = realtime_ns();
        m_history.append(record(m_opt.id, 0, "start")
                             .num("pid", getpid())
                             .str("impl", "client")
                             .num("mono_ns", mono)
                             .num("real_ns", real));
        const auto end = faults::history_clock_ns() + m_opt.duration_ms * 1000000L;
        while (faults::history_clock_ns() < end && !stop_requested()) {
            iteration(end);
            pause(milliseconds{std::uniform_int_distribution<long>(5, 30)(m_rng)});
        }
        m_history.append(record(m_opt.id, 0, "stop"));
    }

private:
    static dlock::client_options client_settings(const options& o) {
        dlock::client_options c;
        c.connection_string = o.conninfo + " application_name=ha-" + o.id + "-lock";
        c.holder = o.id;
        // The worker retries uncertain acquires itself, so that each attempt is recorded.
        c.retry.max_attempts = 1;
        return c;
    }

    [[nodiscard]] bool stop_requested() const {
        return !m_opt.stop_file.empty() && access(m_opt.stop_file.c_str(), F_OK) == 0;
    }

    static void pause(milliseconds d) {
        if (d.count() > 0) std::this_thread::sleep_for(d);
    }

    /// One try_acquire; on ok the lease is in m_lease.
    op_result try_acquire(const std::string& lock, const std::string& owner) {
        dlock::lease_options lo;
        lo.ttl = milliseconds{m_opt.ttl_ms};
        lo.keep_alive = true;
        lo.owner_token = owner;
        op_result r;
        r.owner = owner;
        try {
            auto got = m_client.try_acquire(lock, lo);
            if (!got) {
                r.kind = result_kind::refused;
                r.why = "busy";
                return r;
            }
            m_lease.emplace(std::move(*got));
            r.kind = result_kind::ok;
            r.token = m_lease->fencing_token();
            r.owner = m_lease->owner_token();
        } catch (...) {
            r = faults::classify(std::current_exception(), true, m_data);
            if (r.owner.empty()) r.owner = owner;
        }
        return r;
    }

    void iteration(std::int64_t end) {
        const std::string lock =
            m_opt.locks[std::uniform_int_distribution<std::size_t>(0, m_opt.locks.size() - 1)(m_rng)];
        // The first attempt lets the client choose the owner token; an uncertain
        // outcome reports it, and the retries reuse it.
        std::string owner;
        op_result got;
        bool uncertain = false;
        // An uncertain acquire is retried with the same owner token until it
        // resolves (the server's acquire is idempotent per owner) or the run ends.
        for (int failures = 0; faults::history_clock_ns() < end;) {
            const std::int64_t id = ++m_next_id;
            m_history.append(record(m_opt.id, id, "invoke")
                                 .str("op", "acquire")
                                 .str("lock", lock)
                                 .str("owner", owner)
                                 .str("mode", "try"));
            got = try_acquire(lock, owner);
            if (owner.empty()) owner = got.owner;
            record done(m_opt.id, id, faults::to_string(got.kind));
            if (!got.why.empty()) done.str("why", got.why);
            if (!got.owner.empty()) done.str("owner", got.owner);
            if (got.kind == result_kind::ok) {
                const deadlines d = read_deadlines(*m_lease);
                done.num("token", got.token).num("deadline_ns", d.local_ns).num("until_ns", d.server_ns);
            }
            m_history.append(done);
            if (got.kind == result_kind::unknown) {
                uncertain = true;
                pause(milliseconds{100});
                continue;
            }
            if (got.kind == result_kind::fail || got.why == "25006") {
                // No primary reachable (failover in progress), or a standby answered.
                pause(milliseconds{100});
                if (uncertain && !owner.empty() && ++failures < 300) continue;
            }
            break;
        }
        if (got.kind != result_kind::ok) return;

        // Hold the lease (the keep-alive renews it) and write now and then. Writes
        // go ahead even when the lease is locally lost, so that the fencing is put
        // to work; the history says which writes the client believed covered.
        const int writes = std::uniform_int_distribution<int>(1, 3)(m_rng);
        for (int i = 0; i < writes && faults::history_clock_ns() < end; ++i) {
            pause(milliseconds{std::uniform_int_distribution<long>(0, m_opt.hold_ms / writes)(m_rng)});
            if (std::uniform_real_distribution<double>(0, 1)(m_rng) < slow_holder_chance) {
                // A slow holder: its lease runs out and is taken over before its
                // next write, which the fencing must refuse (also across failover).
                m_lease->stop_keep_alive();
                pause(milliseconds{m_opt.ttl_ms * 3 / 2});
            }
            faults::write_request req;
            const int pick = std::uniform_int_distribution<int>(0, 3)(m_rng);
            req.kind = pick < 2 ? 'g' : pick == 2 ? 't' : 'f';
            req.lock_name = lock;
            req.token = got.token;
            req.worker_id = m_opt.id;
            write(req, owner);
        }

        const std::int64_t id = ++m_next_id;
        m_history.append(record(m_opt.id, id, "invoke")
                             .str("op", "release")
                             .str("lock", lock)
                             .str("owner", owner)
                             .num("token", got.token));
        const dlock::outcome released = m_lease->release();
        record done(m_opt.id, id,
                    released == dlock::outcome::done      ? "ok"
                    : released == dlock::outcome::refused ? "refused"
                                                          : "unknown");
        if (released == dlock::outcome::refused) done.str("why", "not_held");
        m_history.append(done);
        m_lease.reset();
    }

    void write(faults::write_request& req, const std::string& owner) {
        req.op_id = ++m_next_id;
        const bool believed = m_lease->valid();
        const deadlines d = read_deadlines(*m_lease);
        m_history.append(
            faults::write_invoked(req, owner, believed).num("deadline_ns", d.local_ns).num("until_ns", d.server_ns));
        const auto r = faults::fenced_write(m_data, req);
        m_history.append(faults::write_completed(req, r));
        if (!m_data.connected()) pause(milliseconds{50});
    }

    options m_opt;
    faults::history_file m_history;
    dlock::client m_client;
    faults::db_session m_data;
    std::optional<dlock::lease> m_lease;
    std::mt19937_64 m_rng;
    std::int64_t m_next_id = 0;
};

} // namespace

int faults::run_keep_alive(int argc, char** argv) {
    const options o = parse_worker_options(argc, argv);
    if (o.conninfo.empty()) throw std::invalid_argument("--conninfo is required");
    worker w(o);
    w.run();
    return 0;
}
