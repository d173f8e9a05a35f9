// internal.hpp -- shared state of clients, leases and the keep-alive thread.
//
// Ownership: a client object and every lease it granted hold a shared_ptr to
// one client_core. The core owns the pool of caller connections (guarded by
// its mutex) and the keep_alive, whose two threads share its state (and the
// renewer's own connection) with it, so either may outlive the core. The
// keep-alive holds the lease_states registered with it; a lease object marks
// itself released and removes its state (waiting, bounded, for a renewal in
// flight) before it releases, so no renewal is sent after a release, and one
// still in flight is refused by the server.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <libpq-fe.h>
#include <pqxx/pqxx>

#include "dlock/errors.hpp"
#include "dlock/metrics.hpp"
#include "dlock/options.hpp"
#include "dlock/transaction.hpp"

namespace dlock::internal {

/// SQL of the library's calls, with placeholders $1..$9. On the library's own
/// connections they run through call(): prepared by name on a direct
/// connection, one self-contained simple query (the values quoted) behind a
/// transaction pooler; in a caller's transaction as unnamed statements
/// (exec_params), which work through PgBouncer in transaction pooling.
namespace sql {
extern const char* const try_acquire;
extern const char* const acquire;
extern const char* const try_acquire_policies;
extern const char* const acquire_policies;
extern const char* const renew;
extern const char* const release;
extern const char* const force_release;
// lock kinds
extern const char* const try_acquire_shared;
extern const char* const acquire_shared;
extern const char* const try_acquire_permit;
extern const char* const acquire_permit;
extern const char* const try_acquire_all;
extern const char* const acquire_all;
} // namespace sql

/// Which kind of lease an acquire asks for (docs/lock-kinds.md, "Lock kinds").
struct lease_kind {
    enum class mode { exclusive, shared, permit } what = mode::exclusive;
    int permits = 0; ///< the semaphore's size, for mode::permit
};

/// True when the lease options ask for any lease policy (then the acquire
/// statement names them; without, it is the statement of 1.1).
[[nodiscard]] inline bool has_policies(const lease_options& o) noexcept {
    return o.session_bound || o.max_hold.count() != 0 || o.min_hold.count() != 0 || o.lock_delay.count() != 0;
}

/// True for a notice saying a commit canceled its wait for synchronous
/// replication: the COMMIT then reports success although it is only local.
[[nodiscard]] bool is_commit_uncertain_notice(std::string_view message) noexcept;

/// Watches a caller's connection's notices for is_commit_uncertain_notice,
/// passing each on to the caller's own handlers.
class notice_watch final : public pqxx::errorhandler {
public:
    explicit notice_watch(pqxx::connection_base& conn) : pqxx::errorhandler{conn} {}
    bool operator()(const char message[]) noexcept override;
    [[nodiscard]] bool uncertain() const noexcept { return m_uncertain; }

private:
    std::atomic<bool> m_uncertain{false};
};

/// A call's bound as the statement_timeout that enforces it, in ms: at least 1,
/// as 0 would turn the timeout off.
[[nodiscard]] inline long long timeout_ms(std::chrono::milliseconds timeout) noexcept {
    return timeout.count() < 1 ? 1 : static_cast<long long>(timeout.count());
}

/// The connection string with the library's network bounds added (TCP
/// keepalives, tcp_user_timeout, connect_timeout), unless it sets them itself.
[[nodiscard]] std::string bounded_connection_string(const std::string& connection_string,
                                                    std::chrono::milliseconds network_timeout);

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

/// One of the library's own connections, on libpq itself: a call is then one
/// message out and one result back, where a libpqxx transaction object adds
/// a poll of the socket before and after each (docs/client.md, "C++ client").
///
/// How it sends calls follows client_options::pooling. Without a transaction
/// pooler it keeps state: the library's statements are prepared by name, and
/// statement_timeout (the call timeout) and client_connection_check_interval
/// are session settings, made on the first call. With pooling::detect that
/// call finds out, in the same statement that makes the settings: they are
/// made only when pg_backend_pid() is the process id libpq got at connect,
/// which a pooler in between does not pass on (PgBouncer makes up its own), so
/// behind a pooler nothing is left in a server session that another client
/// may get next. A session whose connection broke stays broken: its calls
/// throw pqxx::broken_connection, and the pool drops it.
class session {
public:
    /// Connects with bounded_connection_string; throws connection_error.
    /// `call_timeout` is the statement_timeout the session keeps (when it keeps
    /// state); calls with another bound set theirs local to their transaction.
    session(const std::string& connection_string, std::chrono::milliseconds network_timeout, dlock::pooling pooling,
            std::chrono::milliseconds call_timeout);
    session(const session&) = delete;
    session& operator=(const session&) = delete;
    session(session&&) = delete;
    session& operator=(session&&) = delete;
    ~session() noexcept;

