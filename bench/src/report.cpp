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

// One target line: what, measured ratio, goal, verdict with the gap.
struct target {
    std::string what;
    double measured;
    double goal;
    bool at_least;    // true: measured >= goal is met; false: measured <= goal
    std::string unit; // "×", "%", "ms" or "pairs" (a count)
    std::string how;  // what the ratio is made of
};

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

// How far a missed target is from its goal, in percent of the goal.
double gap_percent(const target& t) {
    return std::fabs(t.measured - t.goal) / t.goal * 100;
}

int gap_digits(const target& t) {
    return gap_percent(t) < 10 ? 1 : 0;
}

std::string verdict(const target& t) {
    if (std::isnan(t.measured)) return "not measured";
    bool met = t.at_least ? t.measured >= t.goal : t.measured <= t.goal;
    if (met) return "met";
    if (std::isinf(t.measured)) return "**missed**: a client never got the lock in a round";
    if (t.at_least && t.measured == 0) return "**missed**: nothing completed";
    char buf[96];
    if (t.unit == "pairs")
        std::snprintf(buf, sizeof buf, "**missed** by %.0f pairs", t.measured - t.goal);
    else if (t.unit == "%")
        std::snprintf(buf, sizeof buf, "**missed** by %.1f points", (t.goal - t.measured) * 100);
    else if (t.unit == "ms")
        std::snprintf(buf, sizeof buf, "**missed** by %.2f ms", std::fabs(t.measured - t.goal));
    else if (t.at_least)
        std::snprintf(buf, sizeof buf, "**missed** by %.*f %% (%.2f× short)", gap_digits(t), gap_percent(t),
                      t.goal - t.measured);
    else
        std::snprintf(buf, sizeof buf, "**missed** by %.*f %% (%.2f× over)", gap_digits(t), gap_percent(t),
                      t.measured - t.goal);
    return buf;
}

// a ÷ b, NaN unless both were measured and b is not zero.
double quotient(double a, double b) {
    if (std::isnan(a) || std::isnan(b) || b == 0) return NAN;
    return a / b;
}

