// pooled_test.cpp -- behind PgBouncer in transaction pooling with a pool of 2
// server connections (DLOCK_POOL2_DSN, set by tests/suites/45-pgbouncer.sh):
// more waiters than pooled connections. Waiting in the server holds a pooled
// connection for the whole wait, so three waiters starve the holder's release
// (the negative control shows it); waiting in the client (wait_mode::poll)
// does not.
#include <dlock/dlock.hpp>

#include <algorithm>
#include <future>
#include <optional>
#include <vector>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class pooled_test : public dlock_testing::server_test {
protected:
    void SetUp() override {
        server_test::SetUp();
        const char* dsn = std::getenv("DLOCK_POOL2_DSN");
        ASSERT_NE(dsn, nullptr) << "DLOCK_POOL2_DSN is not set: run through tests/suites/45-pgbouncer.sh";
        m_dsn = dsn;
    }
    [[nodiscard]] dlock::client_options options(dlock::wait_mode mode) const {
        dlock::client_options o;
        o.connection_string = m_dsn;
        o.wait_mode = mode;
        o.poll_interval = 200ms;
        return o;
    }
    static dlock::lease_options ttl(std::chrono::milliseconds value) {
        dlock::lease_options o;
        o.ttl = value;
        return o;
    }

    // The holder takes the lock; three waiters start waiting (up to `wait`);
    // after 1 s the holder releases. Returns how long the release took and
    // its outcome; the waiters' leases are released as they come.
    std::pair<std::chrono::steady_clock::duration, dlock::outcome>
    release_with_three_waiters(dlock::wait_mode mode, std::chrono::milliseconds wait, int& granted) {
        const auto name = unique_name("pooled");
        dlock::client holder{options(dlock::wait_mode::poll)};
        auto held = holder.try_acquire(name, ttl(10s));
        EXPECT_TRUE(held.has_value());
        std::vector<std::future<bool>> waiters;
        for (int i = 0; i < 3; ++i)
            waiters.push_back(std::async(std::launch::async, [&, i] {
                (void)i;
                dlock::client c{options(mode)};
                try {
                    auto l = c.acquire(name, wait, ttl(10s));
                    return l.release() == dlock::outcome::done;
                } catch (const dlock::busy_error&) {
                    return false;
                }
            }));
        std::this_thread::sleep_for(1s);
        const auto started = std::chrono::steady_clock::now();
        const auto released = held->release();
        const auto took = std::chrono::steady_clock::now() - started;
        granted = 0;
        for (auto& w : waiters)
            granted += w.get() ? 1 : 0;
        return {took, released};
    }

    // The session state of both server connections of the pool: for each, its
    // statement_timeout and client_connection_check_interval and how many
    // statements it has prepared. Both are held at once (a transaction each),
    // so each query runs on another one. With `reset`, also clears that state.
    std::vector<std::string> pooled_session_state(bool reset) {
        pqxx::connection first{m_dsn};
        pqxx::connection second{m_dsn};
        pqxx::work a{first};
        pqxx::work b{second};
        std::vector<std::string> state;
        for (pqxx::work* tx : {&a, &b}) {
            const auto r = tx->exec("SELECT current_setting('statement_timeout') || ' ' || "
                                    "current_setting('client_connection_check_interval') || ' ' || "
                                    "(SELECT count(*) FROM pg_prepared_statements)");
            state.push_back(r[0][0].as<std::string>());
            if (reset) tx->exec("RESET statement_timeout; RESET client_connection_check_interval; DEALLOCATE ALL");
        }
        a.commit();
        b.commit();
        return state;
    }

    // What one of five_at_once's clients saw.
    struct turn {
        bool acquired = false;
        bool valid_at_end = false; // the lease was still valid after the work
        dlock::outcome released = dlock::outcome::unknown;
        std::chrono::steady_clock::time_point start, end; // of the work, under the lease
        std::string error;
        [[nodiscard]] bool clean() const { return acquired && valid_at_end && released == dlock::outcome::done; }
    };

    // Five clients of their own (pooling::detect, the default), started at
    // once: each acquires `name` waiting up to 20 s with a 5 s ttl, works
    // 0.3 s and releases -- the reported scenario of five `dlock run --ttl 5s
    // --wait 20s` through a pool of two. `mode` is the wait mode asked for, or
    // the default when nullopt.
    std::vector<turn> five_at_once(const std::string& name, std::optional<dlock::wait_mode> mode) {
        std::promise<void> go;
        const std::shared_future<void> started = go.get_future().share();
        std::vector<std::future<turn>> clients;
        for (int i = 0; i < 5; ++i)
            clients.push_back(std::async(std::launch::async, [&, started] {
                dlock::client_options o;
                o.connection_string = m_dsn;
                if (mode) o.wait_mode = *mode;
                dlock::client c{o};
                turn t;
                started.wait();
                try {
                    auto l = c.acquire(name, 20s, ttl(5s));
                    t.acquired = true;
                    t.start = std::chrono::steady_clock::now();
                    std::this_thread::sleep_for(300ms);
                    t.valid_at_end = l.valid();
                    t.end = std::chrono::steady_clock::now();
                    t.released = l.release();
                } catch (const std::exception& e) {
                    t.error = e.what();
                }
                return t;
            }));
        go.set_value();
        std::vector<turn> turns;
        for (auto& c : clients)
            turns.push_back(c.get());
        return turns;
    }

private:
    std::string m_dsn;
};

