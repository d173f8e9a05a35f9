// Thin RAII wrapper over libpq; see pg.hpp.
#include "pg.hpp"

#include <cstdlib>

namespace bench {

pg_result& pg_result::operator=(pg_result&& other) noexcept {
    if (this != &other) {
        if (m_res != nullptr) PQclear(m_res);
        m_res = other.m_res;
        other.m_res = nullptr;
    }
    return *this;
}

pg_result::~pg_result() noexcept {
    if (m_res != nullptr) PQclear(m_res);
}

std::int64_t pg_result::int64(int row, int col) const {
    if (is_null(row, col)) throw pg_error("unexpected NULL in result", "");
    return std::strtoll(PQgetvalue(m_res, row, col), nullptr, 10);
}

double pg_result::float8(int row, int col) const {
    if (is_null(row, col)) throw pg_error("unexpected NULL in result", "");
    return std::strtod(PQgetvalue(m_res, row, col), nullptr);
}

long pg_result::affected() const {
    const char* n = PQcmdTuples(m_res);
    return n[0] == '\0' ? 0 : std::strtol(n, nullptr, 10);
}

pg_conn::pg_conn(const std::string& conninfo) : m_conn(PQconnectdb(conninfo.c_str())) {
    if (m_conn == nullptr || PQstatus(m_conn) != CONNECTION_OK) {
        std::string msg = m_conn ? PQerrorMessage(m_conn) : "out of memory";
        if (m_conn != nullptr) PQfinish(m_conn);
        throw pg_error("could not connect: " + msg, "");
    }
}

pg_conn::~pg_conn() noexcept {
    PQfinish(m_conn);
}

pg_result pg_conn::check(PGresult* res) {
    pg_result result(res);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return result;
    std::string state;
    std::string msg;
    if (res != nullptr) {
        const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        state = s ? s : "";
        msg = PQresultErrorMessage(res);
    } else {
        msg = PQerrorMessage(m_conn);
    }
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
        msg.pop_back();
    throw pg_error(msg, state);
}

pg_result pg_conn::exec(const std::string& sql) {
    return check(PQexec(m_conn, sql.c_str()));
}

void pg_conn::prepare(const std::string& name, const std::string& sql) {
    check(PQprepare(m_conn, name.c_str(), sql.c_str(), 0, nullptr));
}

pg_result pg_conn::run(const std::string& name, std::initializer_list<const char*> params) {
    std::vector<const char*> v(params);
    return run(name, v);
}

pg_result pg_conn::run(const std::string& name, const std::vector<const char*>& params) {
    return check(
        PQexecPrepared(m_conn, name.c_str(), static_cast<int>(params.size()), params.data(), nullptr, nullptr, 0));
}

pg_result pg_conn::query(const std::string& sql, const std::vector<const char*>& params) {
    return check(PQexecParams(m_conn, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr,
                              nullptr, 0));
}

} // namespace bench
