// client_test.cpp -- leases from a client: scope release, busy, waits,
// deadlines, typed errors and metrics, against a real pg_dlock server.
#include <dlock/dlock.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class client_test : public dlock_testing::server_test {
protected:
    static dlock::lease_options ttl(std::chrono::milliseconds value) {
        dlock::lease_options o;
        o.ttl = value;
        return o;
    }

    // The query text of the server process waiting in dlock.acquire for `name`
    // (found by `marker` in it).
    std::string waiting_query(const std::string& name, const std::string& marker) {
        std::string query;
        const bool found = eventually(
            [&] {
                pqxx::nontransaction tx{admin()};
                const auto r = tx.exec_params("SELECT query FROM pg_stat_activity WHERE state = 'active' AND "
                                              "wait_event_type = 'Extension' AND strpos(query, $1) > 0 AND "
                                              "pid <> pg_backend_pid()",
                                              marker);
                if (r.empty()) return false;
                query = r[0][0].as<std::string>();
                return true;
            },
            3s);
        EXPECT_TRUE(found) << "no call of " << name << " waits in the server";
        return query;
    }

    // Whether a server process waits in a dlock.acquire* call for `name` at any
    // of the samples taken (every 20 ms) during `during`.
    bool seen_waiting_in_the_server(const std::string& name, std::chrono::milliseconds during) {
        const auto until = std::chrono::steady_clock::now() + during;
        do {
            pqxx::nontransaction tx{admin()};
            if (!tx.exec_params("SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND "
                                "wait_event_type = 'Extension' AND strpos(query, 'dlock.acquire') > 0 AND "
                                "(strpos(query, $1) > 0 OR strpos(query, '$1') > 0) AND pid <> pg_backend_pid()",
                                name)
                     .empty())
                return true;
            std::this_thread::sleep_for(20ms);
        } while (std::chrono::steady_clock::now() < until);
        return false;
    }
};

TEST_F(client_test, lease_is_released_when_it_goes_out_of_scope) {
    const auto name = unique_name("scope");
    dlock::client c;
    {
        auto l = c.try_acquire(name, ttl(30s));
        ASSERT_TRUE(l.has_value());
        EXPECT_TRUE(l->valid());
        EXPECT_EQ(l->name(), name);
        EXPECT_GT(l->fencing_token(), 0);
        EXPECT_EQ(state_of(name), "held");
    }
    EXPECT_EQ(state_of(name), "free");
    EXPECT_EQ(c.metrics().releases, 1u);
    dlock::client other;
    EXPECT_TRUE(other.try_acquire(name, ttl(30s)).has_value());
}

// The first host does not answer; libpq moves on to the second, which is the
// writable server -- the way a client follows a failover.
TEST_F(client_test, connects_with_a_multi_host_connection_string) {
    const std::string port = std::getenv("PGPORT") != nullptr ? std::getenv("PGPORT") : "5432";
    const std::string host = std::getenv("PGHOST") != nullptr ? std::getenv("PGHOST") : "127.0.0.1";
    dlock::client c{"host=" + host + "," + host + " port=1," + port +
                    " target_session_attrs=read-write connect_timeout=5"};
    const auto name = unique_name("multi-host");
    auto l = c.try_acquire(name, ttl(30s));
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(state_of(name), "held");
}

TEST_F(client_test, second_owner_is_refused_while_the_lease_lives) {
    const auto name = unique_name("busy");
    dlock::client a;
    dlock::client b;
    auto held = a.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    EXPECT_FALSE(b.try_acquire(name, ttl(30s)).has_value());
    EXPECT_EQ(b.metrics().busy, 1u);
    EXPECT_EQ(b.metrics().acquisitions, 0u);
    EXPECT_EQ(a.metrics().acquisitions, 1u);
}

