// Thin RAII wrapper over libpq for the benchmark driver: one connection per
// thread, prepared statements by name, text parameters, errors as exceptions
// carrying the SQLSTATE.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

// A failed statement or connection; sqlstate is empty for connection errors.
class pg_error : public std::runtime_error {
public:
    pg_error(const std::string& message, std::string sqlstate)
        : std::runtime_error(message), m_sqlstate(std::move(sqlstate)) {}
    [[nodiscard]] const std::string& sqlstate() const noexcept { return m_sqlstate; }

private:
    std::string m_sqlstate;
};

// Owns one PGresult.
class pg_result {
public:
    explicit pg_result(PGresult* res) noexcept : m_res(res) {}
    pg_result(const pg_result&) = delete;
    pg_result& operator=(const pg_result&) = delete;
    pg_result(pg_result&& other) noexcept : m_res(other.m_res) { other.m_res = nullptr; }
    pg_result& operator=(pg_result&& other) noexcept;
    ~pg_result() noexcept;

    [[nodiscard]] int rows() const noexcept { return PQntuples(m_res); }
    [[nodiscard]] bool is_null(int row, int col) const noexcept { return PQgetisnull(m_res, row, col) != 0; }
    [[nodiscard]] std::string text(int row, int col) const { return std::string(PQgetvalue(m_res, row, col)); }
    [[nodiscard]] std::int64_t int64(int row, int col) const;
    [[nodiscard]] double float8(int row, int col) const;
    // "t" from a boolean column.
    [[nodiscard]] bool boolean(int row, int col) const {
        return !is_null(row, col) && PQgetvalue(m_res, row, col)[0] == 't';
    }
    [[nodiscard]] long affected() const;

private:
    PGresult* m_res;
};

// One connection to the server. Not thread-safe: one per thread.
class pg_conn {
public:
    explicit pg_conn(const std::string& conninfo);
    pg_conn(const pg_conn&) = delete;
    pg_conn& operator=(const pg_conn&) = delete;
    pg_conn(pg_conn&&) = delete;
    pg_conn& operator=(pg_conn&&) = delete;
    ~pg_conn() noexcept;

    // Runs one or more statements without parameters.
    pg_result exec(const std::string& sql);
    void prepare(const std::string& name, const std::string& sql);
    // Runs a prepared statement; nullptr parameters are SQL NULL.
    pg_result run(const std::string& name, std::initializer_list<const char*> params);
    pg_result run(const std::string& name, const std::vector<const char*>& params);
    // Runs a statement with parameters without preparing it first.
    pg_result query(const std::string& sql, const std::vector<const char*>& params);

private:
    pg_result check(PGresult* res);
    PGconn* m_conn;
};

} // namespace bench
