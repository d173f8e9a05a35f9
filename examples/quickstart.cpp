// quickstart.cpp -- the complete program of docs/client.md (and, in short, the README).
// Build against an installed client:
//   c++ -std=c++17 quickstart.cpp $(pkg-config --cflags --libs dlock) -o quickstart
#include <dlock/dlock.hpp>

#include <pqxx/pqxx>

#include <chrono>
#include <iostream>

using namespace std::chrono_literals;

int main() {
    try {
        dlock::client locks; // connection from PG* (or pass a libpq connection string)

        dlock::lease_options options;
        options.ttl = 10s; // renewed in the background every ttl/3
        options.on_lost = [](const dlock::lost_lease& l) {
            std::cerr << "lost " << l.lock_name << " (" << dlock::to_string(l.reason) << ")\n";
        };

        // Wait up to 5 s in the server for the lock; busy_error if it stays taken.
        dlock::lease lease = locks.acquire("nightly-export", 5s, options);
        std::cout << "holding " << lease.name() << " with fencing token " << lease.fencing_token() << "\n";

        // Write business data only while the lease holds, in one transaction.
        pqxx::connection db;
        pqxx::work w{db};
        dlock::assert_holds(w, lease.name(), lease.fencing_token()); // pins the lease until commit
        dlock::fence(w, "export-target", lease.fencing_token());     // refuses older holders
        // ... w.exec_params("INSERT ...", ...);
        if (dlock::commit(w) == dlock::outcome::unknown) std::cerr << "commit outcome unknown: check before retrying\n";

        std::cout << "time left on the lease: " << lease.time_left().count() << " ms\n";
        return 0; // the lease is released here, when it goes out of scope
    } catch (const dlock::busy_error& e) {
        std::cerr << e.subject() << " is busy\n";
        return 75;
    } catch (const dlock::error& e) {
        std::cerr << "dlock: " << e.what() << "\n";
        return 1;
    }
}
