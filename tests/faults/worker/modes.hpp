// tests/faults/worker/modes.hpp -- the modes of fault_worker, the one worker
// binary of the fault harness (tests/faults) and the failover harness
// (tests/ha). main.cpp picks one by --mode and passes it the other arguments.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace faults {

/// --mode workload (the default): acquire, fenced writes, release, under the
/// fault harness's faults (workload.cpp).
int run_workload(int argc, char** argv);

/// --mode keep-alive: keep-alive leases through the client library on a
/// multi-host connection string, each grant and write with its deadlines
/// (keep_alive.cpp; tests/ha). Needs the client library.
int run_keep_alive(int argc, char** argv);

/// --mode elector: a candidate or an observer of the election scenario
/// (elector.cpp). Needs the client library.
int run_elector(int argc, char** argv);

/// The options of the workload and keep-alive modes (workload.cpp's usage;
/// keep-alive reads id, conninfo, history, locks, duration-ms, ttl-ms,
/// hold-ms, seed and stop-file).
struct worker_options {
    std::string id = "w1";
    std::string conninfo;
    std::string history;
    std::vector<std::string> locks{"L1", "L2", "L3"};
    long duration_ms = 5000;
    long ttl_ms = 1500;
    bool fencing = true;
    double p_token = 0.5;
    double p_wait = 0.2;
    double p_txn = 0.0;
    long txn_pause_ms = 30;
    double p_renew = 0.2;
    double slow_prob = 0.0;
    long slow_ms = 0;
    std::string slow_where = "before";
    bool use_lease = false;
    double drift = 0.05;
    long think_ms = 5;
    long hold_ms = 0;
    bool force_pqxx = false;
    bool session_bound = false;
    std::string store;
    unsigned long seed = 0;
    std::string stop_file; // keep-alive: end early (between iterations) once this file exists
};

/// --key value options into worker_options; throws std::invalid_argument.
worker_options parse_worker_options(int argc, char** argv);

/// A mode's options: each "--name value" of argv[1..argc) as name -> value;
/// the names in flags stand alone (no value) and map to "1". Throws
/// std::invalid_argument on anything else.
std::map<std::string, std::string> key_values(int argc, char** argv, const std::set<std::string>& flags = {});

/// The non-empty items of a sep-separated list ("L1,L2,L3").
std::vector<std::string> split(const std::string& text, char sep);

} // namespace faults
