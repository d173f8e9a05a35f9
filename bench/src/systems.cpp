// The lock systems the benchmark compares; see systems.hpp.
#include "systems.hpp"

#include "redis.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace bench {

#ifdef DLOCK_BENCH_HAVE_CLIENT
std::unique_ptr<lock_session> make_client_session(const system_options& opts);
#endif

namespace {

int backend_pid(pg_conn& c) {
    return static_cast<int>(c.exec("SELECT pg_backend_pid()").int64(0, 0));
}

std::string interval_text(std::chrono::milliseconds ms) {
    return std::to_string(ms.count()) + " milliseconds";
}

// ---------------------------------------------------------------------------
// pg_dlock through its SQL functions: the C extension with durable grants
// (dlock-sql) or fenced ones (dlock-fenced), or the SQL edition in its own
// database (dlock-sql-edition) -- the same calls on each.
// ---------------------------------------------------------------------------
class dlock_sql_session final : public lock_session {
public:
    enum class durability { session_default, fenced };

    dlock_sql_session(const system_options& opts, const std::string& conninfo, durability d)
        : m_conn(conninfo), m_ttl(interval_text(opts.ttl)), m_wait(interval_text(opts.wait)) {
        // For the whole session, as an application would set it for its role:
        // every grant and renewal of this system is fenced.
        if (d == durability::fenced) m_conn.exec("SET dlock.durability = fenced");
        m_conn.prepare("acq", "SELECT owner_token, fencing_token FROM dlock.try_acquire($1, $2::interval)");
        m_conn.prepare("acqw", "SELECT owner_token, fencing_token FROM dlock.acquire($1, $2::interval, $3::interval)");
        m_conn.prepare("rel", "SELECT dlock.release($1, $2::uuid)");
        m_conn.prepare("ren", "SELECT dlock.renew($1, $2::uuid, $3::interval)");
    }

    lease try_acquire(const std::string& name) override {
        return to_lease(name, m_conn.run("acq", {name.c_str(), m_ttl.c_str()}));
    }

    lease acquire(const std::string& name) override {
        try {
            return to_lease(name, m_conn.run("acqw", {name.c_str(), m_ttl.c_str(), m_wait.c_str()}));
        } catch (const pg_error& e) {
            if (e.sqlstate() == "55P03") return lease{name, "", 0, false};
            throw;
        }
    }

    void release(const lease& l) override {
        if (!m_conn.run("rel", {l.name.c_str(), l.owner.c_str()}).boolean(0, 0))
            throw std::runtime_error("dlock.release returned false for \"" + l.name + "\"");
    }

    bool renew(const lease& l) override {
        return !m_conn.run("ren", {l.name.c_str(), l.owner.c_str(), m_ttl.c_str()}).is_null(0, 0);
    }

    pg_conn* pg() override { return &m_conn; }
    int server_pid() override {
        if (m_pid == 0) m_pid = backend_pid(m_conn);
        return m_pid;
    }

private:
    static lease to_lease(const std::string& name, const pg_result& r) {
        if (r.rows() != 1 || r.is_null(0, 0)) return lease{name, "", 0, false};
        return lease{name, r.text(0, 0), r.int64(0, 1), true};
    }

    pg_conn m_conn;
    int m_pid = 0;
    std::string m_ttl;
    std::string m_wait;
};

// ---------------------------------------------------------------------------
// The hand-written lease on the design's table: INSERT ... ON CONFLICT DO
// UPDATE ... WHERE lease_until < now() to acquire, DELETE by owner to release.
// ---------------------------------------------------------------------------
class sql_lease_session final : public lock_session {
public:
    explicit sql_lease_session(const system_options& opts) : m_conn(opts.conninfo), m_ttl(interval_text(opts.ttl)) {
        m_rng.seed(opts.seed);
        m_conn.prepare("acq", "INSERT INTO bench.distributed_lock AS l "
                              "(lock_name, owner_token, fencing_seq, lease_until, updated_at) "
                              "VALUES ($1, $2, 1, now() + $3::interval, now()) "
                              "ON CONFLICT (lock_name) DO UPDATE "
                              "SET owner_token = excluded.owner_token, fencing_seq = l.fencing_seq + 1, "
                              "lease_until = excluded.lease_until, updated_at = excluded.updated_at "
                              "WHERE l.lease_until < now() "
                              "RETURNING fencing_seq");
        m_conn.prepare("rel", "DELETE FROM bench.distributed_lock WHERE lock_name = $1 AND owner_token = $2");
        m_conn.prepare("ren",
                       "UPDATE bench.distributed_lock SET lease_until = now() + $3::interval, updated_at = now() "
                       "WHERE lock_name = $1 AND owner_token = $2 AND lease_until >= now()");
    }

