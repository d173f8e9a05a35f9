// election.cpp -- leader election (campaign) and following the leader (observe).
//
// A campaign is dlock.acquire on the election's lock name in slices of a third
// of the ttl: the client dates a lease from when its request was sent, so a
// grant at the end of a longer wait would arrive with little or no time left.
// The lease it wins is kept alive by the client's keep-alive like any other. An observer has one
// connection of its own that LISTENs on dlock_events, and one thread that
// waits for notifications in 200 ms steps (so that it can stop) and re-reads
// dlock.leader whenever something may have changed.
#include "dlock/election.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <pqxx/pqxx>

#include "dlock/json.hpp"
#include "timing.hpp"

namespace dlock {

using std::chrono::milliseconds;

namespace {

using std::chrono::duration_cast;

// The "lock_name" member of an event payload for `name`.
std::string payload_needle(const std::string& name) {
    return "\"lock_name\":" + json_quote(name);
}

constexpr milliseconds wait_step{200};

} // namespace

milliseconds campaign_slice(milliseconds ttl) {
    return std::max(ttl / 3, milliseconds{100});
}

namespace {

constexpr milliseconds idle_recheck{30000};
constexpr milliseconds max_backoff{2000};

} // namespace

// --- election ---------------------------------------------------------------

election::election(client& candidate, std::string name, election_options options)
    : m_client{candidate}, m_name{std::move(name)}, m_options{std::move(options)} {}

election::~election() noexcept {
    (void)resign();
}

bool election::campaign(milliseconds timeout) {
    if (is_leader()) return true;
    m_lease.reset(); // a lost lease: its release is refused, which is fine
    lease_options options;
    options.ttl = m_options.ttl;
    options.holder = m_options.holder;
    options.on_lost = m_options.on_lost;
    const auto deadline = steady_clock::now() + timeout;
    for (;;) {
        const auto left = std::max(milliseconds{0}, duration_cast<milliseconds>(deadline - steady_clock::now()));
        try {
            m_lease.emplace(m_client.acquire(m_name, std::min(left, campaign_slice(m_options.ttl)), options));
            break;
        } catch (const busy_error&) {
            if (steady_clock::now() >= deadline) return false;
        }
    }
    if (m_options.on_elected) m_options.on_elected(*m_lease);
    return true;
}

outcome election::resign() noexcept {
    if (!m_lease) return outcome::refused;
    const outcome result = m_lease->release();
    m_lease.reset();
    return result;
}

bool election::is_leader() const noexcept {
    return m_lease && m_lease->valid();
}

const lease* election::leadership() const noexcept {
    return is_leader() ? &*m_lease : nullptr;
}

// --- observer ---------------------------------------------------------------

struct observer::state {
    std::string connection_string;
    std::string name;
    std::string needle;
    change_callback on_change;
    std::atomic<bool> stop{false};

    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    std::optional<leader_info> current;
    bool ready = false;
    int connections = 0;

    std::thread thread;

    // Reads the leader; reports a change; returns when to read again.
    steady_clock::time_point read(pqxx::connection& conn) {
        pqxx::nontransaction tx{conn};
        const pqxx::result r = tx.exec_params("SELECT holder, fencing_token, pg_catalog.date_part('epoch', since),"
                                              " pg_catalog.date_part('epoch', lease_until)"
                                              " FROM dlock.leader($1) WHERE fencing_token IS NOT NULL",
                                              name);
        std::optional<leader_info> now_leader;
        if (!r.empty()) {
            leader_info l;
            l.holder = r[0][0].is_null() ? std::string{} : r[0][0].as<std::string>();
            l.fencing_token = r[0][1].as<std::int64_t>();
            l.since = internal::from_epoch(r[0][2].as<double>());
            l.lease_until = internal::from_epoch(r[0][3].as<double>());
            now_leader = l;
        }
        bool report = false;
        {
            std::lock_guard<std::mutex> guard{mutex};
            const std::int64_t before = current ? current->fencing_token : 0;
            const std::int64_t after = now_leader ? now_leader->fencing_token : 0;
            report = !ready || before != after;
            current = now_leader;
            ready = true;
        }
        changed.notify_all();
        if (report && on_change) on_change(now_leader);

        // Without an event, the leader changes at the latest when its lease runs out.
        milliseconds until = idle_recheck;
        if (now_leader)
            until = std::clamp(duration_cast<milliseconds>(now_leader->lease_until - std::chrono::system_clock::now()) +
                                   milliseconds{50},
                               milliseconds{50}, idle_recheck);
        return steady_clock::now() + until;
    }

    void run() {
        milliseconds backoff{100};
        while (!stop) {
            try {
                pqxx::connection conn{connection_string};
                struct receiver : pqxx::notification_receiver {
                    receiver(pqxx::connection& c, const std::string& needle)
                        : pqxx::notification_receiver{c, "dlock_events"}, m_needle{needle} {}
                    void operator()(const std::string& payload, int) override {
                        if (payload.find(m_needle) != std::string::npos) hit = true;
                    }
                    const std::string& m_needle;
                    bool hit = false;
                } events{conn, needle};
                {
                    std::lock_guard<std::mutex> guard{mutex};
                    ++connections;
                }
                // Listening first, then reading: nothing that commits after the
                // read can go unnoticed.
                auto recheck = read(conn);
                backoff = milliseconds{100};
                while (!stop) {
                    conn.await_notification(0, duration_cast<std::chrono::microseconds>(wait_step).count());
                    if (events.hit || steady_clock::now() >= recheck) {
                        events.hit = false;
                        recheck = read(conn);
                    }
                }
            } catch (const std::exception&) {
                // reconnect after a pause; the read after reconnecting catches up
                const auto until = steady_clock::now() + backoff;
                while (!stop && steady_clock::now() < until)
                    std::this_thread::sleep_for(milliseconds{20});
                backoff = std::min(backoff * 2, max_backoff);
            }
        }
    }
};

observer::observer(std::string connection_string, std::string name, change_callback on_change)
    : m_state{std::make_shared<state>()} {
    m_state->connection_string = std::move(connection_string);
    m_state->needle = payload_needle(name);
    m_state->name = std::move(name);
    m_state->on_change = std::move(on_change);
    m_state->thread = std::thread{[s = m_state] { s->run(); }};
}

observer::~observer() noexcept {
    m_state->stop = true;
    if (m_state->thread.joinable()) m_state->thread.join();
}

std::optional<leader_info> observer::current() const {
    std::lock_guard<std::mutex> guard{m_state->mutex};
    return m_state->current;
}

bool observer::wait_ready(milliseconds timeout) const {
    std::unique_lock<std::mutex> lock{m_state->mutex};
    return m_state->changed.wait_for(lock, timeout, [this] { return m_state->ready; });
}

int observer::connections() const {
    std::lock_guard<std::mutex> guard{m_state->mutex};
    return m_state->connections;
}

} // namespace dlock