    /// Runs `statement` (one of sql::) with `values` (text) as a transaction of
    /// its own, bounded by statement_timeout `timeout`; see call().
    [[nodiscard]] call_result run(std::chrono::milliseconds timeout, const char* statement,
                                  const std::vector<std::string>& values);
    /// Ends a transaction a failed call left open, so the session can be used
    /// again; closes the connection when even that fails.
    void roll_back() noexcept;
    [[nodiscard]] bool is_open() const noexcept;
    [[nodiscard]] int backend_pid() const noexcept;
    /// Whether this session sends its calls as behind a transaction pooler:
    /// pooling::transaction, or what pooling::detect found. Under
    /// pooling::detect a session that has not made a call yet finds out now,
    /// in the round trip its first call would make anyway (how_to_send);
    /// throws as run() does when that fails.
    [[nodiscard]] bool transaction_pooled();
    /// Whether a notice since the last call said its commit is only local
    /// (is_commit_uncertain_notice).
    [[nodiscard]] bool commit_uncertain() const noexcept { return m_commit_uncertain; }

private:
    /// How run() sends a call on this session.
    enum class send {
        self_contained, ///< a simple query that sets everything local to its transaction
        prepared,       ///< the prepared statement: the session's settings are the call's
        prepared_with_local_timeout, ///< a pipeline: set statement_timeout locally, then the prepared statement
    };
    /// How to send a call bounded by `timeout`. Makes the session settings
    /// (settle) when it has none yet.
    [[nodiscard]] send how_to_send(std::chrono::milliseconds timeout);
    /// Makes the session settings (statement_timeout the session's call
    /// timeout) in a round trip of its own unless made, or known to be left
    /// out (pooling::transaction); with pooling::detect finding out whether it
    /// is a pooler's (then m_pooling becomes pooling::transaction: calls are
    /// self-contained from now on).
    void settle();
    /// The name `statement` is prepared under on this connection; prepares it on
    /// first use (a round trip of its own).
    [[nodiscard]] const std::string& prepared(const char* statement);
    [[nodiscard]] call_result exec_prepared(const char* statement, const std::vector<std::string>& values);
    [[nodiscard]] call_result exec_pipeline(long long timeout_ms, const char* statement,
                                            const std::vector<std::string>& values);
    [[nodiscard]] call_result exec_simple(const std::string& text);
    /// `res` when it succeeded; else clears it and throws as libpqxx would
    /// (pqxx::sql_error with the SQLSTATE, or pqxx::broken_connection).
    call_result checked(PGresult* res, const char* statement);
    [[noreturn]] void throw_broken() const;
    static void on_notice(void* self, const PGresult* notice) noexcept;