TEST_F(client_test, acquire_with_wait_raises_busy_error_when_the_wait_runs_out) {
    const auto name = unique_name("wait-out");
    dlock::client a;
    dlock::client b;
    auto held = a.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    const auto start = std::chrono::steady_clock::now();
    try {
        auto l = b.acquire(name, 300ms, ttl(30s));
        FAIL() << "acquire returned a lease for a held lock";
    } catch (const dlock::busy_error& e) {
        EXPECT_EQ(e.sqlstate(), "55P03");
        EXPECT_EQ(e.subject(), name);
    }
    // The wait limit is the behaviour here: it must have waited for it.
    EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
    const auto m = b.metrics();
    EXPECT_EQ(m.waits, 1u);
    EXPECT_EQ(m.wait_timeouts, 1u);
    std::uint64_t recorded = 0;
    for (auto n : m.wait_histogram)
        recorded += n;
    EXPECT_EQ(recorded, 1u);
    EXPECT_EQ(m.wait_histogram[0] + m.wait_histogram[1] + m.wait_histogram[2], 0u); // > 100 ms
    // The refusal came back in the middle of the call's pipeline (its bound
    // set first): the connection is left whole and in use, no transaction
    // open, and its next calls work on it. (Behind a pooler there is no
    // pipeline, and backend_pid() is the pooler's.)
    if (dlock_testing::through_transaction_pooler()) return;
    const int pid = b.backend_pid();
    const auto state = sql("SELECT state FROM pg_stat_activity WHERE pid = " + std::to_string(pid));
    ASSERT_EQ(state.size(), 1u);
    EXPECT_EQ(state[0][0].as<std::string>(), "idle");
    auto other = b.try_acquire(unique_name("wait-out-after"), ttl(30s));
    ASSERT_TRUE(other.has_value());
    EXPECT_EQ(b.backend_pid(), pid);
    EXPECT_THROW(b.acquire(name, 100ms, ttl(30s)), dlock::busy_error);
    EXPECT_EQ(b.backend_pid(), pid);
}

TEST_F(client_test, acquire_with_wait_gets_the_lock_when_it_is_released) {
    const auto name = unique_name("wait-ok");
    dlock::client a;
    dlock::client b;
    auto held = a.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    const auto first_token = held->fencing_token();
    auto releaser = std::async(std::launch::async, [&] {
        std::this_thread::sleep_for(300ms);
        return held->release();
    });
    auto l = b.acquire(name, 10s, ttl(30s));
    EXPECT_EQ(releaser.get(), dlock::outcome::done);
    EXPECT_TRUE(l.valid());
    EXPECT_GT(l.fencing_token(), first_token);
    EXPECT_EQ(b.metrics().waits, 1u);
    EXPECT_EQ(b.metrics().wait_timeouts, 0u);
}

// A client shared by threads: a call waiting in the server does not hold up
// another thread's release on the same client.
TEST_F(client_test, waiting_acquire_does_not_hold_up_a_release_on_the_same_client) {
    const auto busy_name = unique_name("busy");
    const auto mine_name = unique_name("mine");
    dlock::client other;
    auto busy = other.try_acquire(busy_name, ttl(30s));
    ASSERT_TRUE(busy.has_value());
    dlock::client c;
    auto mine = c.try_acquire(mine_name, ttl(30s));
    ASSERT_TRUE(mine.has_value());
    auto waiting = std::async(std::launch::async, [&] { return c.acquire(busy_name, 5s, ttl(30s)); });
    ASSERT_TRUE(eventually([&] { return c.metrics().waits == 1; }, 2s));
    EXPECT_EQ(mine->release(), dlock::outcome::done);
    EXPECT_EQ(state_of(mine_name), "free");
    EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout) << "the release waited for the acquire";
    EXPECT_EQ(busy->release(), dlock::outcome::done);
    EXPECT_TRUE(waiting.get().valid());
}

