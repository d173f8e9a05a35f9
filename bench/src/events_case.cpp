// events: what lock events cost and how fast they arrive.
//
//   - the uncontended case's acquire+release pairs with dlock.events off and on, the two
//     settings alternating round by round (ratio on/off; target >= 0.9);
//   - delivery: one session grants and releases a lock in a paced loop while
//     8 sessions LISTEN on dlock_events; for each acquire event, the time from
//     the granting statement's reply (the commit is then done) to its arrival
//     at each listener, p50 and p99 over all listeners;
//   - leadership failover: a leader in a child process keeps a lease alive,
//     another session waits for it in dlock.acquire; the leader is killed with
//     SIGKILL, and the time to the new leader's first fenced write (dlock.fence)
//     is compared with the ttl.
// The case changes dlock.events with ALTER SYSTEM, so it needs a superuser.
#include "cases.hpp"

#include <libpq-fe.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

namespace bench {

namespace {

void set_events(const bench_config& cfg, bool on) {
    pg_conn admin(cfg.base.conninfo);
    admin.exec(std::string{"ALTER SYSTEM SET dlock.events = "} + (on ? "on" : "off"));
    admin.exec("SELECT pg_reload_conf()");
    std::this_thread::sleep_for(std::chrono::milliseconds{300});
}

// acquire+release pairs per second of `clients` dlock sessions opened now.
double pairs_per_s(const bench_config& cfg, int clients, const std::string& prefix) {
    auto ws = open_workers("dlock-sql", clients, cfg.base);
    std::uint64_t pairs = 0;
    auto r = run_workers(ws, cfg.warmup_s, cfg.duration_s, [&prefix](worker& w, bool m) {
        const std::string name = prefix + std::to_string(w.id) + "-" + std::to_string(w.cursor++ % 64);
        lease l = w.session->try_acquire(name);
        if (!l.held) return;
        w.session->release(l);
        if (m) w.lat_a.push_back(0);
    });
    if (r.errors > 0) throw std::runtime_error(r.first_error);
    for (auto& w : ws)
        pairs += w.lat_a.size();
    return static_cast<double>(pairs) / r.seconds;
}

std::int64_t token_in(const std::string& payload) {
    const std::string key = "\"fencing_token\":";
    const auto at = payload.find(key);
    return at == std::string::npos ? -1 : std::stoll(payload.substr(at + key.size()));
}

int delivery(const bench_config& cfg, sink& out, const std::string& id) {
    constexpr int listeners = 8;
    const std::string lock = "events-delivery";
    std::mutex mutex;
    std::map<std::int64_t, std::int64_t> replied;                // token -> reply time
    std::vector<std::pair<std::int64_t, std::int64_t>> arrivals; // token, arrival time
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < listeners; ++i)
        threads.emplace_back([&] {
            PGconn* conn = PQconnectdb(cfg.base.conninfo.c_str());
            if (PQstatus(conn) != CONNECTION_OK) {
                PQfinish(conn);
                ++ready;
                return;
            }
            PQclear(PQexec(conn, "LISTEN dlock_events"));
            ++ready;
            std::vector<std::pair<std::int64_t, std::int64_t>> mine;
            while (!stop) {
                fd_set fds;
                FD_ZERO(&fds);
                FD_SET(PQsocket(conn), &fds);
                timeval tv{0, 100000};
                if (select(PQsocket(conn) + 1, &fds, nullptr, nullptr, &tv) <= 0) continue;
                const std::int64_t at = now_ns();
                PQconsumeInput(conn);
                while (PGnotify* n = PQnotifies(conn)) {
                    const std::string payload = n->extra;
                    if (payload.find("\"event\":\"acquire\"") != std::string::npos)
                        mine.emplace_back(token_in(payload), at);
                    PQfreemem(n);
                }
            }
            PQfinish(conn);
            std::lock_guard<std::mutex> guard{mutex};
            arrivals.insert(arrivals.end(), mine.begin(), mine.end());
        });
    while (ready < listeners)
        std::this_thread::sleep_for(std::chrono::milliseconds{10});

    pg_conn granter(cfg.base.conninfo);
    const int grants = static_cast<int>(std::max(50.0, cfg.duration_s * 250));
    for (int i = 0; i < grants; ++i) {
        auto r = granter.query("SELECT fencing_token, owner_token::text FROM dlock.try_acquire($1, '30 seconds')",
                               {lock.c_str()});
        const std::int64_t at = now_ns();
        const std::string owner = r.text(0, 1);
        {
            std::lock_guard<std::mutex> guard{mutex};
            replied[r.int64(0, 0)] = at;
        }
        granter.query("SELECT dlock.release($1, $2::uuid)", {lock.c_str(), owner.c_str()});
        std::this_thread::sleep_for(std::chrono::milliseconds{2}); // paced: delivery, not queueing
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{500});
    stop = true;
    for (auto& t : threads)
        t.join();

