// tests/faults/worker/workload.cpp -- fault_worker's default mode: one worker
// process of the fault harness.
//
// Loops until its duration runs out: acquire one of a few shared lock names,
// do fenced writes while holding it, release. Every call goes to the history
// file with its outcome (see history.hpp). The orchestrator (harness.py) starts
// several of these, injects faults, and hands all histories to checker.py.
//
// Usage: fault_worker [--mode workload] --id w1 --conninfo "..." --history FILE [options]
//   --locks L1,L2,L3       lock names shared by all workers
//   --duration-ms N        how long to run
//   --ttl-ms N             lease ttl
//   --fencing 0|1          0 = negative control: no holds()/fence(), tables without trigger
//   --p-token P            chance of a second write on a token-only resource (t or f)
//   --p-wait P             chance an acquire waits in the server (dlock.acquire)
//   --p-txn P              chance an acquire runs in an explicit transaction ...
//   --txn-pause-ms N       ... with this pause before COMMIT
//   --p-renew P            chance of an explicit renew before the writes
//   --slow-prob P --slow-ms N --slow-where before|inside
//                          a slow holder: pause before the write transaction or
//                          between the read and the write of the read-modify-write
//   --use-lease 0|1        hold the lease until its local deadline is near, then
//                          write only if the lease is still locally valid
//   --drift X              drift allowance of the local lease deadline
//   --think-ms N           pause between iterations
//   --hold-ms N            hold the lease a random 0..N ms before writing
//   --session-bound 0|1    session-bound leases: they also end when the lock
//                          connection's session ends (a killed worker's at once)
//   --store DIR            also write to the file store in DIR (kind x, see resource.hpp),
//                          first thing after each grant, before any database write
//   --pqxx                 use libpqxx directly even when the client library is built
//   --seed N
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "history.hpp"
#include "lock_api.hpp"
#include "modes.hpp"
#include "resource.hpp"
#include "session.hpp"

namespace {

using faults::acquire_mode;
using faults::op_result;
using faults::record;
using faults::result_kind;
using std::chrono::milliseconds;

using options = faults::worker_options;

class worker {
public:
    explicit worker(const options& o)
        : m_opt(o), m_history(o.history),
          m_locks(faults::make_lock_api({o.conninfo, o.id, o.drift, milliseconds{50}, o.session_bound}, o.force_pqxx)),
          m_data(o.conninfo, "faults-" + o.id + "-data"), m_rng(o.seed ? o.seed : std::random_device{}()) {}

    void run() {
        m_history.append(record(m_opt.id, 0, "start")
                             .num("pid", getpid())
                             .str("impl", m_locks->implementation())
                             .flag("fencing", m_opt.fencing));
        const auto end = faults::history_clock_ns() + m_opt.duration_ms * 1000000L;
        while (faults::history_clock_ns() < end) {
            iteration(end);
            pause(milliseconds{m_opt.think_ms});
        }
        m_history.append(record(m_opt.id, 0, "stop"));
    }

private:
    /// A random (version 4) UUID.
    std::string new_owner_token() {
        std::uniform_int_distribution<unsigned> nibble(0, 15);
        static const char* const hex = "0123456789abcdef";
        std::string text;
        for (int i = 0; i < 32; ++i) {
            if (i == 8 || i == 12 || i == 16 || i == 20) text += '-';
            unsigned v = nibble(m_rng);
            if (i == 12) v = 4;
            if (i == 16) v = 8 | (v & 3);
            text += hex[v];
        }
        return text;
    }

    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(m_rng) < p; }

    static void pause(milliseconds d) {
        if (d.count() > 0) std::this_thread::sleep_for(d);
    }

    void complete(std::int64_t id, const op_result& r) {
        record done(m_opt.id, id, faults::to_string(r.kind));
        if (!r.why.empty()) done.str("why", r.why);
        if (r.token != 0) done.num("token", r.token);
        if (!r.owner.empty()) done.str("owner", r.owner);
        m_history.append(done);
    }

