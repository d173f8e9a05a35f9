// dlock_bench: load driver for the pg_dlock benchmarks.
//
//   dlock_bench run CASE [options]   CASE: uncontended, contended, scale, churn,
//                                    keep-alive, business-write, function-cost,
//                                    events or lock-kinds
//   dlock_bench smoke [options]      every system for about --duration seconds
//   dlock_bench report --in TSV --md FILE [--machine FILE]
//
// Results are appended to --out as TSV (case, system, clients, metric, value).
#include "cases.hpp"
#include "report.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char* const usage =
    "usage: dlock_bench run CASE [options]      CASE: uncontended contended scale churn keep-alive\n"
    "                                           business-write function-cost events lock-kinds\n"
    "       dlock_bench smoke [options]\n"
    "       dlock_bench report --in TSV --md FILE [--machine FILE]\n"
    "options:\n"
    "  --pg CONNINFO            libpq connection string (default: the PG* environment)\n"
    "  --pg-sql-edition CONNINFO  the database with the SQL edition (pg_dlock_sql), for the\n"
    "                           system dlock-sql-edition (default: none, the system is skipped)\n"
    "  --redis HOST:PORT        redis-server (default 127.0.0.1:55501)\n"
    "  --systems a,b            systems to run (default: all the case has)\n"
    "  --clients 1,8,32         client counts (default: the case's)\n"
    "  --duration S --warmup S --rounds N\n"
    "  --cs-us N                contended: critical section in microseconds (default 100)\n"
    "  --rows a,b,c             scale: lock rows (default 1000,100000,1000000)\n"
    "  --churn-names N --churn-cycles N (pg_dlock) --churn-baseline-cycles N (hand-written lease)\n"
    "  --churn-max-seconds S --churn-clients N   churn\n"
    "  --leases N               keep-alive: live leases (default 10000)\n"
    "  --out FILE               append results as TSV\n";

template <class T> std::vector<T> split_list(const std::string& s) {
    std::vector<T> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        if constexpr (std::is_same_v<T, std::string>)
            out.push_back(item);
        else
            out.push_back(static_cast<T>(std::stod(item)));
    }
    return out;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fputs(usage, stderr);
        return 2;
    }
    std::string command = argv[1];
    if (command == "--help" || command == "-h" || command == "help") {
        std::fputs(usage, stdout);
        return 0;
    }
    std::string case_id;
    int first = 2;
    if (command == "run") {
        if (argc < 3) {
            std::fputs(usage, stderr);
            return 2;
        }
        case_id = argv[2];
        first = 3;
    }

    bench::bench_config cfg;
    bench::report_paths paths;
    std::string out_path;
    try {
        for (int i = first; i < argc; ++i) {
            std::string opt = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw std::invalid_argument(opt + " needs a value");
                return argv[++i];
            };
            if (opt == "--pg")
                cfg.base.conninfo = value();
            else if (opt == "--pg-sql-edition")
                cfg.base.sql_edition_conninfo = value();
            else if (opt == "--redis") {
                std::string v = value();
                auto colon = v.rfind(':');
                if (colon == std::string::npos) throw std::invalid_argument("--redis wants HOST:PORT");
                cfg.base.redis_host = v.substr(0, colon);
                cfg.base.redis_port = std::stoi(v.substr(colon + 1));
            } else if (opt == "--systems")
                cfg.systems = split_list<std::string>(value());
            else if (opt == "--clients")
                cfg.clients = split_list<int>(value());
            else if (opt == "--duration")
                cfg.duration_s = std::stod(value());
            else if (opt == "--warmup")
                cfg.warmup_s = std::stod(value());
            else if (opt == "--rounds")
                cfg.rounds = std::stoi(value());
            else if (opt == "--cs-us")
                cfg.cs_us = std::stoi(value());
            else if (opt == "--rows")
                cfg.rows = split_list<long>(value());
            else if (opt == "--churn-names")
                cfg.churn_names = std::stol(value());
            else if (opt == "--churn-cycles")
                cfg.churn_cycles = std::stol(value());
            else if (opt == "--churn-baseline-cycles")
                cfg.churn_baseline_cycles = std::stol(value());
            else if (opt == "--churn-max-seconds")
                cfg.churn_max_s = std::stod(value());
            else if (opt == "--churn-clients")
                cfg.churn_clients = std::stoi(value());
            else if (opt == "--leases")
                cfg.leases = std::stol(value());
            else if (opt == "--out")
                out_path = value();
            else if (opt == "--in")
                paths.in = value();
            else if (opt == "--md")
                paths.md = value();
            else if (opt == "--machine")
                paths.machine = value();
            else
                throw std::invalid_argument("unknown option " + opt);
        }
        if (cfg.rounds < 1 || cfg.duration_s <= 0)
            throw std::invalid_argument("--rounds and --duration must be positive");

        if (command == "report") return bench::write_report(paths);
        bench::sink out(out_path);
        if (command == "run") return bench::run_case(case_id, cfg, out) == 0 ? 0 : 1;
        if (command == "smoke") {
            int failed = bench::run_smoke(cfg, out);
            return failed == 0 ? 0 : 1;
        }
        std::fputs(usage, stderr);
        return 2;
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "dlock_bench: %s\n%s", e.what(), usage);
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dlock_bench: %s\n", e.what());
        return 1;
    }
}
