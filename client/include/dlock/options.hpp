// dlock/options.hpp -- settings for a client and for each lease.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dlock {

class lease_listener;

/// The clock every deadline is measured on: monotonic, never set back.
using steady_clock = std::chrono::steady_clock;

/// Three-valued result of a call that changes lock state.
enum class outcome {
    done,    ///< the server confirmed the change
    refused, ///< the server confirmed it did not make the change (not held, busy)
    unknown, ///< the call may or may not have taken effect
};

/// "done", "refused" or "unknown".
[[nodiscard]] const char* to_string(outcome value) noexcept;

/// How a call with an unknown outcome is retried (only calls that are safe to
/// repeat: acquire with the same owner token).
struct retry_policy {
    int max_attempts = 5;                          ///< attempts in total, including the first
    std::chrono::milliseconds initial_backoff{50}; ///< upper bound of the first sleep
    std::chrono::milliseconds max_backoff{2000};   ///< cap of the exponentially growing bound
};

/// How an acquire with a wait (client::acquire, acquire_shared, acquire_permit,
/// acquire_all) waits for a busy lock.
enum class wait_mode {
    /// In the server (dlock.acquire): first come, first served, woken at once on
    /// release. The wait occupies a server connection for its whole length, so
    /// behind a transaction-pooling PgBouncer waiters can take every pooled
    /// connection and starve the holder's renewals and release. Chosen only when
    /// asked for by name: the library then waits in the server even behind a
    /// transaction pooler.
    server,
    /// In the client: try_acquire, then sleep a jittered, growing interval (up to
    /// client_options::poll_interval) and try again until the wait runs out.
    /// Holds no server connection between tries, so it cannot starve the holder
    /// behind a pooler; no FIFO order (a waiter that came later may get the lock
    /// first), and a handover takes up to a poll interval.
    poll,
    /// The default: wait_mode::server on a connection the library knows is
    /// direct, wait_mode::poll behind a transaction pooler -- when
    /// client_options::pooling is pooling::transaction, or pooling::detect finds
    /// a pooler. Under pooling::detect the caller connection the wait would use
    /// is checked before the first try (a connection's first call finds out
    /// anyway, so this costs no extra round trip), and when that check fails the
    /// wait polls. Behind a transaction pooler waits are therefore not FIFO;
    /// ask for wait_mode::server by name to keep FIFO there, at the risk above.
    automatic,
};

/// Whether a connection pooler stands between the client and the server, which
/// decides how the library sends its calls (docs/client.md, "Connection modes").
enum class pooling {
    /// Found out on each new connection: a direct one when the server process
    /// serving it has the process id libpq was told at connect (a pooler in
    /// between hands out its own) and sees this connection's own port as its
    /// client's (a pooler or proxy that passes the process id through
    /// connects from a port of its own; NAT looks the same), otherwise as
    /// transaction. A pooler on Unix-domain sockets at both ends that passes
    /// the process id through cannot be told apart: say transaction there.
    detect,
    /// A direct connection or session pooling: each connection prepares the
    /// library's statements by name once and keeps statement_timeout and
    /// client_connection_check_interval as session settings, made by its first
    /// call; a call with another bound sets its own local to its transaction.
    none,
    /// Transaction pooling (PgBouncer pool_mode = transaction): every call is
    /// self-contained -- one simple query with its settings local to its
    /// transaction, nothing prepared by name, nothing left in the session.
    transaction,
};

/// How the server commits the transactions that grant, renew, release or
/// downgrade this client's leases (the setting dlock.durability, pg_dlock 1.4;
/// docs/client.md, "Durability").
enum class durability {
    /// A grant or renewal is confirmed only once its commit is flushed (and
    /// confirmed by synchronous standbys): a crash loses no confirmed lease.
    /// The library sends nothing for it, so the session's dlock.durability
    /// applies -- durable unless a role or database was set otherwise.
    durable,
    /// A call whose lease change is its transaction's only write commits
    /// without waiting for the WAL flush. A crash may lose a grant the holder
    /// was told of: it learns so at its next renewal (refused) or holds()
    /// (false), and a new owner may get the name at once. Only fenced
    /// resources (fence, assert_holds) stay protected in that window; tokens
    /// are never issued twice (every token after a crash is above every token
    /// before it). Needs the C extension pg_dlock 1.4 or later, preloaded: on
    /// any other server (the SQL edition among them) every call is refused
    /// with server_error, SQLSTATE 0A000, and nothing is granted.
    fenced,
};

