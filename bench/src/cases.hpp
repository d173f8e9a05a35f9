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
    int cs_us = 100; // contended case: critical section, spent sleeping
    std::vector<long> rows = {1000, 100000, 1000000};
    long churn_names = 10000;
    long churn_cycles = 1000000;
    long churn_baseline_cycles = 100000; // for the hand-written lease
    double churn_max_s = 240;
    int churn_clients = 8;
    long leases = 10000;
};

// Runs the case named id: "uncontended", "contended", "scale" (latency
// against number of rows), "churn", "keep-alive", "business-write",
// "function-cost" (cost inside one transaction), "events" or "lock-kinds".
// Returns the number of runs that failed.
int run_case(const std::string& id, const bench_config& cfg, sink& out);

// The events case (events_case.cpp): the cost of lock events, their delivery and
// leadership failover. Returns the number of parts that failed.
int case_events(const bench_config& cfg, sink& out);

// The lock-kinds case (kinds_case.cpp): lock kinds against their peers.
int case_kinds(const bench_config& cfg, sink& out);

// Runs every available system for about duration seconds each through the
// uncontended and contended paths; returns the number of failed systems.
int run_smoke(const bench_config& cfg, sink& out);

} // namespace bench
