// lease.cpp -- the lease object: observers, explicit renew and release.
#include "dlock/lease.hpp"

#include <algorithm>

#include "core.hpp"
#include "dlock/errors.hpp"
#include "lease_state.hpp"

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

void lease_state::renewal_refused(bool wake_keep_alive) noexcept {
    const bool held_to_limit = max_hold.count() > 0 && steady_clock::now() >= acquired + max_hold;
    mark_lost(held_to_limit ? loss_reason::max_hold : loss_reason::refused, wake_keep_alive);
}

void lease_state::renewed(const renewal& confirmed) noexcept {
    const auto now = steady_clock::now();
    steady_clock::duration lateness{};
    steady_clock::duration margin{};
    {
        std::lock_guard<std::mutex> guard{mutex};
        lateness = std::max(steady_clock::duration::zero(), now - renew_planned);
        margin = deadline - now;
        deadline = std::max(deadline, confirmed.deadline);
        lease_until = confirmed.lease_until;
        next_renew = now + renew_every;
        renew_planned = next_renew;
    }
    core->notify.renewed(*this, lateness, margin);
}

} // namespace internal

lease::lease(std::shared_ptr<internal::lease_state> state) noexcept : m_state{std::move(state)} {}

lease::lease(lease&& other) noexcept = default;

lease& lease::operator=(lease&& other) noexcept {
    if (this != &other) {
        static_cast<void>(release()); // as the destructor: nobody to tell

        m_state = std::move(other.m_state);
    }
    return *this;
}

lease::~lease() noexcept {
    static_cast<void>(release()); // bounded by call_timeout; use release() to see the outcome
}

namespace {
const std::string empty_text;
} // namespace

const std::string& lease::name() const noexcept {
    return m_state ? m_state->name : empty_text;
}
std::int64_t lease::fencing_token() const noexcept {
    return m_state ? m_state->fencing_token.load() : 0;
}
const std::string& lease::owner_token() const noexcept {
    return m_state ? m_state->owner_token : empty_text;
}
std::chrono::milliseconds lease::ttl() const noexcept {
    return m_state ? m_state->ttl : std::chrono::milliseconds{0};
}

steady_clock::time_point lease::deadline() const noexcept {
    if (!m_state) return {};
    std::lock_guard<std::mutex> guard{m_state->mutex};
    return m_state->deadline;
}

std::chrono::milliseconds lease::time_left() const noexcept {
    if (!m_state) return std::chrono::milliseconds{0};
    std::lock_guard<std::mutex> guard{m_state->mutex};
    if (m_state->loss || m_state->released) return std::chrono::milliseconds{0};
    const auto left = m_state->deadline - steady_clock::now();
    return std::max(std::chrono::milliseconds{0}, std::chrono::duration_cast<std::chrono::milliseconds>(left));
}

std::chrono::system_clock::time_point lease::lease_until() const noexcept {
    if (!m_state) return {};
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
    if (!m_state) return std::nullopt;
    std::lock_guard<std::mutex> guard{m_state->mutex};
    if (!m_state->loss && !m_state->released && steady_clock::now() >= m_state->deadline) return loss_reason::expired;
    return m_state->loss;
}

bool lease::wait_lost(std::chrono::milliseconds timeout) const {
    if (!m_state) return false;
    const auto until = steady_clock::now() + timeout;
    std::unique_lock<std::mutex> lock{m_state->mutex};
    // Renewals move the deadline while this waits: re-read it on every wake,
    // but never wait past `until`.
    for (;;) {
        if (m_state->released) return false;
        if (m_state->loss) return true;
        const auto now = steady_clock::now();
        if (now >= m_state->deadline) return true;
        if (now >= until) return false;
        m_state->changed.wait_until(lock, std::min(until, m_state->deadline));
    }
}

void lease::report_progress() noexcept {
    if (m_state) m_state->progress = true;
}

void lease::stop_keep_alive() noexcept {
    if (!m_state) return;
    std::lock_guard<std::mutex> guard{m_state->mutex};
    m_state->keep_alive_stopped = true;
}

outcome lease::renew() {
    if (!m_state) return outcome::refused;
    internal::lease_state& s = *m_state;
    internal::client_core& core = *s.core;
    {
        std::lock_guard<std::mutex> guard{s.mutex};
        if (s.released || s.loss) return outcome::refused;
    }
    std::optional<internal::checked_out> held;
    try {
        held.emplace(core);
    } catch (const connection_error&) {
        return outcome::unknown; // nothing was sent: the lease is as valid as it was
    }
    const internal::renewal r =
        internal::renew_lease(core, held->slot(), s.name, s.owner_token, s.ttl, core.options.call_timeout);
    if (r.result == outcome::done) s.renewed(r);
    if (r.result == outcome::refused) s.renewal_refused(true);
    return r.result;
}

outcome lease::downgrade() {
    if (!m_state) return outcome::refused;
    internal::lease_state& s = *m_state;
    internal::client_core& core = *s.core;
    {
        std::lock_guard<std::mutex> guard{s.mutex};
        if (s.released || s.loss) return outcome::refused;
    }
    const internal::downgrading d = internal::downgrade_lease(core, s.name, s.owner_token);
    if (d.result == outcome::done) s.fencing_token = d.fencing_token;
    return d.result;
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
    // Waits for a renewal of it in flight, bounded by the renewal's own timeout.
    core.watcher.remove(state.get(), core.options.call_timeout);
    const outcome result = internal::release_lease(core, state->name, state->owner_token);
    state->bound_session.reset(); // a session-bound lease ends with it in any case
    core.notify.released(*state, result);
    return result;
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
    state->core->watcher.remove(state.get(), state->core->options.call_timeout);
    g.lock_name = state->name;
    g.owner_token = state->owner_token;
    g.fencing_token = state->fencing_token;
    g.ttl = state->ttl;
    return g;
}

} // namespace dlock
