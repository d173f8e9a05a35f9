// keep_alive.cpp -- background renewal and deadline watch.
//
// Two threads per client, started with its first lease. The renewer renews
// each lease every renew_every on its own connection and marks a lease lost
// the moment a renewal is refused or uncertain. The watcher marks a lease lost
// when its local deadline passes without a confirmed renewal -- even while the
// renewer is stuck in a renewal the network swallowed -- and runs on_lost.
// remove() waits for a renewal or callback of the lease in flight, so a
// released lease is never renewed and its callback never runs afterwards.
#include <pthread.h>
#include <signal.h>

#include <algorithm>

#include "internal.hpp"

namespace dlock::internal {

keep_alive::~keep_alive() noexcept {
    {
        std::lock_guard<std::mutex> guard{m_mutex};
        m_stop = true;
    }
    m_cv.notify_all();
    for (std::thread* t : {&m_renewer, &m_watcher}) {
        if (!t->joinable()) continue;
        if (t->get_id() == std::this_thread::get_id())
            t->detach(); // last owner dropped inside an on_lost callback
        else
            t->join();
    }
}

bool keep_alive::on_own_thread() const noexcept {
    const auto self = std::this_thread::get_id();
    return self == m_renewer.get_id() || self == m_watcher.get_id();
}

void keep_alive::add(std::shared_ptr<lease_state> lease) {
    std::lock_guard<std::mutex> guard{m_mutex};
    m_leases.push_back(std::move(lease));
    if (!m_watcher.joinable() || !m_renewer.joinable()) {
        // The threads inherit a mask that blocks every signal: process signals
        // go to the application's threads, never to the library's.
        sigset_t all;
        sigset_t previous;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &previous);
        try {
            if (!m_watcher.joinable()) m_watcher = std::thread{[this] { watch_loop(); }};
            if (!m_renewer.joinable()) m_renewer = std::thread{[this] { renew_loop(); }};
        } catch (...) {
            pthread_sigmask(SIG_SETMASK, &previous, nullptr);
            throw;
        }
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    }
    m_cv.notify_all();
}

void keep_alive::remove(const lease_state* lease) noexcept {
    std::unique_lock<std::mutex> lock{m_mutex};
    m_leases.erase(std::remove_if(m_leases.begin(), m_leases.end(),
                                  [lease](const std::shared_ptr<lease_state>& l) { return l.get() == lease; }),
                   m_leases.end());
    if (on_own_thread()) return; // called from on_lost
    m_cv.wait(lock, [&] { return m_renewing != lease && m_reporting != lease; });
}

void keep_alive::wake() noexcept {
    { std::lock_guard<std::mutex> guard{m_mutex}; }
    m_cv.notify_all();
}

void keep_alive::watch_loop() noexcept {
    std::unique_lock<std::mutex> lock{m_mutex};
    while (!m_stop) {
        const auto now = steady_clock::now();
        auto wake_at = now + std::chrono::hours{1};
        std::shared_ptr<lease_state> due;
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
                    break;
                }
                continue;
            }
            wake_at = std::min(wake_at, l->deadline);
        }
        if (!due) {
            m_cv.wait_until(lock, wake_at);
            continue;
        }
        m_reporting = due.get();
        lock.unlock();
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
            } catch (...) { // NOLINT(bugprone-empty-catch): a callback must not kill the watcher
            }
        }
        due.reset();
        lock.lock();
        m_reporting = nullptr;
        m_cv.notify_all();
    }
}

void keep_alive::renew_loop() noexcept {
    std::unique_lock<std::mutex> lock{m_mutex};
    while (!m_stop) {
        const auto now = steady_clock::now();
        auto wake_at = now + std::chrono::hours{1};
        std::shared_ptr<lease_state> due;
        for (const auto& l : m_leases) {
            std::lock_guard<std::mutex> lease_lock{l->mutex};
            if (l->released || l->loss || !l->keep_alive || l->keep_alive_stopped) continue;
            if (now >= l->deadline) continue; // the watcher reports it
            if (now >= l->next_renew) {
                due = l;
                break;
            }
            wake_at = std::min(wake_at, l->next_renew);
        }
        if (!due) {
            m_cv.wait_until(lock, wake_at);
            continue;
        }
        m_renewing = due.get();
        lock.unlock();
        renew_one(*due);
        due.reset();
        lock.lock();
        m_renewing = nullptr;
        m_cv.notify_all();
    }
    lock.unlock();
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
            // Nothing sent; try again soon (the watcher decides when it is too late).
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
            lease.mark_lost(loss_reason::uncertain, true);
        } else if (r.size() != 1 || r[0][0].is_null()) {
            ++m_core.stats.renewals_refused;
            lease.mark_lost(loss_reason::refused, true);
        } else {
            lease.renewed(sent, r[0][0].as<double>());
        }
    } catch (const std::exception& e) {
        if (is_unknown_outcome(e)) {
            m_session.reset();
            m_backend_pid = 0;
            ++m_core.stats.unknown_outcomes;
            lease.mark_lost(loss_reason::uncertain, true);
        } else {
            ++m_core.stats.renewals_refused;
            lease.mark_lost(loss_reason::refused, true);
        }
    }
}

} // namespace dlock::internal
