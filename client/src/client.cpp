// client.cpp -- the client object: acquire with retries, metrics, adoption.
#include "dlock/client.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "internal.hpp"

namespace dlock {
namespace internal {

namespace {

std::string default_holder() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string{host} + ":" + std::to_string(getpid());
}

} // namespace

std::chrono::system_clock::time_point from_epoch(double seconds) noexcept {
    return std::chrono::system_clock::time_point{
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>{seconds})};
}

void counters::record_wait(std::chrono::steady_clock::duration waited) noexcept {
    std::size_t bucket = 0;
    while (bucket < metrics::wait_bucket_bounds.size() && waited > metrics::wait_bucket_bounds[bucket])
        ++bucket;
    ++wait_histogram[bucket];
}

metrics counters::snapshot() const noexcept {
    metrics m;
    m.acquisitions = acquisitions;
    m.busy = busy;
    m.waits = waits;
    m.wait_timeouts = wait_timeouts;
    m.renewals = renewals;
    m.renewals_refused = renewals_refused;
    m.releases = releases;
    m.lost = lost;
    m.unknown_outcomes = unknown_outcomes;
    m.retries = retries;
    for (std::size_t i = 0; i < m.wait_histogram.size(); ++i)
        m.wait_histogram[i] = wait_histogram[i];
    return m;
}

client_core::client_core(client_options opts)
    : options{std::move(opts)}, holder{options.holder.empty() ? default_holder() : options.holder},
      rng{std::random_device{}()} {}

client_core::~client_core() noexcept = default;

checked_out::checked_out(client_core& core) : m_core{core} {
    {
        std::lock_guard<std::mutex> guard{core.mutex};
        if (!core.idle.empty()) {
            m_session = std::move(core.idle.back());
            core.idle.pop_back();
        }
    }
    if (!m_session) m_session = std::make_unique<session>(core.options.connection_string);
}

checked_out::~checked_out() noexcept {
    if (!m_session) return;
    try {
        std::lock_guard<std::mutex> guard{m_core.mutex};
        constexpr std::size_t max_idle = 4;
        if (m_core.idle.size() < max_idle) m_core.idle.push_back(std::move(m_session));
    } catch (...) { // NOLINT(bugprone-empty-catch): closing the session instead is fine
    }
    m_session.reset();
}

