// keep_alive_test.cpp -- background renewal: keeps a lease across several ttls,
// reports a lease lost (refused, expired, no progress) and never renews after
// a release; a lost lease's fenced writes are refused.
#include <dlock/dlock.hpp>

#include <atomic>
#include <future>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class keep_alive_test : public dlock_testing::server_test {};

TEST_F(keep_alive_test, keeps_a_lease_across_several_ttls) {
    const auto name = unique_name("ka");
    dlock::client c;
    dlock::lease_options o;
    o.ttl = 1500ms;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    const auto token = l->fencing_token();
    std::this_thread::sleep_for(4600ms); // three ttls and a bit
    EXPECT_TRUE(l->valid());
    EXPECT_EQ(state_of(name), "held");
    EXPECT_GE(c.metrics().renewals, 3u);
    EXPECT_EQ(column_of(name, "fencing_token"), token);
    // The renewals ran on the keep-alive's own connection, not the caller's.
    EXPECT_NE(c.keep_alive_backend_pid(), 0);
    EXPECT_NE(c.keep_alive_backend_pid(), c.backend_pid());
    dlock::client other;
    EXPECT_FALSE(other.try_acquire(name, o).has_value());
}

// A pause (keep-alive stopped) lets the lease expire; another owner takes it
// over. The old lease is reported lost and its fenced writes are refused.
TEST_F(keep_alive_test, lease_taken_over_after_a_pause_is_reported_lost_and_fenced) {
    const auto name = unique_name("takeover");
    const auto resource = unique_name("resource");
    dlock::client old_client;
    std::promise<dlock::lost_lease> reported;
    dlock::lease_options o;
    o.ttl = 1s;
    o.on_lost = [&](const dlock::lost_lease& info) { reported.set_value(info); };
    auto old_lease = old_client.try_acquire(name, o);
    ASSERT_TRUE(old_lease.has_value());
    {
        pqxx::work w{admin()};
        dlock::fence(w, resource, old_lease->fencing_token());
        w.commit();
    }

    old_lease->stop_keep_alive(); // the "process pause"
    dlock::client new_client;
    std::optional<dlock::lease> new_lease;
    ASSERT_TRUE(eventually([&] { return (new_lease = new_client.try_acquire(name, o)).has_value(); }, 5s));
    EXPECT_GT(new_lease->fencing_token(), old_lease->fencing_token());
    {
        pqxx::work w{admin()};
        dlock::fence(w, resource, new_lease->fencing_token());
        w.commit();
    }

    // Reported lost: the takeover could only happen after the old deadline.
    EXPECT_TRUE(old_lease->lost());
    EXPECT_FALSE(old_lease->valid());
    EXPECT_TRUE(old_lease->wait_lost(0ms));
    auto fut = reported.get_future();
    ASSERT_EQ(fut.wait_for(2s), std::future_status::ready);
    const auto info = fut.get();
    EXPECT_EQ(info.lock_name, name);
    EXPECT_EQ(info.fencing_token, old_lease->fencing_token());
    EXPECT_EQ(info.reason, dlock::loss_reason::expired);
    EXPECT_EQ(old_client.metrics().lost, 1u);

    // The old owner's writes are refused.
    {
        pqxx::work w{admin()};
        EXPECT_THROW(dlock::fence(w, resource, old_lease->fencing_token()), dlock::stale_token_error);
    }
    {
        pqxx::work w{admin()};
        try {
            dlock::assert_holds(w, name, old_lease->fencing_token());
            ADD_FAILURE() << "assert_holds accepted the old token";
        } catch (const dlock::not_held_error& e) {
            // PD002 from pg_dlock 1.1 on (DL002 from 1.0 servers).
            EXPECT_TRUE(e.sqlstate() == "PD002" || e.sqlstate() == "DL002") << e.sqlstate();
            EXPECT_EQ(e.subject(), name);
        }
    }
    EXPECT_EQ(old_lease->renew(), dlock::outcome::refused);
    // Releasing the old lease must not end the new owner's lease.
    EXPECT_EQ(old_lease->release(), dlock::outcome::refused);
    EXPECT_TRUE(new_lease->valid());
    EXPECT_EQ(state_of(name), "held");
}

