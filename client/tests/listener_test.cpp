// listener_test.cpp -- the lease listener (dlock/listener.hpp): every grant,
// renewal, loss and release of a client's leases is reported once, with its
// wait, lateness or hold time, on every path (each lease kind, sets, the
// keep-alive, a caller's transaction, an election), and a listener that
// throws changes nothing.
#include <dlock/dlock.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;
using std::chrono::steady_clock;

namespace {

/// One reported event, flattened.
struct recorded {
    enum class kind { grant, renew, loss, release } what = kind::grant;
    std::string lock_name;
    std::string owner_token;
    std::int64_t fencing_token = 0;
    steady_clock::duration time{}; ///< waited, lateness, held, held
    steady_clock::duration margin{};
    bool in_transaction = false;
    dlock::loss_reason reason = dlock::loss_reason::expired;
    dlock::outcome result = dlock::outcome::unknown;
};

/// Records every event; read from the test thread while the keep-alive's
/// threads report.
class recording_listener : public dlock::lease_listener {
public:
    void on_grant(const dlock::grant_event& e) override {
        recorded r = about(recorded::kind::grant, e.lease, e.waited);
        r.in_transaction = e.in_transaction;
        add(r);
    }
    void on_renew(const dlock::renew_event& e) override {
        recorded r = about(recorded::kind::renew, e.lease, e.lateness);
        r.margin = e.margin;
        add(r);
    }
    void on_loss(const dlock::loss_event& e) override {
        recorded r = about(recorded::kind::loss, e.lease, e.held);
        r.reason = e.reason;
        add(r);
    }
    void on_release(const dlock::release_event& e) override {
        recorded r = about(recorded::kind::release, e.lease, e.held);
        r.result = e.result;
        add(r);
    }

    /// The events of one lock name, in the order reported.
    std::vector<recorded> of(const std::string& name) const {
        std::lock_guard<std::mutex> guard{m_mutex};
        std::vector<recorded> out;
        for (const auto& r : m_events)
            if (r.lock_name == name) out.push_back(r);
        return out;
    }
    /// How many events of this kind a name has.
    std::size_t count(const std::string& name, recorded::kind what) const {
        std::size_t n = 0;
        for (const auto& r : of(name))
            n += r.what == what ? 1 : 0;
        return n;
    }
    /// The kinds of a name's events, renewals left out: "grant release".
    std::string story(const std::string& name) const {
        static const char* const names[] = {"grant", "renew", "loss", "release"};
        std::string out;
        for (const auto& r : of(name))
            if (r.what != recorded::kind::renew)
                out += (out.empty() ? "" : " ") + std::string{names[static_cast<int>(r.what)]};
        return out;
    }

private:
    static recorded about(recorded::kind what, const dlock::lease_info& lease, steady_clock::duration time) {
        recorded r;
        r.what = what;
        r.lock_name = lease.lock_name;
        r.owner_token = lease.owner_token;
        r.fencing_token = lease.fencing_token;
        r.time = time;
        return r;
    }
    void add(const recorded& r) {
        std::lock_guard<std::mutex> guard{m_mutex};
        m_events.push_back(r);
    }
    mutable std::mutex m_mutex;
    std::vector<recorded> m_events;
};

/// Throws from every call, and counts them.
class throwing_listener : public dlock::lease_listener {
public:
    std::atomic<int> calls{0};
    void on_grant(const dlock::grant_event&) override { fail(); }
    void on_renew(const dlock::renew_event&) override { fail(); }
    void on_loss(const dlock::loss_event&) override { fail(); }
    void on_release(const dlock::release_event&) override { fail(); }

private:
    void fail() {
        ++calls;
        throw std::runtime_error{"listener failed"};
    }
};

class listener_test : public dlock_testing::server_test {
protected:
    std::shared_ptr<recording_listener> events = std::make_shared<recording_listener>();