    void iteration(std::int64_t end) {
        const std::string lock =
            m_opt.locks[std::uniform_int_distribution<std::size_t>(0, m_opt.locks.size() - 1)(m_rng)];
        const milliseconds ttl{m_opt.ttl_ms};

        acquire_mode mode = acquire_mode::try_once;
        milliseconds extra{0};
        if (chance(m_opt.p_txn)) {
            mode = acquire_mode::transaction;
            extra = milliseconds{m_opt.txn_pause_ms};
        } else if (chance(m_opt.p_wait)) {
            mode = acquire_mode::wait;
            extra = milliseconds{m_opt.ttl_ms / 2};
        }

        // Acquire with an owner token of our own, so that an uncertain outcome can
        // be retried with the same owner until it resolves (or the run ends).
        const std::string owner = new_owner_token();
        bool uncertain = false;
        op_result got;
        for (int failures = 0; faults::history_clock_ns() < end;) {
            const std::int64_t id = ++m_next_id;
            m_history.append(record(m_opt.id, id, "invoke")
                                 .str("op", "acquire")
                                 .str("lock", lock)
                                 .str("owner", owner)
                                 .str("mode", mode == acquire_mode::try_once ? "try"
                                              : mode == acquire_mode::wait   ? "wait"
                                                                             : "txn"));
            got = m_locks->acquire(lock, ttl, owner, mode, extra);
            complete(id, got);
            if (got.kind == result_kind::unknown) {
                uncertain = true;
                pause(milliseconds{50});
                continue;
            }
            if ((got.kind == result_kind::fail || got.why == "25006") && uncertain && ++failures < 200) {
                // No connection, or a read-only server: nothing happened this time,
                // but an earlier attempt is still uncertain; keep trying to resolve it.
                pause(milliseconds{100});
                continue;
            }
            break;
        }
        if (got.kind != result_kind::ok) return;

        const std::int64_t token = got.token;
        if (m_opt.use_lease) {
            // Use the lease almost to its local end, the way a careful client does.
            const auto margin = milliseconds{m_opt.ttl_ms / 10};
            const auto left = m_locks->time_left();
            if (left > margin) pause(left - margin);
        }
        if (m_opt.hold_ms > 0) pause(milliseconds{std::uniform_int_distribution<long>(0, m_opt.hold_ms)(m_rng)});
        if (chance(m_opt.slow_prob) && m_opt.slow_where == "before") {
            m_history.append(
                record(m_opt.id, ++m_next_id, "note").str("what", "slow").str("lock", lock).num("ms", m_opt.slow_ms));
            pause(milliseconds{m_opt.slow_ms});
        }
        if (chance(m_opt.p_renew)) {
            const std::int64_t id = ++m_next_id;
            m_history.append(record(m_opt.id, id, "invoke")
                                 .str("op", "renew")
                                 .str("lock", lock)
                                 .str("owner", got.owner)
                                 .num("token", token));
            complete(id, m_locks->renew());
        }

        bool locally_valid = m_locks->lease_valid();
        if (!(m_opt.use_lease && !locally_valid)) {
            faults::write_request req;
            req.lock_name = lock;
            req.token = token;
            req.worker_id = m_opt.id;
            req.fencing = m_opt.fencing;
            if (!m_opt.store.empty()) {
                // Nothing written to the database since the grant: a grant that
                // committed without its WAL flush may still be lost here.
                req.kind = 'x';
                write(req, got.owner, locally_valid);
                locally_valid = m_locks->lease_valid();
            }
            req.kind = 'g';
            if (m_opt.slow_where == "inside" && chance(m_opt.slow_prob)) req.inside_delay = milliseconds{m_opt.slow_ms};
            write(req, got.owner, locally_valid);
            if (chance(m_opt.p_token)) {
                req.kind = chance(0.5) ? 't' : 'f';
                req.inside_delay = milliseconds{0};
                locally_valid = m_locks->lease_valid();
                write(req, got.owner, locally_valid);
            }
        }

        const std::int64_t id = ++m_next_id;
        m_history.append(record(m_opt.id, id, "invoke")
                             .str("op", "release")
                             .str("lock", lock)
                             .str("owner", got.owner)
                             .num("token", token));
        complete(id, m_locks->release());
    }

    void write(faults::write_request& req, const std::string& owner, bool locally_valid) {
        req.op_id = ++m_next_id;
        m_history.append(faults::write_invoked(req, owner, locally_valid).num("delay_ms", req.inside_delay.count()));
        const auto r = req.kind == 'x' ? faults::store_write(m_opt.store, req) : faults::fenced_write(m_data, req);
        m_history.append(faults::write_completed(req, r));
        if (!m_data.connected()) pause(milliseconds{20});
    }

    options m_opt;
    faults::history_file m_history;
    std::unique_ptr<faults::lock_api> m_locks;
    faults::db_session m_data;
    std::mt19937_64 m_rng;
    std::int64_t m_next_id = 0;
};

} // namespace

faults::worker_options faults::parse_worker_options(int argc, char** argv) {
    worker_options o;
    for (const auto& [k, v] : faults::key_values(argc, argv, {"pqxx"})) {
        if (k == "pqxx")
            o.force_pqxx = true;
        else if (k == "id")
            o.id = v;
        else if (k == "conninfo")
            o.conninfo = v;
        else if (k == "history")
            o.history = v;
        else if (k == "locks")
            o.locks = faults::split(v, ',');
        else if (k == "duration-ms")
            o.duration_ms = std::stol(v);
        else if (k == "ttl-ms")
            o.ttl_ms = std::stol(v);
        else if (k == "fencing")
            o.fencing = v != "0";
        else if (k == "p-token")
            o.p_token = std::stod(v);
        else if (k == "p-wait")
            o.p_wait = std::stod(v);
        else if (k == "p-txn")
            o.p_txn = std::stod(v);
        else if (k == "txn-pause-ms")
            o.txn_pause_ms = std::stol(v);
        else if (k == "p-renew")
            o.p_renew = std::stod(v);
        else if (k == "slow-prob")
            o.slow_prob = std::stod(v);
        else if (k == "slow-ms")
            o.slow_ms = std::stol(v);
        else if (k == "slow-where")
            o.slow_where = v;
        else if (k == "use-lease")
            o.use_lease = v != "0";
        else if (k == "drift")
            o.drift = std::stod(v);
        else if (k == "think-ms")
            o.think_ms = std::stol(v);
        else if (k == "hold-ms")
            o.hold_ms = std::stol(v);
        else if (k == "session-bound")
            o.session_bound = v != "0";
        else if (k == "seed")
            o.seed = std::stoul(v);
        else if (k == "store")
            o.store = v;
        else if (k == "stop-file")
            o.stop_file = v;
        else
            throw std::invalid_argument("unknown option --" + k);
    }
    if (o.history.empty() || o.locks.empty()) throw std::invalid_argument("--history and --locks are required");
    return o;
}

int faults::run_workload(int argc, char** argv) {
    const options o = parse_worker_options(argc, argv);
    worker w(o);
    w.run();
    return 0;
}
