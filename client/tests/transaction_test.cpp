// transaction_test.cpp -- lock calls in the caller's transaction: the lease and
// the business rows commit or roll back together; holds, assert_holds and
// fence raise the typed errors.
#include <dlock/dlock.hpp>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class transaction_test : public dlock_testing::server_test {
protected:
    void SetUp() override {
        server_test::SetUp();
        sql("CREATE TABLE IF NOT EXISTS regress_dlock_orders (id text PRIMARY KEY, token bigint)");
    }
    static dlock::lease_options ttl(std::chrono::milliseconds value) {
        dlock::lease_options o;
        o.ttl = value;
        return o;
    }
};

TEST_F(transaction_test, rollback_of_the_callers_transaction_leaves_no_lease) {
    const auto name = unique_name("rollback");
    dlock::client c;
    pqxx::connection conn;
    {
        pqxx::work w{conn};
        auto g = c.try_acquire(w, name, ttl(30s));
        ASSERT_TRUE(g.has_value());
        w.exec_params("INSERT INTO regress_dlock_orders VALUES ($1, $2)", name, g->fencing_token);
        w.abort();
    }
    EXPECT_EQ(state_of(name), "free");
    EXPECT_TRUE(sql("SELECT 1 FROM regress_dlock_orders WHERE id = '" + name + "'").empty());
    dlock::client other;
    EXPECT_TRUE(other.try_acquire(name, ttl(30s)).has_value());
}

TEST_F(transaction_test, commit_keeps_lease_and_rows_and_the_grant_can_be_adopted) {
    const auto name = unique_name("commit");
    const auto resource = unique_name("resource");
    dlock::client c;
    pqxx::connection conn;
    pqxx::work w{conn};
    auto g = c.try_acquire(w, name, ttl(2s));
    ASSERT_TRUE(g.has_value());
    EXPECT_TRUE(dlock::holds(w, name, g->fencing_token));
    EXPECT_NO_THROW(dlock::assert_holds(w, name, g->fencing_token));
    dlock::fence(w, resource, g->fencing_token);
    w.exec_params("INSERT INTO regress_dlock_orders VALUES ($1, $2)", name, g->fencing_token);
    ASSERT_EQ(dlock::commit(w), dlock::outcome::done);
    EXPECT_EQ(state_of(name), "held");
    {
        auto l = c.adopt(*g, ttl(2s));
        EXPECT_TRUE(l.valid());
        EXPECT_EQ(l.fencing_token(), g->fencing_token);
        std::this_thread::sleep_for(2500ms); // kept alive past the original ttl
        EXPECT_TRUE(l.valid());
        EXPECT_EQ(state_of(name), "held");
    }
    EXPECT_EQ(state_of(name), "free");
    EXPECT_FALSE(sql("SELECT 1 FROM regress_dlock_orders WHERE id = '" + name + "'").empty());
}

TEST_F(transaction_test, busy_lock_in_a_transaction_gives_no_grant) {
    const auto name = unique_name("busy");
    dlock::client c;
    auto held = c.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    pqxx::connection conn;
    pqxx::work w{conn};
    EXPECT_FALSE(c.try_acquire(w, name, ttl(30s)).has_value());
    EXPECT_FALSE(dlock::holds(w, name, held->fencing_token() + 1));
}

TEST_F(transaction_test, stale_fencing_token_raises_stale_token_error) {
    const auto resource = unique_name("resource");
    {
        pqxx::work w{admin()};
        dlock::fence(w, resource, 100);
        w.commit();
    }
    pqxx::work w{admin()};
    try {
        dlock::fence(w, resource, 99);
        FAIL() << "a lower token was accepted";
    } catch (const dlock::stale_token_error& e) {
        EXPECT_EQ(e.sqlstate(), "PD001");
        EXPECT_EQ(e.subject(), resource);
    }
}

TEST_F(transaction_test, assert_holds_with_a_wrong_token_raises_not_held_error) {
    const auto name = unique_name("not-held");
    dlock::client c;
    auto l = c.try_acquire(name, ttl(30s));
    ASSERT_TRUE(l.has_value());
    pqxx::work w{admin()};
    try {
        dlock::assert_holds(w, name, l->fencing_token() - 1);
        FAIL() << "assert_holds accepted a wrong token";
    } catch (const dlock::not_held_error& e) {
        EXPECT_EQ(e.sqlstate(), "PD002");
        EXPECT_EQ(e.subject(), name);
    }
}

TEST_F(transaction_test, bad_arguments_in_a_transaction_raise_typed_errors) {
    dlock::client c;
    {
        pqxx::work w{admin()};
        EXPECT_THROW((void)c.try_acquire(w, "", ttl(1s)), dlock::invalid_argument_error);
    }
    {
        pqxx::work w{admin()};
        EXPECT_THROW(dlock::fence(w, "", 1), dlock::invalid_argument_error);
    }
}

} // namespace
