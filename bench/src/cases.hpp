// The benchmark cases.
#pragma once

#include "runner.hpp"

#include <string>
#include <vector>

namespace bench {

struct bench_config {
    system_options base;
    std::vector<std::string> systems; // empty: the case's default set
    std::vector<int> clients;         // empty: the case's default
    double duration_s = 2.0;
    double warmup_s = 0.5;
    int rounds = 2;
    int cs_us = 100; // case 2 critical section, spent sleeping
    std::vector<long> rows = {1000, 100000, 1000000};
    long churn_names = 10000;
    long churn_cycles = 1000000;
    long churn_baseline_cycles = 100000; // for the hand-written lease
    double churn_max_s = 240;
    int churn_clients = 8;
    long leases = 10000;
};

// Runs case "1", "2", "3" (latency against number of rows), "3c" (churn),
// "4", "5" or "6" (function cost inside one transaction). Returns the number of runs that failed.
int run_case(const std::string& id, const bench_config& cfg, sink& out);

// Case 6 (events_case.cpp): the cost of lock events, their delivery and
// leadership failover. Returns the number of parts that failed.
int case_events(const bench_config& cfg, sink& out);

// Case 8 (kinds_case.cpp): lock kinds against their targets and peers.
int case_kinds(const bench_config& cfg, sink& out);

// Runs every available system for about duration seconds each through the
// uncontended and contended paths; returns the number of failed systems.
int run_smoke(const bench_config& cfg, sink& out);

} // namespace bench