    PGconn* m_conn = nullptr;
    dlock::pooling m_pooling;
    bool m_settled = false;            // the session settings are made
    bool m_commit_uncertain = false;
    long long m_statement_timeout;     // the statement_timeout it keeps (the call timeout), ms
    std::unordered_map<const char*, std::string> m_prepared;
};

/// `statement` with its placeholders $1, $2, ... replaced by `literals`, each
/// already quoted by the connection (PQescapeLiteral).
[[nodiscard]] std::string with_literals(std::string_view statement, const std::vector<std::string>& literals);

/// The text of one self-contained call: `statement` with its values as
/// literals (with_literals), after a SELECT that sets statement_timeout and
/// client_connection_check_interval for the transaction (set_config with
/// is_local, as SET LOCAL) -- one simple query. See call().
[[nodiscard]] std::string call_text(std::chrono::milliseconds timeout, std::string_view statement,
                                    const std::vector<std::string>& literals);

/// A call's value as the text it is sent as.
[[nodiscard]] inline std::string value_text(const std::string& v) { return v; }
[[nodiscard]] inline std::string value_text(long long v) { return std::to_string(v); }
[[nodiscard]] inline std::string value_text(int v) { return std::to_string(v); }
[[nodiscard]] inline std::string value_text(bool v) { return v ? "true" : "false"; }

/// Runs one statement of the library as a transaction of its own on s, bounded
/// by statement_timeout `timeout` and client_connection_check_interval, in one
/// round trip. On a session that keeps state the statement runs prepared by
/// name; a call bounded by another timeout than the session's sends, in one
/// pipeline, a prepared set_config of statement_timeout local to the
/// transaction and then the statement: the server runs both in one implicit
/// transaction, and arms each one's timeout when it starts. Else (a transaction
/// pooler may give the next transaction another server connection) every
/// setting is local to the call's transaction: one simple query sets them and
/// then runs the statement, its values as literals quoted by the connection
/// (PQescapeLiteral), as a statement prepared on one server connection may not
/// exist on the next. Throws what libpqxx would throw (the caller maps it),
/// after rolling back what a failure may have left open.
template <typename... Args>
call_result call(session& s, std::chrono::milliseconds timeout, const char* statement, const Args&... args) {
    try {
        return s.run(timeout, statement, {value_text(args)...});
    } catch (...) {
        s.roll_back();
        throw;
    }
}

/// How a failed call ended: the outcome is unknown, or the server refused it.
[[nodiscard]] bool is_unknown_outcome(const std::exception& e) noexcept;

/// Rethrows the exception being handled as a dlock exception: a dlock::error as
/// is, an unknown outcome as unknown_outcome_error, a server error by its
/// SQLSTATE. Call only inside a catch block. The one place SQLSTATEs are mapped.
[[noreturn]] void rethrow_mapped(std::string_view subject, std::string_view owner_token = {});

/// The counters behind dlock::metrics.
struct counters {
    std::atomic<std::uint64_t> acquisitions{0}, busy{0}, waits{0}, wait_timeouts{0}, renewals{0}, renewals_refused{0},
        releases{0}, lost{0}, unknown_outcomes{0}, retries{0};
    std::array<std::atomic<std::uint64_t>, metrics::wait_bucket_bounds.size() + 1> wait_histogram{};

    void record_wait(std::chrono::steady_clock::duration waited) noexcept;
    [[nodiscard]] metrics snapshot() const noexcept;
};

struct client_core;
struct renewal;

/// The state of one lease, shared by the lease object and the keep-alive.
struct lease_state {
    std::shared_ptr<client_core> core;
    std::string name;
    std::string owner_token;
    std::int64_t fencing_token = 0;
    std::chrono::milliseconds ttl{0};
    std::chrono::milliseconds renew_every{0};
    bool keep_alive = true;
    bool renew_only_on_progress = false;
    std::function<void(const lost_lease&)> on_lost;
    /// lease_options::max_hold, and when the grant was requested (client clock):
    /// a refused renewal after acquired + max_hold is the planned end.
    std::chrono::milliseconds max_hold{0};
    steady_clock::time_point acquired;
    /// The connection a session-bound lease was granted on: kept open until the
    /// lease is released (closing it ends the lease on the server).
    std::unique_ptr<session> bound_session;

    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    steady_clock::time_point deadline; // guarded by mutex
    std::chrono::system_clock::time_point lease_until;
    steady_clock::time_point next_renew;
    std::optional<loss_reason> loss;
    bool loss_reported = false;
    bool released = false;
    bool keep_alive_stopped = false;
    std::atomic<bool> progress{false};