TEST_F(keep_alive_test, refused_renewal_marks_the_lease_lost_at_once) {
    const auto name = unique_name("refused");
    dlock::client c;
    std::atomic<int> calls{0};
    dlock::lease_options o;
    o.ttl = 30s;
    o.renew_every = 100ms;
    o.on_lost = [&](const dlock::lost_lease&) { ++calls; };
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    dlock::client admin_client;
    ASSERT_TRUE(admin_client.force_release(name, "keep_alive_test"));
    ASSERT_TRUE(l->wait_lost(3s)); // long before the 30 s ttl
    EXPECT_EQ(l->loss(), dlock::loss_reason::refused);
    EXPECT_TRUE(eventually([&] { return calls == 1; }, 2s));
    EXPECT_GE(c.metrics().renewals_refused, 1u);
}

// A renewal that hangs (here: blocked on the lease row, which an admin
// transaction holds locked -- as a renewal lost in a network partition would
// hang) must not delay the loss report past the deadline.
TEST_F(keep_alive_test, loss_is_reported_at_the_deadline_while_a_renewal_hangs) {
    const auto name = unique_name("hang");
    dlock::client c;
    std::promise<dlock::lost_lease> reported;
    dlock::lease_options o;
    o.ttl = 1500ms;
    o.on_lost = [&](const dlock::lost_lease& info) { reported.set_value(info); };
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    ASSERT_TRUE(eventually([&] { return c.keep_alive_backend_pid() != 0; }, 2s)); // renewer connected
    pqxx::connection blocker_conn;
    pqxx::work blocker{blocker_conn};
    blocker.exec_params("SELECT 1 FROM dlock.distributed_lock WHERE lock_name = $1 FOR UPDATE", name);
    ASSERT_TRUE(wait_until_blocked("dlock.renew", 3s)) << "the renewal did not block";
    auto fut = reported.get_future();
    ASSERT_EQ(fut.wait_for(3s), std::future_status::ready) << "no loss report while the renewal hangs";
    EXPECT_EQ(fut.get().reason, dlock::loss_reason::expired);
    EXPECT_FALSE(l->valid());
    EXPECT_LE(l->deadline(), std::chrono::steady_clock::now());
    blocker.abort();
}

TEST_F(keep_alive_test, renews_only_while_progress_is_reported) {
    const auto name = unique_name("progress");
    dlock::client c;
    dlock::lease_options o;
    o.ttl = 1500ms;
    o.renew_only_on_progress = true;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    for (int i = 0; i < 20; ++i) { // 2 s of a working job
        l->report_progress();
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(l->valid());
    EXPECT_GE(c.metrics().renewals, 3u);
    // The job hangs: no more progress. The lease must run out within about a ttl.
    EXPECT_TRUE(l->wait_lost(3s));
    EXPECT_EQ(l->loss(), dlock::loss_reason::expired);
    EXPECT_TRUE(eventually([&] { return state_of(name) != "held"; }, 2s));
}

TEST_F(keep_alive_test, never_renews_after_release) {
    const auto name = unique_name("after-release");
    dlock::client c;
    dlock::lease_options o;
    o.ttl = 1s;
    o.renew_every = 20ms;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(l->release(), dlock::outcome::done);
    const auto renewals = c.metrics().renewals;
    EXPECT_GE(renewals, 2u);
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(c.metrics().renewals, renewals);
    EXPECT_EQ(c.metrics().renewals_refused, 0u);
    EXPECT_EQ(state_of(name), "free");
}

// A lease dropped from its own callback: on_lost drops the last lease and the client, so the keep-alive
// is destroyed on its own watcher thread, which then must not touch it
// (AddressSanitizer: heap-use-after-free before the fix).
TEST_F(keep_alive_test, on_lost_may_drop_the_last_lease_and_the_client) {
    const auto name = unique_name("drop-in-on-lost");
    struct owned {
        std::unique_ptr<dlock::client> client;
        std::optional<dlock::lease> lease;
    };
    auto box = std::make_shared<owned>();
    std::promise<void> dropped;
    box->client = std::make_unique<dlock::client>();
    dlock::lease_options o;
    o.ttl = 30s;
    o.renew_every = 50ms;
    o.on_lost = [&](const dlock::lost_lease&) {
        box->lease.reset();
        box->client.reset();
        dropped.set_value();
    };
    box->lease = box->client->try_acquire(name, o);
    ASSERT_TRUE(box->lease.has_value());
    dlock::client admin_client;
    ASSERT_TRUE(admin_client.force_release(name, "keep_alive_test"));
    ASSERT_EQ(dropped.get_future().wait_for(5s), std::future_status::ready);
    std::this_thread::sleep_for(300ms); // the watcher thread finishes on what it owns
    EXPECT_FALSE(box->client);
}

// Dropped during a renewal: the lease and its client are dropped while a renewal of it
// hangs behind a row lock: the destructor returns within its bound (the call
// timeout), and the renewer, holding the last reference when its renewal
// ends, finishes without touching the destroyed keep-alive.
TEST_F(keep_alive_test, destroying_a_lease_while_its_renewal_hangs_is_bounded) {
    const auto name = unique_name("bounded-dtor");
    dlock::client_options co;
    co.call_timeout = 500ms;
    auto c = std::make_unique<dlock::client>(co);
    dlock::lease_options o;
    o.ttl = 6s;
    o.renew_every = 1s;
    auto l = c->try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    ASSERT_TRUE(eventually([&] { return c->keep_alive_backend_pid() != 0; }, 3s));
    pqxx::connection blocker_conn;
    pqxx::work blocker{blocker_conn};
    blocker.exec_params("SELECT 1 FROM dlock.distributed_lock WHERE lock_name = $1 FOR UPDATE", name);
    ASSERT_TRUE(wait_until_blocked("dlock.renew", 3s)) << "the renewal did not block";
    const auto started = std::chrono::steady_clock::now();
    auto destroyed = std::async(std::launch::async, [&] {
        l.reset();
        c.reset();
    });
    // remove() waits at most one call timeout, the release (also blocked) another.
    const bool in_time = destroyed.wait_for(2s) == std::future_status::ready;
    if (!in_time) blocker.abort(); // unblock it, so the test ends
    destroyed.wait();
    EXPECT_TRUE(in_time) << "~lease waited "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                                  started)
                                .count()
                         << " ms for a renewal stuck behind a row lock";
    if (in_time) blocker.abort();
    std::this_thread::sleep_for(300ms);
}

