// tests/faults/worker/lock_api_client.cpp -- lock calls through the C++ client
// library (client/include/dlock). Compiled only when the library is built.
#include <optional>
#include <thread>

#include <dlock/dlock.hpp>

#include "lock_api.hpp"

namespace faults {

namespace {

dlock::client_options client_settings(const lock_settings& settings) {
    dlock::client_options o;
    o.connection_string = settings.conninfo + " application_name=faults-" + settings.worker_id + "-lock";
    o.holder = settings.worker_id;
    o.drift_allowance = settings.drift_allowance;
    o.safety_margin = settings.safety_margin;
    // The worker retries uncertain acquires itself, so each attempt is recorded.
    o.retry.max_attempts = 1;
    return o;
}

class client_lock_api final : public lock_api {
public:
    explicit client_lock_api(const lock_settings& settings)
        : m_client(client_settings(settings)),
          m_txn_session(settings.conninfo, "faults-" + settings.worker_id + "-txn"),
          m_session_bound(settings.session_bound) {}

    op_result acquire(const std::string& lock_name, std::chrono::milliseconds ttl, const std::string& owner,
                      acquire_mode mode, std::chrono::milliseconds extra) override {
        forget();
        dlock::lease_options lo;
        lo.ttl = ttl;
        lo.keep_alive = false;
        lo.owner_token = owner;
        lo.session_bound = m_session_bound;
        op_result r;
        r.owner = owner;
        try {
            if (mode == acquire_mode::transaction) return acquire_in_transaction(lock_name, lo, extra);
            if (mode == acquire_mode::wait) {
                m_lease.emplace(m_client.acquire(lock_name, extra, lo));
            } else {
                auto got = m_client.try_acquire(lock_name, lo);
                if (!got) {
                    r.kind = result_kind::refused;
                    r.why = "busy";
                    return r;
                }
                m_lease.emplace(std::move(*got));
            }
            r.kind = result_kind::ok;
            r.token = m_lease->fencing_token();
            r.owner = m_lease->owner_token();
        } catch (const dlock::busy_error&) {
            r.kind = result_kind::refused;
            r.why = "55P03";
        } catch (...) {
            r = classify(std::current_exception(), true, m_txn_session);
            if (r.owner.empty()) r.owner = owner;
        }
        return r;
    }

    [[nodiscard]] bool lease_valid() const override { return m_lease && m_lease->valid(); }

    [[nodiscard]] std::chrono::milliseconds time_left() const override {
        return m_lease ? m_lease->time_left() : std::chrono::milliseconds{0};
    }

    op_result renew() override {
        op_result r;
        if (!m_lease) {
            r.kind = result_kind::fail;
            r.why = "no_lease";
            return r;
        }
        r.owner = m_lease->owner_token();
        try {
            r.kind = from_outcome(m_lease->renew());
            if (r.kind == result_kind::refused) r.why = "not_held";
        } catch (...) {
            r = classify(std::current_exception(), true, m_txn_session);
        }
        return r;
    }

    op_result release() override {
        op_result r;
        if (!m_lease) {
            r.kind = result_kind::fail;
            r.why = "no_lease";
            return r;
        }
        r.owner = m_lease->owner_token();
        r.kind = from_outcome(m_lease->release());
        if (r.kind == result_kind::refused) r.why = "not_held";
        m_lease.reset();
        return r;
    }

    void forget() noexcept override {
        if (m_lease) {
            // The worker always calls release() first, so this destructor call
            // has nothing left to release.
            m_lease->stop_keep_alive();
            m_lease.reset();
        }
    }

    [[nodiscard]] const char* implementation() const noexcept override { return "client"; }

private:
    static result_kind from_outcome(dlock::outcome o) {
        switch (o) {
        case dlock::outcome::done: return result_kind::ok;
        case dlock::outcome::refused: return result_kind::refused;
        case dlock::outcome::unknown: return result_kind::unknown;
        }
        return result_kind::unknown;
    }

    op_result acquire_in_transaction(const std::string& lock_name, const dlock::lease_options& lo,
                                     std::chrono::milliseconds pause) {
        op_result r;
        r.owner = lo.owner_token;
        bool commit_sent = false;
        try {
            pqxx::work txn(m_txn_session.conn());
            auto granted = m_client.try_acquire(txn, lock_name, lo);
            if (!granted) {
                txn.abort();
                r.kind = result_kind::refused;
                r.why = "busy";
                return r;
            }
            r.owner = granted->owner_token;
            r.token = granted->fencing_token;
            std::this_thread::sleep_for(pause);
            commit_sent = true;
            if (dlock::commit(txn) != dlock::outcome::done) {
                r.kind = result_kind::unknown;
                r.why = "commit";
                return r;
            }
            m_lease.emplace(m_client.adopt(*granted, lo));
            r.kind = result_kind::ok;
        } catch (...) {
            const op_result failed = classify(std::current_exception(), commit_sent, m_txn_session);
            r.kind = failed.kind;
            r.why = failed.why;
            if (r.kind != result_kind::unknown) r.token = 0;
        }
        return r;
    }

    dlock::client m_client;
    db_session m_txn_session;
    bool m_session_bound;
    std::optional<dlock::lease> m_lease;
};

} // namespace

std::unique_ptr<lock_api> make_client_lock_api(const lock_settings& settings) {
    return std::make_unique<client_lock_api>(settings);
}

} // namespace faults
