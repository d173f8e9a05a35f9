// election_commands.hpp -- `dlock watch` and `dlock elect` (lock events and
// leader election), registered on the main CLI11 app by main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <dlock/options.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock_cli {

class election_commands {
public:
    /// Adds the subcommands to app.
    explicit election_commands(CLI::App& app);
    /// True when the parsed subcommand takes "-- COMMAND" (elect).
    [[nodiscard]] bool takes_command() const;
    /// The lock names of the parsed subcommand (none when it is not one of these),
    /// for routing to a farm's partition.
    [[nodiscard]] std::vector<std::string> names() const;
    /// Runs the parsed subcommand, if it is one of these; returns its exit status.
    [[nodiscard]] std::optional<int> run(const dlock::client_options& options, const std::vector<std::string>& command);

private:
    CLI::App* m_watch = nullptr;
    std::vector<std::string> m_watch_names;
    bool m_watch_json = false;
    long m_watch_count = 0;

    CLI::App* m_elect = nullptr;
    std::string m_elect_name;
    std::string m_elect_ttl = "10s";
    std::string m_elect_holder;
    std::string m_elect_kill_after = "10s";
    std::string m_elect_restart = "lost";
    std::string m_elect_restart_delay = "1s";
};

/// dlock watch: prints events of the named locks until killed (or count events).
[[nodiscard]] int watch_events(const std::string& dsn, const std::vector<std::string>& names, bool json, long count);

} // namespace dlock_cli