    lease try_acquire(const std::string& name) override {
        std::string owner = random_uuid(m_rng);
        pg_result r = m_conn.run("acq", {name.c_str(), owner.c_str(), m_ttl.c_str()});
        if (r.rows() != 1) return lease{name, "", 0, false};
        return lease{name, owner, r.int64(0, 0), true};
    }

    void release(const lease& l) override {
        if (m_conn.run("rel", {l.name.c_str(), l.owner.c_str()}).affected() != 1)
            throw std::runtime_error("hand-written release deleted no row for \"" + l.name + "\"");
    }

    bool renew(const lease& l) override {
        return m_conn.run("ren", {l.name.c_str(), l.owner.c_str(), m_ttl.c_str()}).affected() == 1;
    }

    pg_conn* pg() override { return &m_conn; }
    int server_pid() override {
        if (m_pid == 0) m_pid = backend_pid(m_conn);
        return m_pid;
    }

private:
    pg_conn m_conn;
    int m_pid = 0;
    std::string m_ttl;
};

// ---------------------------------------------------------------------------
// Session-level advisory locks: pg_try_advisory_lock / pg_advisory_lock /
// pg_advisory_unlock. No lease, no fencing.
// ---------------------------------------------------------------------------
class advisory_session final : public lock_session {
public:
    explicit advisory_session(const system_options& opts) : m_conn(opts.conninfo) {
        m_conn.prepare("try", "SELECT pg_try_advisory_lock($1::bigint)");
        m_conn.prepare("lock", "SELECT pg_advisory_lock($1::bigint)");
        m_conn.prepare("unlock", "SELECT pg_advisory_unlock($1::bigint)");
    }

    lease try_acquire(const std::string& name) override {
        std::string key = std::to_string(advisory_key(name));
        bool ok = m_conn.run("try", {key.c_str()}).boolean(0, 0);
        return lease{name, key, 0, ok};
    }

    lease acquire(const std::string& name) override {
        std::string key = std::to_string(advisory_key(name));
        m_conn.run("lock", {key.c_str()});
        return lease{name, key, 0, true};
    }

    void release(const lease& l) override {
        if (!m_conn.run("unlock", {l.owner.c_str()}).boolean(0, 0))
            throw std::runtime_error("pg_advisory_unlock returned false");
    }

    bool renew(const lease&) override { throw std::logic_error("advisory locks have no lease to renew"); }
    [[nodiscard]] bool can_renew() const override { return false; }
    pg_conn* pg() override { return &m_conn; }
    int server_pid() override {
        if (m_pid == 0) m_pid = backend_pid(m_conn);
        return m_pid;
    }

private:
    pg_conn m_conn;
    int m_pid = 0;
};

// ---------------------------------------------------------------------------
// The floor of a durable handoff: a session-level advisory lock whose every
// grant is followed by a durable one-row UPDATE, in the same statement, before
// the holder goes on -- what a lock needs at least when each grant must reach
// disk before its holder acts: one WAL flush per handoff, in series. With an
// asynchronous UPDATE instead, the floor of a fenced handoff: a write and a
// commit per grant, no flush to wait for.
// ---------------------------------------------------------------------------
class handoff_floor_session final : public lock_session {
public:
    handoff_floor_session(const system_options& opts, bool durable)
        : m_conn(opts.conninfo), m_slot(std::to_string(opts.slot)) {
        if (!durable) m_conn.exec("SET synchronous_commit = off");
        m_conn.prepare("lock", "WITH granted AS (SELECT pg_advisory_lock($1::bigint)) "
                               "UPDATE bench.floor SET n = n + 1 FROM granted WHERE id = $2::int");
        m_conn.prepare("try", "WITH granted AS (SELECT pg_try_advisory_lock($1::bigint) AS ok) "
                              "UPDATE bench.floor SET n = n + 1 FROM granted WHERE granted.ok AND id = $2::int");
        m_conn.prepare("unlock", "SELECT pg_advisory_unlock($1::bigint)");
    }

    lease try_acquire(const std::string& name) override {
        std::string key = std::to_string(advisory_key(name));
        bool ok = m_conn.run("try", {key.c_str(), m_slot.c_str()}).affected() == 1;
        return lease{name, key, 0, ok};
    }

    lease acquire(const std::string& name) override {
        std::string key = std::to_string(advisory_key(name));
        m_conn.run("lock", {key.c_str(), m_slot.c_str()});
        return lease{name, key, 0, true};
    }

