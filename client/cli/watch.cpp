// watch.cpp -- `dlock watch NAME...`: print lock events as they happen.
//
// LISTENs on dlock_events on a connection of its own and prints each event of
// the named locks on one line (or the payload, with --json). After a lost
// connection it reconnects with a growing pause and says so on stderr: events
// committed meanwhile are not printed (dlock status shows the state).
#include <pqxx/pqxx>

#include <iostream>
#include <map>
#include <thread>

#include "cli.hpp"
#include "election_commands.hpp"

namespace dlock_cli {

namespace {

// The members of a flat JSON object of strings, numbers and null (the event
// payload); strings unescaped, other values as written.
std::map<std::string, std::string> parse_payload(const std::string& text) {
    std::map<std::string, std::string> out;
    std::size_t i = 0;
    auto skip = [&] {
        while (i < text.size() &&
               (text[i] == ' ' || text[i] == ',' || text[i] == '{' || text[i] == '}' || text[i] == ':'))
            ++i;
    };
    auto string_at = [&] {
        std::string s;
        for (++i; i < text.size() && text[i] != '"'; ++i) {
            if (text[i] != '\\' || i + 1 >= text.size()) {
                s += text[i];
                continue;
            }
            const char c = text[++i];
            switch (c) {
            case 'n': s += '\n'; break;
            case 't': s += '\t'; break;
            case 'r': s += '\r'; break;
            case 'b': s += '\b'; break;
            case 'f': s += '\f'; break;
            case 'u':
                if (i + 4 < text.size()) s += static_cast<char>(std::stoi(text.substr(i + 1, 4), nullptr, 16));
                i += 4;
                break;
            default: s += c;
            }
        }
        ++i;
        return s;
    };
    for (;;) {
        skip();
        if (i >= text.size() || text[i] != '"') break;
        const std::string key = string_at();
        skip();
        if (i >= text.size()) break;
        if (text[i] == '"') {
            out[key] = string_at();
        } else {
            const std::size_t end = text.find_first_of(",}", i);
            out[key] = text.substr(i, end - i);
            i = end;
        }
    }
    return out;
}

struct event_printer : pqxx::notification_receiver {
    event_printer(pqxx::connection& conn, const std::vector<std::string>& names, bool json, long& remaining)
        : pqxx::notification_receiver{conn, "dlock_events"}, m_names{names}, m_json{json}, m_remaining{remaining} {}

    void operator()(const std::string& payload, int) override {
        auto fields = parse_payload(payload);
        bool wanted = false;
        for (const auto& n : m_names)
            wanted = wanted || fields["lock_name"] == n;
        if (!wanted || m_remaining == 0) return;
        if (m_json) {
            std::cout << payload << std::endl;
        } else {
            const std::string holder = fields.count("holder") ? fields["holder"] : "null";
            std::cout << fields["event"] << " " << fields["lock_name"] << " token=" << fields["fencing_token"]
                      << " holder=" << (holder == "null" ? "-" : shell_quote(holder))
                      << " lease_until=" << fields["lease_until"] << std::endl;
        }
        if (m_remaining > 0) --m_remaining;
    }

    const std::vector<std::string>& m_names;
    bool m_json;
    long& m_remaining;
};

} // namespace

int watch_events(const std::string& dsn, const std::vector<std::string>& names, bool json, long count) {
    for (const auto& n : names)
        check_lock_name(n);
    long remaining = count > 0 ? count : -1;
    std::chrono::milliseconds backoff{100};
    bool connected_once = false;
    while (remaining != 0) {
        try {
            pqxx::connection conn{dsn};
            event_printer printer{conn, names, json, remaining};
            {
                pqxx::nontransaction tx{conn};
                if (tx.exec("SELECT pg_catalog.current_setting('dlock.events', true)")[0][0].as<std::string>("") !=
                    "on")
                    std::cerr << "dlock: warning: dlock.events is off for this database; no events will arrive\n";
            }
            if (connected_once) std::cerr << "dlock: reconnected; events committed meanwhile were missed\n";
            connected_once = true;
            backoff = std::chrono::milliseconds{100};
            // printer counts remaining down from inside await_notification
            while (remaining != 0) // NOLINT(bugprone-infinite-loop)
                conn.await_notification(1, 0);
        } catch (const pqxx::broken_connection& e) {
            if (!connected_once) throw dlock::connection_error{std::string{"could not connect: "} + e.what(), {}};
            std::cerr << "dlock: connection lost (" << e.what() << "); reconnecting\n";
            std::this_thread::sleep_for(backoff);
            backoff = std::min(backoff * 2, std::chrono::milliseconds{5000});
        }
    }
    return exit_code::ok;
}

} // namespace dlock_cli
