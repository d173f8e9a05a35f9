// lock_kinds_test.cpp -- shared leases, semaphore permits and multi-locks from
// the client (docs/lock-kinds.md), against a real pg_dlock server.
#include <dlock/dlock.hpp>

#include <future>
#include <thread>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class lock_kinds_test : public dlock_testing::server_test {
protected:
    static dlock::lease_options ttl(std::chrono::milliseconds value) {
        dlock::lease_options o;
        o.ttl = value;
        return o;
    }
    long long holders_of(const std::string& name) { return column_of(name, "holders"); }
};

TEST_F(lock_kinds_test, readers_share_and_keep_a_writer_out_until_they_leave) {
    const auto name = unique_name("rw");
    dlock::client a;
    dlock::client b;
    dlock::client writer;
    {
        auto r1 = a.try_acquire_shared(name, ttl(30s));
        auto r2 = b.try_acquire_shared(name, ttl(30s));
        ASSERT_TRUE(r1.has_value());
        ASSERT_TRUE(r2.has_value());
        EXPECT_NE(r1->fencing_token(), r2->fencing_token());
        EXPECT_EQ(holders_of(name), 2);
        EXPECT_FALSE(writer.try_acquire(name, ttl(30s)).has_value());
        // renewed and released like an exclusive lease
        EXPECT_EQ(r1->renew(), dlock::outcome::done);
    }
    EXPECT_EQ(holders_of(name), 0);
    auto w = writer.try_acquire(name, ttl(30s));
    ASSERT_TRUE(w.has_value());
    EXPECT_FALSE(a.try_acquire_shared(name, ttl(30s)).has_value());
}

TEST_F(lock_kinds_test, a_downgraded_lease_is_shared_with_a_higher_token_and_keeps_writers_out) {
    const auto name = unique_name("downgrade");
    dlock::client owner;
    dlock::client reader;
    dlock::client writer;
    auto w = owner.try_acquire(name, ttl(900ms));
    ASSERT_TRUE(w.has_value());
    const std::int64_t exclusive_token = w->fencing_token();
    const std::string owner_token = w->owner_token();
    EXPECT_EQ(w->downgrade(), dlock::outcome::done);
    EXPECT_GT(w->fencing_token(), exclusive_token);
    EXPECT_EQ(w->owner_token(), owner_token);
    // the old token no longer passes holds(), the new one does
    const auto held = [&](std::int64_t token) {
        return sql("SELECT dlock.holds('" + admin().esc(name) + "', " + std::to_string(token) + ")")[0][0].as<bool>();
    };
    EXPECT_FALSE(held(exclusive_token));
    EXPECT_TRUE(held(w->fencing_token()));
    // a shared lease now: readers join, writers stay out
    EXPECT_EQ(holders_of(name), 1);
    auto r = reader.try_acquire_shared(name, ttl(30s));
    EXPECT_TRUE(r.has_value());
    EXPECT_FALSE(writer.try_acquire(name, ttl(30s)).has_value());
    // the keep-alive renews the shared lease past its ttl
    std::this_thread::sleep_for(2500ms);
    EXPECT_TRUE(w->valid());
    EXPECT_TRUE(held(w->fencing_token()));
    // a second downgrade changes nothing: the server answers with the shared lease as it is
    const std::int64_t shared_token = w->fencing_token();
    EXPECT_EQ(w->downgrade(), dlock::outcome::done);
    EXPECT_EQ(w->fencing_token(), shared_token);
    EXPECT_EQ(holders_of(name), 2);
    EXPECT_TRUE(w->valid());
    EXPECT_EQ(w->release(), dlock::outcome::done);
    EXPECT_EQ(r->release(), dlock::outcome::done);
    EXPECT_TRUE(writer.try_acquire(name, ttl(30s)).has_value());
}

TEST_F(lock_kinds_test, a_lease_with_a_policy_is_not_downgraded) {
    const auto name = unique_name("downgrade-policy");
    dlock::client c;
    dlock::lease_options o = ttl(30s);
    o.max_hold = 60s;
    auto w = c.try_acquire(name, o);
    ASSERT_TRUE(w.has_value());
    try {
        (void)w->downgrade();
        ADD_FAILURE() << "downgrade of a lease with max_hold did not throw";
    } catch (const dlock::server_error& e) {
        EXPECT_EQ(e.sqlstate(), "0A000");
    }
    EXPECT_TRUE(w->valid());
    EXPECT_EQ(column_of(name, "holders"), 1);
    EXPECT_EQ(state_of(name), "held");
}