    void release(const lease& l) override {
        if (!m_conn.run("unlock", {l.owner.c_str()}).boolean(0, 0))
            throw std::runtime_error("pg_advisory_unlock returned false");
    }

    bool renew(const lease&) override { throw std::logic_error("advisory locks have no lease to renew"); }
    [[nodiscard]] bool can_renew() const override { return false; }
    pg_conn* pg() override { return &m_conn; }
    int server_pid() override {
        if (m_pid == 0) m_pid = backend_pid(m_conn);
        return m_pid;
    }

private:
    pg_conn m_conn;
    int m_pid = 0;
    std::string m_slot;
};

// ---------------------------------------------------------------------------
// Transaction-level advisory locks. try_acquire is one autocommit statement
// (lock and unlock in one round trip: the lock manager as the in-database
// limit); the blocking acquire opens a transaction that release commits.
// ---------------------------------------------------------------------------
class advisory_xact_session final : public lock_session {
public:
    explicit advisory_xact_session(const system_options& opts) : m_conn(opts.conninfo) {
        m_conn.prepare("lock", "SELECT pg_advisory_xact_lock($1::bigint)");
    }

    lease try_acquire(const std::string& name) override {
        std::string key = std::to_string(advisory_key(name));
        m_conn.run("lock", {key.c_str()});
        return lease{name, key, 0, true};
    }

    lease acquire(const std::string& name) override {
        std::string key = std::to_string(advisory_key(name));
        m_conn.exec("BEGIN");
        m_conn.run("lock", {key.c_str()});
        m_in_txn = true;
        return lease{name, key, 0, true};
    }

    void release(const lease&) override {
        if (m_in_txn) {
            m_in_txn = false;
            m_conn.exec("COMMIT");
        }
    }

    bool renew(const lease&) override { throw std::logic_error("advisory locks have no lease to renew"); }
    [[nodiscard]] bool can_renew() const override { return false; }
    [[nodiscard]] bool release_costs_round_trip() const override { return false; }
    pg_conn* pg() override { return &m_conn; }
    int server_pid() override {
        if (m_pid == 0) m_pid = backend_pid(m_conn);
        return m_pid;
    }

private:
    pg_conn m_conn;
    int m_pid = 0;
    bool m_in_txn = false;
};

// ---------------------------------------------------------------------------
// Redis: SET key token NX PX ttl, compare-and-delete / compare-and-pexpire in
// Lua. Not durable, no fencing.
// ---------------------------------------------------------------------------
const char* const release_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const char* const renew_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
    "else return 0 end";

class redis_session final : public lock_session {
public:
    explicit redis_session(const system_options& opts)
        : m_conn(opts.redis_host, opts.redis_port), m_ttl(std::to_string(opts.ttl.count())) {
        m_rng.seed(opts.seed);
        m_release_sha = load(release_script);
        m_renew_sha = load(renew_script);
    }

    lease try_acquire(const std::string& name) override {
        std::string owner = random_uuid(m_rng);
        redis_reply r = m_conn.command({"SET", name, owner, "NX", "PX", m_ttl});
        bool ok = r->type == REDIS_REPLY_STATUS;
        return lease{name, owner, 0, ok};
    }

    void release(const lease& l) override {
        redis_reply r = m_conn.command({"EVALSHA", m_release_sha, "1", l.name, l.owner});
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            throw std::runtime_error("redis release deleted nothing for \"" + l.name + "\"");
    }

    bool renew(const lease& l) override {
        redis_reply r = m_conn.command({"EVALSHA", m_renew_sha, "1", l.name, l.owner, m_ttl});
        return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    }

    int server_pid() override {
        if (m_pid == 0) {
            redis_reply r = m_conn.command({"INFO", "server"});
            std::string info(r->str, r->len);
            auto at = info.find("process_id:");
            if (at != std::string::npos) m_pid = std::atoi(info.c_str() + at + 11);
        }
        return m_pid;
    }

private:
    std::string load(const char* script) {
        redis_reply r = m_conn.command({"SCRIPT", "LOAD", script});
        return std::string(r->str, r->len);
    }

