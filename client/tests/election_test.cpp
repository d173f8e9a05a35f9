// election_test.cpp -- leader election and observers: a leader killed with
// SIGKILL is replaced within ttl plus a bound; observers see exactly one
// leader per token, in token order; an observer restarted, or reconnected, in
// the middle of a change converges on the server's leader.
#include <dlock/dlock.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

/// The changes one observer reported: (token, holder); token 0 = no leader.
struct recorder {
    std::mutex mutex;
    std::vector<std::pair<std::int64_t, std::string>> changes;

    dlock::observer::change_callback callback() {
        return [this](const std::optional<dlock::leader_info>& l) {
            std::lock_guard<std::mutex> guard{mutex};
            changes.emplace_back(l ? l->fencing_token : 0, l ? l->holder : "");
        };
    }
    std::vector<std::pair<std::int64_t, std::string>> snapshot() {
        std::lock_guard<std::mutex> guard{mutex};
        return changes;
    }
};

class election_test : public dlock_testing::server_test {
protected:
    void SetUp() override {
        server_test::SetUp();
        // observers learn of changes from events; sessions opened from now on send them
        sql("ALTER DATABASE " + admin().quote_name(admin().dbname()) + " SET dlock.events = on");
    }
    void TearDown() override { sql("ALTER DATABASE " + admin().quote_name(admin().dbname()) + " RESET dlock.events"); }

    static std::int64_t token_of(const dlock::observer& o) {
        const auto l = o.current();
        return l ? l->fencing_token : 0;
    }
};

// Checks what observers reported: leaders in increasing token order (with
// "no leader" in between), and one holder per token across all observers.
void expect_one_leader_per_token(const std::vector<std::vector<std::pair<std::int64_t, std::string>>>& seen) {
    std::map<std::int64_t, std::string> holder_of;
    for (const auto& changes : seen) {
        std::int64_t last = 0;
        for (const auto& [token, holder] : changes) {
            if (token == 0) continue;
            EXPECT_GT(token, last) << "a leader reported out of token order";
            last = token;
            const auto [it, inserted] = holder_of.emplace(token, holder);
            EXPECT_EQ(it->second, holder) << "two holders reported for token " << token;
        }
    }
}

TEST_F(election_test, leader_killed_with_sigkill_is_replaced_within_ttl_and_observers_agree) {
    const auto name = unique_name("scheduler");
    constexpr auto ttl = 2000ms;
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    // The first leader is a child process, so that it can die of SIGKILL.
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(ready[0]);
        try {
            dlock::client c;
            dlock::election_options o;
            o.ttl = ttl;
            o.holder = "candidate-a";
            dlock::election e{c, name, o};
            if (e.campaign(10s)) {
                const std::int64_t token = e.leadership()->fencing_token();
                (void)!write(ready[1], &token, sizeof token);
            }
            pause();
        } catch (...) {
        }
        _exit(1);
    }
    close(ready[1]);
    std::int64_t first_token = 0;
    ASSERT_EQ(read(ready[0], &first_token, sizeof first_token), static_cast<ssize_t>(sizeof first_token));
    close(ready[0]);

    recorder r1, r2;
    dlock::observer o1{"", name, r1.callback()};
    dlock::observer o2{"", name, r2.callback()};
    ASSERT_TRUE(o1.wait_ready(5s));
    ASSERT_TRUE(o2.wait_ready(5s));
    EXPECT_EQ(token_of(o1), first_token);

    dlock::client c;
    dlock::election_options o;
    o.ttl = ttl;
    o.holder = "candidate-b";
    std::atomic<bool> elected{false};
    o.on_elected = [&](const dlock::lease&) { elected = true; };
    dlock::election b{c, name, o};
    EXPECT_FALSE(b.campaign(300ms)) << "a second leader while the first is alive";

    kill(child, SIGKILL);
    const auto killed = std::chrono::steady_clock::now();
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(b.campaign(ttl + 5s));
    const auto took = std::chrono::steady_clock::now() - killed;
    EXPECT_TRUE(elected);
    EXPECT_LE(took, ttl + 1000ms) << "took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                  << " ms";
    const std::int64_t second_token = b.leadership()->fencing_token();
    EXPECT_GT(second_token, first_token);

    // Both observers follow without polling the table (events), within a bound.
    EXPECT_TRUE(eventually([&] { return token_of(o1) == second_token && token_of(o2) == second_token; }, 1s));
    EXPECT_EQ(o1.current()->holder, "candidate-b");
    expect_one_leader_per_token({r1.snapshot(), r2.snapshot()});
    EXPECT_EQ(r1.snapshot().back().first, second_token);

    EXPECT_EQ(b.resign(), dlock::outcome::done);
    EXPECT_TRUE(eventually([&] { return token_of(o1) == 0 && token_of(o2) == 0; }, 1s));
}

