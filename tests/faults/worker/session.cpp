// tests/faults/worker/session.cpp -- connection handling and outcome classification.
#include "session.hpp"

#include <cstring>

#ifdef FAULTS_WITH_CLIENT
#include <dlock/errors.hpp>
#endif

namespace faults {

const char* to_string(result_kind kind) noexcept {
    switch (kind) {
    case result_kind::ok: return "ok";
    case result_kind::refused: return "refused";
    case result_kind::fail: return "fail";
    case result_kind::unknown: return "unknown";
    }
    return "unknown";
}

class db_session::warning_counter final : public pqxx::errorhandler {
public:
    warning_counter(pqxx::connection_base& conn, db_session& owner) : pqxx::errorhandler(conn), m_owner(owner) {}

    bool operator()(const char msg[]) noexcept override {
        if (std::strncmp(msg, "WARNING", 7) == 0) m_owner.note_warning();
        return false;
    }

private:
    db_session& m_owner;
};

db_session::db_session(std::string conninfo, const std::string& application_name)
    : m_conninfo(std::move(conninfo) + " application_name=" + application_name) {}

db_session::~db_session() noexcept {
    reset();
}

pqxx::connection& db_session::conn() {
    if (!m_conn) {
        auto fresh = std::make_unique<pqxx::connection>(m_conninfo);
        // Reconnecting is this program's decision, never libpqxx's: a silent
        // reconnect would hide an outcome the history must record.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        fresh->inhibit_reactivation(true);
#pragma GCC diagnostic pop
        m_handler = std::make_unique<warning_counter>(*fresh, *this);
        m_conn = std::move(fresh);
    }
    return *m_conn;
}

void db_session::reset() noexcept {
    m_handler.reset();
    if (m_conn) {
        try {
            m_conn->disconnect();
        } catch (...) {
        }
        m_conn.reset();
    }
}

namespace {

bool connection_lost_state(const std::string& state) {
    // 08: connection exception; 57P01-57P03: admin/crash shutdown, cannot connect now.
    return state.rfind("08", 0) == 0 || state.rfind("57P0", 0) == 0;
}

op_result from_sqlstate(const std::string& state, bool may_have_committed, db_session& session) {
    op_result r;
    r.why = state.empty() ? "error" : state;
    if (connection_lost_state(state)) {
        session.reset();
        r.kind = may_have_committed ? result_kind::unknown : result_kind::fail;
    } else if (state == "55P03" || state == "PD001" || state == "PD002") {
        r.kind = result_kind::refused;
    } else if (state == "25006") {
        // Reached a read-only server (a standby not yet promoted): find the primary again.
        session.reset();
        r.kind = result_kind::refused;
    } else {
        r.kind = result_kind::fail;
    }
    if (session.connected() && !session.conn().is_open()) session.reset();
    return r;
}

} // namespace

op_result classify(const std::exception_ptr& error, bool may_have_committed, db_session& session) {
    op_result r;
    try {
        std::rethrow_exception(error);
    } catch (const pqxx::in_doubt_error&) {
        session.reset();
        r.kind = result_kind::unknown;
        r.why = "in_doubt";
    } catch (const pqxx::broken_connection&) {
        session.reset();
        r.kind = may_have_committed ? result_kind::unknown : result_kind::fail;
        r.why = "connection";
    } catch (const pqxx::sql_error& e) {
        r = from_sqlstate(e.sqlstate(), may_have_committed, session);
#ifdef FAULTS_WITH_CLIENT
    } catch (const dlock::unknown_outcome_error& e) {
        session.reset();
        r.kind = result_kind::unknown;
        r.why = "unknown_outcome";
        r.owner = e.owner_token();
    } catch (const dlock::connection_error&) {
        session.reset();
        r.kind = result_kind::fail;
        r.why = "connect";
    } catch (const dlock::error& e) {
        r = from_sqlstate(e.sqlstate(), may_have_committed, session);
#endif
    } catch (const std::exception&) {
        session.reset();
        r.kind = may_have_committed ? result_kind::unknown : result_kind::fail;
        r.why = "exception";
    }
    return r;
}

} // namespace faults
