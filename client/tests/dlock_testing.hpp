// dlock_testing.hpp -- shared helpers of the GoogleTest suites (not installed).
//
// The suites talk to a real server found through the PG* environment (make test
// starts one and sets it). When none is reachable every test fails with a
// message naming what is missing; nothing is skipped. When the PG* environment
// points at a pooler (tests/suites/45-pgbouncer.sh), DLOCK_ADMIN_DSN names the
// server itself for the fixture's admin connection.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include <pqxx/pqxx>

namespace dlock_testing {

/// What is missing to reach the test server, or empty when it is reachable and
/// has the extension.
inline std::string server_problem() {
    std::string unset;
    for (const char* var : {"PGHOST", "PGPORT", "PGUSER", "PGDATABASE"})
        if (std::getenv(var) == nullptr) unset += std::string{unset.empty() ? "" : ", "} + var;
    try {
        pqxx::connection conn;
        pqxx::nontransaction tx{conn};
        // either edition: the C extension or the SQL edition (docs/sql-edition.md)
        if (tx.exec("SELECT 1 FROM pg_extension WHERE extname IN ('pg_dlock', 'pg_dlock_sql')").empty())
            return "database \"" + std::string{conn.dbname()} +
                   "\" has no pg_dlock extension (CREATE EXTENSION pg_dlock)";
    } catch (const std::exception& e) {
        return std::string{"no PostgreSQL server reachable through the PG* environment"} +
               (unset.empty() ? "" : " (unset: " + unset + ")") + ": " + e.what() +
               "Run the suites with `make test`, or set PGHOST, PGPORT, PGUSER and PGDATABASE.";
    }
    return {};
}

/// True when the PG* environment points at a transaction pooler
/// (tests/suites/45-pgbouncer.sh sets DLOCK_TEST_POOLER).
inline bool through_transaction_pooler() {
    return std::getenv("DLOCK_TEST_POOLER") != nullptr;
}

/// Fixture base: fails (never skips) when the server is not there.
class server_test : public ::testing::Test {
protected:
    void SetUp() override {
        static const std::string problem = server_problem();
        ASSERT_TRUE(problem.empty()) << problem;
        const char* admin_dsn = std::getenv("DLOCK_ADMIN_DSN");
        m_admin = std::make_unique<pqxx::connection>(admin_dsn != nullptr ? admin_dsn : "");
    }

    /// A superuser connection for checks and for making things go wrong.
    pqxx::connection& admin() { return *m_admin; }

    /// Runs one query on the admin connection.
    pqxx::result sql(const std::string& query) {
        pqxx::nontransaction tx{admin()};
        return tx.exec(query);
    }

    /// A lock name no other test (or earlier run) uses.
    static std::string unique_name(const std::string& stem) {
        static std::mt19937_64 rng{std::random_device{}()};
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        return std::string{info != nullptr ? info->name() : "test"} + "/" + stem + "/" +
               std::to_string(rng() % 1000000000);
    }

    /// dlock.locks.state of a name ("free" when it has no row).
    std::string state_of(const std::string& name) {
        pqxx::nontransaction tx{admin()};
        const auto r = tx.exec_params("SELECT state FROM dlock.locks WHERE lock_name = $1", name);
        return r.empty() ? "free" : r[0][0].as<std::string>();
    }

    /// dlock.locks.<column> of a name as a number.
    long long column_of(const std::string& name, const std::string& column) {
        pqxx::nontransaction tx{admin()};
        const auto r = tx.exec_params("SELECT " + column + " FROM dlock.locks WHERE lock_name = $1", name);
        return r.empty() || r[0][0].is_null() ? -1 : r[0][0].as<long long>();
    }

    /// Polls until pred() is true or timeout passes; returns pred().
    static bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if (pred()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds{20});
        }
        return pred();
    }

    /// Terminates a backend and waits until it is gone.
    void terminate_backend(int pid) {
        sql("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
        ASSERT_TRUE(
            eventually([&] { return sql("SELECT 1 FROM pg_stat_activity WHERE pid = " + std::to_string(pid)).empty(); },
                       std::chrono::seconds{5}));
    }

    /// Waits until a backend is waiting inside a statement (state active, some wait event).
    bool wait_until_waiting(int pid, const std::string& wait_event, std::chrono::milliseconds timeout) {
        return eventually(
            [&] {
                return !sql("SELECT 1 FROM pg_stat_activity WHERE pid = " + std::to_string(pid) +
                            " AND state = 'active' AND wait_event IS NOT NULL" +
                            (wait_event.empty() ? "" : " AND wait_event = '" + wait_event + "'"))
                            .empty();
            },
            timeout);
    }

    /// Waits until some statement containing `fragment` waits for a lock (a
    /// renewal blocked on the lease row). Works through a pooler, where the
    /// client's backend pid means nothing.
    bool wait_until_blocked(const std::string& fragment, std::chrono::milliseconds timeout) {
        return eventually(
            [&] {
                pqxx::nontransaction tx{admin()};
                return !tx.exec_params("SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND "
                                       "wait_event_type = 'Lock' AND strpos(query, $1) > 0 AND pid <> "
                                       "pg_backend_pid()",
                                       fragment)
                            .empty();
            },
            timeout);
    }

private:
    std::unique_ptr<pqxx::connection> m_admin;
};

} // namespace dlock_testing