/// Two candidates, "a" and "b", for one election.
struct two_candidates {
    explicit two_candidates(const std::string& name) : a{client_a, name, holder("a")}, b{client_b, name, holder("b")} {}
    static dlock::election_options holder(const std::string& text) {
        dlock::election_options o;
        o.holder = text;
        return o;
    }
    dlock::client client_a, client_b;
    dlock::election a, b;
};

TEST_F(election_test, observer_restarted_in_the_middle_of_a_change_converges) {
    const auto name = unique_name("restarted");
    two_candidates candidates{name};
    dlock::election& a = candidates.a;
    dlock::election& b = candidates.b;
    ASSERT_TRUE(a.campaign(5s));

    recorder before, after;
    auto first = std::make_unique<dlock::observer>("", name, before.callback());
    ASSERT_TRUE(first->wait_ready(5s));
    EXPECT_EQ(token_of(*first), a.leadership()->fencing_token());

    // a resigns, the observer goes away, b is elected, a new observer starts
    // while b's grant is still being decided
    std::thread campaign{[&] { EXPECT_TRUE(b.campaign(10s)); }};
    EXPECT_EQ(a.resign(), dlock::outcome::done);
    first.reset();
    dlock::observer second{"", name, after.callback()};
    campaign.join();
    ASSERT_TRUE(second.wait_ready(5s));
    const std::int64_t token = b.leadership()->fencing_token();
    EXPECT_TRUE(eventually([&] { return token_of(second) == token; }, 1s));
    EXPECT_EQ(second.current()->holder, "b");
    expect_one_leader_per_token({before.snapshot(), after.snapshot()});
}

TEST_F(election_test, observer_reconnects_and_rereads_after_missing_events) {
    const auto name = unique_name("reconnect");
    two_candidates candidates{name};
    dlock::election& a = candidates.a;
    dlock::election& b = candidates.b;
    ASSERT_TRUE(a.campaign(5s));
    recorder r;
    dlock::observer o{"", name, r.callback()};
    ASSERT_TRUE(o.wait_ready(5s));
    ASSERT_EQ(o.connections(), 1);

    // cut the observer off, change the leader while it cannot hear, and check
    // it catches up from the re-read after reconnecting
    const auto pid = sql("SELECT pid FROM pg_stat_activity WHERE query LIKE '%dlock.leader($1)%'"
                         " AND pid <> pg_backend_pid()");
    ASSERT_EQ(pid.size(), 1u);
    sql("SELECT pg_terminate_backend(" + pid[0][0].as<std::string>() + ")");
    EXPECT_EQ(a.resign(), dlock::outcome::done);
    ASSERT_TRUE(b.campaign(5s));
    EXPECT_TRUE(eventually([&] { return token_of(o) == b.leadership()->fencing_token(); }, 5s));
    EXPECT_GE(o.connections(), 2);
    expect_one_leader_per_token({r.snapshot()});
}

// Observers find an election's events by its name as the server writes it in
// the payload (escape_json), and dlock --json writes names the same way.
TEST_F(election_test, names_are_quoted_in_json_as_the_server_quotes_them) {
    std::string every_byte;
    for (int c = 1; c < 0x80; ++c)
        every_byte += static_cast<char>(c);
    for (const std::string& text : {every_byte, std::string{"caf\xc3\xa9 \xe2\x82\xac"}, std::string{}}) {
        pqxx::nontransaction tx{admin()};
        const auto server = tx.exec_params1("SELECT pg_catalog.to_json($1::text)::text", text);
        EXPECT_EQ(dlock::json_quote(text), server[0].as<std::string>());
    }
}

} // namespace
