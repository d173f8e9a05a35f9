// report_generation.cpp -- build an expensive report once; concurrent callers
// wait for the builder instead of building it again.
//
// acquire() waits in the server for "report:<name>". The winner builds the
// report, stopping if the lease is lost (on_lost flips a flag the work polls);
// the row is stored with its fencing token and a dlock.enforce_fencing
// trigger refuses a store by an older lease holder. Callers that waited find
// the report ready and reuse it.
//
// Usage: report_generation [REPORT]   (connection from PG*)
// Exit status: 0 report ready, 75 waited too long, 1 lost the lease, 2 error.
#include <dlock/dlock.hpp>

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

void create_tables(pqxx::connection& conn) {
    pqxx::work w{conn};
    w.exec("SELECT pg_advisory_xact_lock(hashtext('dlock examples setup'))");
    w.exec("CREATE TABLE IF NOT EXISTS example_reports ("
           " name text PRIMARY KEY, body text NOT NULL, built_at timestamptz NOT NULL DEFAULT now(),"
           " fencing_token bigint NOT NULL)");
    w.exec("CREATE OR REPLACE TRIGGER example_reports_fencing BEFORE INSERT OR UPDATE ON example_reports"
           " FOR EACH ROW EXECUTE FUNCTION dlock.enforce_fencing('fencing_token')");
    w.commit();
}

bool report_is_fresh(pqxx::connection& conn, const std::string& name) {
    pqxx::nontransaction tx{conn};
    return !tx.exec_params("SELECT 1 FROM example_reports WHERE name = $1 AND built_at > now() - interval '1 hour'",
                           name)
                .empty();
}

} // namespace

int main(int argc, char** argv) {
    const std::string report = argc > 1 ? argv[1] : "monthly-revenue";
    try {
        pqxx::connection conn;
        create_tables(conn);
        if (report_is_fresh(conn, report)) {
            std::cout << "report " << report << " is ready (cached)\n";
            return 0;
        }

        dlock::client locks;
        std::atomic<bool> cancel{false};
        dlock::lease_options options;
        options.ttl = 3s;
        options.on_lost = [&](const dlock::lost_lease&) { cancel = true; };
        dlock::lease lease = locks.acquire("report:" + report, 30s, options);

        // Someone may have built it while we waited.
        if (report_is_fresh(conn, report)) {
            std::cout << "report " << report << " is ready (built by another caller)\n";
            return 0;
        }
        std::string body;
        for (int part = 0; part < 5; ++part) { // the expensive part
            if (cancel) {
                std::cerr << "lease lost while building " << report << "; giving up\n";
                return 1;
            }
            std::this_thread::sleep_for(100ms);
            body += "section " + std::to_string(part) + "\n";
        }
        pqxx::work w{conn};
        w.exec_params("INSERT INTO example_reports (name, body, fencing_token) VALUES ($1, $2, $3)"
                      " ON CONFLICT (name) DO UPDATE SET body = excluded.body, built_at = now(),"
                      " fencing_token = excluded.fencing_token",
                      report, body, lease.fencing_token());
        w.commit();
        std::cout << "report " << report << " built with fencing token " << lease.fencing_token() << "\n";
        return 0;
    } catch (const dlock::busy_error& e) {
        std::cerr << "waited too long for " << e.subject() << "\n";
        return 75;
    } catch (const dlock::stale_token_error& e) {
        std::cerr << "a newer builder already stored " << report << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "report_generation: " << e.what() << "\n";
        return 2;
    }
}