std::string client_core::new_owner_token() {
    std::uint64_t hi = 0;
    std::uint64_t lo = 0;
    {
        std::lock_guard<std::mutex> guard{rng_mutex};
        hi = rng();
        lo = rng();
    }
    hi = (hi & ~0xF000ULL) | 0x4000ULL;                        // version 4
    lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL; // RFC 4122 variant
    char text[37];
    std::snprintf(text, sizeof text, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                  static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                  static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
    return text;
}

std::chrono::milliseconds client_core::backoff(int retry) {
    // Full jitter: uniform in [0, min(cap, initial * 2^(retry-1))].
    const auto initial = std::max<std::int64_t>(1, options.retry.initial_backoff.count());
    const auto cap = std::max<std::int64_t>(initial, options.retry.max_backoff.count());
    std::int64_t bound = initial;
    for (int i = 1; i < retry && bound < cap; ++i)
        bound *= 2;
    bound = std::min(bound, cap);
    std::lock_guard<std::mutex> guard{rng_mutex};
    return std::chrono::milliseconds{std::uniform_int_distribution<std::int64_t>{0, bound}(rng)};
}

steady_clock::time_point client_core::deadline_for(steady_clock::time_point sent,
                                                   std::chrono::milliseconds ttl) const noexcept {
    const auto drift = std::chrono::duration_cast<steady_clock::duration>(
        std::chrono::duration<double, std::milli>{static_cast<double>(ttl.count()) * options.drift_allowance});
    return sent + ttl - drift - options.safety_margin;
}

void client_core::attach(const std::shared_ptr<lease_state>& lease, const lease_options& opts) {
    lease->ttl = opts.ttl;
    lease->renew_every =
        opts.renew_every.count() > 0 ? opts.renew_every : std::max(opts.ttl / 3, std::chrono::milliseconds{1});
    lease->keep_alive = opts.keep_alive;
    lease->renew_only_on_progress = opts.renew_only_on_progress;
    lease->on_lost = opts.on_lost;
    {
        std::lock_guard<std::mutex> guard{lease->mutex};
        lease->next_renew = steady_clock::now() + lease->renew_every;
    }
    watcher.add(lease);
}

std::shared_ptr<lease_state> client_core::acquire(std::string_view name_view,
                                                  std::optional<std::chrono::milliseconds> wait,
                                                  const lease_options& opts) {
    const std::string name{name_view};
    const std::string owner = opts.owner_token.empty() ? new_owner_token() : opts.owner_token;
    const std::string& lease_holder = opts.holder.empty() ? holder : opts.holder;
    const int attempts = std::max(1, options.retry.max_attempts);
    const auto started = steady_clock::now();
    bool uncertain = false;
    if (wait) ++stats.waits;

    for (int attempt = 0; attempt < attempts; ++attempt) {
        if (attempt > 0) {
            ++stats.retries;
            std::this_thread::sleep_for(backoff(attempt));
        }
        std::optional<checked_out> held;
        const auto sent = steady_clock::now();
        try {
            session& s = *held.emplace(*this);
            s.notices().reset();
            pqxx::nontransaction tx{s.conn()};
            pqxx::result r;
            if (wait) {
                // A negative wait goes to the server as given (it refuses it).
                const auto left =
                    wait->count() < 0
                        ? *wait
                        : std::max(std::chrono::milliseconds{0},
                                   *wait - std::chrono::duration_cast<std::chrono::milliseconds>(sent - started));
                r = tx.exec_prepared(stmt::acquire, name, static_cast<long long>(opts.ttl.count()),
                                     static_cast<long long>(left.count()), owner, lease_holder);
            } else {
                r = tx.exec_prepared(stmt::try_acquire, name, static_cast<long long>(opts.ttl.count()), owner,
                                     lease_holder);
            }
            if (s.notices().uncertain()) {
                // Committed locally but the wait for the standby was canceled.
                ++stats.unknown_outcomes;
                uncertain = true;
                continue;
            }
            if (wait) stats.record_wait(steady_clock::now() - started);
            if (r.size() != 1 || r[0][2].is_null()) {
                ++stats.busy;
                return nullptr;
            }
            auto lease = std::make_shared<lease_state>();
            lease->name = r[0][0].as<std::string>();
            lease->owner_token = r[0][1].as<std::string>();
            lease->fencing_token = r[0][2].as<std::int64_t>();
            lease->lease_until = from_epoch(r[0][3].as<double>());
            lease->deadline = deadline_for(sent, opts.ttl);
            ++stats.acquisitions;
            return lease;
        } catch (const connection_error&) {
            // Nothing was sent this time; after an uncertain attempt keep trying.
            if (!uncertain) throw;
        } catch (const std::exception& e) {
            if (is_unknown_outcome(e)) {
                if (held) held->discard();
                ++stats.unknown_outcomes;
                uncertain = true;
                continue;
            }
            if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e); sql && sql->sqlstate() == "55P03") {
                ++stats.busy;
                ++stats.wait_timeouts;
                stats.record_wait(steady_clock::now() - started);
            }
            rethrow_mapped(name, owner);
        }
    }
    throw unknown_outcome_error{"outcome of the acquire is unknown after " + std::to_string(attempts) + " attempts",
                                name, owner};
}

} // namespace internal

client::client(client_options options) : m_core{std::make_shared<internal::client_core>(std::move(options))} {}

client::client(std::string connection_string)
    : client{[&] {
          client_options options;
          options.connection_string = std::move(connection_string);
          return options;
      }()} {}

client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;
client::~client() noexcept = default;

std::optional<lease> client::try_acquire(std::string_view lock_name, const lease_options& options) {
    auto state = m_core->acquire(lock_name, std::nullopt, options);
    if (!state) return std::nullopt;
    state->core = m_core;
    m_core->attach(state, options);
    return lease{std::move(state)};
}

lease client::acquire(std::string_view lock_name, std::chrono::milliseconds wait, const lease_options& options) {
    auto state = m_core->acquire(lock_name, wait, options);
    if (!state) throw busy_error{"lock is busy", std::string{lock_name}, "55P03"};
    state->core = m_core;
    m_core->attach(state, options);
    return lease{std::move(state)};
}

