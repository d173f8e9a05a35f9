// policies_test.cpp -- lease policies from the C++ client (lease_options:
// session_bound, max_hold, min_hold, lock_delay), against a real server that
// preloads pg_dlock (docs/lease-policies.md).
#include <dlock/dlock.hpp>

#include <future>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class policies_test : public dlock_testing::server_test {
protected:
    static dlock::lease_options ttl(std::chrono::milliseconds value) {
        dlock::lease_options o;
        o.ttl = value;
        return o;
    }
};

// The lease keeps the connection it was granted on; when that session ends
// (here: terminated), another client gets the lock at once, long before the
// ttl, with a higher token, and the first lease's renewal is refused.
TEST_F(policies_test, session_bound_lease_ends_with_its_session) {
    const auto name = unique_name("session");
    dlock::client a;
    dlock::client b;
    auto o = ttl(60s);
    o.session_bound = true;
    o.keep_alive = false;
    auto held = a.try_acquire(name, o);
    ASSERT_TRUE(held.has_value());
    const long long pid = column_of(name, "session_pid");
    ASSERT_GT(pid, 0);
    EXPECT_FALSE(b.try_acquire(name, ttl(60s)).has_value());
    terminate_backend(static_cast<int>(pid));
    auto next = b.try_acquire(name, ttl(60s));
    ASSERT_TRUE(next.has_value());
    EXPECT_GT(next->fencing_token(), held->fencing_token());
    EXPECT_EQ(held->renew(), dlock::outcome::refused);
    EXPECT_EQ(held->loss(), dlock::loss_reason::refused);
}

// The bound connection is not returned to the pool: closing it is what ends
// the lease, and releasing the lease closes it.
TEST_F(policies_test, session_bound_lease_closes_its_connection_on_release) {
    const auto name = unique_name("session-release");
    dlock::client a;
    auto o = ttl(60s);
    o.session_bound = true;
    auto held = a.try_acquire(name, o);
    ASSERT_TRUE(held.has_value());
    const long long pid = column_of(name, "session_pid");
    ASSERT_GT(pid, 0);
    EXPECT_NE(a.backend_pid(), pid); // another call gets another connection
    EXPECT_EQ(held->release(), dlock::outcome::done);
    EXPECT_TRUE(eventually(
        [&] { return sql("SELECT 1 FROM pg_stat_activity WHERE pid = " + std::to_string(pid)).empty(); }, 5s));
}

// The keep-alive's renewal is refused once the lease has been held for its
// max_hold: the lease is reported lost with loss_reason::max_hold, while the
// server keeps it to the end of its current ttl.
TEST_F(policies_test, keep_alive_reports_max_hold_as_its_own_loss) {
    const auto name = unique_name("max-hold");
    dlock::client a;
    std::promise<dlock::lost_lease> reported;
    auto o = ttl(1s);
    o.max_hold = 1s;
    o.renew_every = 200ms;
    o.on_lost = [&](const dlock::lost_lease& info) { reported.set_value(info); };
    auto held = a.try_acquire(name, o);
    ASSERT_TRUE(held.has_value());
    auto lost = reported.get_future();
    ASSERT_EQ(lost.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(lost.get().reason, dlock::loss_reason::max_hold);
    EXPECT_GE(a.metrics().renewals, 3u);
    EXPECT_STREQ(dlock::to_string(dlock::loss_reason::max_hold), "max_hold");
}

TEST_F(policies_test, min_hold_and_lock_delay_reach_the_server) {
    const auto name = unique_name("min-hold");
    dlock::client a;
    dlock::client b;
    auto o = ttl(30s);
    o.min_hold = 20s;
    o.lock_delay = 5s;
    auto held = a.try_acquire(name, o);
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ(column_of(name, "extract(epoch FROM lock_delay)::int"), 5);
    EXPECT_EQ(column_of(name, "extract(epoch FROM min_hold_until - acquired_at)::int"), 20);
    EXPECT_EQ(held->release(), dlock::outcome::done);
    EXPECT_FALSE(b.try_acquire(name, ttl(30s)).has_value());
    pqxx::nontransaction tx{admin()};
    EXPECT_EQ(tx.exec_params("SELECT policy_state FROM dlock.locks WHERE lock_name = $1", name)[0][0].as<std::string>(),
              "released, held until min_hold");
}

TEST_F(policies_test, bad_policy_options_raise_invalid_argument_error) {
    const auto name = unique_name("bad");
    dlock::client a;
    auto below_ttl = ttl(10s);
    below_ttl.max_hold = 5s;
    EXPECT_THROW(static_cast<void>(a.try_acquire(name, below_ttl)), dlock::invalid_argument_error);
    auto above_ttl = ttl(10s);
    above_ttl.min_hold = 11s;
    EXPECT_THROW(static_cast<void>(a.try_acquire(name, above_ttl)), dlock::invalid_argument_error);
    auto negative = ttl(10s);
    negative.lock_delay = -1s;
    EXPECT_THROW(static_cast<void>(a.acquire(name, 1s, negative)), dlock::invalid_argument_error);
    EXPECT_EQ(state_of(name), "free");
}

} // namespace