std::vector<target> targets(const results& r, const std::string& sys) {
    std::vector<target> t;
    std::string label = sys == reference ? "pg_dlock (SQL)" : "pg_dlock (C++ client)";
    t.push_back({"Case 1: " + label + " pairs/s at 8 clients vs hand-written SQL lease",
                 quotient(r.get("1", sys, 8, "pairs_per_s"), r.get("1", "sql-lease", 8, "pairs_per_s")), 1.5, true, "×",
                 "pairs/s ÷ pairs/s"});
    {
        double floors = r.get("1", "floor-update", 8, "server_cpu_us") + r.get("1", "floor-update-async", 8, "server_cpu_us");
        t.push_back({"Case 1: " + label + " server CPU per pair at 8 clients vs floor UPDATE + floor async UPDATE",
                     quotient(r.get("1", sys, 8, "server_cpu_us"), floors), 1.25, false, "×", "µs ÷ µs"});
    }
    t.push_back({"Case 1: " + label + " acquire p50 at 1 client vs durable one-row UPDATE",
                 quotient(r.get("1", sys, 1, "acq_p50_us"), r.get("1", "floor-update", 1, "acq_p50_us")), 1.05, false,
                 "×", "p50 ÷ p50"});
    t.push_back({"Case 1: " + label + " release p50 at 1 client vs SELECT 1",
                 quotient(r.get("1", sys, 1, "rel_p50_us"), r.get("1", "floor-select1", 1, "acq_p50_us")), 2.0, false,
                 "×", "p50 ÷ p50"});
    t.push_back({"Case 2: " + label + " critical sections/s at 8 clients vs blocking pg_advisory_lock",
                 quotient(r.get("2", sys, 8, "cs_per_s"), r.get("2", "advisory", 8, "cs_per_s")), 0.7, true, "×",
                 "rate ÷ rate"});
    t.push_back({"Case 2: " + label + " fairness at 8 clients (most ÷ fewest acquisitions)",
                 r.get("2", sys, 8, "fairness"), 1.2, false, "×", "most ÷ fewest"});
    t.push_back({"Case 2: " + label + " handoff p50 at 50 clients vs 8 clients",
                 quotient(r.get("2", sys, 50, "handoff_p50_us"), r.get("2", sys, 8, "handoff_p50_us")), 1.5, false, "×",
                 "p50 ÷ p50"});
    t.push_back({"Case 2: " + label + " order inversions, 49 waiters queued one after another",
                 r.get("2", sys, 50, "order_inversions"), 0, false, "pairs", "pairs granted against arrival order"});
    if (sys == reference) {
        double update_us = r.get("6", "floor-update", 1, "update_us");
        t.push_back({"Case 6: try_acquire on an existing row, in one transaction, vs a plain UPDATE by primary key",
                     quotient(r.get("6", sys, 1, "try_acquire_us"), update_us), 2.0, false, "×", "µs ÷ µs"});
        t.push_back({"Case 6: release, in one transaction, vs a plain UPDATE by primary key",
                     quotient(r.get("6", sys, 1, "release_us"), update_us), 2.0, false, "×", "µs ÷ µs"});
        auto xs = r.xs("3");
        if (xs.size() >= 2) {
            t.push_back(
                {"Case 3: acquire p50 at " + rows_label(xs.back()) + " rows vs " + rows_label(xs.front()) + " rows",
                 quotient(r.get("3", sys, xs.back(), "acq_p50_us"), r.get("3", sys, xs.front(), "acq_p50_us")), 1.2,
                 false, "×", "p50 ÷ p50"});
        }
        auto cx = r.xs("3c");
        long names = cx.empty() ? 0 : cx.front();
        double cycles = r.get("3c", sys, names, "cycles");
        std::string after = std::isnan(cycles) ? "churn" : num(cycles) + " cycles";
        t.push_back({"Case 3: table size after " + after + " vs after the first pass",
                     r.get("3c", sys, names, "table_growth"), 1.5, false, "×", "bytes ÷ bytes"});
        t.push_back({"Case 3: HOT share of lock-row updates during the churn", r.get("3c", sys, names, "hot_share"),
                     0.95, true, "%", "HOT updates ÷ updates"});
        for (long c : {1L, 8L})
            t.push_back({"Case 7: case 1 pairs/s at " + std::to_string(c) + " client" + (c == 1 ? "" : "s") +
                             " with dlock.events on vs off",
                         r.get("7", sys, c, "events_on_over_off"), 0.9, true, "×", "pairs/s ÷ pairs/s"});
        t.push_back({"Case 7: lock events delivered to each of 8 listeners", r.get("7", sys, 8, "delivered_share"), 1.0,
                     true, "%", "events received ÷ events sent × listeners"});
        t.push_back({"Case 7: event delivery p50, from the grant's reply to 8 listeners",
                     r.get("7", sys, 8, "delivery_p50_us") / 1000, 2.0, false, "ms", "p50"});
        t.push_back({"Case 7: event delivery p99, from the grant's reply to 8 listeners",
                     r.get("7", sys, 8, "delivery_p99_us") / 1000, 10.0, false, "ms", "p99"});
        t.push_back({"Case 7: leadership failover after SIGKILL of the leader, worst time to the next leader's "
                     "fenced write vs ttl",
                     quotient(r.get("7", sys, 2, "failover_max_ms"), r.get("7", sys, 2, "failover_ttl_ms")), 1.1,
                     false, "×", "ms ÷ ms"});
        // the ratios kinds_case.cpp computed in the run
        t.push_back({"Case 8: shared pairs/s, 8 clients on one name, vs exclusive on 8 distinct names",
                     r.get("8", "target", 8, "shared_1_name_vs_exclusive_8_names (>=0.8)"), 0.8, true, "×",
                     "pairs/s ÷ pairs/s"});
        t.push_back({"Case 8: semaphore of 4 permits, 8 clients, vs exclusive on 4 distinct names",
                     r.get("8", "target", 8, "permit_4_vs_exclusive_4_names (>=0.5)"), 0.5, true, "×",
                     "pairs/s ÷ pairs/s"});
        t.push_back({"Case 8: multi-lock of 4 names, mean acquire+release latency at 1 client, vs one exclusive name",
                     r.get("8", "target", 1, "multi_4_vs_single_latency (<=1.5)"), 1.5, false, "×",
                     "µs ÷ µs (1 ÷ pairs/s)"});
    }
    return t;
}

