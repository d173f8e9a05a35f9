// tests/faults/worker/main.cpp -- fault_worker, the one worker binary of the
// fault harness (tests/faults/harness.py) and the failover harness
// (tests/ha/ha.py).
//
// Usage: fault_worker [--mode workload|keep-alive|elector] [the mode's options]
//   workload    (default) the fault scenarios' worker (workload.cpp)
//   keep-alive  the Patroni failover worker: keep-alive leases, deadlines
//               recorded (keep_alive.cpp; needs the client library)
//   elector     a candidate or observer of the election scenario (elector.cpp;
//               needs the client library)
// Every mode writes its history in the format of history.hpp.
#include <csignal>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "modes.hpp"

std::map<std::string, std::string> faults::key_values(int argc, char** argv, const std::set<std::string>& flags) {
    std::map<std::string, std::string> kv;
    for (int i = 1; i < argc; ++i) {
        const std::string key = argv[i];
        if (key.rfind("--", 0) != 0) throw std::invalid_argument("bad argument " + key);
        if (flags.count(key.substr(2)) != 0) {
            kv[key.substr(2)] = "1";
            continue;
        }
        if (i + 1 >= argc) throw std::invalid_argument("bad argument " + key);
        kv[key.substr(2)] = argv[++i];
    }
    return kv;
}

std::vector<std::string> faults::split(const std::string& text, char sep) {
    std::vector<std::string> parts;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, sep))
        if (!item.empty()) parts.push_back(item);
    return parts;
}

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    std::string mode = "workload";
    if (argc > 2 && std::string(argv[1]) == "--mode") {
        mode = argv[2];
        // The mode sees its own options as if they were the program's.
        argv[2] = argv[0];
        argc -= 2;
        argv += 2;
    }
    try {
        if (mode == "workload") return faults::run_workload(argc, argv);
#ifdef FAULTS_WITH_CLIENT
        if (mode == "keep-alive") return faults::run_keep_alive(argc, argv);
        if (mode == "elector") return faults::run_elector(argc, argv);
#else
        if (mode == "keep-alive" || mode == "elector")
            throw std::invalid_argument("--mode " + mode + " needs the client library, which this build lacks");
#endif
        throw std::invalid_argument("unknown --mode " + mode + " (workload, keep-alive, elector)");
    } catch (const std::exception& e) {
        std::cerr << "fault_worker --mode " << mode << ": " << e.what() << "\n";
        return 2;
    }
}
