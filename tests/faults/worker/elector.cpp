// tests/faults/worker/elector.cpp -- fault_worker --mode elector: a process of
// the fault harness's election scenario, a candidate or an observer of the leader.
//
// A candidate campaigns (dlock::election, lease kept alive by the client's
// keep-alive) and, while it leads, makes fenced writes with its fencing token,
// recorded in the same history format as fault_worker's, so that checker.py
// checks them the same way (no two leaders' writes interleave, tokens never go
// back, acknowledged writes are there). An observer follows the leader
// (dlock::observer) and records every leader it reports, and on SIGTERM the
// leader it knows last, which the checker compares with the server's.
//
// Usage: fault_worker --mode elector --role candidate|observer --id ID --conninfo "..." --out FILE
//                      --election NAME --ttl-ms N --duration-ms N [options]
//   --fencing 0|1      0 = negative control: writes without holds()/fence()
//   --inside-ms N      pause between the read and the write of each read-modify-write
//   --trust-events     negative control (observer): believe the notifications
//                      alone, never read the leader from the server
// A candidate resigns and an observer writes its final view on SIGTERM; both
// stop after --duration-ms at the latest.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <dlock/dlock.hpp>
#include <dlock/election.hpp>
#include <pqxx/pqxx>

#include "history.hpp"
#include "modes.hpp"
#include "resource.hpp"
#include "session.hpp"

namespace {

using faults::record;
using faults::result_kind;
using std::chrono::milliseconds;

volatile std::sig_atomic_t stop_requested = 0;

extern "C" void request_stop(int) {
    stop_requested = 1;
}

struct options {
    std::string role;
    std::string id;
    std::string conninfo;
    std::string out;
    std::string election;
    long ttl_ms = 1000;
    long duration_ms = 60000;
    bool fencing = true;
    long inside_ms = 100;
    bool trust_events = false;
};

options parse(int argc, char** argv) {
    options o;
    for (const auto& [k, v] : faults::key_values(argc, argv, {"trust-events"})) {
        if (k == "trust-events")
            o.trust_events = true;
        else if (k == "role")
            o.role = v;
        else if (k == "id")
            o.id = v;
        else if (k == "conninfo")
            o.conninfo = v;
        else if (k == "out")
            o.out = v;
        else if (k == "election")
            o.election = v;
        else if (k == "ttl-ms")
            o.ttl_ms = std::stol(v);
        else if (k == "duration-ms")
            o.duration_ms = std::stol(v);
        else if (k == "fencing")
            o.fencing = v != "0";
        else if (k == "inside-ms")
            o.inside_ms = std::stol(v);
        else
            throw std::invalid_argument("unknown option --" + k);
    }
    if ((o.role != "candidate" && o.role != "observer") || o.id.empty() || o.out.empty() || o.election.empty())
        throw std::invalid_argument("--role candidate|observer, --id, --out and --election are required");
    return o;
}

bool running(std::int64_t end) {
    return stop_requested == 0 && faults::history_clock_ns() < end;
}

// --- candidate ----------------------------------------------------------------

class candidate {
public:
    explicit candidate(const options& o)
        : m_opt(o), m_history(o.out), m_client(client_settings(o)),
          m_election(m_client, o.election, election_settings(o)), m_data(o.conninfo, "faults-" + o.id + "-data") {}

    void run() {
        m_history.append(
            record(m_opt.id, 0, "start").num("pid", getpid()).str("impl", "client").flag("fencing", m_opt.fencing));
        const std::int64_t end = faults::history_clock_ns() + m_opt.duration_ms * 1000000L;
        while (running(end)) {
            if (!campaign(end)) continue;
            while (running(end) && m_election.is_leader())
                lead();
        }
        if (m_election.is_leader()) resign();
        m_history.append(record(m_opt.id, 0, "stop"));
    }

private:
    static dlock::client_options client_settings(const options& o) {
        dlock::client_options c;
        c.connection_string = o.conninfo + " application_name=faults-" + o.id + "-lock";
        c.holder = o.id;
        c.retry.max_attempts = 1;
        return c;
    }

    static dlock::election_options election_settings(const options& o) {
        dlock::election_options e;
        e.ttl = milliseconds{o.ttl_ms};
        e.holder = o.id;
        return e;
    }

    // One campaign of up to two ttl; true when elected.
    bool campaign(std::int64_t end) {
        const std::int64_t id = ++m_next_id;
        m_history.append(
            record(m_opt.id, id, "invoke").str("op", "acquire").str("lock", m_opt.election).str("mode", "wait"));
        record done(m_opt.id, id, "refused");
        bool elected = false;
        try {
            const auto left = milliseconds{(end - faults::history_clock_ns()) / 1000000};
            elected = m_election.campaign(std::max(milliseconds{1}, std::min(left, milliseconds{2 * m_opt.ttl_ms})));
            if (elected) {
                const dlock::lease* lease = m_election.leadership();
                elected = lease != nullptr;
                if (elected) {
                    m_token = lease->fencing_token();
                    m_owner = lease->owner_token();
                    done = record(m_opt.id, id, "ok").num("token", m_token).str("owner", m_owner);
                }
            }
            if (!elected) done.str("why", "busy");
        } catch (...) {
            const faults::op_result r = faults::classify(std::current_exception(), true, m_data);
            done = record(m_opt.id, id, faults::to_string(r.kind));
            if (!r.why.empty()) done.str("why", r.why);
            std::this_thread::sleep_for(milliseconds{100});
        }
        m_history.append(done);
        return elected;
    }

