// cli.hpp -- pieces of the dlock command-line tool shared between its files.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

namespace dlock_cli {

/// Exit statuses (documented in --help and docs/readme/cli.md).
namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int not_held = 1;     ///< renew/release/force-release: nothing held
inline constexpr int usage = 64;       ///< EX_USAGE, as flock(1)
inline constexpr int unavailable = 69; ///< EX_UNAVAILABLE: cannot connect
inline constexpr int busy = 75;        ///< EX_TEMPFAIL: busy / wait ran out (run -E changes it, as flock -E)
inline constexpr int lost = 124;       ///< lease lost, COMMAND terminated (as timeout(1) on timeout)
inline constexpr int failed = 125;     ///< dlock itself failed: server error, unknown outcome, release not confirmed (as timeout(1))
inline constexpr int cannot_run = 126; ///< COMMAND found but could not be run
inline constexpr int not_found = 127;  ///< COMMAND not found
} // namespace exit_code

/// A usage error; the message names the flag or argument.
class usage_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Parses 500ms, 30s, 5m, 1h (a whole number and one unit); throws usage_error naming `flag`.
[[nodiscard]] std::chrono::milliseconds parse_duration(const std::string& text, const std::string& flag);
/// 850ms, 12s, 3m04s, 2h05m, 3d04h; negative values get a leading '-'.
[[nodiscard]] std::string format_duration(std::chrono::milliseconds value);
/// ISO 8601 UTC with milliseconds: 2026-11-29T16:40:00.123Z.
[[nodiscard]] std::string format_time(std::chrono::system_clock::time_point value);
/// A string quoted for POSIX sh.
[[nodiscard]] std::string shell_quote(const std::string& text);
/// Checks a lock name: not empty, at most 200 characters; throws usage_error.
void check_lock_name(const std::string& name, const std::string& what = "NAME");
/// Checks an owner token looks like a UUID; throws usage_error.
void check_owner_token(const std::string& token);
/// Parses --wait-mode: "auto" (wait_mode::automatic), "server" or "poll"; throws usage_error.
[[nodiscard]] dlock::wait_mode parse_wait_mode(const std::string& text);
/// Parses --pooling: "detect", "none" or "transaction"; throws usage_error.
[[nodiscard]] dlock::pooling parse_pooling(const std::string& text);
/// Parses --durability: "durable" or "fenced"; throws usage_error.
[[nodiscard]] dlock::durability parse_durability(const std::string& text);

struct run_args {
    std::string name;               // the names, comma-separated (for messages)
    std::vector<std::string> names; // several: all or none (exclusive)
    bool shared = false;            // --shared: a shared lease (read-write lock)
    int permits = 0;                // --permits N: one permit of a semaphore of N
    std::chrono::milliseconds ttl{30000};
    std::optional<std::chrono::milliseconds> wait; // nullopt = --no-wait
    std::string holder;
    std::chrono::milliseconds kill_after{10000};
    int conflict_exit_code = exit_code::busy;
    std::vector<std::string> command;
    // lease policies (docs/lease-policies.md, "Lease policies"); zero = not asked for
    bool session_bound = false;
    std::chrono::milliseconds max_hold{0};
    std::chrono::milliseconds min_hold{0};
    std::chrono::milliseconds lock_delay{0};
};

/// Blocks the signals `dlock run` handles (in the calling thread).
void block_run_signals();
/// dlock run: acquire, run COMMAND under the lease, release. Returns the exit status.
[[nodiscard]] int run_under_lease(dlock::client& client, const run_args& args);

} // namespace dlock_cli