// Behind a transaction pooler (pooling::transaction, and what pooling::detect
// finds there) each call is one round trip: the server receives the statement
// in the same message as the transaction-local statement_timeout that bounds
// it (a simple query of its own implicit transaction), as pg_stat_activity
// shows while it waits.
TEST_F(client_test, a_pooled_call_is_one_round_trip_that_carries_its_own_statement_timeout) {
    const auto name = unique_name("one-trip");
    dlock::client holder;
    auto held = holder.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    dlock::client_options co;
    co.pooling = dlock::pooling::transaction;
    co.wait_mode = dlock::wait_mode::server; // by name: the default polls behind a transaction pooler
    dlock::client c{co};
    auto waiting = std::async(std::launch::async, [&] { return c.acquire(name, 5s, ttl(30s)); });
    const std::string query = waiting_query(name, name);
    EXPECT_EQ(query.rfind("SELECT pg_catalog.set_config('statement_timeout', '", 0), 0u) << query;
    EXPECT_NE(query.find("pg_catalog.set_config('client_connection_check_interval', '1000', true);"), std::string::npos)
        << query;
    EXPECT_NE(query.find("dlock.acquire("), std::string::npos) << query;
    EXPECT_EQ(held->release(), dlock::outcome::done);
    EXPECT_TRUE(waiting.get().valid());
}