// What the server and machine need for the same sequence of writes, without
// pg_dlock: where such a floor is already past a target's goal, the target is
// out of reach on this machine and the line says so.
std::string floor_lines(const results& r) {
    struct floor_line {
        std::string target;
        std::string floor;
        double floor_ratio; // the floor against the target's own denominator
        double goal;
        bool at_least;
        double dlock_vs_floor; // pg_dlock (SQL) ÷ the floor
    };
    std::vector<floor_line> lines;
    lines.push_back({"Case 1: pairs/s at 8 clients vs hand-written SQL lease",
                     "`floor-update-pair`: a durable one-row UPDATE, then an asynchronous one, per pair (the writes "
                     "and commits of a durable acquire and an asynchronous release)",
                     quotient(r.get("1", "floor-update-pair", 8, "pairs_per_s"), r.get("1", "sql-lease", 8, "pairs_per_s")),
                     1.5, true,
                     quotient(r.get("1", reference, 8, "pairs_per_s"), r.get("1", "floor-update-pair", 8, "pairs_per_s"))});
    double select1 = r.get("1", "floor-select1", 1, "acq_p50_us");
    double pair_release = r.get("1", "floor-update-pair", 1, "rel_p50_us");
    lines.push_back({"Case 1: release p50 at 1 client vs SELECT 1",
                     "`floor-update-pair`: an asynchronous one-row UPDATE right after a durable one, on one connection",
                     quotient(pair_release, select1), 2.0, false,
                     quotient(r.get("1", reference, 1, "rel_p50_us"), pair_release)});
    lines.push_back({"Case 2: critical sections/s at 8 clients vs blocking pg_advisory_lock",
                     "`floor-handoff-durable`: pg_advisory_lock with a durable one-row UPDATE after every grant "
                     "(one WAL flush per handoff, in series)",
                     quotient(r.get("2", "floor-handoff-durable", 8, "cs_per_s"), r.get("2", "advisory", 8, "cs_per_s")),
                     0.7, true,
                     quotient(r.get("2", reference, 8, "cs_per_s"), r.get("2", "floor-handoff-durable", 8, "cs_per_s"))});
    std::ostringstream md;
    bool any = false;
    for (const auto& l : lines)
        any = any || !std::isnan(l.floor_ratio);
    if (!any) return "";
    md << "Floors of the targets: the same writes and commits without pg_dlock, against the target's own "
          "denominator. A floor past the goal means the target is out of reach on this machine whatever pg_dlock "
          "does.\n\n"
       << "| target | floor | floor measured | goal | floor within the goal? | pg_dlock ÷ floor |\n"
          "|---|---|---|---|---|---|\n";
    for (const auto& l : lines) {
        if (std::isnan(l.floor_ratio)) continue;
        bool within = l.at_least ? l.floor_ratio >= l.goal : l.floor_ratio <= l.goal;
        md << "| " << l.target << " | " << l.floor << " | " << fmt_target_value(l.floor_ratio, "×") << " | "
           << (l.at_least ? "≥ " : "≤ ") << fmt_target_value(l.goal, "×") << " | "
           << (within ? "yes" : "**no**: out of reach here") << " | " << fmt_target_value(l.dlock_vs_floor, "×")
           << " |\n";
    }
    md << "\n";
    return md.str();
}

// "inverted of pairs" for case 2, or a dash where it was not measured.
std::string inversions(const results& r, const std::string& sys, long c) {
    double pairs = r.get("2", sys, c, "order_pairs");
    if (std::isnan(pairs)) return "–";
    return count(r.get("2", sys, c, "order_inversions")) + " of " + count(pairs);
}

bool has(const results& r, const std::string& c, const std::string& sys) {
    const auto& s = r.systems(c);
    return std::find(s.begin(), s.end(), sys) != s.end() && r.data.count(c) && r.data.at(c).count(sys);
}

// A gnuplot datablock with a header line; numeric_x leaves the first column
// unquoted so that it can serve as x coordinate.
void gp_datablock(std::ostream& gp, const std::string& name, const std::vector<std::string>& columns,
                  const std::vector<std::pair<std::string, std::vector<double>>>& rows, bool numeric_x = false) {
    gp << '$' << name << " << EOD\n\"x\"";
    for (const auto& c : columns)
        gp << " \"" << c << '"';
    gp << '\n';
    for (const auto& [label, values] : rows) {
        if (numeric_x)
            gp << label;
        else
            gp << '"' << label << '"';
        for (double v : values) {
            if (std::isnan(v) || std::isinf(v))
                gp << " ?";
            else
                gp << ' ' << v;
        }
        gp << '\n';
    }
    gp << "EOD\n";
}

} // namespace