    redis_conn m_conn;
    int m_pid = 0;
    std::string m_ttl;
    std::string m_release_sha;
    std::string m_renew_sha;
};

// ---------------------------------------------------------------------------
// Floors: the acquire is the whole operation, release costs nothing -- except
// update_pair, whose acquire is a durable one-row UPDATE and whose release an
// asynchronous UPDATE of the same row right after it: the same sequence of
// commits as a pg_dlock acquire + release, so its release latency is what the
// server and machine cost for an async write that follows a WAL flush; and
// update_async_pair, both UPDATEs asynchronous: the commits of a fenced
// acquire + release; and update_async_returning_pair, the same two UPDATEs
// with the first returning the counter it wrote, which the driver reads: the
// writes and commits of a fenced acquire + release and the one reply neither
// can do without, the token a grant sends back.
// ---------------------------------------------------------------------------
class floor_session final : public lock_session {
public:
    enum class kind { select1, update, update_async, update_pair, update_async_pair, update_async_returning_pair };

    floor_session(const system_options& opts, kind k) : m_conn(opts.conninfo), m_slot(std::to_string(opts.slot)), m_kind(k) {
        if (k == kind::select1) {
            m_conn.prepare("op", "SELECT 1");
            m_has_param = false;
        } else if (k == kind::update_pair) {
            // Asynchronous unless the statement raises it for its own transaction.
            m_conn.exec("SET synchronous_commit = off");
            m_conn.prepare("op", "WITH durable AS (SELECT pg_catalog.set_config('synchronous_commit', 'on', true)) "
                                 "UPDATE bench.floor SET n = n + 1 FROM durable WHERE id = $1::int");
            m_conn.prepare("async", "UPDATE bench.floor SET n = n + 1 WHERE id = $1::int");
        } else {
            if (k != kind::update) m_conn.exec("SET synchronous_commit = off");
            m_conn.prepare("op", std::string("UPDATE bench.floor SET n = n + 1 WHERE id = $1::int") +
                                     (k == kind::update_async_returning_pair ? " RETURNING n" : ""));
            if (is_pair()) m_conn.prepare("async", "UPDATE bench.floor SET n = n + 1 WHERE id = $1::int");
        }
    }

    lease try_acquire(const std::string& name) override {
        if (m_kind == kind::update_async_returning_pair) {
            pg_result r = m_conn.run("op", {m_slot.c_str()});
            if (r.rows() != 1) throw std::runtime_error("the floor's UPDATE … RETURNING returned no row");
            return lease{name, "", r.int64(0, 0), true};
        }
        op();
        return lease{name, "", 0, true};
    }

    void release(const lease&) override {
        if (is_pair()) m_conn.run("async", {m_slot.c_str()});
    }

    bool renew(const lease&) override {
        op();
        return true;
    }

    [[nodiscard]] bool release_costs_round_trip() const override { return is_pair(); }
    pg_conn* pg() override { return &m_conn; }
    int server_pid() override {
        if (m_pid == 0) m_pid = backend_pid(m_conn);
        return m_pid;
    }

private:
    [[nodiscard]] bool is_pair() const {
        return m_kind == kind::update_pair || m_kind == kind::update_async_pair ||
               m_kind == kind::update_async_returning_pair;
    }
    void op() {
        if (m_has_param)
            m_conn.run("op", {m_slot.c_str()});
        else
            m_conn.run("op", {});
    }

    pg_conn m_conn;
    int m_pid = 0;
    std::string m_slot;
    kind m_kind;
    bool m_has_param = true;
};

} // namespace

lease lock_session::acquire(const std::string& name) {
    std::chrono::microseconds backoff{100};
    const std::chrono::microseconds cap{5000};
    for (;;) {
        lease l = try_acquire(name);
        if (l.held) return l;
        std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count());
        std::this_thread::sleep_for(std::chrono::microseconds(jitter(m_rng)));
        backoff = std::min(cap, backoff * 2);
    }
}

void prepare_schema(pg_conn& conn) {
    conn.exec("SET client_min_messages = warning");
    conn.exec("CREATE SCHEMA IF NOT EXISTS bench");
    // The table of the design document, verbatim.
    conn.exec("CREATE TABLE IF NOT EXISTS bench.distributed_lock ("
              " lock_name varchar(200) PRIMARY KEY,"
              " owner_token varchar(100) NOT NULL,"
              " fencing_seq bigint NOT NULL,"
              " lease_until timestamp NOT NULL,"
              " updated_at timestamp NOT NULL)");
    conn.exec("CREATE TABLE IF NOT EXISTS bench.floor (id int PRIMARY KEY, n bigint NOT NULL)");
    conn.exec("INSERT INTO bench.floor SELECT g, 0 FROM generate_series(0, 1023) g ON CONFLICT DO NOTHING");
    conn.exec("CREATE TABLE IF NOT EXISTS bench.account ("
              " id int PRIMARY KEY, balance bigint NOT NULL, fencing_token bigint NOT NULL)");
    conn.exec("INSERT INTO bench.account SELECT g, 0, 0 FROM generate_series(0, 1023) g ON CONFLICT DO NOTHING");
    conn.exec("RESET client_min_messages");
}

