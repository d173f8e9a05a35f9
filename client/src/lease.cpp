// lease.cpp -- the lease object: observers, explicit renew and release.
#include "dlock/lease.hpp"

#include <algorithm>

#include "internal.hpp"

namespace dlock {
namespace internal {

void lease_state::mark_lost(loss_reason reason, bool wake_keep_alive) noexcept {
    {
        std::lock_guard<std::mutex> guard{mutex};
        if (loss || released) return;
        loss = reason;
    }
    ++core->stats.lost;
    changed.notify_all();
    if (wake_keep_alive) core->watcher.wake();
}

void lease_state::renewed(steady_clock::time_point sent, double server_epoch) noexcept {
    {
        std::lock_guard<std::mutex> guard{mutex};
        deadline = std::max(deadline, core->deadline_for(sent, ttl));
        lease_until = from_epoch(server_epoch);
        next_renew = sent + renew_every;
    }
    ++core->stats.renewals;
}

} // namespace internal

lease::lease(std::shared_ptr<internal::lease_state> state) noexcept : m_state{std::move(state)} {}

lease::lease(lease&& other) noexcept = default;

lease& lease::operator=(lease&& other) noexcept {
    if (this != &other) {
        release();
        m_state = std::move(other.m_state);
    }
    return *this;
}

lease::~lease() noexcept {
    release();
}

const std::string& lease::name() const noexcept {
    return m_state->name;
}
std::int64_t lease::fencing_token() const noexcept {
    return m_state->fencing_token;
}
const std::string& lease::owner_token() const noexcept {
    return m_state->owner_token;
}
std::chrono::milliseconds lease::ttl() const noexcept {
    return m_state->ttl;
}

steady_clock::time_point lease::deadline() const noexcept {
    std::lock_guard<std::mutex> guard{m_state->mutex};
    return m_state->deadline;
}

std::chrono::milliseconds lease::time_left() const noexcept {
    std::lock_guard<std::mutex> guard{m_state->mutex};
    if (m_state->loss || m_state->released) return std::chrono::milliseconds{0};
    const auto left = m_state->deadline - steady_clock::now();
    return std::max(std::chrono::milliseconds{0}, std::chrono::duration_cast<std::chrono::milliseconds>(left));
}

std::chrono::system_clock::time_point lease::lease_until() const noexcept {
    std::lock_guard<std::mutex> guard{m_state->mutex};
    return m_state->lease_until;
}

bool lease::valid() const noexcept {
    if (!m_state) return false;
    std::lock_guard<std::mutex> guard{m_state->mutex};
    return !m_state->loss && !m_state->released && steady_clock::now() < m_state->deadline;
}

bool lease::lost() const noexcept {
    if (!m_state) return false;
    std::lock_guard<std::mutex> guard{m_state->mutex};
    if (m_state->released) return false;
    return m_state->loss.has_value() || steady_clock::now() >= m_state->deadline;
}

std::optional<loss_reason> lease::loss() const noexcept {
    std::lock_guard<std::mutex> guard{m_state->mutex};
    if (!m_state->loss && !m_state->released && steady_clock::now() >= m_state->deadline) return loss_reason::expired;
    return m_state->loss;
}

bool lease::wait_lost(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock{m_state->mutex};
    const auto until = steady_clock::now() + timeout;
    m_state->changed.wait_until(lock, std::min(until, m_state->deadline),
                                [this] { return m_state->loss.has_value() || m_state->released; });
    if (m_state->released) return false;
    return m_state->loss.has_value() || steady_clock::now() >= m_state->deadline;
}

void lease::report_progress() noexcept {
    m_state->progress = true;
}

void lease::stop_keep_alive() noexcept {
    std::lock_guard<std::mutex> guard{m_state->mutex};
    m_state->keep_alive_stopped = true;
}

outcome lease::renew() {
    internal::lease_state& s = *m_state;
    internal::client_core& core = *s.core;
    {
        std::lock_guard<std::mutex> guard{s.mutex};
        if (s.released || s.loss) return outcome::refused;
    }
    std::optional<internal::checked_out> held;
    const auto sent = steady_clock::now();
    try {
        internal::session& session = *held.emplace(core);
        session.notices().reset();
        pqxx::nontransaction tx{session.conn()};
        const pqxx::result r =
            tx.exec_prepared(internal::stmt::renew, s.name, s.owner_token, static_cast<long long>(s.ttl.count()));
        if (session.notices().uncertain()) {
            ++core.stats.unknown_outcomes;
            s.mark_lost(loss_reason::uncertain, true);
            return outcome::unknown;
        }
        if (r.size() != 1 || r[0][0].is_null()) {
            ++core.stats.renewals_refused;
            s.mark_lost(loss_reason::refused, true);
            return outcome::refused;
        }
        s.renewed(sent, r[0][0].as<double>());
        return outcome::done;
    } catch (const connection_error&) {
        // Nothing was sent: the lease is as valid as it was.
        return outcome::unknown;
    } catch (const std::exception& e) {
        if (internal::is_unknown_outcome(e)) {
            if (held) held->discard();
            ++core.stats.unknown_outcomes;
            s.mark_lost(loss_reason::uncertain, true);
            return outcome::unknown;
        }
        internal::rethrow_mapped(s.name, s.owner_token);
    }
}

outcome lease::release() noexcept {
    if (!m_state) return outcome::refused;
    const std::shared_ptr<internal::lease_state> state = m_state;
    internal::client_core& core = *state->core;
    {
        std::lock_guard<std::mutex> guard{state->mutex};
        if (state->released) return outcome::refused;
        state->released = true;
    }
    state->changed.notify_all();
    core.watcher.remove(state.get()); // no renewal of it is in flight after this
    try {
        // One reconnect when the connection had broken since the last call.
        for (int attempt = 0; attempt < 2; ++attempt) {
            std::optional<internal::checked_out> held;
            try {
                internal::session& session = *held.emplace(core);
                pqxx::nontransaction tx{session.conn()};
                const pqxx::result r = tx.exec_prepared(internal::stmt::release, state->name, state->owner_token);
                if (r.size() == 1 && !r[0][0].is_null() && r[0][0].as<bool>()) {
                    ++core.stats.releases;
                    return outcome::done;
                }
                return outcome::refused;
            } catch (const connection_error&) {
                return outcome::unknown;
            } catch (const std::exception& e) {
                if (!internal::is_unknown_outcome(e)) return outcome::refused;
                if (held) held->discard();
                ++core.stats.unknown_outcomes;
            }
        }
    } catch (...) { // NOLINT(bugprone-empty-catch): a release must never throw
    }
    return outcome::unknown;
}

grant lease::detach() noexcept {
    grant g;
    if (!m_state) return g;
    const std::shared_ptr<internal::lease_state> state = m_state;
    {
        std::lock_guard<std::mutex> guard{state->mutex};
        state->released = true; // from here on the object neither renews nor releases
        g.deadline = state->deadline;
        g.lease_until = state->lease_until;
    }
    state->changed.notify_all();
    state->core->watcher.remove(state.get());
    g.lock_name = state->name;
    g.owner_token = state->owner_token;
    g.fencing_token = state->fencing_token;
    g.ttl = state->ttl;
    return g;
}

} // namespace dlock
