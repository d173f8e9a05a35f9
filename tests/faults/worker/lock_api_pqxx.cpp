// tests/faults/worker/lock_api_pqxx.cpp -- lock calls as plain SQL over libpqxx.
//
// Used before the client library exists, and through PgBouncer in transaction
// pooling mode if the library cannot run there. Only unnamed statements
// (exec_params), no session state, so it works through a transaction pooler.
#include <thread>

#include "lock_api.hpp"

namespace faults {

std::unique_ptr<lock_api> make_client_lock_api(const lock_settings& settings);

namespace {

std::string interval_ms(std::chrono::milliseconds value) {
    return std::to_string(value.count()) + " milliseconds";
}

class pqxx_lock_api final : public lock_api {
public:
    explicit pqxx_lock_api(const lock_settings& settings)
        : m_settings(settings), m_session(settings.conninfo, "faults-" + settings.worker_id + "-lock") {}

    op_result acquire(const std::string& lock_name, std::chrono::milliseconds ttl, const std::string& owner,
                      acquire_mode mode, std::chrono::milliseconds extra) override {
        forget();
        const auto sent = std::chrono::steady_clock::now();
        bool may_have_committed = false;
        op_result r;
        r.owner = owner;
        m_session.clear_warnings();
        try {
            pqxx::connection& conn = m_session.conn();
            pqxx::result rows;
            if (mode == acquire_mode::transaction) {
                pqxx::work txn(conn);
                rows =
                    txn.exec_params("SELECT fencing_token, owner_token::text FROM dlock.try_acquire($1, $2::interval, "
                                    "NULLIF($3, '')::uuid, $4, session_bound => $5::boolean)",
                                    lock_name, interval_ms(ttl), owner, m_settings.worker_id,
                                    m_settings.session_bound);
                std::this_thread::sleep_for(extra);
                may_have_committed = true;
                txn.commit();
            } else {
                pqxx::nontransaction txn(conn);
                may_have_committed = true;
                if (mode == acquire_mode::wait)
                    rows =
                        txn.exec_params("SELECT fencing_token, owner_token::text FROM dlock.acquire($1, $2::interval, "
                                        "$3::interval, NULLIF($4, '')::uuid, $5, session_bound => $6::boolean)",
                                        lock_name, interval_ms(ttl), interval_ms(extra), owner, m_settings.worker_id,
                                        m_settings.session_bound);
                else
                    rows = txn.exec_params("SELECT fencing_token, owner_token::text FROM dlock.try_acquire($1, "
                                           "$2::interval, NULLIF($3, '')::uuid, $4, session_bound => $5::boolean)",
                                           lock_name, interval_ms(ttl), owner, m_settings.worker_id,
                                           m_settings.session_bound);
            }
            if (rows.empty() || rows[0][0].is_null()) {
                r.kind = result_kind::refused;
                r.why = "busy";
            } else {
                r.token = rows[0][0].as<std::int64_t>();
                r.owner = rows[0][1].as<std::string>();
                if (m_session.warnings() > 0) {
                    // The commit succeeded only locally (canceled sync-rep wait).
                    r.kind = result_kind::unknown;
                    r.why = "warning";
                } else {
                    r.kind = result_kind::ok;
                    m_lock = lock_name;
                    m_owner = r.owner;
                    m_ttl = ttl;
                    m_deadline = sent + local_budget(ttl);
                    m_held = true;
                }
            }
        } catch (...) {
            const std::string used = r.owner;
            r = classify(std::current_exception(), may_have_committed, m_session);
            r.owner = used;
        }
        return r;
    }

    [[nodiscard]] bool lease_valid() const override { return m_held && std::chrono::steady_clock::now() < m_deadline; }

    [[nodiscard]] std::chrono::milliseconds time_left() const override {
        if (!m_held) return std::chrono::milliseconds{0};
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(m_deadline - std::chrono::steady_clock::now());
        return left.count() > 0 ? left : std::chrono::milliseconds{0};
    }

    op_result renew() override {
        op_result r;
        r.owner = m_owner;
        const auto sent = std::chrono::steady_clock::now();
        m_session.clear_warnings();
        try {
            pqxx::nontransaction txn(m_session.conn());
            const auto rows =
                txn.exec_params("SELECT dlock.renew($1, $2::uuid, $3::interval)", m_lock, m_owner, interval_ms(m_ttl));
            if (rows[0][0].is_null()) {
                r.kind = result_kind::refused;
                r.why = "not_held";
                m_held = false;
            } else if (m_session.warnings() > 0) {
                r.kind = result_kind::unknown;
                r.why = "warning";
                m_held = false;
            } else {
                r.kind = result_kind::ok;
                m_deadline = sent + local_budget(m_ttl);
            }
        } catch (...) {
            r = classify(std::current_exception(), true, m_session);
            r.owner = m_owner;
            m_held = false;
        }
        return r;
    }

    op_result release() override {
        op_result r;
        r.owner = m_owner;
        try {
            pqxx::nontransaction txn(m_session.conn());
            const auto rows = txn.exec_params("SELECT dlock.release($1, $2::uuid)", m_lock, m_owner);
            r.kind = rows[0][0].as<bool>() ? result_kind::ok : result_kind::refused;
            if (r.kind == result_kind::refused) r.why = "not_held";
        } catch (...) {
            r = classify(std::current_exception(), true, m_session);
            r.owner = m_owner;
        }
        m_held = false;
        return r;
    }

    void forget() noexcept override { m_held = false; }

    [[nodiscard]] const char* implementation() const noexcept override { return "pqxx"; }

private:
    [[nodiscard]] std::chrono::steady_clock::duration local_budget(std::chrono::milliseconds ttl) const {
        const auto budget =
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(ttl * (1.0 - m_settings.drift_allowance));
        return budget - m_settings.safety_margin;
    }

    lock_settings m_settings;
    db_session m_session;
    std::string m_lock;
    std::string m_owner;
    std::chrono::milliseconds m_ttl{0};
    std::chrono::steady_clock::time_point m_deadline{};
    bool m_held = false;
};

} // namespace

std::unique_ptr<lock_api> make_lock_api(const lock_settings& settings, bool force_pqxx) {
#ifdef FAULTS_WITH_CLIENT
    if (!force_pqxx) return make_client_lock_api(settings);
#else
    (void)force_pqxx;
#endif
    return std::make_unique<pqxx_lock_api>(settings);
}

} // namespace faults
