// outcome_test.cpp -- unknown outcomes: a terminated backend is never reported
// as success; an uncertain acquire is retried with the same owner token; a
// commit that canceled its synchronous-replication wait counts as unknown;
// destructors with a dead connection do not throw.
#include <dlock/dlock.hpp>

#include <cstdlib>
#include <future>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class outcome_test : public dlock_testing::server_test {
protected:
    static dlock::client_options no_retry() {
        dlock::client_options o;
        o.retry.max_attempts = 1;
        return o;
    }
    static dlock::lease_options ttl(std::chrono::milliseconds value) {
        dlock::lease_options o;
        o.ttl = value;
        return o;
    }
};

TEST_F(outcome_test, terminated_backend_during_acquire_gives_unknown_not_success) {
    const auto name = unique_name("terminate");
    dlock::client holder;
    auto held = holder.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());

    dlock::client c{no_retry()};
    const int pid = c.backend_pid();
    auto call = std::async(std::launch::async, [&] { return c.acquire(name, 20s, ttl(30s)); });
    ASSERT_TRUE(wait_until_waiting(pid, "", 5s));
    terminate_backend(pid);
    ASSERT_EQ(call.wait_for(5s), std::future_status::ready);
    try {
        auto l = call.get();
        FAIL() << "acquire reported success after its backend was terminated";
    } catch (const dlock::unknown_outcome_error& e) {
        EXPECT_EQ(e.subject(), name);
        EXPECT_FALSE(e.owner_token().empty());
    }
    EXPECT_EQ(c.metrics().unknown_outcomes, 1u);
    EXPECT_EQ(c.metrics().acquisitions, 0u);
}

// The retry after an unknown outcome uses the same owner token: it waits on,
// and one lease (not two) is granted.
TEST_F(outcome_test, unknown_acquire_is_retried_with_the_same_owner) {
    const auto name = unique_name("retry");
    dlock::client holder;
    auto held = holder.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());
    const auto acquisitions_before = column_of(name, "acquisitions");

    dlock::client c;
    const int pid = c.backend_pid();
    auto call = std::async(std::launch::async, [&] { return c.acquire(name, 20s, ttl(30s)); });
    ASSERT_TRUE(wait_until_waiting(pid, "", 5s));
    terminate_backend(pid);
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(held->release(), dlock::outcome::done);
    ASSERT_EQ(call.wait_for(10s), std::future_status::ready);
    auto l = call.get();
    EXPECT_TRUE(l.valid());
    EXPECT_GE(c.metrics().unknown_outcomes, 1u);
    EXPECT_GE(c.metrics().retries, 1u);
    EXPECT_EQ(c.metrics().acquisitions, 1u);
    EXPECT_EQ(column_of(name, "acquisitions"), acquisitions_before + 1);
    EXPECT_EQ(column_of(name, "fencing_token"), l.fencing_token());
}

// With a synchronous standby configured that never connects, the acquire's
// commit waits; canceling the wait makes PostgreSQL report success with the
// warning "canceling wait for synchronous replication": committed locally
// only. The client must treat that as unknown and retry with the same owner
// token -- which returns the same lease, not a second one.
class sync_rep_test : public outcome_test {
protected:
    void TearDown() override {
        reset_sync_rep();
        outcome_test::TearDown();
    }
    void set_sync_rep(const std::string& value) {
        sql("ALTER SYSTEM SET synchronous_standby_names = '" + value + "'");
        sql("SELECT pg_reload_conf()");
        ASSERT_TRUE(eventually(
            [&] {
                pqxx::connection fresh;
                pqxx::nontransaction tx{fresh};
                return tx.exec("SHOW synchronous_standby_names")[0][0].as<std::string>() == value;
            },
            5s));
    }
    void reset_sync_rep() {
        try {
            sql("ALTER SYSTEM RESET synchronous_standby_names");
            sql("SELECT pg_reload_conf()");
        } catch (...) { // NOLINT(bugprone-empty-catch)
        }
    }
};

TEST_F(sync_rep_test, canceled_sync_rep_wait_is_unknown_and_the_retry_keeps_the_token) {
    const auto name = unique_name("syncrep");
    dlock::client_options co;
    co.retry.initial_backoff = 200ms;
    dlock::client c{co};
    const int pid = c.backend_pid();
    set_sync_rep("regress_dlock_no_such_standby");

    auto call = std::async(std::launch::async, [&] { return c.try_acquire(name, ttl(30s)); });
    ASSERT_TRUE(wait_until_waiting(pid, "SyncRep", 5s)) << "the acquire's commit did not wait for the standby";
    sql("SELECT pg_cancel_backend(" + std::to_string(pid) + ")");
    reset_sync_rep();

    ASSERT_EQ(call.wait_for(10s), std::future_status::ready);
    auto l = call.get();
    ASSERT_TRUE(l.has_value());
    EXPECT_TRUE(l->valid());
    EXPECT_EQ(c.metrics().unknown_outcomes, 1u);
    EXPECT_GE(c.metrics().retries, 1u);
    EXPECT_EQ(column_of(name, "acquisitions"), 1) << "the retry granted a second lease";
    EXPECT_EQ(column_of(name, "fencing_token"), l->fencing_token());
}

