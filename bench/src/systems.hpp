// The lock systems the benchmark compares. Each session owns its own
// connection(s) and is used by one thread.
#pragma once

#include "pg.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace bench {

// What a successful acquire hands back; held is false when the lock was busy.
struct lease {
    std::string name;
    std::string owner;
    std::int64_t fence = 0;
    bool held = false;
};

struct system_options {
    std::string conninfo;
    // The database with the SQL edition (pg_dlock_sql): the two editions
    // cannot share one database. Empty: the dlock-sql-edition system is skipped.
    std::string sql_edition_conninfo;
    std::string redis_host = "127.0.0.1";
    int redis_port = 55501;
    std::chrono::milliseconds ttl{30000};
    std::chrono::milliseconds wait{10000};
    int slot = 0; // client index: selects the floor row of this client
    std::uint64_t seed = 1;
};

class lock_session {
public:
    lock_session() = default;
    lock_session(const lock_session&) = delete;
    lock_session& operator=(const lock_session&) = delete;
    lock_session(lock_session&&) = delete;
    lock_session& operator=(lock_session&&) = delete;
    virtual ~lock_session() noexcept = default;

    // Non-blocking acquire: held == false when another owner has the lock.
    [[nodiscard]] virtual lease try_acquire(const std::string& name) = 0;
    // Blocking acquire. The default retries try_acquire with exponential
    // backoff and jitter (100 us doubling to 5 ms), what a team writes for a
    // store without server-side waiting.
    [[nodiscard]] virtual lease acquire(const std::string& name);
    // Ends the lease; throws when the lease was not held any more.
    virtual void release(const lease& l) = 0;
    // Extends the lease; false when it was not held any more.
    [[nodiscard]] virtual bool renew(const lease& l) = 0;

    // False for systems whose acquire already ended the lock (the floors and a
    // one-statement pg_advisory_xact_lock): no release latency to report.
    [[nodiscard]] virtual bool release_costs_round_trip() const { return true; }
    [[nodiscard]] virtual bool can_renew() const { return true; }
    // The PostgreSQL connection of the session (for business writes in the business-write case),
    // or nullptr when the system is not PostgreSQL.
    [[nodiscard]] virtual pg_conn* pg() { return nullptr; }
    // The server process serving this session (a PostgreSQL backend or
    // redis-server), so the driver can read its CPU time; 0 if unknown.
    [[nodiscard]] virtual int server_pid() { return 0; }

protected:
    std::mt19937_64 m_rng{1};
};

// Creates the tables the baselines use (schema "bench"); idempotent.
void prepare_schema(pg_conn& conn);

// All system names the driver knows, in report order.
[[nodiscard]] const std::vector<std::string>& known_systems();
// The C extension's systems (dlock-sql, dlock-fenced, dlock-cpp).
[[nodiscard]] bool system_uses_pg_dlock(const std::string& system);
// The SQL edition's system, which runs in its own database.
[[nodiscard]] bool system_uses_sql_edition(const std::string& system);
[[nodiscard]] bool system_is_floor(const std::string& system);
[[nodiscard]] bool system_available(const std::string& system);

// Opens a session of the named system; throws std::invalid_argument for an
// unknown name.
[[nodiscard]] std::unique_ptr<lock_session> make_session(const std::string& system, const system_options& opts);

[[nodiscard]] std::string random_uuid(std::mt19937_64& rng);
[[nodiscard]] std::int64_t advisory_key(const std::string& name) noexcept;

// CPU time (user + system) a local process used so far, in seconds; NaN when
// it cannot be read (another machine, no /proc).
[[nodiscard]] double process_cpu_seconds(int pid);
// CPU time of this driver process so far, in seconds.
[[nodiscard]] double own_cpu_seconds();

} // namespace bench
