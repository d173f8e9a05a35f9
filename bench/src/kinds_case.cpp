// lock-kinds: lock kinds against their peers.
//
//   shared      8 clients, shared acquire+release on ONE name, against exclusive
//               acquire+release of 8 clients on 8 names,
//               shared on 8 names (one name costs nothing more when readers
//               do not queue on one row) and pg_advisory_lock_shared on one key
//   semaphore   8 clients, a semaphore of 4 permits (acquire_permit with a
//               wait), against 8 clients on 4 exclusive names and a
//               hand-written SQL semaphore (count of live holder rows under a
//               FOR UPDATE lock of the semaphore's row); and the same two calls
//               in ONE statement, release(acquire_permit(...).owner_token): a
//               permit taken and released in one transaction
//   multi-lock  1 client, latency of try_acquire_all on 4 names against one
//               try_acquire
//
// The targets these figures are judged by are in docs/performance.md.
//
// Every pair is a call per statement in autocommit, as an application makes
// them; grants commit durably, so the flush of the WAL is part of every pair.
#include "cases.hpp"
#include "pg.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace bench {

namespace {

const char* const ttl = "30 seconds";

// One client's loop body: one acquire+release pair. Returns false when the
// acquire was refused (busy), true for a pair.
using pair_fn = std::function<bool(pg_conn&, int client, std::string& owner)>;

struct pairs_result {
    double per_second = 0;
    double busy_per_second = 0;
    std::vector<std::int64_t> acquire_ns;
    std::string error;
};

pairs_result run_pairs(const bench_config& cfg, int clients, const std::function<void(pg_conn&)>& prepare,
                       const pair_fn& pair, bool time_acquire = false) {
    std::vector<std::unique_ptr<pg_conn>> conns;
    for (int i = 0; i < clients; ++i) {
        conns.push_back(std::make_unique<pg_conn>(cfg.base.conninfo));
        prepare(*conns.back());
    }
    std::atomic<bool> measuring{false};
    std::atomic<bool> stop{false};
    std::vector<std::uint64_t> pairs(clients, 0), busy(clients, 0);
    std::vector<std::vector<std::int64_t>> lat(clients);
    std::vector<std::string> errors(clients);
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i)
        threads.emplace_back([&, i] {
            std::string owner;
            try {
                while (!stop.load()) {
                    const bool m = measuring.load();
                    const auto t0 = now_ns();
                    const bool ok = pair(*conns[i], i, owner);
                    if (!m) continue;
                    if (time_acquire) lat[i].push_back(now_ns() - t0);
                    ++(ok ? pairs[i] : busy[i]);
                }
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        });
    std::this_thread::sleep_for(std::chrono::duration<double>(cfg.warmup_s));
    measuring = true;
    const auto t0 = now_ns();
    std::this_thread::sleep_for(std::chrono::duration<double>(cfg.duration_s));
    measuring = false;
    const double seconds = static_cast<double>(now_ns() - t0) / 1e9;
    stop = true;
    for (auto& t : threads)
        t.join();
    pairs_result r;
    std::uint64_t total = 0, refused = 0;
    for (int i = 0; i < clients; ++i) {
        total += pairs[i];
        refused += busy[i];
        r.acquire_ns.insert(r.acquire_ns.end(), lat[i].begin(), lat[i].end());
        if (r.error.empty()) r.error = errors[i];
    }
    r.per_second = static_cast<double>(total) / seconds;
    r.busy_per_second = static_cast<double>(refused) / seconds;
    return r;
}

// One pair: the prepared "acquire" statement, returning the owner token
// (NULL when busy), then "release".
bool dlock_pair(pg_conn& c, const std::string& name) {
    pg_result r = c.run("acquire", {name.c_str()});
    if (r.rows() != 1 || r.is_null(0, 0)) return false;
    const std::string owner = r.text(0, 0);
    (void)c.run("release", {name.c_str(), owner.c_str()});
    return true;
}

void prepare_release(pg_conn& c) {
    c.prepare("release", "SELECT dlock.release($1, $2::uuid)");
}

} // namespace

