// keep_alive.cpp -- background renewal and deadline watch.
//
// Two threads per client, started with its first lease. The renewer renews
// each lease every renew_every on its own connection and marks a lease lost
// the moment a renewal is refused; a renewal whose outcome is unknown (broken
// connection, timeout, failover) is retried on a fresh connection -- a
// multi-host connection string then finds the new primary -- until the lease's
// deadline. Each renewal is bounded (statement timeout: the lease's time left,
// and at most the shortest renewal interval of the client's leases), so one
// renewal stuck behind a row lock cannot hold up the others past their slack.
// The watcher marks a lease lost when its local deadline passes without a
// confirmed renewal -- even while the renewer is stuck on the network -- and
// reports it: to the client's listener, then to on_lost. remove() waits
// (bounded) for a renewal or callback of the lease in flight, so a released
// lease is never renewed and its callback never runs afterwards.
//
// The threads use only keep_alive::shared, which they co-own: the keep_alive
// object dies with its client_core, and that can happen on one of these very
// threads (on_lost dropped the last lease and client, or a renewal held the
// last reference). The thread then detaches itself and ends on its own state.
#include "keep_alive.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "core.hpp"
#include "lease_state.hpp"

namespace dlock::internal {

struct keep_alive::shared {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::shared_ptr<lease_state>> leases;
    const lease_state* renewing = nullptr;  // renewal in flight
    const lease_state* reporting = nullptr; // on_lost call in flight
    bool stop = false;
    std::atomic<int> backend_pid{0};
    // When each thread will wake while it waits for that time on cv; min()
    // while it runs (it scans the leases again before it waits). add() wakes
    // the threads only for a lease due before then: a lease taken and released
    // well within its ttl then costs the threads nothing.
    steady_clock::time_point renewer_wakes = steady_clock::time_point::min();
    steady_clock::time_point watcher_wakes = steady_clock::time_point::min();
};

namespace {

using shared_state = std::shared_ptr<keep_alive::shared>;

// One renewal of `lease` on the renewer's connection `conn`.
void renew_one(lease_state& lease, std::unique_ptr<session>& conn, std::chrono::milliseconds timeout,
               keep_alive::shared& sh) noexcept {
    const auto now = steady_clock::now();
    if (lease.renew_only_on_progress && !lease.progress.exchange(false)) {
        // No progress since the last renewal: let the lease run out.
        std::lock_guard<std::mutex> guard{lease.mutex};
        lease.next_renew = now + lease.renew_every;
        lease.renew_planned = lease.next_renew;
        return;
    }
    renewal r;
    try {
        r = renew_lease(*lease.core, conn, lease.name, lease.owner_token, lease.ttl, timeout);
    } catch (...) { // NOLINT(bugprone-empty-catch): a refused argument is retried like any failure
    }
    sh.backend_pid = conn ? conn->backend_pid() : 0;
    switch (r.result) {
    case outcome::done: lease.renewed(r); break;
    case outcome::refused: lease.renewal_refused(true); break;
    case outcome::unknown: {
        // Still held until its deadline: try again soon (the watcher reports it
        // lost when the deadline passes first).
        std::lock_guard<std::mutex> guard{lease.mutex};
        lease.next_renew = steady_clock::now() + std::min(lease.renew_every, std::chrono::milliseconds{250});
        break;
    }
    }
}

void renew_loop(const shared_state& sh) noexcept {
    std::unique_ptr<session> conn; // this thread's own connection
    std::unique_lock<std::mutex> lock{sh->mutex};
    while (!sh->stop) {
        const auto now = steady_clock::now();
        auto wake_at = now + std::chrono::hours{1};
        std::shared_ptr<lease_state> due;
        auto due_left = std::chrono::milliseconds::max();
        auto shortest_every = std::chrono::milliseconds::max();
        for (const auto& l : sh->leases) {
            std::lock_guard<std::mutex> lease_lock{l->mutex};
            if (l->released || l->loss || !l->keep_alive || l->keep_alive_stopped) continue;
            if (now >= l->deadline) continue; // the watcher reports it
            shortest_every = std::min(shortest_every, l->renew_every);
            if (!due && now >= l->next_renew) {
                due = l;
                due_left = std::chrono::duration_cast<std::chrono::milliseconds>(l->deadline - now);
            } else {
                wake_at = std::min(wake_at, l->next_renew);
            }
        }
        if (!due) {
            sh->renewer_wakes = wake_at;
            sh->cv.wait_until(lock, wake_at);
            sh->renewer_wakes = steady_clock::time_point::min();
            continue;
        }
        sh->renewing = due.get();
        lock.unlock();
        const auto timeout = std::max(std::chrono::milliseconds{50},
                                      std::min({due_left, shortest_every, due->core->options.call_timeout}));
        renew_one(*due, conn, timeout, *sh);
        due.reset(); // may end the client: from here on only sh is used
        lock.lock();
        sh->renewing = nullptr;
        sh->cv.notify_all();
    }
    lock.unlock();
    conn.reset();
}

void watch_loop(const shared_state& sh) noexcept {
    std::unique_lock<std::mutex> lock{sh->mutex};
    while (!sh->stop) {
        const auto now = steady_clock::now();
        auto wake_at = now + std::chrono::hours{1};
        std::shared_ptr<lease_state> due;
        for (const auto& l : sh->leases) {
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
            sh->watcher_wakes = wake_at;
            sh->cv.wait_until(lock, wake_at);
            sh->watcher_wakes = steady_clock::time_point::min();
            continue;
        }
        sh->reporting = due.get();
        lock.unlock();
        loss_reason reason{};
        {
            std::lock_guard<std::mutex> guard{due->mutex};
            reason = *due->loss;
        }
        due->core->notify.lost(*due, reason);
        if (due->on_lost) {
            lost_lease info;
            info.lock_name = due->name;
            info.fencing_token = due->fencing_token;
            info.reason = reason;
            try {
                due->on_lost(info);
            } catch (...) { // NOLINT(bugprone-empty-catch): a callback must not kill the watcher
            }
        }
        due.reset(); // may end the client: from here on only sh is used
        lock.lock();
        sh->reporting = nullptr;
        sh->cv.notify_all();
    }
}

} // namespace

keep_alive::keep_alive() : m_shared{std::make_shared<shared>()} {}

keep_alive::~keep_alive() noexcept {
    {
        std::lock_guard<std::mutex> guard{m_shared->mutex};
        m_shared->stop = true;
    }
    m_shared->cv.notify_all();
    for (std::thread* t : {&m_renewer, &m_watcher}) {
        if (!t->joinable()) continue;
        if (t->get_id() == std::this_thread::get_id())
            t->detach(); // the last owner let go on this thread; it ends on m_shared
        else
            t->join();
    }
}

int keep_alive::backend_pid() const noexcept {
    return m_shared->backend_pid;
}

void keep_alive::add(std::shared_ptr<lease_state> lease) {
    bool due_earlier = false;
    std::lock_guard<std::mutex> guard{m_shared->mutex};
    {
        std::lock_guard<std::mutex> lease_lock{lease->mutex};
        due_earlier = lease->deadline < m_shared->watcher_wakes ||
                      (lease->keep_alive && lease->next_renew < m_shared->renewer_wakes);
    }
    m_shared->leases.push_back(std::move(lease));
    if (!m_watcher.joinable() || !m_renewer.joinable()) {
        // The threads inherit a mask that blocks every signal: process signals
        // go to the application's threads, never to the library's.
        sigset_t all;
        sigset_t previous;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &previous);
        try {
            if (!m_watcher.joinable()) m_watcher = std::thread{[sh = m_shared] { watch_loop(sh); }};
            if (!m_renewer.joinable()) m_renewer = std::thread{[sh = m_shared] { renew_loop(sh); }};
        } catch (...) {
            pthread_sigmask(SIG_SETMASK, &previous, nullptr);
            throw;
        }
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    }
    if (due_earlier) m_shared->cv.notify_all();
}

void keep_alive::remove(const lease_state* lease, std::chrono::milliseconds bound) noexcept {
    std::unique_lock<std::mutex> lock{m_shared->mutex};
    auto& leases = m_shared->leases;
    leases.erase(std::remove_if(leases.begin(), leases.end(),
                                [lease](const std::shared_ptr<lease_state>& l) { return l.get() == lease; }),
                 leases.end());
    // From on_lost (the watcher) the callback in flight is the caller itself,
    // but a renewal of the lease may be in flight on the renewer: wait for it.
    const auto self = std::this_thread::get_id();
    const bool on_renewer = self == m_renewer.get_id();
    const bool on_watcher = self == m_watcher.get_id();
    m_shared->cv.wait_for(lock, bound, [&] {
        return (on_renewer || m_shared->renewing != lease) && (on_watcher || m_shared->reporting != lease);
    });
}

void keep_alive::wake() noexcept {
    { std::lock_guard<std::mutex> guard{m_shared->mutex}; }
    m_shared->cv.notify_all();
}

} // namespace dlock::internal