TEST_F(lock_kinds_test, a_semaphore_admits_its_permits_and_no_more) {
    const auto name = unique_name("sem");
    dlock::client c;
    auto p1 = c.try_acquire_permit(name, 2, ttl(30s));
    auto p2 = c.try_acquire_permit(name, 2, ttl(30s));
    ASSERT_TRUE(p1.has_value());
    ASSERT_TRUE(p2.has_value());
    EXPECT_NE(p1->owner_token(), p2->owner_token());
    EXPECT_FALSE(c.try_acquire_permit(name, 2, ttl(30s)).has_value());
    EXPECT_THROW((void)c.try_acquire_permit(name, 3, ttl(30s)), dlock::invalid_argument_error);
    EXPECT_THROW((void)c.try_acquire_shared(name, ttl(30s)), dlock::invalid_argument_error);
    EXPECT_THROW((void)c.acquire_permit(name, 2, 200ms, ttl(30s)), dlock::busy_error);
    EXPECT_EQ(p1->release(), dlock::outcome::done);
    EXPECT_TRUE(c.try_acquire_permit(name, 2, ttl(30s)).has_value());
}

TEST_F(lock_kinds_test, a_permit_is_kept_alive_past_its_ttl) {
    const auto name = unique_name("sem-keep-alive");
    dlock::client c;
    auto p = c.try_acquire_permit(name, 1, ttl(900ms));
    ASSERT_TRUE(p.has_value());
    std::this_thread::sleep_for(2500ms);
    EXPECT_TRUE(p->valid());
    EXPECT_EQ(holders_of(name), 1);
    dlock::client other;
    EXPECT_FALSE(other.try_acquire_permit(name, 1, ttl(30s)).has_value());
}

TEST_F(lock_kinds_test, a_set_is_taken_all_or_nothing) {
    const auto a = unique_name("item-a");
    const auto b = unique_name("item-b");
    const auto c_name = unique_name("item-c");
    dlock::client c;
    auto set = c.try_acquire_all({b, a}, ttl(30s));
    ASSERT_TRUE(set.has_value());
    ASSERT_EQ(set->size(), 2u);
    EXPECT_EQ((*set)[0].owner_token(), (*set)[1].owner_token());
    EXPECT_EQ(state_of(a), "held");
    EXPECT_EQ(state_of(b), "held");
    dlock::client other;
    EXPECT_FALSE(other.try_acquire_all({c_name, b}, ttl(30s)).has_value());
    EXPECT_EQ(state_of(c_name), "free");
    EXPECT_THROW((void)other.acquire_all({c_name, a}, 200ms, ttl(30s)), dlock::busy_error);
    EXPECT_THROW((void)other.try_acquire_all({a, a}, ttl(30s)), dlock::invalid_argument_error);
    set.reset();
    EXPECT_EQ(state_of(a), "free");
    EXPECT_EQ(state_of(b), "free");
    EXPECT_TRUE(other.try_acquire_all({a, b, c_name}, ttl(30s)).has_value());
}

// acquire_all follows the wait mode like acquire: wait_mode::poll tries
// try_acquire_all until the wait runs out, with no server process waiting in
// dlock.acquire_all meanwhile (sampled in pg_stat_activity), and gets the set
// once it is free; wait_mode::server waits in dlock.acquire_all (the control
// that the sampling sees such a wait).
TEST_F(lock_kinds_test, a_set_waits_where_the_wait_mode_says) {
    for (const auto mode : {dlock::wait_mode::poll, dlock::wait_mode::server}) {
        const auto a = unique_name("wait-set-a");
        const auto b = unique_name("wait-set-b");
        dlock::client holder;
        auto held = holder.try_acquire(b, ttl(30s));
        ASSERT_TRUE(held.has_value());
        dlock::client_options co;
        co.wait_mode = mode;
        co.poll_interval = 100ms;
        dlock::client waiter{co};
        if (mode == dlock::wait_mode::poll) {
            const auto started = std::chrono::steady_clock::now();
            EXPECT_THROW((void)waiter.acquire_all({a, b}, 500ms, ttl(30s)), dlock::busy_error);
            EXPECT_GE(std::chrono::steady_clock::now() - started, 500ms) << "gave up before the wait ran out";
            EXPECT_EQ(state_of(a), "free");
        }
        auto waiting = std::async(std::launch::async, [&] { return waiter.acquire_all({a, b}, 10s, ttl(30s)); });
        bool seen = false;
        for (const auto until = std::chrono::steady_clock::now() + 1s;
             !seen && std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(20ms))
            seen = !sql("SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND wait_event_type = 'Extension' AND "
                        "query LIKE '%dlock.acquire_all(%' AND pid <> pg_backend_pid()")
                        .empty();
        EXPECT_EQ(seen, mode == dlock::wait_mode::server) << "wait mode " << static_cast<int>(mode);
        EXPECT_EQ(held->release(), dlock::outcome::done);
        const auto set = waiting.get();
        ASSERT_EQ(set.size(), 2u);
        EXPECT_TRUE(set[0].valid());
        EXPECT_EQ(set[0].owner_token(), set[1].owner_token());
        EXPECT_EQ(state_of(a), "held");
    }
}

} // namespace