// A TCP forwarder on 127.0.0.1 to the test server (PGHOST, PGPORT) that
// passes every byte both ways, the server's process id in BackendKeyData
// included: what a pooler that passes the real process id through looks
// like to a client. Each connection is served by a thread of its own until
// either side closes it or the forwarder is destroyed.
class forwarder {
public:
    forwarder() {
        m_listener = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof(address);
        if (m_listener < 0 || bind(m_listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
            listen(m_listener, 4) != 0 ||
            getsockname(m_listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
            throw std::runtime_error("forwarder: cannot listen");
        m_port = ntohs(address.sin_port);
        m_thread = std::thread([this] { serve(); });
    }
    forwarder(const forwarder&) = delete;
    forwarder& operator=(const forwarder&) = delete;
    ~forwarder() {
        m_stop = true;
        shutdown(m_listener, SHUT_RDWR);
        m_thread.join();
        for (auto& t : m_connections)
            t.join();
        close(m_listener);
    }
    [[nodiscard]] int port() const noexcept { return m_port; }

private:
    static int connect_to_server() {
        addrinfo hints{};
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        const char* host = std::getenv("PGHOST");
        const char* port = std::getenv("PGPORT");
        if (getaddrinfo(host != nullptr ? host : "127.0.0.1", port != nullptr ? port : "5432", &hints, &found) != 0)
            return -1;
        const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
        if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
            close(fd);
            freeaddrinfo(found);
            return -1;
        }
        freeaddrinfo(found);
        return fd;
    }

    void serve() {
        while (!m_stop) {
            pollfd listening{m_listener, POLLIN, 0};
            if (poll(&listening, 1, 100) <= 0) continue;
            const int client = accept(m_listener, nullptr, nullptr);
            if (client < 0) continue;
            m_connections.emplace_back([this, client] {
                const int server = connect_to_server();
                if (server >= 0) pump(client, server);
                close(client);
                if (server >= 0) close(server);
            });
        }
    }

    // Copies bytes both ways until either side closes or the forwarder stops.
    void pump(int a, int b) {
        char buffer[8192];
        while (!m_stop) {
            pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
            if (poll(fds, 2, 100) <= 0) continue;
            for (int i = 0; i < 2; ++i) {
                if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
                const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
                if (n <= 0) return;
                for (ssize_t sent = 0; sent < n;) {
                    const ssize_t w = write(fds[1 - i].fd, buffer + sent, static_cast<size_t>(n - sent));
                    if (w <= 0) return;
                    sent += w;
                }
            }
        }
    }

    int m_listener = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::thread m_thread;
    std::vector<std::thread> m_connections; // only the accepting thread adds to it
};

// pooling::detect through something that passes the server's process id
// through (the forwarder above): it is taken for a pooler, so the client
// sends self-contained calls with the lock name among their literals and
// leaves no session settings behind -- not the prepared statements of a
// direct connection, which a transaction pooler of that kind would leak to
// other clients. (A pooler that made up its own process id was always found.)
TEST_F(client_test, detect_takes_a_proxy_that_passes_the_process_id_through_for_a_pooler) {
    if (dlock_testing::through_transaction_pooler()) GTEST_SKIP() << "the forwarder leads to the server itself";
    forwarder proxy;
    const auto name = unique_name("pid-passed");
    dlock::client holder;
    auto held = holder.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    dlock::client_options co;
    co.connection_string = "host=127.0.0.1 port=" + std::to_string(proxy.port());
    co.wait_mode = dlock::wait_mode::server; // by name: shows the query the server runs
    dlock::client c{co};
    auto waiting = std::async(std::launch::async, [&] { return c.acquire(name, 5s, ttl(30s)); });
    const std::string query = waiting_query(name, name);
    EXPECT_EQ(query.rfind("SELECT pg_catalog.set_config('statement_timeout', '", 0), 0u)
        << "a prepared call: the forwarder was taken for a direct connection: " << query;
    EXPECT_EQ(held->release(), dlock::outcome::done);
    EXPECT_TRUE(waiting.get().valid());
}

// With the default pooling::detect, a direct connection runs the library's
// statements prepared by name: the server shows a call bounded by the
// session's statement_timeout (call_timeout) as the prepared statement, with
// its placeholders, and so a waiting acquire (another bound, set local to its
// transaction by a prepared set_config ahead of it in one pipeline). Through a
// transaction pooler (45-pgbouncer) the same client sends self-contained
// calls, the name among their literals. (The wait is asked for in the server
// by name, as the default polls behind a transaction pooler.)
TEST_F(client_test, detect_prepares_statements_on_a_direct_connection_only) {
    const auto name = unique_name("detect");
    dlock::client holder;
    auto held = holder.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    dlock::client_options co;
    co.wait_mode = dlock::wait_mode::server;
    dlock::client c{co};
    if (!dlock_testing::through_transaction_pooler()) {
        auto mine = c.try_acquire(unique_name("detect-free"), ttl(30s));
        ASSERT_TRUE(mine.has_value());
        const auto last = sql("SELECT query FROM pg_stat_activity WHERE pid = " + std::to_string(c.backend_pid()));
        ASSERT_EQ(last.size(), 1u);
        const auto query = last[0][0].as<std::string>();
        EXPECT_EQ(query.rfind("SELECT l.lock_name, ", 0), 0u) << query;
        EXPECT_NE(query.find("FROM dlock.try_acquire($1, $2::bigint"), std::string::npos) << query;
    }
    auto waiting = std::async(std::launch::async, [&] { return c.acquire(name, 5s, ttl(30s)); });
    if (dlock_testing::through_transaction_pooler()) {
        const std::string query = waiting_query(name, name);
        EXPECT_EQ(query.rfind("SELECT pg_catalog.set_config('statement_timeout', '", 0), 0u) << query;
    } else {
        const std::string query = waiting_query(name, "FROM dlock.acquire($1, $2::bigint");
        EXPECT_EQ(query.rfind("SELECT l.lock_name, ", 0), 0u) << query;
        EXPECT_EQ(query.find(name), std::string::npos) << query;
        EXPECT_EQ(query.find("set_config"), std::string::npos) << query;
    }
    EXPECT_EQ(held->release(), dlock::outcome::done);
    EXPECT_TRUE(waiting.get().valid());
}

// wait_mode::automatic, the default: a wait in the server on a connection the
// library knows is direct, a client-side wait (no server process waits in
// dlock.acquire) behind a transaction pooler -- configured, or found by
// pooling::detect at the client's very first call, which is the acquire
// itself here. Either way the waiter gets the lock once it is released.
TEST_F(client_test, automatic_wait_waits_in_the_server_only_on_a_direct_connection) {
    struct setting {
        dlock::pooling pooling;
        bool in_server;
    };
    const bool pooled = dlock_testing::through_transaction_pooler();
    for (const auto [pooling, in_server] :
         {setting{dlock::pooling::detect, !pooled}, setting{dlock::pooling::transaction, false}}) {
        const auto name = unique_name("automatic");
        dlock::client holder;
        auto held = holder.try_acquire(name, ttl(30s));
        ASSERT_TRUE(held.has_value());
        dlock::client_options co;
        co.pooling = pooling;
        ASSERT_EQ(co.wait_mode, dlock::wait_mode::automatic) << "the default";
        co.poll_interval = 100ms;
        dlock::client c{co};
        auto waiting = std::async(std::launch::async, [&] { return c.acquire(name, 10s, ttl(30s)); });
        ASSERT_TRUE(eventually([&] { return c.metrics().waits == 1; }, 2s));
        EXPECT_EQ(seen_waiting_in_the_server(name, in_server ? 3s : 1s), in_server)
            << "pooling " << static_cast<int>(pooling) << (pooled ? " through a pooler" : " on a direct connection");
        EXPECT_EQ(held->release(), dlock::outcome::done);
        auto l = waiting.get();
        EXPECT_TRUE(l.valid());
        EXPECT_EQ(c.metrics().busy, 0u);
    }
}

// The statement_timeout of every call follows that call also where the
// session keeps it between calls: after an acquire that waited under a long
// bound (its wait plus call_timeout), a release blocked behind a row lock
// still ends after call_timeout; and after that short bound, an acquire may
// wait longer than call_timeout again.
TEST_F(client_test, each_call_is_bounded_by_its_own_statement_timeout_in_every_pooling_mode) {
    for (const auto mode : {dlock::pooling::detect, dlock::pooling::transaction}) {
        const auto blocked_name = unique_name("bound-blocked");
        const auto busy_name = unique_name("bound-busy");
        dlock::client_options co;
        co.call_timeout = 500ms;
        co.pooling = mode;
        dlock::client c{co};
        // A long bound first: the wait (10 s) plus call_timeout.
        auto blocked = std::make_optional(c.acquire(blocked_name, 10s, ttl(30s)));
        {
            pqxx::work row_lock{admin()};
            row_lock.exec_params("SELECT 1 FROM dlock.distributed_lock WHERE lock_name = $1 FOR UPDATE", blocked_name);
            const auto started = std::chrono::steady_clock::now();
            EXPECT_EQ(blocked->release(), dlock::outcome::unknown);
            EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << "the release ran under the 10.5 s bound";
            row_lock.abort();
        }
        // Then a wait longer than call_timeout: granted after about 1 s.
        dlock::client other;
        auto busy = other.try_acquire(busy_name, ttl(30s));
        ASSERT_TRUE(busy.has_value());
        auto releaser = std::async(std::launch::async, [&] {
            std::this_thread::sleep_for(1s);
            return busy->release();
        });
        EXPECT_NO_THROW({
            auto l = c.acquire(busy_name, 10s, ttl(30s));
            EXPECT_TRUE(l.valid());
        });
        EXPECT_EQ(releaser.get(), dlock::outcome::done);
        EXPECT_EQ(c.release(blocked_name, blocked->owner_token()), dlock::outcome::done);
    }
}

// The client deadline must never be later than the server's lease_until minus
// the round trip of the query that observed it (measured from its send time).
TEST_F(client_test, deadline_is_never_later_than_server_lease_until_minus_round_trip) {
    dlock::client c;
    for (auto t : {1000ms, 2000ms, 30000ms}) {
        const auto name = unique_name("deadline");
        auto l = c.try_acquire(name, ttl(t));
        ASSERT_TRUE(l.has_value());
        for (int round = 0; round < 2; ++round) {
            if (round == 1) {
                ASSERT_EQ(l->renew(), dlock::outcome::done);
            }
            pqxx::nontransaction tx{admin()};
            const auto sent = std::chrono::steady_clock::now();
            const auto r =
                tx.exec_params("SELECT extract(epoch FROM lease_until - clock_timestamp())::float8 FROM dlock.locks "
                               "WHERE lock_name = $1",
                               name);
            ASSERT_EQ(r.size(), 1u);
            const auto server_left = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>{r[0][0].as<double>()});
            EXPECT_LE(l->deadline(), sent + server_left) << "ttl " << t.count() << " ms, round " << round;
            // ...and not uselessly early: within drift + margin + a scheduling allowance.
            EXPECT_GE(l->deadline(), sent + server_left - t / 50 - 50ms - 500ms);
        }
    }
}

TEST_F(client_test, bad_arguments_raise_typed_errors) {
    dlock::client c;
    auto expect_invalid = [&](const std::string& name, std::chrono::milliseconds t, const char* label) {
        try {
            auto l = c.try_acquire(name, ttl(t));
            ADD_FAILURE() << label << ": no error";
        } catch (const dlock::invalid_argument_error& e) {
            EXPECT_EQ(e.sqlstate(), "22023") << label;
            EXPECT_EQ(e.subject(), name) << label;
        }
    };
    expect_invalid("", 1s, "empty name");
    expect_invalid(std::string(201, 'x'), 1s, "name over 200 characters");
    expect_invalid(unique_name("ttl"), 0ms, "zero ttl");
    expect_invalid(unique_name("ttl"), -5ms, "negative ttl");
    expect_invalid(unique_name("ttl"), std::chrono::hours{24 * 2}, "ttl above dlock.max_ttl");
    const auto name = unique_name("wait");
    EXPECT_THROW((void)c.acquire(name, -1ms, ttl(1s)), dlock::invalid_argument_error);
}

TEST_F(client_test, force_release_without_grant_raises_permission_error) {
    sql("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_dlock_app') THEN "
        "CREATE ROLE regress_dlock_app LOGIN; END IF; END$$");
    sql("GRANT USAGE ON SCHEMA dlock TO regress_dlock_app");
    const auto name = unique_name("force");
    dlock::client app{"user=regress_dlock_app"};
    auto l = app.try_acquire(name, ttl(30s));
    ASSERT_TRUE(l.has_value());
    try {
        (void)app.force_release(name, "test");
        FAIL() << "force_release without a grant succeeded";
    } catch (const dlock::permission_error& e) {
        EXPECT_EQ(e.sqlstate(), "42501");
        EXPECT_EQ(e.subject(), name);
    }
    dlock::client admin_client;
    EXPECT_TRUE(admin_client.force_release(name, "test"));
    EXPECT_EQ(state_of(name), "free");
}

TEST_F(client_test, explicit_release_reports_whether_it_ended_the_lease) {
    const auto name = unique_name("release");
    dlock::client c;
    auto l = c.try_acquire(name, ttl(30s));
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->release(), dlock::outcome::done);
    EXPECT_FALSE(l->valid());
    EXPECT_FALSE(l->lost());
    EXPECT_EQ(l->release(), dlock::outcome::refused);
    EXPECT_EQ(state_of(name), "free");
}

