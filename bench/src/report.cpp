// Turns the TSV results of a run into markdown and a gnuplot script; see
// report.hpp.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

namespace {

const char* const reference = "dlock-sql";

struct results {
    // case -> system -> x (clients or rows) -> metric -> value
    std::map<std::string, std::map<std::string, std::map<long, std::map<std::string, double>>>> data;
    std::map<std::string, std::vector<std::string>> order; // systems per case, first seen first
    std::vector<std::string> notes;

    [[nodiscard]] double get(const std::string& c, const std::string& sys, long x, const std::string& m) const {
        auto ci = data.find(c);
        if (ci == data.end()) return NAN;
        auto si = ci->second.find(sys);
        if (si == ci->second.end()) return NAN;
        auto xi = si->second.find(x);
        if (xi == si->second.end()) return NAN;
        auto mi = xi->second.find(m);
        return mi == xi->second.end() ? NAN : mi->second;
    }
    [[nodiscard]] std::vector<long> xs(const std::string& c) const {
        std::vector<long> out;
        auto ci = data.find(c);
        if (ci == data.end()) return out;
        for (const auto& [sys, by_x] : ci->second)
            for (const auto& [x, metrics] : by_x)
                if (x != 0 && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
        std::sort(out.begin(), out.end());
        return out;
    }
    [[nodiscard]] const std::vector<std::string>& systems(const std::string& c) const {
        static const std::vector<std::string> none;
        auto i = order.find(c);
        return i == order.end() ? none : i->second;
    }
};

results load(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("could not read " + path);
    results r;
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> f;
        std::stringstream ss(line);
        std::string field;
        while (std::getline(ss, field, '\t'))
            f.push_back(field);
        if (f.size() != 5) continue;
        auto& ord = r.order[f[0]];
        if (std::find(ord.begin(), ord.end(), f[1]) == ord.end()) ord.push_back(f[1]);
        if (f[3] == "note") {
            std::string n = "case " + f[0] + ", " + f[1] + ": " + f[4];
            if (std::find(r.notes.begin(), r.notes.end(), n) == r.notes.end()) r.notes.push_back(n);
            continue;
        }
        r.data[f[0]][f[1]][std::stol(f[2])][f[3]] = std::strtod(f[4].c_str(), nullptr);
    }
    return r;
}

std::string num(double v) {
    if (std::isnan(v)) return "–";
    if (std::isinf(v)) return "∞";
    char buf[64];
    double a = std::fabs(v);
    if (a >= 100)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else if (a >= 10)
        std::snprintf(buf, sizeof buf, "%.1f", v);
    else
        std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

std::string count(double v) {
    if (std::isnan(v)) return "–";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
}

std::string ratio(double v, double ref) {
    if (std::isnan(v) || std::isnan(ref) || ref == 0) return "–";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f×", v / ref);
    return buf;
}

// "min–max" of a rate over the rounds, when there were several.
std::string spread(const results& r, const std::string& c, const std::string& sys, long x, const std::string& metric) {
    double lo = r.get(c, sys, x, metric + "_min");
    double hi = r.get(c, sys, x, metric + "_max");
    if (std::isnan(lo) || std::isnan(hi)) return "–";
    return num(lo) + "–" + num(hi);
}

std::string mib(double bytes) {
    if (std::isnan(bytes)) return "–";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
    return buf;
}

std::string pct(double share) {
    if (std::isnan(share)) return "–";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %%", share * 100);
    return buf;
}

std::string rows_label(long n) {
    if (n >= 1000000 && n % 1000000 == 0) return std::to_string(n / 1000000) + " M";
    if (n >= 1000 && n % 1000 == 0) return std::to_string(n / 1000) + " k";
    return std::to_string(n);
}

std::string fmt_target_value(double v, const std::string& unit) {
    if (std::isnan(v)) return "not measured";
    if (std::isinf(v)) return "∞";
    char buf[32];
    if (unit == "pairs")
        std::snprintf(buf, sizeof buf, "%.0f pairs", v);
    else if (unit == "ms")
        std::snprintf(buf, sizeof buf, "%.2f ms", v);
    else if (unit == "%")
        std::snprintf(buf, sizeof buf, "%.1f %%", v * 100);
    else
        std::snprintf(buf, sizeof buf, "%.2f×", v);
    return buf;
}

// "inverted of pairs" for the contended case, or a dash where it was not measured.
std::string inversions(const results& r, const std::string& sys, long c) {
    double pairs = r.get("contended", sys, c, "order_pairs");
    if (std::isnan(pairs)) return "–";
    return count(r.get("contended", sys, c, "order_inversions")) + " of " + count(pairs);
}

bool has(const results& r, const std::string& c, const std::string& sys) {
    const auto& s = r.systems(c);
    return std::find(s.begin(), s.end(), sys) != s.end() && r.data.count(c) && r.data.at(c).count(sys);
}

} // namespace

int write_report(const report_paths& paths) {
    results r = load(paths.in);
    std::ostringstream md;

    md << "# pg_dlock benchmark results\n\n"
       << "Written by `make bench` (bench/run.sh). Every figure below comes from one run on the machine described "
          "next; each case ran its systems in alternation, round after round. Ratios are to pg_dlock through its "
          "SQL functions (`dlock-sql`) in the same run unless a column says otherwise.\n\n";
    if (!paths.machine.empty()) {
        std::ifstream m(paths.machine);
        md << "## Machine\n\n" << m.rdbuf() << "\n";
    }

    md << "The targets these figures are judged by, with their verdicts for this run, are in "
          "docs/performance.md; `bench/render.py` computes them from the TSV and draws the plots.\n\n";

    // The PNGs (bench/render.py) sit next to the results file: the markdown names them bare.
    const std::string plot_prefix;

    // uncontended
    if (r.data.count("uncontended")) {
        md << "## uncontended: acquire + release, distinct names\n\n"
           << "Each client cycles through 64 names of its own: acquire, then release at once. For the floors the "
              "acquire column is the single statement; `advisory-xact` is `SELECT pg_advisory_xact_lock(k)` in "
              "autocommit, lock and unlock in one round trip. `dlock-fenced` is `dlock-sql` with "
              "`SET dlock.durability = fenced` on its sessions (grants commit without waiting for the WAL flush); "
              "`dlock-sql-edition` is the same calls on the SQL edition (PL/pgSQL) in a database of its own; "
              "`floor-update-async-pair` is two asynchronous one-row UPDATEs, the commits of a fenced pair; "
              "`floor-update-async-returning-pair` the same UPDATEs, the first returning the value it wrote, read by "
              "the driver: the one reply a fenced pair cannot do without, the token a grant sends back.\n\n"
           << "Server CPU is the user + system time of the PostgreSQL backends (or redis-server) serving the "
              "clients during the measured window, per pair, read from /proc; driver CPU is the load driver's own. "
              "CPU time is less disturbed than wall time by other work on the machine.\n\n"
           << "| system | clients | pairs/s | rounds min–max | × pg_dlock | acquire p50 µs | acquire p99 µs | release "
              "p50 µs | release p99 µs | server CPU µs/pair | driver CPU µs/pair | errors |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("uncontended"))
            for (const auto& sys : r.systems("uncontended")) {
                if (!has(r, "uncontended", sys)) continue;
                double v = r.get("uncontended", sys, c, "pairs_per_s");
                md << "| " << sys << " | " << c << " | " << num(v) << " | " << spread(r, "uncontended", sys, c, "pairs_per_s")
                   << " | " << ratio(v, r.get("uncontended", reference, c, "pairs_per_s")) << " | "
                   << num(r.get("uncontended", sys, c, "acq_p50_us")) << " | " << num(r.get("uncontended", sys, c, "acq_p99_us")) << " | "
                   << num(r.get("uncontended", sys, c, "rel_p50_us")) << " | " << num(r.get("uncontended", sys, c, "rel_p99_us")) << " | "
                   << num(r.get("uncontended", sys, c, "server_cpu_us")) << " | " << num(r.get("uncontended", sys, c, "driver_cpu_us"))
                   << " | " << count(r.get("uncontended", sys, c, "errors")) << " |\n";
            }
        md << "\n![uncontended: pairs per second against clients](" << plot_prefix << "uncontended-throughput.png)\n\n"
           << "![uncontended: latency percentiles at 1 client](" << plot_prefix << "uncontended-latency.png)\n\n";

    }

    // contended
    if (r.data.count("contended")) {
        md << "## contended: every client on one name\n\n"
           << "Clients loop: blocking acquire, critical section (a 100 µs sleep unless the run says otherwise), "
              "release. pg_dlock waits in the server (`dlock.acquire`), advisory locks block in the lock manager, "
              "the hand-written lease and Redis retry with exponential backoff (100 µs doubling to 5 ms, with "
              "jitter); the SQL edition waits in the server by polling (`pg_sleep`, back-off up to 100 ms), "
              "in no order. `floor-handoff-async` is `floor-handoff-durable` with an asynchronous UPDATE: the "
              "floor of a fenced handoff. Handoff = from the holder starting its release to the next holder's "
              "acquire returning. Fairness = most ÷ fewest critical sections of one client in a round (worst round "
              "shown). Overlaps "
              "counts critical sections entered while another client was inside (must be 0); timeouts counts "
              "blocking acquires that gave up after 5 s. Order inversions (50 clients, systems that wait in the "
              "server): one client holds the lock while the other 49 ask for it one after another, each seen waiting "
              "in `pg_stat_activity` before the next asks; pairs granted against their arrival order, of all pairs, "
              "over the rounds (not for the SQL edition, which keeps no order).\n\n"
           << "| system | clients | critical sections/s | rounds min–max | × pg_dlock | handoff p50 µs | handoff p99 "
              "µs | "
              "wait p50 µs "
              "| server CPU µs per section | most | fewest | fairness | overlaps | order inversions | timeouts "
              "| errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("contended"))
            for (const auto& sys : r.systems("contended")) {
                if (!has(r, "contended", sys)) continue;
                double v = r.get("contended", sys, c, "cs_per_s");
                md << "| " << sys << " | " << c << " | " << num(v) << " | " << spread(r, "contended", sys, c, "cs_per_s")
                   << " | " << ratio(v, r.get("contended", reference, c, "cs_per_s")) << " | "
                   << num(r.get("contended", sys, c, "handoff_p50_us")) << " | " << num(r.get("contended", sys, c, "handoff_p99_us"))
                   << " | " << num(r.get("contended", sys, c, "wait_p50_us")) << " | "
                   << num(r.get("contended", sys, c, "server_cpu_us")) << " | " << count(r.get("contended", sys, c, "most")) << " | "
                   << count(r.get("contended", sys, c, "fewest")) << " | " << num(r.get("contended", sys, c, "fairness")) << " | "
                   << count(r.get("contended", sys, c, "overlaps")) << " | " << inversions(r, sys, c) << " | "
                   << count(r.get("contended", sys, c, "timeouts")) << " | " << count(r.get("contended", sys, c, "errors")) << " |\n";
            }
        md << "\n![contended: critical sections per second](" << plot_prefix << "contended.png)\n\n";

    }

    // scale and churn
    if (r.data.count("scale") || r.data.count("churn")) {
        md << "## scale: lock rows and churn\n\n";
    }
    if (r.data.count("scale")) {
        auto xs = r.xs("scale");
        md << "Acquire + release on one client, names drawn at random. pg_dlock keeps one row per name, so its "
              "table holds that many free locks and every acquire updates an existing row; the hand-written lease "
              "only has rows for held locks, so its table holds that many live leases of other owners and every "
              "acquire inserts a new name. Tables were filled with INSERT … SELECT (for pg_dlock, copies of a row "
              "the extension itself left after one acquire and release), then VACUUM (ANALYZE) and CHECKPOINT; "
              "server settings are the defaults (shared_buffers 128 MB).\n\n"
           << "| system | lock rows | acquire p50 µs | acquire p99 µs | × at "
           << rows_label(xs.empty() ? 0 : xs.front()) << " | release p50 µs | pairs/s | table | indexes | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (const auto& sys : r.systems("scale")) {
            if (!has(r, "scale", sys)) continue;
            for (long n : xs) {
                double p50 = r.get("scale", sys, n, "acq_p50_us");
                md << "| " << sys << " | " << rows_label(n) << " | " << num(p50) << " | "
                   << num(r.get("scale", sys, n, "acq_p99_us")) << " | "
                   << ratio(p50, r.get("scale", sys, xs.front(), "acq_p50_us")) << " | "
                   << num(r.get("scale", sys, n, "rel_p50_us")) << " | " << num(r.get("scale", sys, n, "pairs_per_s")) << " | "
                   << mib(r.get("scale", sys, n, "table_bytes")) << " | " << mib(r.get("scale", sys, n, "index_bytes")) << " | "
                   << count(r.get("scale", sys, n, "errors")) << " |\n";
            }
        }
        md << "\n![scale: acquire latency against lock rows](" << plot_prefix << "scale-latency.png)\n\n"
           << "![scale: table and index size against lock rows](" << plot_prefix << "scale-size.png)\n\n";
    }
    if (r.data.count("churn")) {
        md << "Churn: the first pass acquires and releases each name once (creating the rows), then clients "
              "acquire and release random names from the same set. Sizes are the main fork (`pg_relation_size`) "
              "and all indexes; HOT share is `n_tup_hot_upd ÷ n_tup_upd` over the churn. Autovacuum ran with its "
              "default settings.\n\n"
           << "| system | names | cycles (target) | cycles/s | table after first pass | table after churn | "
              "growth | indexes after first pass | indexes after churn | growth | updates | HOT share | "
              "autovacuums | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (const auto& sys : r.systems("churn")) {
            if (!has(r, "churn", sys)) continue;
            for (long n : r.xs("churn")) {
                auto g = [&](const char* m) { return r.get("churn", sys, n, m); };
                char growth[32];
                std::snprintf(growth, sizeof growth, "%.2f×", g("table_growth"));
                char igrowth[32];
                std::snprintf(igrowth, sizeof igrowth, "%.2f×", g("index_growth"));
                md << "| " << sys << " | " << rows_label(n) << " | " << count(g("cycles")) << " ("
                   << count(g("cycles_target")) << ") | " << num(g("cycles_per_s")) << " | "
                   << mib(g("first_table_bytes")) << " | " << mib(g("table_bytes")) << " | "
                   << (std::isnan(g("table_growth")) ? "–" : growth) << " | " << mib(g("first_index_bytes")) << " | "
                   << mib(g("index_bytes")) << " | " << (std::isnan(g("index_growth")) ? "–" : igrowth) << " | "
                   << count(g("updates")) << " | " << pct(g("hot_share")) << " | " << count(g("autovacuums")) << " | "
                   << count(g("errors")) << " |\n";
            }
        }
        md << "\n";
    }

    // keep-alive
    if (r.data.count("keep-alive")) {
        md << "## keep-alive: the cost of renewals\n\n"
           << "Clients hold many live leases and renew them round-robin as fast as the server allows. "
              "\"Leases kept alive\" is the renewal rate times 10 s: how many leases one server keeps alive if each "
              "renews every 10 s (a 30 s TTL renewed at a third). Advisory locks have no lease and need no renewal "
              "(they cost an open session each instead). `floor-update` renews nothing: it is the durable one-row "
              "UPDATE floor.\n\n"
           << "| system | clients | live leases | renewals/s | rounds min–max | × pg_dlock | renew p50 µs | renew p99 "
              "µs "
              "| server CPU µs/renewal | leases kept alive at one renewal per 10 s | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("keep-alive"))
            for (const auto& sys : r.systems("keep-alive")) {
                if (!has(r, "keep-alive", sys)) continue;
                double v = r.get("keep-alive", sys, c, "renewals_per_s");
                md << "| " << sys << " | " << c << " | " << count(r.get("keep-alive", sys, c, "leases")) << " | " << num(v)
                   << " | " << spread(r, "keep-alive", sys, c, "renewals_per_s") << " | "
                   << ratio(v, r.get("keep-alive", reference, c, "renewals_per_s")) << " | "
                   << num(r.get("keep-alive", sys, c, "renew_p50_us")) << " | " << num(r.get("keep-alive", sys, c, "renew_p99_us"))
                   << " | " << num(r.get("keep-alive", sys, c, "server_cpu_us")) << " | " << num(v * 10) << " | "
                   << count(r.get("keep-alive", sys, c, "errors")) << " |\n";
            }
        md << "\n";
    }

    // business-write
    if (r.data.count("business-write")) {
        const std::string ref5 = "dlock-sql 3 tx";
        md << "## business-write: lock + business write in one transaction vs three transactions\n\n"
           << "One unit = take the lock, update one business row (`UPDATE bench.account … WHERE id = $1`, a row "
              "per client), give the lock back. *1 tx*: BEGIN, acquire, write, release, COMMIT (one durable commit). "
              "*3 tx*: acquire, write and release each commit on their own. *fenced*: the write transaction first "
              "calls `dlock.assert_holds`. `advisory-xact 1 tx` is BEGIN, `pg_advisory_xact_lock`, write, COMMIT. "
              "Ratios are to `"
           << ref5 << "`.\n\n"
           << "| variant | clients | units/s | rounds min–max | × " << ref5
           << " | unit p50 µs | unit p99 µs | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("business-write"))
            for (const auto& v : r.systems("business-write")) {
                if (!has(r, "business-write", v)) continue;
                double u = r.get("business-write", v, c, "units_per_s");
                md << "| " << v << " | " << c << " | " << num(u) << " | " << spread(r, "business-write", v, c, "units_per_s")
                   << " | " << ratio(u, r.get("business-write", ref5, c, "units_per_s")) << " | "
                   << num(r.get("business-write", v, c, "unit_p50_us")) << " | " << num(r.get("business-write", v, c, "unit_p99_us")) << " | "
                   << count(r.get("business-write", v, c, "errors")) << " |\n";
            }
        md << "\n";
    }

    // function-cost
    if (r.data.count("function-cost")) {
        double update_us = r.get("function-cost", "floor-update", 1, "update_us");
        md << "## function-cost: cost per call inside one transaction\n\n"
           << "Each statement runs 5 000 times (on the SQL edition, in its database, 500 times) in a PL/pgSQL loop "
              "sent as one statement, inside one transaction "
              "that is rolled back (no commit, no round trip per call); the loop's own cost per iteration is "
              "subtracted. try_acquire and release work on existing, free lock rows; the UPDATE changes three "
              "columns of a row found by its text primary key in a table with the same fillfactor. Median of the "
              "passes.\n\n"
           << "| statement | µs per call | × UPDATE by primary key |\n|---|---:|---:|\n";
        auto row = [&](const std::string& what, const std::string& sys, const std::string& m) {
            double v = r.get("function-cost", sys, 1, m);
            md << "| " << what << " | " << num(v) << " | " << ratio(v, update_us) << " |\n";
        };
        row("`SELECT dlock.try_acquire(…)`", reference, "try_acquire_us");
        row("`SELECT dlock.release(…)`", reference, "release_us");
        if (!std::isnan(r.get("function-cost", "dlock-sql-edition", 1, "try_acquire_us"))) {
            row("`SELECT dlock.try_acquire(…)`, SQL edition", "dlock-sql-edition", "try_acquire_us");
            row("`SELECT dlock.release(…)`, SQL edition", "dlock-sql-edition", "release_us");
        }
        row("`UPDATE … WHERE key = $1`", "floor-update", "update_us");
        row("`SELECT $1` (an empty statement)", "floor-select1", "select_us");
        md << "\nThe loop itself: " << num(r.get("function-cost", "floor-select1", 1, "loop_us")) << " µs per iteration.\n\n";
    }

    // events
    if (r.data.count("events")) {
        md << "## events: lock events\n\n"
           << "The uncontended case with `dlock.events` off and on, alternating round by round (the ratio is the cost of events). "
              "Delivery: one session grants and releases a lock every 2 ms while 8 sessions `LISTEN` on "
              "`dlock_events`; for each acquire event, the time from the granting statement's reply to its arrival "
              "at each listener. Failover: a leader in a child process keeps a lease of ttl 1 s alive, another "
              "session waits for it in `dlock.acquire`; the leader is killed with SIGKILL, and the time to the new "
              "leader's first `dlock.fence` is compared with the ttl.\n\n"
           << "| clients | pairs/s, events off | pairs/s, events on | on ÷ off |\n|---:|---:|---:|---:|\n";
        for (long c : r.xs("events")) {
            if (std::isnan(r.get("events", reference, c, "events_on_over_off"))) continue;
            md << "| " << c << " | " << num(r.get("events", reference, c, "pairs_per_s_events_off")) << " | "
               << num(r.get("events", reference, c, "pairs_per_s_events_on")) << " | "
               << fmt_target_value(r.get("events", reference, c, "events_on_over_off"), "×") << " |\n";
        }
        md << "\n| | |\n|---|---|\n"
           << "| delivery to 8 listeners | p50 " << num(r.get("events", reference, 8, "delivery_p50_us")) << " µs, p99 "
           << num(r.get("events", reference, 8, "delivery_p99_us")) << " µs, "
           << pct(r.get("events", reference, 8, "delivered_share")) << " delivered |\n"
           << "| leadership failover after SIGKILL (ttl " << num(r.get("events", reference, 2, "failover_ttl_ms"))
           << " ms) | p50 " << num(r.get("events", reference, 2, "failover_p50_ms")) << " ms, max "
           << num(r.get("events", reference, 2, "failover_max_ms")) << " ms |\n\n";
    }

    // lock-kinds
    if (r.data.count("lock-kinds")) {
        md << "## lock-kinds: shared leases, permits, multi-locks\n\n"
           << "Acquire+release pairs per second (`try_acquire_shared`, `acquire_permit`, `try_acquire_all` and "
              "their releases) against exclusive leases and peers; `dlock-permit-4-one-txn` is the permit's two "
              "calls in one statement, `release(acquire_permit(...).owner_token)`: taken and released in one "
              "transaction. The pair p50 is that of a whole pair at one client.\n\n"
           << "| system | clients | pairs/s | pair p50 µs |\n|---|---:|---:|---:|\n";
        for (const char* sys :
             {"dlock-exclusive-8-names", "dlock-shared-1-name", "dlock-shared-8-names", "advisory-shared-1-key",
              "dlock-exclusive-4-names", "dlock-permit-4", "dlock-permit-4-one-txn", "sql-semaphore-4",
              "dlock-exclusive-1-name", "dlock-multi-4-names"}) {
            for (long c : {1L, 8L}) {
                const double rate = r.get("lock-kinds", sys, c, "pairs_per_s");
                if (std::isnan(rate)) continue;
                const double p50 = r.get("lock-kinds", sys, c, "pair_p50_us");
                md << "| " << sys << " | " << c << " | " << num(rate) << " | " << (std::isnan(p50) ? "–" : num(p50))
                   << " |\n";
            }
        }
        md << "\n";
    }

    if (!r.notes.empty()) {
        md << "## Notes from the run\n\n";
        for (const auto& n : r.notes)
            md << "- " << n << "\n";
        md << "\n";
    }

    std::ofstream mdf(paths.md);
    if (!mdf) throw std::runtime_error("could not write " + paths.md);
    mdf << md.str();
    return 0;
}

} // namespace bench