// The reported scenario through the library: five clients with the default
// wait mode behind a transaction pooler with a pool of two server
// connections. wait_mode::automatic polls there (pooling::detect finds the
// pooler at each client's first call, which is this acquire), so no waiter
// holds a pooled connection while it waits, and every holder's release gets
// through: all five get the lock in turn, each for its whole work, and the
// works never overlap. Not FIFO: the order among the five is not checked.
TEST_F(pooled_test, five_default_clients_take_turns_behind_a_pool_of_two) {
    const auto name = unique_name("pooled-five");
    const auto began = std::chrono::steady_clock::now();
    auto turns = five_at_once(name, std::nullopt);
    const auto took = std::chrono::steady_clock::now() - began;
    for (std::size_t i = 0; i < turns.size(); ++i) {
        EXPECT_TRUE(turns[i].clean()) << "client " << i << ": acquired " << turns[i].acquired << ", valid at the end "
                                      << turns[i].valid_at_end << ", release " << dlock::to_string(turns[i].released)
                                      << " " << turns[i].error;
    }
    EXPECT_LT(took, 20s) << "the five took longer than the wait";
    std::sort(turns.begin(), turns.end(), [](const turn& a, const turn& b) { return a.start < b.start; });
    for (std::size_t i = 1; i < turns.size(); ++i) {
        if (turns[i - 1].acquired && turns[i].acquired) {
            EXPECT_LE(turns[i - 1].end, turns[i].start) << "two works under the lock overlapped";
        }
    }
}

// Negative control: the same five asking for the server-side wait by name.
// The four waiters sit in dlock.acquire on both pooled connections (two more
// queue in PgBouncer), the holder's renewals and release queue behind them,
// and its lease ends by expiry, not by a release; so it goes on. Not every
// client gets through cleanly.
TEST_F(pooled_test, five_clients_waiting_in_the_server_starve_each_other_behind_a_pool_of_two) {
    const auto name = unique_name("pooled-five-server");
    const auto turns = five_at_once(name, dlock::wait_mode::server);
    const auto clean = std::count_if(turns.begin(), turns.end(), [](const turn& t) { return t.clean(); });
    EXPECT_LT(clean, 5) << "the negative control did not reproduce the starvation";
}

TEST_F(pooled_test, client_side_waits_do_not_starve_the_holder_behind_a_pool_of_two) {
    int granted = 0;
    const auto [took, released] = release_with_three_waiters(dlock::wait_mode::poll, 15s, granted);
    EXPECT_EQ(released, dlock::outcome::done);
    EXPECT_LT(took, 1s) << "the release waited "
                        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms for a connection";
    EXPECT_EQ(granted, 3) << "every waiter gets the lock in turn";
}

// Negative control: the same with server-side waits. Two waiters occupy both
// pooled connections inside dlock.acquire; the release queues in PgBouncer
// until a wait runs out (3 s).
TEST_F(pooled_test, server_side_waits_starve_the_holder_behind_a_pool_of_two) {
    int granted = 0;
    const auto [took, released] = release_with_three_waiters(dlock::wait_mode::server, 3s, granted);
    EXPECT_GT(took, 1500ms) << "the negative control did not reproduce the starvation";
    (void)released;
}

// The keep-alive of a holder keeps its lease while client-side waiters poll.
TEST_F(pooled_test, holder_keeps_its_lease_while_more_waiters_than_connections_poll) {
    const auto name = unique_name("pooled-keep");
    dlock::client holder{options(dlock::wait_mode::poll)};
    dlock::lease_options o = ttl(1500ms);
    auto held = holder.try_acquire(name, o);
    ASSERT_TRUE(held.has_value());
    std::vector<std::future<void>> waiters;
    for (int i = 0; i < 4; ++i)
        waiters.push_back(std::async(std::launch::async, [&] {
            dlock::client c{options(dlock::wait_mode::poll)};
            EXPECT_THROW((void)c.acquire(name, 3s, ttl(1500ms)), dlock::busy_error);
        }));
    EXPECT_FALSE(held->wait_lost(3500ms)) << "the holder lost its lease to starved renewals";
    for (auto& w : waiters)
        w.get();
    EXPECT_GE(holder.metrics().renewals, 3u);
    EXPECT_EQ(held->release(), dlock::outcome::done);
}

// Through a transaction pooler pooling::detect (the default) leaves nothing in
// the server sessions that the next client would get: the library's calls set
// no session setting and prepare nothing there. The negative control, the
// same client told there is no pooler (pooling::none), leaves its
// statement_timeout on a pooled server connection.
TEST_F(pooled_test, detect_leaves_no_session_state_in_the_pooled_server_connections) {
    const auto clean = pooled_session_state(true);
    const auto name = unique_name("pooled-state");
    dlock::client_options co = options(dlock::wait_mode::poll);
    co.call_timeout = 4321ms;
    {
        dlock::client c{co};
        auto held = c.try_acquire(name, ttl(30s));
        ASSERT_TRUE(held.has_value());
        EXPECT_EQ(held->renew(), dlock::outcome::done);
        EXPECT_EQ(held->release(), dlock::outcome::done);
    }
    EXPECT_EQ(pooled_session_state(false), clean);

    co.pooling = dlock::pooling::none;
    {
        dlock::client c{co};
        try {
            auto held = c.try_acquire(name, ttl(30s));
            if (held) (void)held->release();
        } catch (const std::exception&) { // NOLINT(bugprone-empty-catch): a statement prepared on another
        }                                 // server connection may be missing; the settings are made first
    }
    const auto left = pooled_session_state(true);
    EXPECT_TRUE(left[0].rfind("4321ms ", 0) == 0 || left[1].rfind("4321ms ", 0) == 0)
        << "the negative control left no setting behind: " << left[0] << ", " << left[1];
}

} // namespace
