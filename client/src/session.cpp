// session.cpp -- the library's own connections and their prepared statements.
#include <string>

#include "internal.hpp"

namespace dlock::internal {

namespace {

// A lease row comes back as four columns; all NULL when the lock is busy.
constexpr const char* lease_columns = "SELECT l.lock_name, l.owner_token::text, l.fencing_token, "
                                      "pg_catalog.date_part('epoch', l.lease_until) ";

} // namespace

const char* const try_acquire_sql = "SELECT l.lock_name, l.owner_token::text, l.fencing_token, "
                                    "pg_catalog.date_part('epoch', l.lease_until) "
                                    "FROM dlock.try_acquire($1, $2::bigint * interval '1 millisecond', $3::uuid, "
                                    "NULLIF($4::text, '')) l";

session::session(const std::string& connection_string) {
    try {
        m_conn = std::make_unique<pqxx::connection>(connection_string);
    } catch (const std::exception& e) {
        throw connection_error{std::string{"could not connect: "} + e.what(), {}};
    }
    m_watch = std::make_unique<notice_watch>(*m_conn, true);
    try {
        // A server-side wait (dlock.acquire) ends soon after this client goes
        // away, instead of taking the lock for nobody. Best effort: older
        // servers do not know the setting.
        pqxx::nontransaction tx{*m_conn};
        tx.exec("SET client_connection_check_interval = 1000");
    } catch (const pqxx::broken_connection& e) {
        throw connection_error{std::string{"could not connect: "} + e.what(), {}};
    } catch (const std::exception&) { // NOLINT(bugprone-empty-catch)
    }
    m_conn->prepare(stmt::try_acquire, try_acquire_sql);
    m_conn->prepare(stmt::acquire, std::string{lease_columns} +
                                       "FROM dlock.acquire($1, $2::bigint * interval '1 millisecond', "
                                       "$3::bigint * interval '1 millisecond', $4::uuid, NULLIF($5::text, '')) l");
    m_conn->prepare(stmt::renew, "SELECT pg_catalog.date_part('epoch', "
                                 "dlock.renew($1, $2::uuid, $3::bigint * interval '1 millisecond'))");
    m_conn->prepare(stmt::release, "SELECT dlock.release($1, $2::uuid)");
    m_conn->prepare(stmt::force_release, "SELECT dlock.force_release($1, $2)");
}

session::~session() noexcept {
    try {
        m_watch.reset();
        m_conn.reset();
    } catch (...) { // NOLINT(bugprone-empty-catch): closing must not throw
    }
}

} // namespace dlock::internal