    /// Marks the lease lost (first reason wins); wakes waiters and, when
    /// wake_keep_alive, the keep-alive thread so it runs on_lost.
    void mark_lost(loss_reason reason, bool wake_keep_alive) noexcept;
    /// Takes a confirmed renewal's lease_until and deadline.
    void renewed(const renewal& confirmed) noexcept;
    /// A renewal was refused: lost, with loss_reason::max_hold when the lease
    /// had been held for its max_hold by then.
    void renewal_refused(bool wake_keep_alive) noexcept;
};

/// What a renewal came back with.
struct renewal {
    outcome result = outcome::unknown;
    std::chrono::system_clock::time_point lease_until; ///< when done
    steady_clock::time_point deadline;                 ///< when done
    std::string error;                                 ///< why, when unknown
};

/// The one renewal implementation (lease::renew, client::renew, the
/// keep-alive): refused when the server says the owner holds no live lease;
/// unknown when it could not be confirmed (broken connection, timeout, commit
/// in doubt) -- the lease is then as valid as before, until its deadline.
/// Discards the session when it broke. Throws only mapped dlock errors for
/// refusals of the arguments (invalid_argument_error, permission_error).
[[nodiscard]] renewal renew_lease(client_core& core, std::unique_ptr<session>& s, const std::string& name,
                                  const std::string& owner_token, std::chrono::milliseconds ttl,
                                  std::chrono::milliseconds timeout);

/// The one release implementation (lease::release, client::release): done,
/// refused (the owner held no live lease), or unknown (not confirmed within
/// the call timeout, connection broken). Never throws.
[[nodiscard]] outcome release_lease(client_core& core, const std::string& name, const std::string& owner_token) noexcept;

/// Background renewal and deadline watch for the leases of one client: one
/// thread renews (on its own connection), another watches deadlines and runs
/// on_lost, so a renewal stuck on the network cannot delay the loss report.
/// The threads share only `shared` with this object, never the object itself:
/// the last owner of a client may drop it on one of these threads (inside
/// on_lost, or when a renewal held the last reference), and the thread then
/// finishes on state it owns.
class keep_alive {
public:
    keep_alive();
    keep_alive(const keep_alive&) = delete;
    keep_alive& operator=(const keep_alive&) = delete;
    keep_alive(keep_alive&&) = delete;
    keep_alive& operator=(keep_alive&&) = delete;
    ~keep_alive() noexcept;

    void add(std::shared_ptr<lease_state> lease);
    /// Stops watching the lease; returns after a renewal or on_lost call of it
    /// in flight finished, or after `bound` (a renewal that lands later is
    /// refused by the server once the lease is released).
    void remove(const lease_state* lease, std::chrono::milliseconds bound) noexcept;
    void wake() noexcept;
    [[nodiscard]] int backend_pid() const noexcept;

    struct shared;

private:
    std::shared_ptr<shared> m_shared;
    std::thread m_renewer;
    std::thread m_watcher;
};

/// Everything a client and its leases share.
struct client_core {
    explicit client_core(client_options opts);
    client_core(const client_core&) = delete;
    client_core& operator=(const client_core&) = delete;
    client_core(client_core&&) = delete;
    client_core& operator=(client_core&&) = delete;
    ~client_core() noexcept;

    client_options options;
    std::string holder;
    counters stats;

    std::mutex mutex;                           // guards idle
    std::vector<std::unique_ptr<session>> idle; // caller sessions not in use

    std::mutex rng_mutex;
    std::mt19937_64 rng;
    [[nodiscard]] std::string new_owner_token();
    [[nodiscard]] std::chrono::milliseconds backoff(int retry);
    /// A sleep between two tries of a client-side wait: uniform in [bound/2, bound] ms.
    [[nodiscard]] std::chrono::milliseconds poll_sleep(std::int64_t bound);