    std::vector<std::int64_t> samples;
    for (const auto& [token, at] : arrivals)
        if (auto it = replied.find(token); it != replied.end()) samples.push_back(at - it->second);
    const double expected = static_cast<double>(grants) * listeners;
    out.put(id, "dlock-sql", listeners, "delivered_share", static_cast<double>(samples.size()) / expected);
    out.put(id, "dlock-sql", listeners, "delivery_p50_us", percentile_us(samples, 0.50));
    out.put(id, "dlock-sql", listeners, "delivery_p99_us", percentile_us(samples, 0.99));
    return samples.size() < expected ? 1 : 0;
}

// The leader: grants itself the lease, reports its token, renews every ttl/3.
[[noreturn]] void leader_process(const std::string& conninfo, const std::string& lock, int ttl_ms, int report_fd) {
    PGconn* conn = PQconnectdb(conninfo.c_str());
    const std::string ttl = std::to_string(ttl_ms) + " milliseconds";
    const char* params[2] = {lock.c_str(), ttl.c_str()};
    PGresult* r = PQexecParams(conn,
                               "SELECT fencing_token, owner_token::text FROM dlock.acquire($1, $2::interval, "
                               "'10 seconds')",
                               2, nullptr, params, nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) _exit(1);
    const std::string owner = PQgetvalue(r, 0, 1);
    const std::int64_t token = std::stoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (write(report_fd, &token, sizeof token) != static_cast<ssize_t>(sizeof token)) _exit(1);
    const char* renew[3] = {lock.c_str(), owner.c_str(), ttl.c_str()};
    for (;;) {
        usleep(static_cast<useconds_t>(ttl_ms) * 1000 / 3);
        PQclear(PQexecParams(conn, "SELECT dlock.renew($1, $2::uuid, $3::interval)", 3, nullptr, renew, nullptr,
                             nullptr, 0));
    }
}

int failover(const bench_config& cfg, sink& out, const std::string& id) {
    constexpr int ttl_ms = 1000;
    const int repeats = std::max(3, cfg.rounds * 3);
    std::vector<std::int64_t> samples;
    int failed = 0;
    for (int i = 0; i < repeats; ++i) {
        const std::string lock = "events-failover-" + std::to_string(i) + "-" + std::to_string(now_ns());
        int fds[2];
        if (pipe(fds) != 0) return failed + 1;
        const pid_t child = fork();
        if (child == 0) {
            close(fds[0]);
            leader_process(cfg.base.conninfo, lock, ttl_ms, fds[1]);
        }
        close(fds[1]);
        std::int64_t leader_token = 0;
        const bool led = read(fds[0], &leader_token, sizeof leader_token) == static_cast<ssize_t>(sizeof leader_token);
        close(fds[0]);
        if (!led) {
            kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
            ++failed;
            continue;
        }
        // The follower waits in the server; the leader dies after a renewal or two.
        PGconn* follower = PQconnectdb(cfg.base.conninfo.c_str());
        const std::string ttl = std::to_string(ttl_ms) + " milliseconds";
        const char* params[2] = {lock.c_str(), ttl.c_str()};
        PQsendQueryParams(follower, "SELECT fencing_token FROM dlock.acquire($1, $2::interval, '30 seconds')", 2,
                          nullptr, params, nullptr, nullptr, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds{ttl_ms / 2 + 100});
        kill(child, SIGKILL);
        const std::int64_t killed = now_ns();
        waitpid(child, nullptr, 0);
        PGresult* r = PQgetResult(follower);
        bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        std::string token = ok ? PQgetvalue(r, 0, 0) : "";
        PQclear(r);
        while ((r = PQgetResult(follower)) != nullptr)
            PQclear(r);
        if (ok) {
            const std::string resource = lock + "-resource";
            const char* fence[2] = {resource.c_str(), token.c_str()};
            r = PQexecParams(follower, "SELECT dlock.fence($1, $2::bigint)", 2, nullptr, fence, nullptr, nullptr, 0);
            ok = PQresultStatus(r) == PGRES_TUPLES_OK && std::stoll(token) > leader_token;
            PQclear(r);
        }
        if (ok)
            samples.push_back(now_ns() - killed);
        else
            ++failed;
        PQfinish(follower);
    }
    out.put(id, "dlock-sql", 2, "failover_ttl_ms", ttl_ms);
    out.put(id, "dlock-sql", 2, "failover_p50_ms", percentile_us(samples, 0.50) / 1000.0);
    out.put(id, "dlock-sql", 2, "failover_max_ms", percentile_us(samples, 1.0) / 1000.0);
    return failed;
}

} // namespace

int case_events(const bench_config& cfg, sink& out) {
    const std::string id = "events";
    int failed = 0;
    const auto clients = cfg.clients.empty() ? std::vector<int>{1, 8} : cfg.clients;
    try {
        for (int c : clients) {
            double off = 0;
            double on = 0;
            for (int round = 0; round < cfg.rounds; ++round)
                for (bool events : {round % 2 == 0, round % 2 != 0}) {
                    set_events(cfg, events);
                    const double rate = pairs_per_s(cfg, c, "ev" + std::to_string(c) + "-");
                    (events ? on : off) += rate / cfg.rounds;
                }
            out.put(id, "dlock-sql", c, "pairs_per_s_events_off", off);
            out.put(id, "dlock-sql", c, "pairs_per_s_events_on", on);
            out.put(id, "dlock-sql", c, "events_on_over_off", on / off);
        }
        set_events(cfg, true);
        failed += delivery(cfg, out, id);
        failed += failover(cfg, out, id);
    } catch (const std::exception& e) {
        out.note(id, "dlock-sql", e.what());
        ++failed;
    }
    set_events(cfg, false);
    return failed;
}

} // namespace bench