int case_kinds(const bench_config& cfg, sink& out) {
    const std::string id = "lock-kinds";
    int failed = 0;
    auto report = [&](const std::string& system, int clients, const pairs_result& r) {
        if (!r.error.empty()) {
            out.note(id, system, "error: " + r.error);
            ++failed;
        }
        out.put(id, system, clients, "pairs_per_s", r.per_second);
        if (r.busy_per_second > 0) out.put(id, system, clients, "busy_per_s", r.busy_per_second);
    };
    const std::string try_acquire = std::string("SELECT owner_token FROM dlock.try_acquire($1, '") + ttl + "')";

    // --- shared: one name, against 8 exclusive names and advisory locks
    std::vector<std::string> names8;
    for (int i = 0; i < 8; ++i)
        names8.push_back("kinds-ex8-" + std::to_string(i));
    const auto exclusive8 = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("acquire", try_acquire);
            prepare_release(c);
        },
        [&](pg_conn& c, int i, std::string&) { return dlock_pair(c, names8[i]); });
    report("dlock-exclusive-8-names", 8, exclusive8);
    const auto shared1 = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("acquire", std::string("SELECT owner_token FROM dlock.try_acquire_shared($1, '") + ttl + "')");
            prepare_release(c);
        },
        [&](pg_conn& c, int, std::string&) { return dlock_pair(c, "kinds-shared"); });
    report("dlock-shared-1-name", 8, shared1);
    // the same shared grants spread over 8 names: equal to one name when
    // readers of one name do not queue behind each other
    const auto shared8 = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("acquire", std::string("SELECT owner_token FROM dlock.try_acquire_shared($1, '") + ttl + "')");
            prepare_release(c);
        },
        [&](pg_conn& c, int i, std::string&) { return dlock_pair(c, "kinds-shared-" + std::to_string(i)); });
    report("dlock-shared-8-names", 8, shared8);
    const auto advisory = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("lock", "SELECT pg_advisory_lock_shared(8008)");
            c.prepare("unlock", "SELECT pg_advisory_unlock_shared(8008)");
        },
        [&](pg_conn& c, int, std::string&) {
            (void)c.run("lock", {});
            (void)c.run("unlock", {});
            return true;
        });
    report("advisory-shared-1-key", 8, advisory);

    // --- semaphore of 4 permits, against 4 exclusive names and a SQL semaphore
    const auto exclusive4 = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("acquire", std::string("SELECT owner_token FROM dlock.acquire($1, '") + ttl + "', '10 seconds')");
            prepare_release(c);
        },
        [&](pg_conn& c, int i, std::string&) { return dlock_pair(c, names8[i % 4]); });
    report("dlock-exclusive-4-names", 8, exclusive4);
    const auto permits = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("acquire",
                      std::string("SELECT owner_token FROM dlock.acquire_permit($1, 4, '") + ttl + "', '10 seconds')");
            prepare_release(c);
        },
        [&](pg_conn& c, int, std::string&) { return dlock_pair(c, "kinds-sem"); });
    report("dlock-permit-4", 8, permits);
    // The same two calls in one statement, so in one transaction: the permit's
    // grant and its release commit together, and the next waiter can only be
    // granted once that transaction has ended.
    const auto permits_one_txn = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("pair", std::string("SELECT dlock.release($1, (dlock.acquire_permit($1, 4, '") + ttl +
                                  "', '10 seconds')).owner_token)");
        },
        [&](pg_conn& c, int, std::string&) {
            pg_result r = c.run("pair", {"kinds-sem"});
            if (r.rows() != 1 || !r.boolean(0, 0))
                throw std::runtime_error("dlock.release of the permit just taken did not return true");
            return true;
        });
    report("dlock-permit-4-one-txn", 8, permits_one_txn);
    try {
        pg_conn admin(cfg.base.conninfo);
        admin.exec("DROP TABLE IF EXISTS bench_sem, bench_sem_holder");
        admin.exec("CREATE TABLE bench_sem (name text PRIMARY KEY, permits int NOT NULL)");
        admin.exec("CREATE TABLE bench_sem_holder (owner uuid PRIMARY KEY, name text NOT NULL, "
                   "until timestamptz NOT NULL)");
        admin.exec("CREATE INDEX ON bench_sem_holder (name)");
        admin.exec("INSERT INTO bench_sem VALUES ('sem', 4)");
    } catch (const std::exception& e) {
        out.note(id, "sql-semaphore-4", std::string("error: ") + e.what());
        ++failed;
    }
    // The hand-written semaphore: lock the semaphore's row, count the live
    // holders, add one when there is room -- one transaction; a full
    // semaphore is retried after a short sleep, as a client without a
    // server-side wait must.
    const auto sql_sem = run_pairs(
        cfg, 8,
        [&](pg_conn& c) {
            c.prepare("acquire",
                      "WITH s AS (SELECT permits FROM bench_sem WHERE name = 'sem' FOR UPDATE), "
                      "live AS (SELECT count(*) AS n FROM bench_sem_holder h WHERE h.name = 'sem' "
                      "AND h.until > clock_timestamp()) "
                      "INSERT INTO bench_sem_holder SELECT gen_random_uuid(), 'sem', clock_timestamp() + '30 s' "
                      "FROM s, live WHERE live.n < s.permits RETURNING owner");
            c.prepare("release", "DELETE FROM bench_sem_holder WHERE owner = $1::uuid");
        },
        [&](pg_conn& c, int, std::string&) {
            for (;;) {
                pg_result r = c.run("acquire", {});
                if (r.rows() == 1) {
                    const std::string owner = r.text(0, 0);
                    (void)c.run("release", {owner.c_str()});
                    return true;
                }
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        });
    report("sql-semaphore-4", 8, sql_sem);

    // --- multi-lock latency: 4 names against 1, one client
    const std::string all_names = "{kinds-m-a,kinds-m-b,kinds-m-c,kinds-m-d}";
    auto one = run_pairs(
        cfg, 1,
        [&](pg_conn& c) {
            c.prepare("acquire", try_acquire);
            prepare_release(c);
        },
        [&](pg_conn& c, int, std::string&) { return dlock_pair(c, "kinds-m-one"); }, true);
    auto multi = run_pairs(
        cfg, 1,
        [&](pg_conn& c) {
            c.prepare("acquire", std::string("SELECT owner_token FROM dlock.try_acquire_all($1::text[], '") + ttl +
                                     "') LIMIT 1");
            c.prepare("release", "SELECT dlock.release_all($1::text[], $2::uuid)");
        },
        [&](pg_conn& c, int, std::string&) {
            pg_result r = c.run("acquire", {all_names.c_str()});
            if (r.rows() != 1 || r.is_null(0, 0)) return false;
            const std::string owner = r.text(0, 0);
            (void)c.run("release", {all_names.c_str(), owner.c_str()});
            return true;
        },
        true);
    report("dlock-exclusive-1-name", 1, one);
    report("dlock-multi-4-names", 1, multi);
    // latency of a whole pair (acquire + release), p50 in microseconds
    const double one_p50 = percentile_us(one.acquire_ns, 0.5);
    const double multi_p50 = percentile_us(multi.acquire_ns, 0.5);
    out.put(id, "dlock-exclusive-1-name", 1, "pair_p50_us", one_p50);
    out.put(id, "dlock-multi-4-names", 1, "pair_p50_us", multi_p50);

    // Ratios between these figures (and the targets they are judged by) are
    // computed from the TSV by bench/render.py; the targets live in
    // docs/performance.md.
    return failed;
}

} // namespace bench
