// keep_alive.cpp -- background renewal and deadline watch.
//
// One thread per client, started with the first lease, using its own
// connection. It renews each lease every renew_every, and marks a lease lost
// the moment a renewal is refused or uncertain, or its local deadline passes
// without a confirmed renewal; then it runs the lease's on_lost callback.
// remove() waits for a renewal in flight, so a released lease is never renewed.
#include <algorithm>

#include "internal.hpp"

namespace dlock::internal {

keep_alive::~keep_alive() noexcept {
    {
        std::lock_guard<std::mutex> guard{m_mutex};
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) {
        if (m_thread.get_id() == std::this_thread::get_id())
            m_thread.detach(); // last owner dropped inside an on_lost callback
        else
            m_thread.join();
    }
}

void keep_alive::add(std::shared_ptr<lease_state> lease) {
    std::lock_guard<std::mutex> guard{m_mutex};
    m_leases.push_back(std::move(lease));
    if (!m_thread.joinable()) m_thread = std::thread{[this] { run(); }};
    m_cv.notify_all();
}

void keep_alive::remove(const lease_state* lease) noexcept {
    std::unique_lock<std::mutex> lock{m_mutex};
    m_leases.erase(std::remove_if(m_leases.begin(), m_leases.end(),
                                  [lease](const std::shared_ptr<lease_state>& l) { return l.get() == lease; }),
                   m_leases.end());
    if (std::this_thread::get_id() == m_thread.get_id()) return; // called from on_lost
    m_cv.wait(lock, [&] { return m_in_flight != lease; });
}

void keep_alive::wake() noexcept {
    { std::lock_guard<std::mutex> guard{m_mutex}; }
    m_cv.notify_all();
}

void keep_alive::run() noexcept {
    std::unique_lock<std::mutex> lock{m_mutex};
    while (!m_stop) {
        const auto now = steady_clock::now();
        auto wake_at = now + std::chrono::hours{1};
        std::shared_ptr<lease_state> due;
        bool report = false;
        for (const auto& l : m_leases) {
            std::unique_lock<std::mutex> lease_lock{l->mutex};
            if (l->released) continue;
            if (!l->loss && now >= l->deadline) {
                lease_lock.unlock();
                l->mark_lost(loss_reason::expired, false);
                lease_lock.lock();
            }
            if (l->loss) {
                if (!l->loss_reported) {
                    l->loss_reported = true;
                    due = l;
                    report = true;
                    break;
                }
                continue;
            }
            const bool renewing = l->keep_alive && !l->keep_alive_stopped;
            if (renewing && now >= l->next_renew) {
                due = l;
                break;
            }
            wake_at = std::min(wake_at, l->deadline);
            if (renewing) wake_at = std::min(wake_at, l->next_renew);
        }
        if (!due) {
            m_cv.wait_until(lock, wake_at);
            continue;
        }
        m_in_flight = due.get();
        lock.unlock();
        if (report) {
            if (due->on_lost) {
                lost_lease info;
                info.lock_name = due->name;
                info.fencing_token = due->fencing_token;
                {
                    std::lock_guard<std::mutex> guard{due->mutex};
                    info.reason = *due->loss;
                }
                try {
                    due->on_lost(info);
                } catch (...) { // NOLINT(bugprone-empty-catch): a callback must not kill the keep-alive
                }
            }
        } else {
            renew_one(*due);
        }
        due.reset();
        lock.lock();
        m_in_flight = nullptr;
        m_cv.notify_all();
    }
    m_session.reset();
}

void keep_alive::renew_one(lease_state& lease) noexcept {
    const auto now = steady_clock::now();
    if (lease.renew_only_on_progress && !lease.progress.exchange(false)) {
        // No progress since the last renewal: let the lease run out.
        std::lock_guard<std::mutex> guard{lease.mutex};
        lease.next_renew = now + lease.renew_every;
        return;
    }
    if (!m_session) {
        try {
            m_session = std::make_unique<session>(m_core.options.connection_string);
            m_backend_pid = m_session->conn().backendpid();
        } catch (...) {
            // Nothing sent; try again soon (the deadline watch decides when it is too late).
            std::lock_guard<std::mutex> guard{lease.mutex};
            lease.next_renew = now + std::min(lease.renew_every, std::chrono::milliseconds{250});
            return;
        }
    }
    const auto sent = steady_clock::now();
    try {
        m_session->notices().reset();
        pqxx::nontransaction tx{m_session->conn()};
        const pqxx::result r =
            tx.exec_prepared(stmt::renew, lease.name, lease.owner_token, static_cast<long long>(lease.ttl.count()));
        if (m_session->notices().uncertain()) {
            ++m_core.stats.unknown_outcomes;
            lease.mark_lost(loss_reason::uncertain, false);
        } else if (r.size() != 1 || r[0][0].is_null()) {
            ++m_core.stats.renewals_refused;
            lease.mark_lost(loss_reason::refused, false);
        } else {
            lease.renewed(sent, r[0][0].as<double>());
        }
    } catch (const std::exception& e) {
        if (is_unknown_outcome(e)) {
            m_session.reset();
            m_backend_pid = 0;
            ++m_core.stats.unknown_outcomes;
            lease.mark_lost(loss_reason::uncertain, false);
        } else {
            ++m_core.stats.renewals_refused;
            lease.mark_lost(loss_reason::refused, false);
        }
    }
}

} // namespace dlock::internal