// Bounded waits: wait_lost(timeout) returns after the timeout although renewals
// keep moving the deadline.
TEST_F(keep_alive_test, wait_lost_honours_its_timeout_while_renewals_move_the_deadline) {
    const auto name = unique_name("wait-lost");
    dlock::client c;
    dlock::lease_options o;
    o.ttl = 900ms;
    o.renew_every = 100ms;
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    for (auto timeout : {300ms, 2000ms}) {
        const auto started = std::chrono::steady_clock::now();
        EXPECT_FALSE(l->wait_lost(timeout));
        const auto took = std::chrono::steady_clock::now() - started;
        EXPECT_GE(took, timeout);
        EXPECT_LT(took, timeout + 500ms) << "timeout " << timeout.count() << " ms";
    }
    EXPECT_TRUE(l->valid());
}

// One stuck renewal stalls no other lease: a renewal stuck behind a row lock must not stop the renewals of
// the client's other leases.
TEST_F(keep_alive_test, one_hung_renewal_does_not_stop_the_other_leases) {
    const auto stuck_name = unique_name("stuck");
    const auto other_name = unique_name("other");
    dlock::client c;
    dlock::lease_options slow;
    slow.ttl = 20s;
    slow.renew_every = 100ms;
    auto stuck = c.try_acquire(stuck_name, slow);
    ASSERT_TRUE(stuck.has_value());
    ASSERT_TRUE(eventually([&] { return c.keep_alive_backend_pid() != 0; }, 2s));
    pqxx::connection blocker_conn;
    pqxx::work blocker{blocker_conn};
    blocker.exec_params("SELECT 1 FROM dlock.distributed_lock WHERE lock_name = $1 FOR UPDATE", stuck_name);
    dlock::lease_options fast;
    fast.ttl = 1500ms;
    fast.renew_every = 300ms;
    auto other = c.try_acquire(other_name, fast);
    ASSERT_TRUE(other.has_value());
    ASSERT_TRUE(wait_until_blocked("dlock.renew", 3s)) << "the renewal did not block";
    EXPECT_FALSE(other->wait_lost(4s)) << "the other lease was lost while one renewal hung";
    EXPECT_TRUE(other->valid());
    EXPECT_TRUE(stuck->valid()); // its own deadline is far away: retried, not lost
    blocker.abort();
    EXPECT_EQ(other->release(), dlock::outcome::done);
    EXPECT_EQ(stuck->release(), dlock::outcome::done);
}

} // namespace