    // One round of the leader's work: a read-modify-write, then an increment.
    void lead() {
        faults::write_request req;
        req.kind = 'g';
        req.lock_name = m_opt.election;
        req.token = m_token;
        req.worker_id = m_opt.id;
        req.fencing = m_opt.fencing;
        req.inside_delay = milliseconds{m_opt.inside_ms};
        write(req);
        req.kind = 't';
        req.inside_delay = milliseconds{0};
        write(req);
        std::this_thread::sleep_for(milliseconds{5});
    }

    void write(faults::write_request& req) {
        req.op_id = ++m_next_id;
        m_history.append(faults::write_invoked(req, m_owner, m_election.is_leader()));
        const auto r = faults::fenced_write(m_data, req);
        m_history.append(faults::write_completed(req, r));
        if (!m_data.connected()) std::this_thread::sleep_for(milliseconds{20});
    }

    void resign() {
        const std::int64_t id = ++m_next_id;
        m_history.append(record(m_opt.id, id, "invoke")
                             .str("op", "release")
                             .str("lock", m_opt.election)
                             .str("owner", m_owner)
                             .num("token", m_token));
        const dlock::outcome o = m_election.resign();
        m_history.append(record(m_opt.id, id,
                                o == dlock::outcome::done      ? "ok"
                                : o == dlock::outcome::refused ? "refused"
                                                               : "unknown"));
    }

    options m_opt;
    faults::history_file m_history;
    dlock::client m_client;
    dlock::election m_election;
    faults::db_session m_data;
    std::int64_t m_next_id = 0;
    std::int64_t m_token = 0;
    std::string m_owner;
};

// --- observer -----------------------------------------------------------------

void record_view(faults::history_file& out, const std::string& id, const char* event, std::int64_t token,
                 const std::string& holder) {
    out.append(record(id, 0, event).num("token", token).str("holder", holder));
}

// The negative control: the leader as the notifications say, never read from
// the server. The election's name must need no escaping in JSON.
class trusting_observer {
public:
    explicit trusting_observer(const options& o) : m_opt(o), m_out(o.out) {}

    void run() {
        const std::int64_t end = faults::history_clock_ns() + m_opt.duration_ms * 1000000L;
        const std::string needle = "\"lock_name\":\"" + m_opt.election + "\"";
        while (running(end)) {
            try {
                pqxx::connection conn{m_opt.conninfo + " application_name=faults-" + m_opt.id + "-observer"};
                struct receiver : pqxx::notification_receiver {
                    receiver(pqxx::connection& c, trusting_observer& self, const std::string& needle)
                        : pqxx::notification_receiver{c, "dlock_events"}, m_self{self}, m_needle{needle} {}
                    void operator()(const std::string& payload, int) override {
                        if (payload.find(m_needle) != std::string::npos) m_self.believe(payload);
                    }
                    trusting_observer& m_self;
                    const std::string& m_needle;
                } events{conn, *this, needle};
                while (running(end))
                    conn.await_notification(0, 100000);
            } catch (const std::exception&) {
                std::this_thread::sleep_for(milliseconds{100});
            }
        }
        record_view(m_out, m_opt.id, "final", m_token, m_holder);
    }

private:
    static std::string member(const std::string& payload, const std::string& key) {
        const std::string quoted = "\"" + key + "\":";
        auto at = payload.find(quoted);
        if (at == std::string::npos) return {};
        at += quoted.size();
        if (payload[at] == '"') {
            const auto close = payload.find('"', at + 1);
            return payload.substr(at + 1, close - at - 1);
        }
        return payload.substr(at, payload.find_first_of(",}", at) - at);
    }

    void believe(const std::string& payload) {
        const std::string event = member(payload, "event");
        const std::int64_t token = std::stoll(member(payload, "fencing_token"));
        if (event == "acquire" || event == "takeover") {
            m_token = token;
            m_holder = member(payload, "holder");
        } else if (token == m_token) {
            m_token = 0;
            m_holder.clear();
        } else {
            return;
        }
        record_view(m_out, m_opt.id, "view", m_token, m_holder);
    }

    options m_opt;
    faults::history_file m_out;
    std::int64_t m_token = 0;
    std::string m_holder;
};

void observe(const options& o) {
    faults::history_file out(o.out);
    out.append(record(o.id, 0, "start").num("pid", getpid()).flag("trust_events", o.trust_events));
    if (o.trust_events) {
        trusting_observer{o}.run();
        return;
    }
    const std::int64_t end = faults::history_clock_ns() + o.duration_ms * 1000000L;
    dlock::observer follower{o.conninfo + " application_name=faults-" + o.id + "-observer", o.election,
                             [&](const std::optional<dlock::leader_info>& leader) {
                                 record_view(out, o.id, "view", leader ? leader->fencing_token : 0,
                                             leader ? leader->holder : std::string{});
                             }};
    while (running(end))
        std::this_thread::sleep_for(milliseconds{20});
    const auto last = follower.current();
    record_view(out, o.id, "final", last ? last->fencing_token : 0, last ? last->holder : std::string{});
}

} // namespace

int faults::run_elector(int argc, char** argv) {
    std::signal(SIGTERM, request_stop);
    const options o = parse(argc, argv);
    if (o.role == "candidate")
        candidate{o}.run();
    else
        observe(o);
    return 0;
}