    /// Local deadline of a lease of `ttl` the server granted `server_waited`
    /// after receiving the request that was sent at `sent` and answered at
    /// `received` (see grant_deadline in client.cpp).
    [[nodiscard]] steady_clock::time_point deadline_for(steady_clock::time_point sent,
                                                        steady_clock::time_point received, double server_waited_ms,
                                                        std::chrono::milliseconds ttl) const noexcept;

    /// Acquire with retries; nullptr when busy (try) -- see client::try_acquire/acquire.
    std::shared_ptr<lease_state> acquire(std::string_view name, std::optional<std::chrono::milliseconds> wait,
                                         const lease_options& opts, lease_kind kind = {});
    /// Whether an acquire with a wait waits in the client (wait_mode::poll)
    /// rather than in the server: the one place wait_mode::automatic is
    /// decided (see options.hpp). Under pooling::detect it asks a caller
    /// session (transaction_pooled), once more on a fresh one when that
    /// fails, and polls when that fails too. Throws connection_error when no
    /// session can be connected.
    [[nodiscard]] bool waits_in_client();
    /// One acquire (server-side wait when wait is set), retried with the same
    /// owner while its outcome is unknown.
    std::shared_ptr<lease_state> acquire_once(const std::string& name, std::optional<std::chrono::milliseconds> wait,
                                              const lease_options& opts, const std::string& owner,
                                              steady_clock::time_point started, lease_kind kind = {});
    /// Fills in the per-lease settings and starts watching it.
    void attach(const std::shared_ptr<lease_state>& lease, const lease_options& opts);

    keep_alive watcher; // last: stopped first
};

/// A caller session checked out of the client's pool for one call, so calls
/// from several threads do not wait for each other (a waiting acquire does
/// not hold up a release). It goes back to the pool when destroyed, unless
/// discarded after it broke.
class checked_out {
public:
    /// Takes an idle session or connects a new one; throws connection_error.
    explicit checked_out(client_core& core);
    /// The session slot itself (a call may discard or replace it).
    [[nodiscard]] std::unique_ptr<session>& slot() noexcept { return m_session; }
    checked_out(const checked_out&) = delete;
    checked_out& operator=(const checked_out&) = delete;
    checked_out(checked_out&&) = delete;
    checked_out& operator=(checked_out&&) = delete;
    ~checked_out() noexcept;

    [[nodiscard]] session& operator*() noexcept { return *m_session; }
    [[nodiscard]] session* operator->() noexcept { return m_session.get(); }
    void discard() noexcept { m_session.reset(); }

private:
    client_core& m_core;
    std::unique_ptr<session> m_session;
};

/// Converts a server epoch (seconds) to a system_clock time point.
[[nodiscard]] std::chrono::system_clock::time_point from_epoch(double seconds) noexcept;

/// The grant in one row of a lease statement (sql.cpp): lock_name,
/// owner_token, fencing_token, lease_until in epoch seconds, and the
/// milliseconds the server waited before granting. Row is a call_result row
/// or a pqxx::row: both read as row[column].as<T>().
template <typename Row>
[[nodiscard]] grant read_grant(const client_core& core, const Row& row, steady_clock::time_point sent,
                               steady_clock::time_point received, std::chrono::milliseconds ttl) {
    grant g;
    g.lock_name = row[0].template as<std::string>();
    g.owner_token = row[1].template as<std::string>();
    g.fencing_token = row[2].template as<std::int64_t>();
    g.ttl = ttl;
    g.lease_until = from_epoch(row[3].template as<double>());
    g.deadline = core.deadline_for(sent, received, row[4].template as<double>(), ttl);
    return g;
}

/// Copies a grant into a lease's state (attach() adds the settings).
void set_grant(lease_state& state, const grant& granted);

} // namespace dlock::internal