int write_report(const report_paths& paths) {
    results r = load(paths.in);
    std::ostringstream md;
    std::ostringstream gp;

    md << "# pg_dlock benchmark results\n\n"
       << "Written by `make bench` (bench/run.sh). Every figure below comes from one run on the machine described "
          "next; each case ran its systems in alternation, round after round. Ratios are to pg_dlock through its "
          "SQL functions (`dlock-sql`) in the same run unless a column says otherwise.\n\n";
    if (!paths.machine.empty()) {
        std::ifstream m(paths.machine);
        md << "## Machine\n\n" << m.rdbuf() << "\n";
    }

    // Targets.
    std::ostringstream tg;
    tg << "| target | measured | goal | verdict |\n|---|---|---|---|\n";
    std::vector<std::string> dlock_systems = {reference};
    if (has(r, "1", "dlock-cpp") || has(r, "2", "dlock-cpp")) dlock_systems.push_back("dlock-cpp");
    for (const auto& sys : dlock_systems)
        for (const auto& t : targets(r, sys))
            tg << "| " << t.what << " | " << fmt_target_value(t.measured, t.unit) << " | " << (t.at_least ? "≥ " : "≤ ")
               << fmt_target_value(t.goal, t.unit) << " | " << verdict(t) << " |\n";
    md << "## Targets\n\n" << tg.str() << "\n";
    {
        double async_ratio =
            quotient(r.get("1", "floor-update-async", 1, "acq_p50_us"), r.get("1", "floor-select1", 1, "acq_p50_us"));
        double durable_ratio =
            quotient(r.get("1", "floor-update", 1, "acq_p50_us"), r.get("1", "floor-select1", 1, "acq_p50_us"));
        if (!std::isnan(async_ratio))
            md << "Context from the floors of this run, at 1 client: an asynchronous one-row UPDATE takes "
               << fmt_target_value(async_ratio, "×") << " the `SELECT 1` round trip (the machine the targets were set on: "
               << "2.2×), a durable one " << fmt_target_value(durable_ratio, "×") << ".\n\n";
    }
    md << floor_lines(r);

    if (!paths.summary.empty()) {
        // Key figures, one row per system, each with its ratio to pg_dlock.
        auto cell = [&](const std::string& c, const std::string& sys, long x, const std::string& m) {
            double v = r.get(c, sys, x, m);
            if (std::isnan(v)) return std::string("–");
            return num(v) + " (" + ratio(v, r.get(c, reference, x, m)) + ")";
        };
        std::ostringstream sm;
        sm << "| system | pairs/s, 1 client | pairs/s, 8 clients | acquire p50 µs, 1 client | release p50 µs, 1 "
              "client | contended critical sections/s, 8 clients | renewals/s, 8 clients |\n"
           << "|---|---:|---:|---:|---:|---:|---:|\n";
        std::vector<std::string> all = r.systems("1");
        for (const auto& c : {"2", "4"})
            for (const auto& sys : r.systems(c))
                if (std::find(all.begin(), all.end(), sys) == all.end()) all.push_back(sys);
        for (const auto& sys : all) {
            if (!has(r, "1", sys) && !has(r, "2", sys) && !has(r, "4", sys)) continue;
            sm << "| " << sys << " | " << cell("1", sys, 1, "pairs_per_s") << " | " << cell("1", sys, 8, "pairs_per_s")
               << " | " << cell("1", sys, 1, "acq_p50_us") << " | " << cell("1", sys, 1, "rel_p50_us") << " | "
               << cell("2", sys, 8, "cs_per_s") << " | " << cell("4", sys, 8, "renewals_per_s") << " |\n";
        }
        std::ofstream sf(paths.summary);
        if (!sf) throw std::runtime_error("could not write " + paths.summary);
        sf << sm.str() << "\n" << tg.str();
    }

    // The PNGs sit next to the results file: the markdown names them bare.
    const std::string plot_prefix;

    // Case 1.
    if (r.data.count("1")) {
        md << "## Case 1: uncontended acquire + release, distinct names\n\n"
           << "Each client cycles through 64 names of its own: acquire, then release at once. For the floors the "
              "acquire column is the single statement; `advisory-xact` is `SELECT pg_advisory_xact_lock(k)` in "
              "autocommit, lock and unlock in one round trip.\n\n"
           << "Server CPU is the user + system time of the PostgreSQL backends (or redis-server) serving the "
              "clients during the measured window, per pair, read from /proc; driver CPU is the load driver's own. "
              "CPU time is less disturbed than wall time by other work on the machine.\n\n"
           << "| system | clients | pairs/s | rounds min–max | × pg_dlock | acquire p50 µs | acquire p99 µs | release "
              "p50 µs | release p99 µs | server CPU µs/pair | driver CPU µs/pair | errors |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("1"))
            for (const auto& sys : r.systems("1")) {
                if (!has(r, "1", sys)) continue;
                double v = r.get("1", sys, c, "pairs_per_s");
                md << "| " << sys << " | " << c << " | " << num(v) << " | " << spread(r, "1", sys, c, "pairs_per_s")
                   << " | " << ratio(v, r.get("1", reference, c, "pairs_per_s")) << " | "
                   << num(r.get("1", sys, c, "acq_p50_us")) << " | " << num(r.get("1", sys, c, "acq_p99_us")) << " | "
                   << num(r.get("1", sys, c, "rel_p50_us")) << " | " << num(r.get("1", sys, c, "rel_p99_us")) << " | "
                   << num(r.get("1", sys, c, "server_cpu_us")) << " | " << num(r.get("1", sys, c, "driver_cpu_us"))
                   << " | " << count(r.get("1", sys, c, "errors")) << " |\n";
            }
        md << "\n![Case 1: pairs per second against clients](" << plot_prefix << "case1-throughput.png)\n\n"
           << "![Case 1: latency percentiles at 1 client](" << plot_prefix << "case1-latency.png)\n\n";

        std::vector<std::string> cols;
        for (const auto& sys : r.systems("1"))
            if (has(r, "1", sys)) cols.push_back(sys);
        std::vector<std::pair<std::string, std::vector<double>>> rows;
        for (long c : r.xs("1")) {
            std::vector<double> v;
            for (const auto& sys : cols)
                v.push_back(r.get("1", sys, c, "pairs_per_s"));
            rows.emplace_back(std::to_string(c), v);
        }
        gp_datablock(gp, "c1rate", cols, rows, true);
        gp << "set output '" << paths.plot_dir << "/case1-throughput.png'\n"
           << "set title 'Case 1: uncontended acquire + release pairs per second'\n"
           << "set xlabel 'clients'; set ylabel 'pairs/s'; set logscale x 2; set logscale y 10\n"
           << "set key outside right; set grid\n"
           << "plot for [i=2:" << cols.size() + 1 << "] $c1rate using (column(1)):i with linespoints lw 2 title "
           << "columnheader(i)\n"
           << "unset logscale; unset xlabel; unset ylabel\n";

        std::vector<std::pair<std::string, std::vector<double>>> lat;
        long lowest = r.xs("1").empty() ? 1 : r.xs("1").front();
        for (const auto& sys : cols)
            lat.emplace_back(
                sys, std::vector<double>{r.get("1", sys, lowest, "acq_p50_us"), r.get("1", sys, lowest, "acq_p99_us"),
                                         r.get("1", sys, lowest, "rel_p50_us"), r.get("1", sys, lowest, "rel_p99_us")});
        gp_datablock(gp, "c1lat", {"acquire p50", "acquire p99", "release p50", "release p99"}, lat);
        gp << "set output '" << paths.plot_dir << "/case1-latency.png'\n"
           << "set title 'Case 1: latency at " << lowest << " client(s), microseconds (log scale)'\n"
           << "set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1\n"
           << "set logscale y 10; set ylabel 'µs'; set xtics rotate by -30; set key outside right\n"
           << "plot $c1lat using 2:xtic(1) title columnheader(2), for [i=3:5] $c1lat using i title columnheader(i)\n"
           << "unset logscale; set xtics norotate; unset ylabel\n";
    }

    // Case 2.
    if (r.data.count("2")) {
        md << "## Case 2: contended, every client on one name\n\n"
           << "Clients loop: blocking acquire, critical section (a 100 µs sleep unless the run says otherwise), "
              "release. pg_dlock waits in the server (`dlock.acquire`), advisory locks block in the lock manager, "
              "the hand-written lease and Redis retry with exponential backoff (100 µs doubling to 5 ms, with "
              "jitter). Handoff = from the holder starting its release to the next holder's acquire returning. "
              "Fairness = most ÷ fewest critical sections of one client in a round (worst round shown). Overlaps "
              "counts critical sections entered while another client was inside (must be 0); timeouts counts "
              "blocking acquires that gave up after 5 s. Order inversions (50 clients, systems that wait in the "
              "server): one client holds the lock while the other 49 ask for it one after another, each seen waiting "
              "in `pg_stat_activity` before the next asks; pairs granted against their arrival order, of all pairs, "
              "over the rounds.\n\n"
           << "| system | clients | critical sections/s | rounds min–max | × pg_dlock | handoff p50 µs | handoff p99 "
              "µs | "
              "wait p50 µs "
              "| server CPU µs per section | most | fewest | fairness | overlaps | order inversions | timeouts "
              "| errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("2"))
            for (const auto& sys : r.systems("2")) {
                if (!has(r, "2", sys)) continue;
                double v = r.get("2", sys, c, "cs_per_s");
                md << "| " << sys << " | " << c << " | " << num(v) << " | " << spread(r, "2", sys, c, "cs_per_s")
                   << " | " << ratio(v, r.get("2", reference, c, "cs_per_s")) << " | "
                   << num(r.get("2", sys, c, "handoff_p50_us")) << " | " << num(r.get("2", sys, c, "handoff_p99_us"))
                   << " | " << num(r.get("2", sys, c, "wait_p50_us")) << " | "
                   << num(r.get("2", sys, c, "server_cpu_us")) << " | " << count(r.get("2", sys, c, "most")) << " | "
                   << count(r.get("2", sys, c, "fewest")) << " | " << num(r.get("2", sys, c, "fairness")) << " | "
                   << count(r.get("2", sys, c, "overlaps")) << " | " << inversions(r, sys, c) << " | "
                   << count(r.get("2", sys, c, "timeouts")) << " | " << count(r.get("2", sys, c, "errors")) << " |\n";
            }
        md << "\n![Case 2: critical sections per second](" << plot_prefix << "case2-contended.png)\n\n";

        std::vector<std::string> cols;
        for (long c : r.xs("2"))
            cols.push_back(std::to_string(c) + " clients");
        std::vector<std::pair<std::string, std::vector<double>>> rows;
        for (const auto& sys : r.systems("2")) {
            if (!has(r, "2", sys)) continue;
            std::vector<double> v;
            for (long c : r.xs("2"))
                v.push_back(r.get("2", sys, c, "cs_per_s"));
            rows.emplace_back(sys, v);
        }
        gp_datablock(gp, "c2", cols, rows);
        gp << "set output '" << paths.plot_dir << "/case2-contended.png'\n"
           << "set title 'Case 2: critical sections per second, one contended name'\n"
           << "set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1\n"
           << "set ylabel 'critical sections/s'; set xtics rotate by -30; set key outside right; set yrange [0:*]\n"
           << "plot $c2 using 2:xtic(1) title columnheader(2)";
        for (std::size_t i = 1; i < cols.size(); ++i)
            gp << ", $c2 using " << i + 2 << " title columnheader(" << i + 2 << ")";
        gp << "\nset xtics norotate; unset ylabel; set autoscale y\n";
    }

    // Case 3.
    if (r.data.count("3") || r.data.count("3c")) {
        md << "## Case 3: scale\n\n";
    }
    if (r.data.count("3")) {
        auto xs = r.xs("3");
        md << "Acquire + release on one client, names drawn at random. pg_dlock keeps one row per name, so its "
              "table holds that many free locks and every acquire updates an existing row; the hand-written lease "
              "only has rows for held locks, so its table holds that many live leases of other owners and every "
              "acquire inserts a new name. Tables were filled with INSERT … SELECT (for pg_dlock, copies of a row "
              "the extension itself left after one acquire and release), then VACUUM (ANALYZE) and CHECKPOINT; "
              "server settings are the defaults (shared_buffers 128 MB).\n\n"
           << "| system | lock rows | acquire p50 µs | acquire p99 µs | × at "
           << rows_label(xs.empty() ? 0 : xs.front()) << " | release p50 µs | pairs/s | table | indexes | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (const auto& sys : r.systems("3")) {
            if (!has(r, "3", sys)) continue;
            for (long n : xs) {
                double p50 = r.get("3", sys, n, "acq_p50_us");
                md << "| " << sys << " | " << rows_label(n) << " | " << num(p50) << " | "
                   << num(r.get("3", sys, n, "acq_p99_us")) << " | "
                   << ratio(p50, r.get("3", sys, xs.front(), "acq_p50_us")) << " | "
                   << num(r.get("3", sys, n, "rel_p50_us")) << " | " << num(r.get("3", sys, n, "pairs_per_s")) << " | "
                   << mib(r.get("3", sys, n, "table_bytes")) << " | " << mib(r.get("3", sys, n, "index_bytes")) << " | "
                   << count(r.get("3", sys, n, "errors")) << " |\n";
            }
        }
        md << "\n![Case 3: acquire latency against lock rows](" << plot_prefix << "case3-scale.png)\n\n"
           << "![Case 3: table and index size against lock rows](" << plot_prefix << "case3-size.png)\n\n";

        std::vector<std::string> cols;
        std::vector<std::string> size_cols;
        std::vector<std::string> sys3;
        for (const auto& sys : r.systems("3"))
            if (has(r, "3", sys)) {
                sys3.push_back(sys);
                cols.push_back(sys + " p50");
                cols.push_back(sys + " p99");
                size_cols.push_back(sys + " table");
                size_cols.push_back(sys + " indexes");
            }
        std::vector<std::pair<std::string, std::vector<double>>> rows;
        std::vector<std::pair<std::string, std::vector<double>>> size_rows;
        for (long n : xs) {
            std::vector<double> v;
            std::vector<double> s;
            for (const auto& sys : sys3) {
                v.push_back(r.get("3", sys, n, "acq_p50_us"));
                v.push_back(r.get("3", sys, n, "acq_p99_us"));
                s.push_back(r.get("3", sys, n, "table_bytes") / 1048576.0);
                s.push_back(r.get("3", sys, n, "index_bytes") / 1048576.0);
            }
            rows.emplace_back(std::to_string(n), v);
            size_rows.emplace_back(std::to_string(n), s);
        }
        gp_datablock(gp, "c3", cols, rows, true);
        gp_datablock(gp, "c3size", size_cols, size_rows, true);
        gp << "set output '" << paths.plot_dir << "/case3-scale.png'\n"
           << "set title 'Case 3: acquire latency against lock rows (1 client)'\n"
           << "set xlabel 'lock rows'; set ylabel 'µs (log scale)'; set logscale xy 10; set key outside right\n"
           << "set grid; set format x '%.0s%c'; set xrange [500:2000000]\n"
           << "plot for [i=2:" << cols.size() + 1 << "] $c3 using (column(1)):i with linespoints lw 2 title "
           << "columnheader(i)\n"
           << "set output '" << paths.plot_dir << "/case3-size.png'\n"
           << "set title 'Case 3: table and index size against lock rows'\n"
           << "set ylabel 'MiB (log scale)'; set logscale xy 10; set autoscale y\n"
           << "plot for [i=2:" << size_cols.size() + 1
           << "] $c3size using (column(1)):i with linespoints lw 2 title columnheader(i)\n"
           << "unset logscale; unset xlabel; unset ylabel; unset grid; set format x; set autoscale x\n";
    }
    if (r.data.count("3c")) {
        md << "Churn: the first pass acquires and releases each name once (creating the rows), then clients "
              "acquire and release random names from the same set. Sizes are the main fork (`pg_relation_size`) "
              "and all indexes; HOT share is `n_tup_hot_upd ÷ n_tup_upd` over the churn. Autovacuum ran with its "
              "default settings.\n\n"
           << "| system | names | cycles (target) | cycles/s | table after first pass | table after churn | "
              "growth | indexes after first pass | indexes after churn | growth | updates | HOT share | "
              "autovacuums | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (const auto& sys : r.systems("3c")) {
            if (!has(r, "3c", sys)) continue;
            for (long n : r.xs("3c")) {
                auto g = [&](const char* m) { return r.get("3c", sys, n, m); };
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

    // Case 4.
    if (r.data.count("4")) {
        md << "## Case 4: keep-alive cost\n\n"
           << "Clients hold many live leases and renew them round-robin as fast as the server allows. "
              "\"Leases kept alive\" is the renewal rate times 10 s: how many leases one server keeps alive if each "
              "renews every 10 s (a 30 s TTL renewed at a third). Advisory locks have no lease and need no renewal "
              "(they cost an open session each instead). `floor-update` renews nothing: it is the durable one-row "
              "UPDATE floor.\n\n"
           << "| system | clients | live leases | renewals/s | rounds min–max | × pg_dlock | renew p50 µs | renew p99 "
              "µs "
              "| server CPU µs/renewal | leases kept alive at one renewal per 10 s | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("4"))
            for (const auto& sys : r.systems("4")) {
                if (!has(r, "4", sys)) continue;
                double v = r.get("4", sys, c, "renewals_per_s");
                md << "| " << sys << " | " << c << " | " << count(r.get("4", sys, c, "leases")) << " | " << num(v)
                   << " | " << spread(r, "4", sys, c, "renewals_per_s") << " | "
                   << ratio(v, r.get("4", reference, c, "renewals_per_s")) << " | "
                   << num(r.get("4", sys, c, "renew_p50_us")) << " | " << num(r.get("4", sys, c, "renew_p99_us"))
                   << " | " << num(r.get("4", sys, c, "server_cpu_us")) << " | " << num(v * 10) << " | "
                   << count(r.get("4", sys, c, "errors")) << " |\n";
            }
        md << "\n";
    }

    // Case 5.
    if (r.data.count("5")) {
        const std::string ref5 = "dlock-sql 3 tx";
        md << "## Case 5: lock + business write in one transaction vs three transactions\n\n"
           << "One unit = take the lock, update one business row (`UPDATE bench.account … WHERE id = $1`, a row "
              "per client), give the lock back. *1 tx*: BEGIN, acquire, write, release, COMMIT (one durable commit). "
              "*3 tx*: acquire, write and release each commit on their own. *fenced*: the write transaction first "
              "calls `dlock.assert_holds`. `advisory-xact 1 tx` is BEGIN, `pg_advisory_xact_lock`, write, COMMIT. "
              "Ratios are to `"
           << ref5 << "`.\n\n"
           << "| variant | clients | units/s | rounds min–max | × " << ref5
           << " | unit p50 µs | unit p99 µs | errors |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
        for (long c : r.xs("5"))
            for (const auto& v : r.systems("5")) {
                if (!has(r, "5", v)) continue;
                double u = r.get("5", v, c, "units_per_s");
                md << "| " << v << " | " << c << " | " << num(u) << " | " << spread(r, "5", v, c, "units_per_s")
                   << " | " << ratio(u, r.get("5", ref5, c, "units_per_s")) << " | "
                   << num(r.get("5", v, c, "unit_p50_us")) << " | " << num(r.get("5", v, c, "unit_p99_us")) << " | "
                   << count(r.get("5", v, c, "errors")) << " |\n";
            }
        md << "\n";
    }

    // Case 6.
    if (r.data.count("6")) {
        double update_us = r.get("6", "floor-update", 1, "update_us");
        md << "## Case 6: cost per call inside one transaction\n\n"
           << "Each statement runs 5 000 times in a PL/pgSQL loop sent as one statement, inside one transaction "
              "that is rolled back (no commit, no round trip per call); the loop's own cost per iteration is "
              "subtracted. try_acquire and release work on existing, free lock rows; the UPDATE changes three "
              "columns of a row found by its text primary key in a table with the same fillfactor. Median of the "
              "passes.\n\n"
           << "| statement | µs per call | × UPDATE by primary key |\n|---|---:|---:|\n";
        auto row = [&](const std::string& what, const std::string& sys, const std::string& m) {
            double v = r.get("6", sys, 1, m);
            md << "| " << what << " | " << num(v) << " | " << ratio(v, update_us) << " |\n";
        };
        row("`SELECT dlock.try_acquire(…)`", reference, "try_acquire_us");
        row("`SELECT dlock.release(…)`", reference, "release_us");
        row("`UPDATE … WHERE key = $1`", "floor-update", "update_us");
        row("`SELECT $1` (an empty statement)", "floor-select1", "select_us");
        md << "\nThe loop itself: " << num(r.get("6", "floor-select1", 1, "loop_us")) << " µs per iteration.\n\n";
    }

    // Case 7.
    if (r.data.count("7")) {
        md << "## Case 7: lock events\n\n"
           << "Case 1 with `dlock.events` off and on, alternating round by round (the ratio is the cost of events). "
              "Delivery: one session grants and releases a lock every 2 ms while 8 sessions `LISTEN` on "
              "`dlock_events`; for each acquire event, the time from the granting statement's reply to its arrival "
              "at each listener. Failover: a leader in a child process keeps a lease of ttl 1 s alive, another "
              "session waits for it in `dlock.acquire`; the leader is killed with SIGKILL, and the time to the new "
              "leader's first `dlock.fence` is compared with the ttl.\n\n"
           << "| clients | pairs/s, events off | pairs/s, events on | on ÷ off |\n|---:|---:|---:|---:|\n";
        for (long c : r.xs("7")) {
            if (std::isnan(r.get("7", reference, c, "events_on_over_off"))) continue;
            md << "| " << c << " | " << num(r.get("7", reference, c, "pairs_per_s_events_off")) << " | "
               << num(r.get("7", reference, c, "pairs_per_s_events_on")) << " | "
               << fmt_target_value(r.get("7", reference, c, "events_on_over_off"), "×") << " |\n";
        }
        md << "\n| | |\n|---|---|\n"
           << "| delivery to 8 listeners | p50 " << num(r.get("7", reference, 8, "delivery_p50_us")) << " µs, p99 "
           << num(r.get("7", reference, 8, "delivery_p99_us")) << " µs, "
           << pct(r.get("7", reference, 8, "delivered_share")) << " delivered |\n"
           << "| leadership failover after SIGKILL (ttl " << num(r.get("7", reference, 2, "failover_ttl_ms"))
           << " ms) | p50 " << num(r.get("7", reference, 2, "failover_p50_ms")) << " ms, max "
           << num(r.get("7", reference, 2, "failover_max_ms")) << " ms |\n\n";
    }

    // Case 8.
    if (r.data.count("8")) {
        md << "## Case 8: lock kinds\n\n"
           << "Acquire+release pairs per second (`try_acquire_shared`, `try_acquire_permit`, `try_acquire_all` and "
              "their releases) against exclusive leases and peers; the multi-lock row is the p50 of a whole pair "
              "at one client.\n\n"
           << "| system | clients | pairs/s | pair p50 µs |\n|---|---:|---:|---:|\n";
        for (const char* sys : {"dlock-exclusive-8-names", "dlock-shared-1-name", "dlock-shared-8-names",
                                "advisory-shared-1-key", "dlock-exclusive-4-names", "dlock-permit-4", "sql-semaphore-4",
                                "dlock-exclusive-1-name", "dlock-multi-4-names"}) {
            for (long c : {1L, 8L}) {
                const double rate = r.get("8", sys, c, "pairs_per_s");
                if (std::isnan(rate)) continue;
                const double p50 = r.get("8", sys, c, "pair_p50_us");
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
    if (!paths.gnuplot.empty()) {
        std::ofstream gpf(paths.gnuplot);
        if (!gpf) throw std::runtime_error("could not write " + paths.gnuplot);
        gpf << "# generated by dlock_bench report\n"
            << "set datafile missing '?'\n"
            << "if (!exists(\"term\")) term = \"pngcairo\"\n"
            << "set terminal @term size 1000,560\n"
            << "set linetype 1 lc rgb '#1f77b4' pt 7\n"
            << "set linetype 2 lc rgb '#17becf' pt 5\n"
            << "set linetype 3 lc rgb '#ff7f0e' pt 9\n"
            << "set linetype 4 lc rgb '#2ca02c' pt 11\n"
            << "set linetype 5 lc rgb '#98df8a' pt 13\n"
            << "set linetype 6 lc rgb '#d62728' pt 15\n"
            << "set linetype 7 lc rgb '#7f7f7f' pt 4\n"
            << "set linetype 8 lc rgb '#000000' pt 6\n"
            << "set linetype 9 lc rgb '#9467bd' pt 8\n"
            << "set linetype 10 lc rgb '#8c564b' pt 10\n"
            << "set linetype cycle 10\n"
            << gp.str();
    }
    return 0;
}

} // namespace bench
