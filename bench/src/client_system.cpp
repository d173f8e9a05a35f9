// pg_dlock through its C++ client library (client/): one dlock::client per
// thread, leases without keep-alive (the benchmark renews explicitly).
#include "systems.hpp"

#include <dlock/dlock.hpp>

#include <stdexcept>
#include <unordered_map>

namespace bench {

namespace {

class dlock_cpp_session final : public lock_session {
public:
    explicit dlock_cpp_session(const system_options& opts) : m_client(client_options(opts)), m_wait(opts.wait) {
        m_lease_opts.ttl = opts.ttl;
        m_lease_opts.keep_alive = false;
        (void)m_client.backend_pid(); // connect now, not inside the first timed call
    }

    lease try_acquire(const std::string& name) override { return keep(name, m_client.try_acquire(name, m_lease_opts)); }

    lease acquire(const std::string& name) override {
        try {
            return keep(name, m_client.acquire(name, m_wait, m_lease_opts));
        } catch (const dlock::busy_error&) {
            return lease{name, "", 0, false};
        }
    }

    void release(const lease& l) override {
        auto it = m_held.find(l.name);
        if (it == m_held.end()) throw std::logic_error("release of a lease this session does not hold: " + l.name);
        dlock::outcome o = it->second.release();
        m_held.erase(it);
        if (o != dlock::outcome::done)
            throw std::runtime_error(std::string("dlock::lease::release: ") + dlock::to_string(o) + " for \"" + l.name +
                                     "\"");
    }

    bool renew(const lease& l) override {
        auto it = m_held.find(l.name);
        if (it == m_held.end()) throw std::logic_error("renew of a lease this session does not hold: " + l.name);
        return it->second.renew() == dlock::outcome::done;
    }

    int server_pid() override { return m_client.backend_pid(); }

private:
    static dlock::client_options client_options(const system_options& opts) {
        dlock::client_options o;
        o.connection_string = opts.conninfo;
        return o;
    }

    lease keep(const std::string& name, std::optional<dlock::lease> granted) {
        if (!granted) return lease{name, "", 0, false};
        return keep(name, std::move(*granted));
    }

    lease keep(const std::string& name, dlock::lease granted) {
        lease out{name, granted.owner_token(), granted.fencing_token(), true};
        m_held.insert_or_assign(name, std::move(granted));
        return out;
    }

    dlock::client m_client;
    dlock::lease_options m_lease_opts;
    std::chrono::milliseconds m_wait;
    std::unordered_map<std::string, dlock::lease> m_held;
};

} // namespace

std::unique_ptr<lock_session> make_client_session(const system_options& opts) {
    return std::make_unique<dlock_cpp_session>(opts);
}

} // namespace bench