/// Settings of a client object.
struct client_options {
    /// libpq connection string or URI; empty uses the PG* environment. Multi-host
    /// strings ("host=a,b target_session_attrs=read-write") follow a failover.
    std::string connection_string;
    /// The partitions of a lock farm (docs/farm.md), as connection strings in
    /// partition order; read only by dlock::farm_client (dlock/farm.hpp), which
    /// connects each call to partition hashtext(name) & (N - 1) as the farm's
    /// proxy routes it. N must be a power of two. dlock::client refuses a
    /// non-empty list (invalid_argument_error): it talks to one server.
    std::vector<std::string> partitions;
    /// Text stored with every lease (dlock.locks.holder); empty = "hostname:pid".
    std::string holder;
    /// Allowance for the client clock running faster than the server's (0.01 = 1 %).
    double drift_allowance = 0.01;
    /// Fixed amount taken off every deadline on top of the drift allowance.
    std::chrono::milliseconds safety_margin{50};
    retry_policy retry;
    /// Bound of every call the library makes: the statement timeout of its
    /// transaction (SET LOCAL; for acquire with a wait, the wait plus this). A
    /// call that runs out is refused by the server and reported as such
    /// (release: outcome::unknown; keep-alive: retried until the deadline).
    std::chrono::milliseconds call_timeout{5000};
    /// Bound on noticing a dead server or a black-holed network: libpq's
    /// tcp_user_timeout, TCP keepalives (idle a third of it, then probes every
    /// second) and connect_timeout, unless the connection string sets them.
    std::chrono::milliseconds network_timeout{10000};
    /// How acquire(name, wait, ...) waits. The default, wait_mode::automatic,
    /// waits in the server on a direct connection and polls from the client
    /// behind a transaction pooler (docs/client.md, "PgBouncer").
    dlock::wait_mode wait_mode = wait_mode::automatic;
    /// Longest sleep between two tries of wait_mode::poll.
    std::chrono::milliseconds poll_interval{500};
    /// Whether a pooler stands in between (decides how calls are sent).
    dlock::pooling pooling = pooling::detect;
    /// How the server commits this client's grants, renewals, releases and
    /// downgrades: set in each call's transaction as call_timeout is (a
    /// session setting on a direct connection, local to the transaction
    /// behind a transaction pooler). Calls in a caller's transaction
    /// (try_acquire(txn, ...)) keep that transaction's own setting.
    dlock::durability durability = durability::durable;
    /// Told of every grant, renewal, loss and release of this client's leases
    /// (dlock/listener.hpp); none by default.
    std::shared_ptr<lease_listener> listener;
};

/// Why a lease was marked lost.
enum class loss_reason {
    refused, ///< a renewal was refused: the lease had expired or was taken over
    expired, ///< the local deadline passed without a confirmed renewal (renewals
             ///< whose outcome was unknown are retried until then)
    max_hold, ///< a renewal was refused after lease_options::max_hold: the planned end of
              ///< the lease (the server keeps it to the end of its current ttl, so nobody
              ///< else holds the lock before then, but the holder must stop now)
};

/// "refused", "expired" or "max_hold".
[[nodiscard]] const char* to_string(loss_reason value) noexcept;

/// What an on_lost callback is told.
struct lost_lease {
    std::string lock_name;
    std::int64_t fencing_token = 0;
    loss_reason reason = loss_reason::expired;
};

/// Settings of one lease.
struct lease_options {
    std::chrono::milliseconds ttl{30000};
    /// Renew in the background on the client's keep-alive connection and thread.
    bool keep_alive = true;
    /// Time between renewals; zero means ttl / 3.
    std::chrono::milliseconds renew_every{0};
    /// Renew only when the work called lease::report_progress() since the last
    /// renewal, so a hung job loses its lease instead of holding it forever.
    bool renew_only_on_progress = false;
    /// Runs once, on the keep-alive's watcher thread, when the lease is marked lost. Keep it
    /// short; it must not block on the lease's own thread.
    std::function<void(const lost_lease&)> on_lost;
    /// Overrides client_options::holder when not empty.
    std::string holder;
    /// A UUID to use as owner token; empty = a fresh random one. Reusing the token
    /// of an uncertain acquire resolves it (the server's acquire is idempotent).
    std::string owner_token;

    // Lease policies (docs/lease-policies.md, "Lease policies"). Zero durations are not sent (the
    // server's settings apply); a lease without any policy uses the same SQL as 1.1.

    /// The lease also ends when the database session that took it ends (this
    /// process exits or its connection breaks): the lease keeps the connection
    /// it was granted on open, and closes it after the release. Needs a direct
    /// connection (or session pooling) and pg_dlock in shared_preload_libraries.
    /// lease::detach() does not keep the connection: such a lease ends when the
    /// lease object is destroyed.
    bool session_bound = false;
    /// Renewals are refused once the lease has been held this long; the
    /// keep-alive then reports the lease lost with loss_reason::max_hold.
    std::chrono::milliseconds max_hold{0};
    /// A release before this long after the grant keeps the lock from others until then.
    std::chrono::milliseconds min_hold{0};
    /// After the lease is lost (expired, session ended, forced away), the lock is
    /// not granted again for this long.
    std::chrono::milliseconds lock_delay{0};
};

} // namespace dlock