std::optional<grant> client::try_acquire(pqxx::transaction_base& txn, std::string_view lock_name,
                                         const lease_options& options) {
    const std::string name{lock_name};
    const std::string owner = options.owner_token.empty() ? m_core->new_owner_token() : options.owner_token;
    const std::string& lease_holder = options.holder.empty() ? m_core->holder : options.holder;
    const auto sent = steady_clock::now();
    pqxx::result r;
    try {
        r = txn.exec_params(internal::try_acquire_sql, name, static_cast<long long>(options.ttl.count()), owner,
                            lease_holder);
    } catch (const std::exception& e) {
        if (internal::is_unknown_outcome(e)) ++m_core->stats.unknown_outcomes;
        internal::rethrow_mapped(name, owner);
    }
    if (r.size() != 1 || r[0][2].is_null()) {
        ++m_core->stats.busy;
        return std::nullopt;
    }
    grant g;
    g.lock_name = r[0][0].as<std::string>();
    g.owner_token = r[0][1].as<std::string>();
    g.fencing_token = r[0][2].as<std::int64_t>();
    g.ttl = options.ttl;
    g.lease_until = internal::from_epoch(r[0][3].as<double>());
    g.deadline = m_core->deadline_for(sent, options.ttl);
    ++m_core->stats.acquisitions;
    return g;
}

lease client::adopt(const grant& granted, const lease_options& options) {
    auto state = std::make_shared<internal::lease_state>();
    state->core = m_core;
    state->name = granted.lock_name;
    state->owner_token = granted.owner_token;
    state->fencing_token = granted.fencing_token;
    state->lease_until = granted.lease_until;
    state->deadline = granted.deadline;
    lease_options opts = options;
    opts.ttl = granted.ttl;
    m_core->attach(state, opts);
    return lease{std::move(state)};
}

std::optional<grant> client::renew(std::string_view lock_name, std::string_view owner_token,
                                   std::chrono::milliseconds ttl) {
    const std::string name{lock_name};
    const std::string owner{owner_token};
    std::optional<internal::checked_out> held;
    const auto sent = steady_clock::now();
    try {
        internal::session& s = *held.emplace(*m_core);
        s.notices().reset();
        pqxx::nontransaction tx{s.conn()};
        const pqxx::result r =
            tx.exec_prepared(internal::stmt::renew, name, owner, static_cast<long long>(ttl.count()));
        if (s.notices().uncertain()) throw unknown_outcome_error{"commit of the renewal is only local", name, owner};
        if (r.size() != 1 || r[0][0].is_null()) {
            ++m_core->stats.renewals_refused;
            return std::nullopt;
        }
        ++m_core->stats.renewals;
        grant g;
        g.lock_name = name;
        g.owner_token = owner;
        g.ttl = ttl;
        g.lease_until = internal::from_epoch(r[0][0].as<double>());
        g.deadline = m_core->deadline_for(sent, ttl);
        return g;
    } catch (const std::exception& e) {
        if (internal::is_unknown_outcome(e)) {
            if (held) held->discard();
            ++m_core->stats.unknown_outcomes;
        }
        internal::rethrow_mapped(name, owner);
    }
}

outcome client::release(std::string_view lock_name, std::string_view owner_token) noexcept {
    std::optional<internal::checked_out> held;
    try {
        internal::session& s = *held.emplace(*m_core);
        pqxx::nontransaction tx{s.conn()};
        const pqxx::result r =
            tx.exec_prepared(internal::stmt::release, std::string{lock_name}, std::string{owner_token});
        if (r.size() == 1 && !r[0][0].is_null() && r[0][0].as<bool>()) {
            ++m_core->stats.releases;
            return outcome::done;
        }
        return outcome::refused;
    } catch (const connection_error&) {
        return outcome::unknown;
    } catch (const std::exception& e) {
        if (!internal::is_unknown_outcome(e)) return outcome::refused;
        if (held) held->discard();
        ++m_core->stats.unknown_outcomes;
        return outcome::unknown;
    } catch (...) {
        return outcome::unknown;
    }
}

bool client::force_release(std::string_view lock_name, std::string_view reason) {
    const std::string name{lock_name};
    std::optional<internal::checked_out> held;
    try {
        internal::session& s = *held.emplace(*m_core);
        pqxx::nontransaction tx{s.conn()};
        const pqxx::result r = tx.exec_prepared(internal::stmt::force_release, name, std::string{reason});
        return r.size() == 1 && !r[0][0].is_null() && r[0][0].as<bool>();
    } catch (const std::exception& e) {
        if (internal::is_unknown_outcome(e)) {
            if (held) held->discard();
            ++m_core->stats.unknown_outcomes;
        }
        internal::rethrow_mapped(name);
    }
}

metrics client::metrics() const {
    return m_core->stats.snapshot();
}

const std::string& client::holder() const noexcept {
    return m_core->holder;
}

int client::backend_pid() {
    internal::checked_out s{*m_core};
    return s->conn().backendpid();
}

int client::keep_alive_backend_pid() const {
    return m_core->watcher.backend_pid();
}

} // namespace dlock