// A downgrade whose commit is in doubt is asked again on a fresh connection:
// the server answers the owner's retry with the shared lease the first try
// gave, so the lease learns its new token instead of staying unknown.
TEST_F(sync_rep_test, downgrade_in_doubt_is_asked_again_and_learns_the_shared_token) {
    const auto name = unique_name("syncrep-downgrade");
    dlock::client c;
    auto w = c.try_acquire(name, ttl(30s));
    ASSERT_TRUE(w.has_value());
    const std::int64_t exclusive_token = w->fencing_token();
    const int pid = c.backend_pid();
    set_sync_rep("regress_dlock_no_such_standby");

    auto call = std::async(std::launch::async, [&] { return w->downgrade(); });
    ASSERT_TRUE(wait_until_waiting(pid, "SyncRep", 5s)) << "the downgrade's commit did not wait for the standby";
    sql("SELECT pg_cancel_backend(" + std::to_string(pid) + ")");
    reset_sync_rep();

    ASSERT_EQ(call.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(call.get(), dlock::outcome::done);
    EXPECT_GE(c.metrics().unknown_outcomes, 1u);
    EXPECT_GT(w->fencing_token(), exclusive_token);
    const auto shared = sql("SELECT fencing_token FROM dlock.lock_holders WHERE lock_name = '" + admin().esc(name) + "'");
    ASSERT_EQ(shared.size(), 1u) << "one shared lease, not two";
    EXPECT_EQ(shared[0][0].as<std::int64_t>(), w->fencing_token());
    EXPECT_EQ(w->release(), dlock::outcome::done);
}

TEST_F(sync_rep_test, commit_in_callers_transaction_reports_canceled_sync_rep_wait_as_unknown) {
    const auto name = unique_name("syncrep-txn");
    dlock::client c;
    pqxx::connection conn;
    const int pid = conn.backendpid();
    set_sync_rep("regress_dlock_no_such_standby");
    pqxx::work w{conn};
    auto g = c.try_acquire(w, name, ttl(30s));
    ASSERT_TRUE(g.has_value());
    auto committed = std::async(std::launch::async, [&] { return dlock::commit(w); });
    ASSERT_TRUE(wait_until_waiting(pid, "SyncRep", 5s));
    sql("SELECT pg_cancel_backend(" + std::to_string(pid) + ")");
    ASSERT_EQ(committed.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(committed.get(), dlock::outcome::unknown);
}

// An unknown renewal proves nothing either way: the lease stays as valid as it
// was (until its deadline), and the next renewal on a fresh connection settles it.
TEST_F(outcome_test, renew_on_a_terminated_connection_is_unknown_and_keeps_the_lease) {
    const auto name = unique_name("renew-terminated");
    dlock::client c;
    dlock::lease_options o = ttl(30s);
    o.keep_alive = false;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    terminate_backend(c.backend_pid());
    EXPECT_EQ(l->renew(), dlock::outcome::unknown);
    EXPECT_FALSE(l->lost());
    EXPECT_TRUE(l->valid());
    EXPECT_EQ(l->renew(), dlock::outcome::done);
    EXPECT_EQ(l->release(), dlock::outcome::done);
}

// The keep-alive's connection dies (as at a failover): it reconnects (a
// multi-host string would find the new primary) and the lease lives on.
TEST_F(outcome_test, keep_alive_reconnects_after_its_connection_died_and_the_lease_survives) {
    const auto name = unique_name("ka-terminated");
    dlock::client c;
    dlock::lease_options o = ttl(3s);
    o.renew_every = 100ms;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    ASSERT_TRUE(eventually([&] { return c.keep_alive_backend_pid() != 0; }, 2s));
    const int first = c.keep_alive_backend_pid();
    terminate_backend(first);
    EXPECT_FALSE(l->wait_lost(4s)) << "lost although the lease survived on the server";
    EXPECT_TRUE(l->valid());
    EXPECT_NE(c.keep_alive_backend_pid(), first);
    EXPECT_NE(c.keep_alive_backend_pid(), 0);
    EXPECT_EQ(state_of(name), "held");
    EXPECT_EQ(l->release(), dlock::outcome::done);
}

// The lease did not survive while the keep-alive was cut off: the renewal on
// the new connection is refused and the lease is reported lost at once.
TEST_F(outcome_test, keep_alive_reports_a_lease_that_did_not_survive_the_reconnect_as_lost) {
    const auto name = unique_name("ka-gone");
    dlock::client c;
    dlock::lease_options o = ttl(30s);
    o.renew_every = 200ms;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    ASSERT_TRUE(eventually([&] { return c.keep_alive_backend_pid() != 0; }, 2s));
    dlock::client admin_client;
    ASSERT_TRUE(admin_client.force_release(name, "outcome_test"));
    terminate_backend(c.keep_alive_backend_pid());
    ASSERT_TRUE(l->wait_lost(3s));
    EXPECT_EQ(l->loss(), dlock::loss_reason::refused);
}

// Reconnection: the server goes away and comes back (a restart here; a failover
// to a standby looks the same to the client): the keep-alive's renewals fail
// while it is down and are retried on a new connection, and the lease, which
// the server kept, lives on.
TEST_F(outcome_test, keep_alive_renews_on_a_new_connection_after_a_server_restart) {
    const char* root = std::getenv("DLOCK_ROOT");
    const char* cluster = std::getenv("DLOCK_CLUSTER_DIR");
    ASSERT_TRUE(root != nullptr && cluster != nullptr)
        << "DLOCK_ROOT and DLOCK_CLUSTER_DIR are not set: run through tests/run-all.sh";
    const auto name = unique_name("restart");
    dlock::client c;
    dlock::lease_options o = ttl(10s);
    o.renew_every = 300ms;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    ASSERT_TRUE(eventually([&] { return c.metrics().renewals >= 1; }, 3s));
    const std::string script = std::string{root} + "/scripts/pg-cluster.sh";
    ASSERT_EQ(std::system((script + " stop '" + cluster + "' >/dev/null").c_str()), 0);
    std::this_thread::sleep_for(1s); // renewals fail meanwhile
    ASSERT_EQ(std::system((script + " restart '" + cluster + "' >/dev/null").c_str()), 0);
    const auto renewals = c.metrics().renewals;
    EXPECT_TRUE(eventually([&] { return c.metrics().renewals > renewals; }, 5s)) << "no renewal after the restart";
    EXPECT_TRUE(l->valid());
    EXPECT_FALSE(l->lost());
    pqxx::connection fresh; // the fixture's admin connection died with the server
    pqxx::nontransaction tx{fresh};
    EXPECT_EQ(tx.exec_params("SELECT state FROM dlock.locks WHERE lock_name = $1", name)[0][0].as<std::string>(),
              "held");
    EXPECT_EQ(l->release(), dlock::outcome::done);
}

// The connections die and cannot come back (the role may no longer log in):
// releasing in destructors fails, and must not throw.
TEST_F(outcome_test, destructors_with_a_dead_connection_do_not_throw) {
    sql("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_dlock_app') THEN "
        "CREATE ROLE regress_dlock_app LOGIN; END IF; END$$");
    sql("ALTER ROLE regress_dlock_app LOGIN");
    sql("GRANT USAGE ON SCHEMA dlock TO regress_dlock_app");
    const auto name = unique_name("dead");
    EXPECT_NO_THROW({
        dlock::client c{"user=regress_dlock_app"};
        dlock::lease_options o = ttl(5s);
        o.renew_every = 100ms;
        auto l = c.try_acquire(name, o);
        ASSERT_TRUE(l.has_value());
        ASSERT_TRUE(eventually([&] { return c.keep_alive_backend_pid() != 0; }, 2s));
        sql("ALTER ROLE regress_dlock_app NOLOGIN");
        sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'regress_dlock_app'");
        ASSERT_TRUE(eventually(
            [&] { return sql("SELECT 1 FROM pg_stat_activity WHERE usename = 'regress_dlock_app'").empty(); }, 5s));
        // The keep-alive cannot reconnect: the lease is reported lost at its
        // deadline, not before (the server cannot be asked).
        EXPECT_FALSE(l->wait_lost(2s));
        EXPECT_TRUE(l->wait_lost(5s));
        EXPECT_EQ(l->loss(), dlock::loss_reason::expired);
        EXPECT_LE(l->deadline(), std::chrono::steady_clock::now());
        // l and c are destroyed here, in that order, with no way to reach the server.
    });
    sql("ALTER ROLE regress_dlock_app LOGIN");
    // Nobody released it: it runs out at its ttl (held or already expired, never free).
    EXPECT_NE(state_of(name), "free");
}

} // namespace