const std::vector<std::string>& known_systems() {
    static const std::vector<std::string> systems = {
        "dlock-sql",
        "dlock-fenced",
        "dlock-cpp",
        "dlock-sql-edition",
        "sql-lease",
        "advisory",
        "advisory-xact",
        "redis",
        "floor-select1",
        "floor-update",
        "floor-update-async",
        "floor-update-pair",
        "floor-update-async-pair",
        "floor-update-async-returning-pair",
        "floor-handoff-durable",
        "floor-handoff-async",
    };
    return systems;
}

bool system_uses_pg_dlock(const std::string& system) {
    return system.rfind("dlock-", 0) == 0 && !system_uses_sql_edition(system);
}

bool system_uses_sql_edition(const std::string& system) {
    return system == "dlock-sql-edition";
}

bool system_is_floor(const std::string& system) {
    return system.rfind("floor-", 0) == 0;
}

bool system_available(const std::string& system) {
#ifdef DLOCK_BENCH_HAVE_CLIENT
    (void)system;
    return true;
#else
    return system != "dlock-cpp";
#endif
}

std::unique_ptr<lock_session> make_session(const std::string& system, const system_options& opts) {
    using durability = dlock_sql_session::durability;
    if (system == "dlock-sql")
        return std::make_unique<dlock_sql_session>(opts, opts.conninfo, durability::session_default);
    if (system == "dlock-fenced") return std::make_unique<dlock_sql_session>(opts, opts.conninfo, durability::fenced);
    if (system == "dlock-sql-edition") {
        if (opts.sql_edition_conninfo.empty())
            throw std::invalid_argument("dlock-sql-edition: no database with the SQL edition (--pg-sql-edition)");
        return std::make_unique<dlock_sql_session>(opts, opts.sql_edition_conninfo, durability::session_default);
    }
    if (system == "dlock-cpp") {
#ifdef DLOCK_BENCH_HAVE_CLIENT
        return make_client_session(opts);
#else
        throw std::invalid_argument("dlock-cpp: the driver was built without the C++ client library");
#endif
    }
    if (system == "sql-lease") return std::make_unique<sql_lease_session>(opts);
    if (system == "advisory") return std::make_unique<advisory_session>(opts);
    if (system == "advisory-xact") return std::make_unique<advisory_xact_session>(opts);
    if (system == "redis") return std::make_unique<redis_session>(opts);
    if (system == "floor-select1") return std::make_unique<floor_session>(opts, floor_session::kind::select1);
    if (system == "floor-update") return std::make_unique<floor_session>(opts, floor_session::kind::update);
    if (system == "floor-update-async") return std::make_unique<floor_session>(opts, floor_session::kind::update_async);
    if (system == "floor-handoff-durable") return std::make_unique<handoff_floor_session>(opts, true);
    if (system == "floor-handoff-async") return std::make_unique<handoff_floor_session>(opts, false);
    if (system == "floor-update-pair") return std::make_unique<floor_session>(opts, floor_session::kind::update_pair);
    if (system == "floor-update-async-pair")
        return std::make_unique<floor_session>(opts, floor_session::kind::update_async_pair);
    if (system == "floor-update-async-returning-pair")
        return std::make_unique<floor_session>(opts, floor_session::kind::update_async_returning_pair);
    throw std::invalid_argument("unknown system \"" + system + "\"");
}

std::string random_uuid(std::mt19937_64& rng) {
    std::uint64_t hi = rng();
    std::uint64_t lo = rng();
    hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL; // version 4
    lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL; // variant 1
    char buf[37];
    std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                  static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                  static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xffffffffffffULL));
    return buf;
}

std::int64_t advisory_key(const std::string& name) noexcept {
    std::uint64_t h = 1469598103934665603ULL; // FNV-1a
    for (unsigned char c : name) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return static_cast<std::int64_t>(h);
}

double process_cpu_seconds(int pid) {
    if (pid <= 0) return NAN;
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) return NAN;
    // Fields after the command name, which is in parentheses and may hold spaces.
    auto close = line.rfind(')');
    if (close == std::string::npos) return NAN;
    const char* p = line.c_str() + close + 2; // field 3, the state
    for (int field = 3; field < 14; ++field) {
        p = std::strchr(p, ' ');
        if (p == nullptr) return NAN;
        ++p;
    }
    char* end = nullptr;
    double utime = std::strtod(p, &end);
    double stime = std::strtod(end, nullptr);
    return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double own_cpu_seconds() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

} // namespace bench
