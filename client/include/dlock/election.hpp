// dlock/election.hpp -- leader election on a lock name: campaign, and observe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dlock/client.hpp"

namespace dlock {

/// The leader of an election as dlock.leader reports it.
struct leader_info {
    std::string holder;
    std::int64_t fencing_token = 0;
    std::chrono::system_clock::time_point since;       ///< when its lease was granted (server clock)
    std::chrono::system_clock::time_point lease_until; ///< end of its lease, as of the last read
};

/// Settings of a campaign.
struct election_options {
    /// ttl of the leader's lease; the keep-alive renews it every ttl / 3.
    std::chrono::milliseconds ttl{10000};
    /// Overrides client_options::holder when not empty: what observers see.
    std::string holder;
    /// Runs on the campaigning thread once this candidate has become leader.
    std::function<void(const lease&)> on_elected;
    /// Runs once on the keep-alive's watcher thread when leadership is lost
    /// (renewal refused or uncertain, or deadline passed). Keep it short.
    std::function<void(const lost_lease&)> on_lost;
};

/// Longest wait of one acquire while campaigning with this ttl (a third of it):
/// a lease is dated from when its request was sent, so a longer wait would
/// leave too little of the ttl after the grant.
[[nodiscard]] std::chrono::milliseconds campaign_slice(std::chrono::milliseconds ttl);

/// One candidate in the election named `name` (a lock name): the leader is the
/// holder of the lock's live lease, kept alive by the client's keep-alive.
///
/// Not thread safe, except is_leader(), which any thread may call.
class election {
public:
    election(client& candidate, std::string name, election_options options = {});
    election(const election&) = delete;
    election& operator=(const election&) = delete;
    election(election&&) = delete;
    election& operator=(election&&) = delete;
    /// Resigns if leader.
    ~election() noexcept;

    /// Waits up to `timeout` to become leader; true when this candidate leads
    /// (at once if it already does). Calls on_elected when it wins.
    [[nodiscard]] bool campaign(std::chrono::milliseconds timeout);
    /// Gives leadership up (releases the lease); refused when not leader.
    outcome resign() noexcept;
    /// Leading: elected, not resigned, lease not lost.
    [[nodiscard]] bool is_leader() const noexcept;
    /// The leader's lease (its fencing token guards the leader's writes);
    /// nullptr when not leading.
    [[nodiscard]] const lease* leadership() const noexcept;

private:
    client& m_client;
    std::string m_name;
    election_options m_options;
    std::optional<lease> m_lease;
};

/// Follows the leader of an election without polling: listens on the
/// dlock_events channel (the server needs dlock.events = on) and re-reads
/// dlock.leader after every event for the election, after every (re)connect,
/// and when the known leader's lease_until passes. A notification is a hint:
/// the callback always gets the state read from the server.
///
/// LISTEN needs a session of its own: connect directly or through a
/// session-pooling PgBouncer, not a transaction-pooling one.
class observer {
public:
    /// Called on the observer's thread with the new leader (nullopt: nobody
    /// leads) whenever the leader's fencing token differs from the last one
    /// reported, and once after the first read.
    using change_callback = std::function<void(const std::optional<leader_info>&)>;

    /// Starts following; connection_string empty = PG* environment.
    observer(std::string connection_string, std::string name, change_callback on_change);
    observer(const observer&) = delete;
    observer& operator=(const observer&) = delete;
    observer(observer&&) = delete;
    observer& operator=(observer&&) = delete;
    /// Stops the thread (within about 200 ms) and closes the connection.
    ~observer() noexcept;

    /// The leader as last read; nullopt before the first read or with no leader.
    [[nodiscard]] std::optional<leader_info> current() const;
    /// Blocks until the first read succeeded or timeout; true when it did.
    [[nodiscard]] bool wait_ready(std::chrono::milliseconds timeout) const;
    /// Connections made so far (1 + reconnects).
    [[nodiscard]] int connections() const;

private:
    struct state;
    std::shared_ptr<state> m_state;
};

} // namespace dlock
