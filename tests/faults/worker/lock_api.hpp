// tests/faults/worker/lock_api.hpp -- the lock calls a worker makes, behind one
// interface: the C++ client library (client/) when it is built, otherwise plain
// libpqxx calls of the SQL functions. The worker records every call.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "session.hpp"

namespace faults {

enum class acquire_mode {
    try_once,    ///< dlock.try_acquire in autocommit
    wait,        ///< dlock.acquire with a server-side wait
    transaction, ///< try_acquire inside an explicit transaction, a pause, then COMMIT
};

struct lock_settings {
    std::string conninfo;
    std::string worker_id;
    double drift_allowance = 0.05;
    std::chrono::milliseconds safety_margin{50};
    bool session_bound = false; ///< leases end with the lock connection's session (a lease policy)
};

/// Holds at most one lease at a time (the worker's current one).
class lock_api {
public:
    lock_api() = default;
    lock_api(const lock_api&) = delete;
    lock_api& operator=(const lock_api&) = delete;
    lock_api(lock_api&&) = delete;
    lock_api& operator=(lock_api&&) = delete;
    virtual ~lock_api() noexcept = default;

    /// Acquires lock_name. owner empty: a fresh owner token; otherwise the token of
    /// an earlier uncertain acquire (a retry). `extra` is the wait (mode wait) or the
    /// pause before COMMIT (mode transaction). On ok the lease becomes current.
    [[nodiscard]] virtual op_result acquire(const std::string& lock_name, std::chrono::milliseconds ttl,
                                            const std::string& owner, acquire_mode mode,
                                            std::chrono::milliseconds extra) = 0;
    /// The local belief: the current lease is still surely held (client clock).
    [[nodiscard]] virtual bool lease_valid() const = 0;
    /// Time until the local deadline of the current lease.
    [[nodiscard]] virtual std::chrono::milliseconds time_left() const = 0;
    [[nodiscard]] virtual op_result renew() = 0;
    [[nodiscard]] virtual op_result release() = 0;
    /// Forgets the current lease without telling the server.
    virtual void forget() noexcept = 0;
    [[nodiscard]] virtual const char* implementation() const noexcept = 0;
};

/// The client library when compiled with it, libpqxx otherwise (or when forced).
[[nodiscard]] std::unique_ptr<lock_api> make_lock_api(const lock_settings& settings, bool force_pqxx);

} // namespace faults