TEST_F(client_test, moved_lease_is_released_once_by_its_new_owner) {
    const auto name = unique_name("move");
    dlock::client c;
    std::optional<dlock::lease> outer;
    {
        auto l = c.try_acquire(name, ttl(30s));
        ASSERT_TRUE(l.has_value());
        outer.emplace(std::move(*l));
    }
    EXPECT_EQ(state_of(name), "held");
    outer.reset();
    EXPECT_EQ(state_of(name), "free");
    EXPECT_EQ(c.metrics().releases, 1u);
}

// Moved-from leases: the getters of a moved-from lease read nothing through a null state.
TEST_F(client_test, moved_from_lease_is_empty_and_its_getters_are_safe) {
    const auto name = unique_name("moved-from");
    dlock::client c;
    auto l = c.try_acquire(name, ttl(30s));
    ASSERT_TRUE(l.has_value());
    dlock::lease kept{std::move(*l)};
    const dlock::lease& gone = *l;
    EXPECT_EQ(gone.name(), "");
    EXPECT_EQ(gone.owner_token(), "");
    EXPECT_EQ(gone.fencing_token(), 0);
    EXPECT_EQ(gone.ttl(), 0ms);
    EXPECT_EQ(gone.time_left(), 0ms);
    EXPECT_FALSE(gone.valid());
    EXPECT_FALSE(gone.lost());
    EXPECT_FALSE(gone.loss().has_value());
    EXPECT_FALSE(gone.wait_lost(10ms));
    EXPECT_EQ(l->release(), dlock::outcome::refused);
    EXPECT_EQ(kept.name(), name);
    EXPECT_TRUE(kept.valid());
}

