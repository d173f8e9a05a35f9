// daily_settlement.cpp -- a nightly batch that must run on exactly one host.
//
// Every host starts it from cron; the first takes "settlement:<day>" and the
// others exit (busy). The lease is kept alive only while the batch reports
// progress, so a hung batch loses it instead of blocking the next run. Each
// chunk commits with assert_holds (the lease cannot be taken over during the
// chunk) and fence (a batch that lost the lease cannot write after a newer
// one), and the batch stops the moment the lease is lost.
//
// Usage: daily_settlement [DAY]   (connection from PG*; DAY defaults to today)
// Exit status: 0 settled (or already settled), 75 another host is settling,
// 1 lost the lease (the next run resumes), 2 error.
#include <dlock/dlock.hpp>

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>

using namespace std::chrono_literals;

namespace {

void create_tables(pqxx::connection& conn, const std::string& day) {
    pqxx::work w{conn};
    w.exec("SELECT pg_advisory_xact_lock(hashtext('dlock examples setup'))");
    w.exec("CREATE TABLE IF NOT EXISTS example_ledger ("
           " day date NOT NULL, account integer NOT NULL, amount numeric NOT NULL)");
    w.exec("CREATE TABLE IF NOT EXISTS example_settlements ("
           " day date NOT NULL, account integer NOT NULL, total numeric NOT NULL,"
           " fencing_token bigint NOT NULL, PRIMARY KEY (day, account))");
    // Some ledger entries for the day, once.
    w.exec_params("INSERT INTO example_ledger SELECT $1::date, a, (a * e) % 97"
                  " FROM generate_series(1, 200) a, generate_series(1, 5) e"
                  " WHERE NOT EXISTS (SELECT FROM example_ledger WHERE day = $1::date)",
                  day);
    w.commit();
}

} // namespace

int main(int argc, char** argv) {
    try {
        pqxx::connection conn;
        const std::string day =
            argc > 1 ? argv[1] : pqxx::nontransaction{conn}.exec("SELECT current_date::text")[0][0].as<std::string>();
        create_tables(conn, day);

        dlock::client locks;
        std::atomic<bool> lost{false};
        dlock::lease_options options;
        options.ttl = 5s;
        options.renew_only_on_progress = true; // a hung batch must not hold the lock forever
        options.on_lost = [&](const dlock::lost_lease& l) {
            lost = true;
            std::cerr << "lease on " << l.lock_name << " lost (" << dlock::to_string(l.reason) << ")\n";
        };
        const std::string lock_name = "settlement:" + day;
        auto lease = locks.try_acquire(lock_name, options);
        if (!lease) {
            std::cout << "another host is settling " << day << "\n";
            return 75;
        }

        int settled = 0;
        for (;;) {
            if (lost || !lease->valid()) return 1; // stop writing at once
            pqxx::work w{conn};
            dlock::assert_holds(w, lock_name, lease->fencing_token());
            // Fencing tokens grow per lock name, so the fenced resource is per day too.
            dlock::fence(w, "settlements/" + day, lease->fencing_token());
            // Next chunk of accounts not yet settled for the day (resumable).
            const auto r = w.exec_params(
                "INSERT INTO example_settlements (day, account, total, fencing_token)"
                " SELECT day, account, sum(amount), $2 FROM example_ledger l WHERE day = $1::date"
                "   AND NOT EXISTS (SELECT FROM example_settlements s WHERE s.day = l.day AND s.account = l.account)"
                "   AND account IN (SELECT DISTINCT account FROM example_ledger WHERE day = $1::date"
                "     AND account NOT IN (SELECT account FROM example_settlements WHERE day = $1::date)"
                "     ORDER BY account LIMIT 50)"
                " GROUP BY day, account",
                day, lease->fencing_token());
            w.commit();
            if (r.affected_rows() == 0) break;
            settled += static_cast<int>(r.affected_rows());
            lease->report_progress();
        }
        std::cout << "settled " << settled << " accounts for " << day << " with fencing token "
                  << lease->fencing_token() << "\n";
        return 0;
    } catch (const dlock::not_held_error& e) {
        std::cerr << "lease lost: " << e.subject() << "\n";
        return 1;
    } catch (const dlock::stale_token_error& e) {
        std::cerr << "a newer settlement run already wrote " << e.subject() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "daily_settlement: " << e.what() << "\n";
        return 2;
    }
}