    dlock::client_options with_listener(std::shared_ptr<dlock::lease_listener> listener) {
        dlock::client_options o;
        o.listener = std::move(listener);
        return o;
    }
    static dlock::lease_options ttl(std::chrono::milliseconds value) {
        dlock::lease_options o;
        o.ttl = value;
        return o;
    }
};

TEST_F(listener_test, grant_reports_the_wait_behind_another_holder) {
    const auto name = unique_name("wait");
    dlock::client holder_client;
    auto held = holder_client.try_acquire(name, ttl(30s));
    ASSERT_TRUE(held.has_value());

    dlock::client c{with_listener(events)};
    const auto before = steady_clock::now();
    // The holder lets go 350 ms after the call starts (give or take the
    // thread's start): the grant cannot have waited less than 300 ms.
    std::thread releaser{[&] {
        std::this_thread::sleep_until(before + 350ms);
        EXPECT_EQ(held->release(), dlock::outcome::done);
    }};
    auto l = c.acquire(name, 5s, ttl(30s));
    const auto after = steady_clock::now();
    releaser.join();

    const auto story = events->of(name);
    ASSERT_EQ(story.size(), 1u);
    EXPECT_EQ(story[0].what, recorded::kind::grant);
    EXPECT_GE(story[0].time, 300ms);
    EXPECT_LE(story[0].time, after - before);
    EXPECT_EQ(story[0].fencing_token, l.fencing_token());
    EXPECT_EQ(story[0].owner_token, l.owner_token());
    EXPECT_FALSE(story[0].in_transaction);
}

TEST_F(listener_test, release_reports_the_hold_time_once) {
    const auto name = unique_name("hold");
    dlock::client c{with_listener(events)};
    {
        auto l = c.try_acquire(name, ttl(30s));
        ASSERT_TRUE(l.has_value());
        std::this_thread::sleep_for(250ms);
        EXPECT_EQ(l->release(), dlock::outcome::done);
        EXPECT_EQ(l->release(), dlock::outcome::refused); // a second call ends nothing: no event
        // nor does the destructor after a release
    }
    const auto story = events->of(name);
    ASSERT_EQ(events->story(name), "grant release");
    EXPECT_LT(story[0].time, 250ms); // no wait: one round trip
    EXPECT_GE(story[1].time, 250ms);
    EXPECT_EQ(story[1].result, dlock::outcome::done);
    EXPECT_EQ(story[1].fencing_token, story[0].fencing_token);
}

TEST_F(listener_test, every_lease_kind_and_set_reports_one_grant_and_one_release) {
    const auto exclusive = unique_name("exclusive");
    const auto shared = unique_name("shared");
    const auto semaphore = unique_name("semaphore");
    const auto set_a = unique_name("set-a");
    const auto set_b = unique_name("set-b");
    dlock::client c{with_listener(events)};
    {
        auto x = c.acquire(exclusive, 1s, ttl(30s));
        auto r1 = c.try_acquire_shared(shared, ttl(30s));
        auto r2 = c.acquire_shared(shared, 1s, ttl(30s));
        auto p1 = c.try_acquire_permit(semaphore, 2, ttl(30s));
        auto p2 = c.acquire_permit(semaphore, 2, 1s, ttl(30s));
        auto set = c.try_acquire_all({set_a, set_b}, ttl(30s));
        ASSERT_TRUE(r1 && p1 && set);
        EXPECT_FALSE(c.try_acquire_permit(semaphore, 2, ttl(30s)).has_value()); // busy: no event
        EXPECT_EQ(set->size(), 2u);
    }
    EXPECT_EQ(events->story(exclusive), "grant release");
    EXPECT_EQ(events->story(shared), "grant grant release release");
    EXPECT_EQ(events->story(semaphore), "grant grant release release");
    EXPECT_EQ(events->story(set_a), "grant release");
    EXPECT_EQ(events->story(set_b), "grant release");
    for (const auto& name : {exclusive, shared, semaphore, set_a, set_b}) {
        for (const auto& r : events->of(name)) {
            if (r.what == recorded::kind::release) {
                EXPECT_EQ(r.result, dlock::outcome::done) << name;
            }
        }
    }
    EXPECT_EQ(c.metrics().acquisitions, 7u);
    EXPECT_EQ(c.metrics().releases, 7u);
}

TEST_F(listener_test, keep_alive_renewals_are_reported_one_for_one) {
    const auto name = unique_name("renew");
    dlock::client c{with_listener(events)};
    dlock::lease_options o = ttl(3s);
    o.renew_every = 100ms;
    {
        auto l = c.try_acquire(name, o);
        ASSERT_TRUE(l.has_value());
        ASSERT_TRUE(eventually([&] { return events->count(name, recorded::kind::renew) >= 3; }, 3s));
        EXPECT_EQ(l->renew(), dlock::outcome::done); // an explicit renewal is reported too
    }
    // Counted after the release: no renewal is sent after it.
    EXPECT_EQ(events->count(name, recorded::kind::renew), c.metrics().renewals);
    EXPECT_EQ(events->story(name), "grant release");
    for (const auto& r : events->of(name)) {
        if (r.what != recorded::kind::renew) continue;
        EXPECT_LT(r.time, 3s);    // late by less than the ttl, or the lease would be lost
        EXPECT_GT(r.margin, 0ms); // renewed before the deadline
        EXPECT_LE(r.margin, 3s);
    }
}

TEST_F(listener_test, loss_is_reported_when_the_lease_is_force_released) {
    const auto name = unique_name("forced");
    dlock::client c{with_listener(events)};
    dlock::lease_options o = ttl(30s);
    o.renew_every = 100ms;
    std::promise<void> on_lost_ran;
    o.on_lost = [&](const dlock::lost_lease&) { on_lost_ran.set_value(); };
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    dlock::client admin_client;
    ASSERT_TRUE(admin_client.force_release(name, "listener_test"));
    ASSERT_TRUE(l->wait_lost(5s)); // long before the 30 s ttl
    ASSERT_EQ(on_lost_ran.get_future().wait_for(3s), std::future_status::ready);
    EXPECT_EQ(events->story(name), "grant loss"); // reported before on_lost ran
    EXPECT_EQ(l->release(), dlock::outcome::refused);
    ASSERT_EQ(events->story(name), "grant loss release");
    const auto story = events->of(name);
    EXPECT_EQ(story[story.size() - 2].reason, dlock::loss_reason::refused);
    EXPECT_EQ(story.back().result, dlock::outcome::refused);
}

TEST_F(listener_test, loss_is_reported_when_the_lease_expires) {
    const auto name = unique_name("expired");
    dlock::client c{with_listener(events)};
    auto l = c.try_acquire(name, ttl(600ms));
    ASSERT_TRUE(l.has_value());
    l->stop_keep_alive();
    ASSERT_TRUE(eventually([&] { return events->count(name, recorded::kind::loss) == 1; }, 3s));
    const auto loss = events->of(name).back();
    EXPECT_EQ(loss.reason, dlock::loss_reason::expired);
    EXPECT_GE(loss.time, 400ms); // held until its deadline: the ttl less drift and margin
    EXPECT_LE(loss.time, 2s);
    EXPECT_EQ(events->story(name), "grant loss");
}

TEST_F(listener_test, a_grant_in_a_transaction_is_reported_once_and_its_adoption_adds_none) {
    const auto name = unique_name("txn");
    dlock::client c{with_listener(events)};
    pqxx::connection conn;
    pqxx::work w{conn};
    auto g = c.try_acquire(w, name, ttl(30s));
    ASSERT_TRUE(g.has_value());
    ASSERT_EQ(events->story(name), "grant");
    EXPECT_TRUE(events->of(name)[0].in_transaction);
    ASSERT_EQ(dlock::commit(w), dlock::outcome::done);
    {
        auto l = c.adopt(*g, ttl(30s));
        EXPECT_TRUE(l.valid());
    }
    EXPECT_EQ(events->story(name), "grant release");
    EXPECT_EQ(events->of(name).back().result, dlock::outcome::done);
}

TEST_F(listener_test, an_election_reports_its_leadership_as_a_lease) {
    const auto name = unique_name("election");
    dlock::client c{with_listener(events)};
    {
        dlock::election e{c, name};
        ASSERT_TRUE(e.campaign(2s));
        EXPECT_EQ(events->story(name), "grant");
        EXPECT_EQ(e.resign(), dlock::outcome::done);
    }
    EXPECT_EQ(events->story(name), "grant release");
}

TEST_F(listener_test, a_listener_that_throws_does_not_break_the_lease_logic) {
    const auto name = unique_name("throws");
    const auto listener = std::make_shared<throwing_listener>();
    dlock::client c{with_listener(listener)};
    dlock::lease_options o = ttl(30s);
    o.renew_every = 100ms;
    std::promise<dlock::loss_reason> lost;
    o.on_lost = [&](const dlock::lost_lease& info) { lost.set_value(info.reason); };
    {
        auto l = c.acquire(name, 1s, o);
        EXPECT_EQ(state_of(name), "held");
        ASSERT_TRUE(eventually([&] { return c.metrics().renewals >= 2; }, 3s)); // the renewer goes on
        EXPECT_TRUE(l.valid());
        EXPECT_EQ(l.renew(), dlock::outcome::done);
        EXPECT_EQ(l.release(), dlock::outcome::done);
    }
    EXPECT_EQ(state_of(name), "free");
    // The watcher goes on too: a loss still reaches on_lost.
    auto l = c.try_acquire(name, o);
    ASSERT_TRUE(l.has_value());
    dlock::client admin_client;
    ASSERT_TRUE(admin_client.force_release(name, "listener_test"));
    auto reason = lost.get_future();
    ASSERT_EQ(reason.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(reason.get(), dlock::loss_reason::refused);
    // Every kind of call was made (and threw): grant, renewals, release, grant, loss.
    EXPECT_GE(listener->calls.load(), 6);
}

} // namespace