// Long waits: a lease granted after a server-side wait longer than its ttl is
// alive when acquire returns; its deadline counts from the grant (the server
// reports how long it waited) and is still not later than lease_until.
TEST_F(client_test, lease_granted_after_a_wait_longer_than_its_ttl_is_not_born_lost) {
    const auto name = unique_name("born-lost");
    dlock::client holder;
    auto held = holder.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    auto releaser = std::async(std::launch::async, [&] {
        std::this_thread::sleep_for(2500ms);
        return held->release();
    });
    dlock::client c;
    dlock::lease_options o = ttl(2s);
    o.keep_alive = false; // the deadline as granted, without renewals
    auto l = c.acquire(name, 20s, o);
    EXPECT_EQ(releaser.get(), dlock::outcome::done);
    EXPECT_TRUE(l.valid()) << "born lost after waiting 2.5 s for a 2 s lease";
    EXPECT_GT(l.time_left(), 1500ms);
    EXPECT_LE(l.time_left(), 2s);
    pqxx::nontransaction tx{admin()};
    const auto sent = std::chrono::steady_clock::now();
    const auto r = tx.exec_params(
        "SELECT extract(epoch FROM lease_until - clock_timestamp())::float8 FROM dlock.locks WHERE lock_name = $1",
        name);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_LE(l.deadline(), sent + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>{r[0][0].as<double>()}));
}

