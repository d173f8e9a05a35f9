// client.cpp -- the client object: acquire with retries, metrics, adoption.
#include "dlock/client.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include <pqxx/pqxx>

#include "core.hpp"
#include "dlock/json.hpp"
#include "error_mapping.hpp"
#include "sql.hpp"
#include "timing.hpp"

namespace dlock {
namespace internal {

namespace {

std::string default_holder() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string{host} + ":" + std::to_string(getpid());
}

} // namespace

void set_grant(lease_state& state, const grant& granted) {
    state.name = granted.lock_name;
    state.owner_token = granted.owner_token;
    state.fencing_token = granted.fencing_token;
    state.lease_until = granted.lease_until;
    state.deadline = granted.deadline;
}

client_core::client_core(client_options opts)
    : options{std::move(opts)}, holder{options.holder.empty() ? default_holder() : options.holder},
      notify{options.listener}, rng{std::random_device{}()} {}

client_core::~client_core() noexcept = default;

checked_out::checked_out(client_core& core) : m_core{core} {
    {
        std::lock_guard<std::mutex> guard{core.mutex};
        if (!core.idle.empty()) {
            m_session = std::move(core.idle.back());
            core.idle.pop_back();
        }
    }
    if (!m_session)
        m_session = std::make_unique<session>(core.options.connection_string, core.options.network_timeout,
                                              core.options.pooling, core.options.call_timeout,
                                              core.options.durability);
}

checked_out::~checked_out() noexcept {
    if (!m_session) return;
    try {
        std::lock_guard<std::mutex> guard{m_core.mutex};
        constexpr std::size_t max_idle = 4;
        if (m_core.idle.size() < max_idle && m_session->is_open()) m_core.idle.push_back(std::move(m_session));
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

std::chrono::milliseconds client_core::poll_sleep(std::int64_t bound) {
    std::lock_guard<std::mutex> guard{rng_mutex};
    return std::chrono::milliseconds{std::uniform_int_distribution<std::int64_t>{bound / 2, bound}(rng)};
}

void client_core::attach(const std::shared_ptr<lease_state>& lease, const lease_options& opts) {
    lease->ttl = opts.ttl;
    lease->renew_every =
        opts.renew_every.count() > 0 ? opts.renew_every : std::max(opts.ttl / 3, std::chrono::milliseconds{1});
    lease->keep_alive = opts.keep_alive;
    lease->renew_only_on_progress = opts.renew_only_on_progress;
    lease->on_lost = opts.on_lost;
    lease->max_hold = opts.max_hold;
    {
        std::lock_guard<std::mutex> guard{lease->mutex};
        lease->next_renew = steady_clock::now() + lease->renew_every;
        lease->renew_planned = lease->next_renew;
    }
    watcher.add(lease);
}

bool client_core::waits_in_client() {
    switch (options.wait_mode) {
    case wait_mode::server: return false;
    case wait_mode::poll: return true;
    case wait_mode::automatic: break;
    }
    if (options.pooling != pooling::detect) return options.pooling == pooling::transaction;
    // Ask the session the first try would most likely get (the pool hands out
    // the one put back last); a session that made a call already knows, a new
    // one finds out in the round trip its first call would make anyway. Any
    // session of a client is as direct as any other, as long as the
    // connection string leads to one place.
    for (int attempt = 0; attempt < 2; ++attempt) {
        std::optional<checked_out> held;
        try {
            return held.emplace(*this)->transaction_pooled();
        } catch (const connection_error&) {
            throw; // the acquire could not connect either
        } catch (const std::exception&) {
            // Broke, e.g. an idle connection the server closed since: drop it.
            if (held) held->discard();
        }
    }
    // Unknown: polling is right behind a pooler and only not FIFO on a direct
    // connection; the tries report what is wrong with the connection.
    return true;
}

std::shared_ptr<lease_state> client_core::acquire(std::string_view name_view,
                                                  std::optional<std::chrono::milliseconds> wait,
                                                  const lease_options& opts, lease_kind kind) {
    const std::string name{name_view};
    const std::string owner = opts.owner_token.empty() ? new_owner_token() : opts.owner_token;
    const auto started = steady_clock::now();
    if (!wait) return acquire_once(name, std::nullopt, opts, owner, started, kind);
    ++stats.waits;
    try {
        std::shared_ptr<lease_state> lease;
        if (wait->count() < 0 || !waits_in_client()) {
            // A negative wait goes to the server as given (it refuses it).
            lease = acquire_once(name, wait, opts, owner, started, kind);
        } else {
            // Client-side wait: no server connection is held between tries.
            const auto until = started + *wait;
            const auto cap = std::max<std::int64_t>(1, options.poll_interval.count());
            std::uint64_t busy_tries = 0;
            for (std::int64_t bound = std::min<std::int64_t>(20, cap);; bound = std::min(cap, bound * 2)) {
                if ((lease = acquire_once(name, std::nullopt, opts, owner, started, kind))) break;
                ++busy_tries;
                const auto now = steady_clock::now();
                if (now >= until) break;
                std::this_thread::sleep_for(std::min<steady_clock::duration>(poll_sleep(bound), until - now));
            }
            stats.busy -= busy_tries; // one wait is one busy at most, counted below
        }
        stats.record_wait(steady_clock::now() - started);
        if (!lease) {
            ++stats.busy;
            ++stats.wait_timeouts;
        }
        return lease;
    } catch (const busy_error&) {
        ++stats.busy;
        ++stats.wait_timeouts;
        stats.record_wait(steady_clock::now() - started);
        throw;
    }
}

std::shared_ptr<lease_state> client_core::acquire_once(const std::string& name,
                                                       std::optional<std::chrono::milliseconds> wait,
                                                       const lease_options& opts, const std::string& owner,
                                                       steady_clock::time_point started, lease_kind kind) {
    const std::string& lease_holder = opts.holder.empty() ? holder : opts.holder;
    const int attempts = std::max(1, options.retry.max_attempts);
    bool uncertain = false;
    const bool policies = has_policies(opts);
    if (policies && kind.what != lease_kind::mode::exclusive)
        throw invalid_argument_error("lease policies (session_bound, max_hold, min_hold, lock_delay) apply to "
                                     "exclusive leases only",
                                     name);

    for (int attempt = 0; attempt < attempts; ++attempt) {
        if (attempt > 0) {
            ++stats.retries;
            std::this_thread::sleep_for(backoff(attempt));
        }
        std::optional<checked_out> held;
        try {
            session& s = *held.emplace(*this);
            internal::call_result r;
            const auto sent = steady_clock::now();
            if (wait) {
                const auto left =
                    wait->count() < 0
                        ? *wait
                        : std::max(std::chrono::milliseconds{0},
                                   *wait - std::chrono::duration_cast<std::chrono::milliseconds>(sent - started));
                const auto timeout = std::max(std::chrono::milliseconds{0}, left) + options.call_timeout;
                if (kind.what == lease_kind::mode::permit)
                    r = call(s, timeout, sql::acquire_permit, name, opts.ttl, left, owner, lease_holder, kind.permits);
                else if (kind.what == lease_kind::mode::shared)
                    r = call(s, timeout, sql::acquire_shared, name, opts.ttl, left, owner, lease_holder);
                else if (policies)
                    r = call(s, timeout, sql::acquire_policies, name, opts.ttl, left, owner, lease_holder,
                             opts.session_bound, opts.max_hold, opts.min_hold, opts.lock_delay);
                else
                    r = call(s, timeout, sql::acquire, name, opts.ttl, left, owner, lease_holder);
            } else if (policies && kind.what == lease_kind::mode::exclusive) {
                r = call(s, options.call_timeout, sql::try_acquire_policies, name, opts.ttl, owner, lease_holder,
                         opts.session_bound, opts.max_hold, opts.min_hold, opts.lock_delay);
            } else {
                if (kind.what == lease_kind::mode::permit)
                    r = call(s, options.call_timeout, sql::try_acquire_permit, name, opts.ttl, owner, lease_holder,
                             kind.permits);
                else
                    r = call(s, options.call_timeout,
                             kind.what == lease_kind::mode::shared ? sql::try_acquire_shared : sql::try_acquire, name,
                             opts.ttl, owner, lease_holder);
            }
            const auto received = steady_clock::now();
            if (s.commit_uncertain()) {
                // Committed locally but the wait for the standby was canceled.
                ++stats.unknown_outcomes;
                uncertain = true;
                continue;
            }
            if (r.size() != 1 || r[0][2].is_null()) {
                ++stats.busy;
                return nullptr;
            }
            auto lease = std::make_shared<lease_state>();
            set_grant(*lease, read_grant(*this, r[0], started, sent, received, opts.ttl));
            lease->acquired = sent;
            lease->granted = received;
            // The lease lives as long as this connection: it leaves the pool.
            if (opts.session_bound) lease->bound_session = std::move(held->slot());
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
            rethrow_mapped(name, owner);
        }
    }
    throw unknown_outcome_error{"outcome of the acquire is unknown after " + std::to_string(attempts) + " attempts",
                                name, owner};
}

renewal renew_lease(client_core& core, std::unique_ptr<session>& s, const std::string& name,
                    const std::string& owner_token, std::chrono::milliseconds ttl, std::chrono::milliseconds timeout) {
    renewal result;
    try {
        if (!s)
            s = std::make_unique<session>(core.options.connection_string, core.options.network_timeout,
                                          core.options.pooling, core.options.call_timeout,
                                          core.options.durability);
        const auto sent = steady_clock::now();
        const call_result r = call(*s, timeout, sql::renew, name, owner_token, ttl);
        const auto received = steady_clock::now();
        if (s->commit_uncertain()) {
            ++core.stats.unknown_outcomes;
            result.error = "commit of the renewal is only local (synchronous replication wait canceled)";
            return result;
        }
        if (r.size() != 1 || r[0][0].is_null()) {
            ++core.stats.renewals_refused;
            result.result = outcome::refused;
            return result;
        }
        ++core.stats.renewals;
        result.result = outcome::done;
        result.lease_until = from_epoch(r[0][0].as<double>());
        result.deadline = deadline_for(core.options, sent, received, r[0][1].as<double>(), ttl);
        return result;
    } catch (const connection_error& e) {
        result.error = e.what(); // nothing was sent
        return result;
    } catch (const std::exception& e) {
        if (is_unknown_outcome(e)) s.reset();
        ++core.stats.unknown_outcomes;
        result.error = e.what();
        // A refusal of the arguments is the caller's mistake, not a lost lease;
        // so is a durability the server does not offer (0A000: it never will).
        if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
            const std::string& state = sql->sqlstate();
            if (state == "22023" || state == "22004" || state == "42501" || state == "0A000")
                rethrow_mapped(name, owner_token);
        }
        return result;
    }
}

downgrading downgrade_lease(client_core& core, const std::string& name, const std::string& owner_token) {
    downgrading result;
    // An outcome not learned is asked again once on a fresh connection: a
    // downgrade retried by its owner returns the shared lease it gave.
    for (int attempt = 0; attempt < 2; ++attempt) {
        std::optional<checked_out> held;
        try {
            session& s = *held.emplace(core);
            const call_result r = call(s, core.options.call_timeout, sql::downgrade, name, owner_token);
            if (s.commit_uncertain()) {
                ++core.stats.unknown_outcomes;
                continue;
            }
            if (r.size() != 1 || r[0][0].is_null()) {
                result.result = outcome::refused;
                return result;
            }
            result.result = outcome::done;
            result.fencing_token = r[0][0].as<std::int64_t>();
            return result;
        } catch (const connection_error&) {
            // nothing was sent this time: the lease is as the last try left it
            result.result = outcome::unknown;
            return result;
        } catch (const std::exception& e) {
            if (is_unknown_outcome(e)) {
                if (held) held->discard();
                ++core.stats.unknown_outcomes;
                continue;
            }
            rethrow_mapped(name, owner_token);
        }
    }
    result.result = outcome::unknown;
    return result;
}

outcome release_lease(client_core& core, const std::string& name, const std::string& owner_token) noexcept {
    try {
        bool uncertain = false;
        // One more try on a fresh connection when the first broke (e.g. the
        // idle connection died since the last call).
        for (int attempt = 0; attempt < 2; ++attempt) {
            std::optional<checked_out> held;
            try {
                session& s = *held.emplace(core);
                const call_result r = call(s, core.options.call_timeout, sql::release, name, owner_token);
                if (r.size() == 1 && !r[0][0].is_null() && r[0][0].as<bool>()) {
                    ++core.stats.releases;
                    return outcome::done;
                }
                // After an uncertain first try, "not held" may mean the first one ended it.
                return uncertain ? outcome::unknown : outcome::refused;
            } catch (const connection_error&) {
                return outcome::unknown;
            } catch (const std::exception& e) {
                ++core.stats.unknown_outcomes;
                if (!is_unknown_outcome(e)) return outcome::unknown; // e.g. the call timeout: not released
                if (held) held->discard();
                uncertain = true;
            }
        }
    } catch (...) { // NOLINT(bugprone-empty-catch): a release must never throw
    }
    return outcome::unknown;
}

} // namespace internal

client::client(client_options options) {
    // a partition list given to a one-server client would be silently ignored: every name on one server
    if (!options.partitions.empty())
        throw invalid_argument_error("client_options::partitions is set: a lock farm's partitions are for "
                                     "dlock::farm_client (dlock/farm.hpp); dlock::client talks to one server",
                                     "partitions", "22023");
    m_core = std::make_shared<internal::client_core>(std::move(options));
}

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

std::optional<lease> client::try_acquire_shared(std::string_view lock_name, const lease_options& options) {
    auto state = m_core->acquire(lock_name, std::nullopt, options, {internal::lease_kind::mode::shared, 0});
    if (!state) return std::nullopt;
    state->core = m_core;
    m_core->attach(state, options);
    return lease{std::move(state)};
}

lease client::acquire_shared(std::string_view lock_name, std::chrono::milliseconds wait,
                             const lease_options& options) {
    auto state = m_core->acquire(lock_name, wait, options, {internal::lease_kind::mode::shared, 0});
    if (!state) throw busy_error{"lock is busy", std::string{lock_name}, "55P03"};
    state->core = m_core;
    m_core->attach(state, options);
    return lease{std::move(state)};
}

std::optional<lease> client::try_acquire_permit(std::string_view semaphore_name, int permits,
                                                const lease_options& options) {
    auto state = m_core->acquire(semaphore_name, std::nullopt, options, {internal::lease_kind::mode::permit, permits});
    if (!state) return std::nullopt;
    state->core = m_core;
    m_core->attach(state, options);
    return lease{std::move(state)};
}

lease client::acquire_permit(std::string_view semaphore_name, int permits, std::chrono::milliseconds wait,
                             const lease_options& options) {
    auto state = m_core->acquire(semaphore_name, wait, options, {internal::lease_kind::mode::permit, permits});
    if (!state) throw busy_error{"all permits are held", std::string{semaphore_name}, "55P03"};
    state->core = m_core;
    m_core->attach(state, options);
    return lease{std::move(state)};
}

namespace {

// The names as a JSON array, which the set's statements unpack into text[]
// (json_quote: the one quoting of text the library writes).
std::string json_array(const std::vector<std::string>& names) {
    std::string array = "[";
    for (std::size_t i = 0; i < names.size(); ++i)
        array += (i > 0 ? "," : "") + json_quote(names[i]);
    return array + "]";
}

} // namespace

std::optional<std::vector<lease>> client::acquire_set(const std::vector<std::string>& lock_names,
                                                      std::optional<std::chrono::milliseconds> wait,
                                                      const lease_options& options) {
    const auto started = steady_clock::now();
    if (internal::has_policies(options))
        throw invalid_argument_error("lease policies (session_bound, max_hold, min_hold, lock_delay) apply to "
                                     "exclusive leases only, not to a set of locks",
                                     lock_names.empty() ? std::string{} : lock_names.front());
    const std::string names = json_array(lock_names);
    const std::string set_label = lock_names.empty() ? std::string{} : lock_names.front();
    const std::string owner = options.owner_token.empty() ? m_core->new_owner_token() : options.owner_token;
    const std::string& lease_holder = options.holder.empty() ? m_core->holder : options.holder;
    internal::call_result r;
    steady_clock::time_point sent;
    // One call: dlock.acquire_all waiting `server_wait` in the server, or
    // dlock.try_acquire_all. True when it granted the set.
    const auto once = [&](std::optional<std::chrono::milliseconds> server_wait) {
        std::optional<internal::checked_out> held;
        sent = steady_clock::now();
        try {
            internal::session& s = *held.emplace(*m_core);
            if (server_wait)
                r = internal::call(s,
                                   std::max(std::chrono::milliseconds{0}, *server_wait) + m_core->options.call_timeout,
                                   internal::sql::acquire_all, names, options.ttl, *server_wait, owner, lease_holder);
            else
                r = internal::call(s, m_core->options.call_timeout, internal::sql::try_acquire_all, names, options.ttl,
                                   owner, lease_holder);
        } catch (const std::exception& e) {
            if (internal::is_unknown_outcome(e)) {
                if (held) held->discard();
                ++m_core->stats.unknown_outcomes;
            }
            internal::rethrow_mapped(set_label, owner);
        }
        return !r.empty();
    };
    bool granted = false;
    if (!wait) {
        granted = once(std::nullopt);
    } else if (wait->count() < 0 || !m_core->waits_in_client()) {
        granted = once(wait); // a negative wait goes to the server as given (it refuses it)
    } else {
        // Client-side wait, as client_core::acquire's: the same owner token on
        // every try, so a try whose answer was lost is taken up by the next.
        const auto deadline = steady_clock::now() + *wait;
        const auto cap = std::max<std::int64_t>(1, m_core->options.poll_interval.count());
        for (std::int64_t bound = std::min<std::int64_t>(20, cap);; bound = std::min(cap, bound * 2)) {
            if ((granted = once(std::nullopt))) break;
            const auto now = steady_clock::now();
            if (now >= deadline) break;
            std::this_thread::sleep_for(std::min<steady_clock::duration>(m_core->poll_sleep(bound), deadline - now));
        }
    }
    const auto received = steady_clock::now();
    if (!granted) {
        ++m_core->stats.busy;
        return std::nullopt;
    }
    std::vector<lease> leases;
    leases.reserve(r.size());
    for (int i = 0; i < r.size(); ++i) {
        const auto row = r[i];
        auto state = std::make_shared<internal::lease_state>();
        state->core = m_core;
        internal::set_grant(*state, internal::read_grant(*m_core, row, started, sent, received, options.ttl));
        state->acquired = sent;
        state->granted = received;
        ++m_core->stats.acquisitions;
        m_core->attach(state, options);
        leases.push_back(lease{std::move(state)});
    }
    return leases;
}

std::optional<std::vector<lease>> client::try_acquire_all(const std::vector<std::string>& lock_names,
                                                          const lease_options& options) {
    return acquire_set(lock_names, std::nullopt, options);
}

std::vector<lease> client::acquire_all(const std::vector<std::string>& lock_names, std::chrono::milliseconds wait,
                                       const lease_options& options) {
    auto leases = acquire_set(lock_names, wait, options);
    if (!leases) throw busy_error{"a lock of the set is busy", lock_names.empty() ? "" : lock_names.front(), "55P03"};
    return std::move(*leases);
}

std::optional<grant> client::try_acquire(pqxx::transaction_base& txn, std::string_view lock_name,
                                         const lease_options& options) {
    using internal::milliseconds_text;
    const std::string name{lock_name};
    const std::string owner = options.owner_token.empty() ? m_core->new_owner_token() : options.owner_token;
    const std::string& lease_holder = options.holder.empty() ? m_core->holder : options.holder;
    const auto sent = steady_clock::now();
    pqxx::result r;
    try {
        if (internal::has_policies(options))
            r = txn.exec_params(internal::sql::try_acquire_policies, name, milliseconds_text(options.ttl), owner,
                                lease_holder, options.session_bound, milliseconds_text(options.max_hold),
                                milliseconds_text(options.min_hold), milliseconds_text(options.lock_delay));
        else
            r = txn.exec_params(internal::sql::try_acquire, name, milliseconds_text(options.ttl), owner, lease_holder);
    } catch (const std::exception& e) {
        if (internal::is_unknown_outcome(e)) ++m_core->stats.unknown_outcomes;
        internal::rethrow_mapped(name, owner);
    }
    const auto received = steady_clock::now();
    if (r.size() != 1 || r[0][2].is_null()) {
        ++m_core->stats.busy;
        return std::nullopt;
    }
    ++m_core->stats.acquisitions;
    return internal::read_grant(*m_core, r[0], sent, sent, received, options.ttl, true);
}

lease client::adopt(const grant& granted, const lease_options& options) {
    auto state = std::make_shared<internal::lease_state>();
    state->core = m_core;
    internal::set_grant(*state, granted);
    state->acquired = granted.deadline - granted.ttl;
    state->granted = state->acquired; // its arrival is not known; this is no later than it
    lease_options opts = options;
    opts.ttl = granted.ttl;
    m_core->attach(state, opts);
    return lease{std::move(state)};
}

std::optional<grant> client::renew(std::string_view lock_name, std::string_view owner_token,
                                   std::chrono::milliseconds ttl) {
    const std::string name{lock_name};
    const std::string owner{owner_token};
    internal::checked_out held{*m_core};
    const internal::renewal r = internal::renew_lease(*m_core, held.slot(), name, owner, ttl, m_core->options.call_timeout);
    if (r.result == outcome::refused) return std::nullopt;
    if (r.result == outcome::unknown)
        throw unknown_outcome_error{"outcome of the renewal is unknown: " + r.error, name, owner};
    grant g;
    g.lock_name = name;
    g.owner_token = owner;
    g.ttl = ttl;
    g.lease_until = r.lease_until;
    g.deadline = r.deadline;
    return g;
}

outcome client::release(std::string_view lock_name, std::string_view owner_token) noexcept {
    try {
        return internal::release_lease(*m_core, std::string{lock_name}, std::string{owner_token});
    } catch (...) {
        return outcome::unknown; // copying the arguments ran out of memory
    }
}

bool client::force_release(std::string_view lock_name, std::string_view reason) {
    const std::string name{lock_name};
    std::optional<internal::checked_out> held;
    try {
        internal::session& s = *held.emplace(*m_core);
        const internal::call_result r =
            internal::call(s, m_core->options.call_timeout, internal::sql::force_release, name, std::string{reason});
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
    return s->backend_pid();
}

int client::keep_alive_backend_pid() const {
    return m_core->watcher.backend_pid();
}

} // namespace dlock
