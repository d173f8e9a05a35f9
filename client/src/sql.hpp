// sql.hpp -- the SQL of the library's calls, and the rows they return.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <libpq-fe.h>

namespace dlock::internal {

/// SQL of the library's calls, with placeholders $1..$9. On the library's own
/// connections they run through call() (session.hpp): prepared by name on a
/// direct connection, one self-contained simple query (the values quoted)
/// behind a transaction pooler; in a caller's transaction as unnamed
/// statements (exec_params), which work through PgBouncer in transaction
/// pooling. Durations are sent as milliseconds (milliseconds_text, timing.hpp).
namespace sql {
extern const char* const try_acquire;
extern const char* const acquire;
extern const char* const try_acquire_policies;
extern const char* const acquire_policies;
extern const char* const renew;
extern const char* const release;
extern const char* const downgrade;
extern const char* const force_release;
// lock kinds
extern const char* const try_acquire_shared;
extern const char* const acquire_shared;
extern const char* const try_acquire_permit;
extern const char* const acquire_permit;
extern const char* const try_acquire_all;
extern const char* const acquire_all;
} // namespace sql

/// The rows of one call on a session (libpq's PGresult, cleared with it), read
/// as the call sites read libpqxx results: r[row][column].as<T>().
class call_result {
public:
    class field {
    public:
        field(const PGresult* res, int row, int column) noexcept : m_res{res}, m_row{row}, m_column{column} {}
        [[nodiscard]] bool is_null() const noexcept { return PQgetisnull(m_res, m_row, m_column) != 0; }
        /// The value as std::string, std::int64_t, double or bool; throws
        /// pqxx::conversion_error for NULL or a text that is not one.
        template <typename T> [[nodiscard]] T as() const;

    private:
        [[nodiscard]] const char* text() const;
        const PGresult* m_res;
        int m_row;
        int m_column;
    };
    class row {
    public:
        row(const PGresult* res, int index) noexcept : m_res{res}, m_index{index} {}
        [[nodiscard]] field operator[](int column) const noexcept { return {m_res, m_index, column}; }

    private:
        const PGresult* m_res;
        int m_index;
    };

    call_result() noexcept = default;
    explicit call_result(PGresult* res) noexcept : m_res{res} {}
    call_result(call_result&& other) noexcept : m_res{std::exchange(other.m_res, nullptr)} {}
    call_result& operator=(call_result&& other) noexcept {
        std::swap(m_res, other.m_res);
        return *this;
    }
    call_result(const call_result&) = delete;
    call_result& operator=(const call_result&) = delete;
    ~call_result() { PQclear(m_res); }

    [[nodiscard]] bool has_result() const noexcept { return m_res != nullptr; }
    [[nodiscard]] PGresult* release() noexcept { return std::exchange(m_res, nullptr); }
    [[nodiscard]] int size() const noexcept { return m_res == nullptr ? 0 : PQntuples(m_res); }
    [[nodiscard]] bool empty() const noexcept { return size() == 0; }
    [[nodiscard]] row operator[](int index) const noexcept { return {m_res, index}; }

private:
    PGresult* m_res = nullptr;
};

template <> std::string call_result::field::as<std::string>() const;
template <> std::int64_t call_result::field::as<std::int64_t>() const;
template <> double call_result::field::as<double>() const;
template <> bool call_result::field::as<bool>() const;

} // namespace dlock::internal