// The same through the client-side wait (wait_mode::poll).
TEST_F(client_test, poll_wait_gets_the_lock_when_it_is_released_and_runs_out_as_busy) {
    const auto name = unique_name("poll");
    dlock::client holder;
    auto held = holder.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    dlock::client_options po;
    po.wait_mode = dlock::wait_mode::poll;
    po.poll_interval = 200ms;
    dlock::client c{po};
    const auto started = std::chrono::steady_clock::now();
    EXPECT_THROW((void)c.acquire(name, 700ms, ttl(5s)), dlock::busy_error);
    const auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_GE(waited, 700ms);
    EXPECT_LT(waited, 1500ms);
    EXPECT_EQ(c.metrics().busy, 1u);
    EXPECT_EQ(c.metrics().wait_timeouts, 1u);
    auto releaser = std::async(std::launch::async, [&] {
        std::this_thread::sleep_for(500ms);
        return held->release();
    });
    auto l = c.acquire(name, 10s, ttl(5s));
    EXPECT_EQ(releaser.get(), dlock::outcome::done);
    EXPECT_TRUE(l.valid());
    EXPECT_LT(std::chrono::steady_clock::now() - started, 700ms + 500ms + 1s);
}

// Dead peers: the library's connections ask the kernel for TCP
// keepalives (a dead primary is noticed on an idle connection), as `ss` shows.
TEST_F(client_test, library_connections_use_tcp_keepalives) {
    const auto name = unique_name("keepalive");
    dlock::client c;
    dlock::lease_options o = ttl(30s);
    o.renew_every = 100ms;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    ASSERT_TRUE(eventually([&] { return c.keep_alive_backend_pid() != 0; }, 2s));
    const std::string port = std::getenv("PGPORT") != nullptr ? std::getenv("PGPORT") : "5432";
    // Our own process's sockets to the server port.
    const std::string cmd = "ss -tnpoH state established '( dport = :" + port + " )' 2>&1";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char buf[512];
        while (fgets(buf, sizeof buf, p) != nullptr) {
            const std::string line{buf};
            if (line.find("pid=" + std::to_string(getpid()) + ",") != std::string::npos) out += line;
        }
        pclose(p);
    }
    // libpq turns keepalives on by default with the kernel's idle time (two
    // hours); the fixture's admin connection has that. The client's two
    // (caller, keep-alive) must probe within seconds: network_timeout 10 s
    // gives an idle time of 3 s.
    std::size_t short_timers = 0;
    const std::string mark = "timer:(keepalive,";
    for (std::size_t at = out.find(mark); at != std::string::npos; at = out.find(mark, at + 1)) {
        const std::string timer = out.substr(at + mark.size(), out.find(',', at + mark.size()) - at - mark.size());
        if (timer.find("ms") != std::string::npos ||
            (timer.find("sec") != std::string::npos && std::stod(timer) <= 3.0))
            ++short_timers;
    }
    EXPECT_GE(short_timers, 2u) << out;
}

} // namespace
