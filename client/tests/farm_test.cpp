// dlock::farm_client against a real lock farm of 4 partitions set up by
// farm/setup.sh (run by tests/suites/50-farm.sh, which sets
// DLOCK_FARM_PARTITIONS to the partitions' connection strings joined by ';'
// and DLOCK_FARM_PROXY to the proxy's). A lease taken through the router is
// on the partition dlock.partition_of names, assert_holds passes there and
// refuses the token elsewhere; a multi-lock across partitions is refused and
// takes nothing. Control: a router given the partitions in another order puts
// a lease where dlock.partition_of does not look, and the check sees it.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "dlock/dlock.hpp"

namespace {

std::string env(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

std::vector<std::string> partitions() {
    std::vector<std::string> out;
    std::stringstream list{env("DLOCK_FARM_PARTITIONS")};
    for (std::string item; std::getline(list, item, ';');)
        if (!item.empty()) out.push_back(item);
    return out;
}

class farm_test : public ::testing::Test {
protected:
    void SetUp() override {
        m_parts = partitions();
        ASSERT_EQ(m_parts.size(), 4u) << "set DLOCK_FARM_PARTITIONS to a farm's 4 partitions (tests/suites/50-farm.sh)";
        ASSERT_FALSE(env("DLOCK_FARM_PROXY").empty()) << "set DLOCK_FARM_PROXY (tests/suites/50-farm.sh)";
        m_proxy = std::make_unique<pqxx::connection>(env("DLOCK_FARM_PROXY"));
    }

    std::string proxy_value(const std::string& sql, const std::string& name) {
        pqxx::nontransaction tx{*m_proxy};
        return tx.exec_params1(sql, name)[0].as<std::string>();
    }

    /// Whether assert_holds(name, token) passes on the partition dlock.partition_of names.
    bool holds_where_partition_of_says(const std::string& name, std::int64_t token) {
        pqxx::connection conn{proxy_value("SELECT dlock.partition_of($1)", name) + " user=postgres"};
        pqxx::work tx{conn};
        try {
            tx.exec_params("SELECT dlock.assert_holds($1, $2)", name, token);
            return true;
        } catch (const pqxx::sql_error& e) {
            EXPECT_EQ(e.sqlstate(), "PD002") << e.what();
            return false;
        }
    }

    /// Partitions on which name has a live holder.
    std::vector<std::size_t> live_on(const std::string& name) {
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < m_parts.size(); ++i) {
            pqxx::connection conn{m_parts[i]};
            pqxx::nontransaction tx{conn};
            if (tx.exec_params1("SELECT count(*) FROM dlock.locks WHERE lock_name = $1 AND holders > 0", name)[0]
                    .as<int>() > 0)
                out.push_back(i);
        }
        return out;
    }

    std::vector<std::string> m_parts;
    std::unique_ptr<pqxx::connection> m_proxy;
};

dlock::lease_options thirty_seconds() {
    dlock::lease_options options;
    options.ttl = std::chrono::seconds{30};
    return options;
}

dlock::client_options farm_options(std::vector<std::string> parts) {
    dlock::client_options options;
    options.partitions = std::move(parts);
    return options;
}

TEST_F(farm_test, partition_counts_other_than_a_power_of_two_are_refused) {
    for (std::size_t n : {0, 3, 5, 6}) {
        std::vector<std::string> parts(n, m_parts[0]);
        try {
            dlock::farm_client farm{farm_options(parts)};
            ADD_FAILURE() << n << " partitions accepted";
        } catch (const dlock::invalid_argument_error& e) {
            EXPECT_EQ(e.sqlstate(), "22023");
            EXPECT_EQ(e.subject(), "partitions");
        }
    }
    for (std::size_t n : {1, 2, 4, 8}) EXPECT_NO_THROW(dlock::farm_client{farm_options(std::vector<std::string>(n, m_parts[0]))});
    // a one-server client refuses a partition list rather than ignoring it
    EXPECT_THROW(dlock::client{farm_options(m_parts)}, dlock::invalid_argument_error);
}

TEST_F(farm_test, routes_every_name_where_the_proxy_does) {
    dlock::farm_client farm{farm_options(m_parts)};
    pqxx::nontransaction tx{*m_proxy};
    std::vector<int> seen(4, 0);
    for (int i = 0; i < 200; ++i) {
        const std::string name = "route-" + std::to_string(i) + (i % 3 == 0 ? "-ключ" : "");
        const auto want = tx.exec_params1("SELECT dlock_farm.partition_number($1)", name)[0].as<std::size_t>();
        EXPECT_EQ(farm.partition_of(name), want) << name;
        ++seen[want];
    }
    for (int count : seen) EXPECT_GT(count, 0);
}

TEST_F(farm_test, a_lease_lands_on_the_partition_partition_of_names_and_assert_holds_passes_there) {
    dlock::farm_client farm{farm_options(m_parts)};
    for (int i = 0; i < 12; ++i) {
        const std::string name = "farm-cpp-" + std::to_string(i);
        std::optional<dlock::lease> held = farm.try_acquire(name, thirty_seconds());
        ASSERT_TRUE(held.has_value()) << name;
        EXPECT_EQ(live_on(name), std::vector<std::size_t>{farm.partition_of(name)}) << name;
        EXPECT_TRUE(holds_where_partition_of_says(name, held->fencing_token())) << name;
        // the token means nothing on another partition
        pqxx::connection other{m_parts[(farm.partition_of(name) + 1) % 4]};
        pqxx::work tx{other};
        try {
            tx.exec_params("SELECT dlock.assert_holds($1, $2)", name, held->fencing_token());
            ADD_FAILURE() << "assert_holds passed on a partition that does not own " << name;
        } catch (const pqxx::sql_error& e) {
            EXPECT_EQ(e.sqlstate(), "PD002");
        }
        tx.abort();
        EXPECT_EQ(held->release(), dlock::outcome::done);
    }
}

TEST_F(farm_test, control_partitions_in_another_order_are_caught) {
    std::vector<std::string> reversed(m_parts.rbegin(), m_parts.rend());
    dlock::farm_client wrong{farm_options(reversed)};
    dlock::farm_client right{farm_options(m_parts)};
    std::string name;
    for (int i = 0; name.empty(); ++i) { // a name whose partition p is not 3 - p
        const std::string candidate = "farm-cpp-wrong-" + std::to_string(i);
        if (right.partition_of(candidate) != 3 - right.partition_of(candidate)) name = candidate;
    }
    std::optional<dlock::lease> held = wrong.try_acquire(name, thirty_seconds());
    ASSERT_TRUE(held.has_value());
    EXPECT_NE(live_on(name), std::vector<std::size_t>{right.partition_of(name)});
    EXPECT_FALSE(holds_where_partition_of_says(name, held->fencing_token()));
    EXPECT_EQ(held->release(), dlock::outcome::done);
}

TEST_F(farm_test, multi_locks_across_partitions_are_refused_and_take_nothing) {
    dlock::farm_client farm{farm_options(m_parts)};
    std::string apart;
    for (int i = 0; apart.empty(); ++i) { // a name on another partition than cpp-m1's
        const std::string candidate = "cpp-apart-" + std::to_string(i);
        if (farm.partition_of(candidate) != farm.partition_of("cpp-m1")) apart = candidate;
    }
    try {
        (void)farm.try_acquire_all({"cpp-m1", apart});
        ADD_FAILURE() << "a multi-lock across partitions was sent";
    } catch (const dlock::invalid_argument_error& e) {
        EXPECT_EQ(e.sqlstate(), "0A000");
    }
    EXPECT_THROW((void)farm.acquire_all({"cpp-m1", apart}, std::chrono::seconds{1}), dlock::invalid_argument_error);
    EXPECT_TRUE(live_on("cpp-m1").empty());
    EXPECT_TRUE(live_on(apart).empty());
    // names of one partition are taken together there
    std::vector<std::string> same{"cpp-m1"};
    for (int i = 0; same.size() < 3; ++i) {
        const std::string candidate = "cpp-same-" + std::to_string(i);
        if (farm.partition_of(candidate) == farm.partition_of("cpp-m1")) same.push_back(candidate);
    }
    auto taken = farm.try_acquire_all(same);
    ASSERT_TRUE(taken.has_value());
    ASSERT_EQ(taken->size(), 3u);
    for (const std::string& name : same) EXPECT_EQ(live_on(name), std::vector<std::size_t>{farm.partition_of(name)});
    for (dlock::lease& held : *taken) EXPECT_EQ(held.release(), dlock::outcome::done);
}

} // namespace
