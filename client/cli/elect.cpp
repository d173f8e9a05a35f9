// elect.cpp -- `dlock elect NAME -- COMMAND`: run COMMAND while leader.
//
// Each round waits, quietly, until an observer (dlock::observer: events, and a
// re-read when the leader's lease_until passes) sees no leader, then runs
// COMMAND under a lease exactly as `dlock run --wait` does, waiting at most
// dlock::campaign_slice(ttl) in the server: kept alive, and on loss
// of the lease COMMAND's process group gets SIGTERM, then SIGKILL after
// --kill-after. After a loss dlock campaigns again. When COMMAND exits by
// itself, --restart decides: "lost" (the default) ends dlock with COMMAND's
// status; "always" campaigns again, unless COMMAND died of SIGINT or SIGTERM
// (which dlock forwards when it is asked to stop).
#include <signal.h>

#include <iostream>
#include <thread>

#include "cli.hpp"
#include "election_commands.hpp"

namespace dlock_cli {

namespace {

// Blocks until the observer reports no leader.
void wait_for_vacancy(const dlock::observer& observer) {
    while (observer.current().has_value() || !observer.wait_ready(std::chrono::milliseconds{0}))
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
}

int elect(const dlock::client_options& options, run_args args, bool restart_always,
          std::chrono::milliseconds restart_delay) {
    dlock::client client{options};
    const dlock::observer observer{options.connection_string, args.name, nullptr};
    args.wait = dlock::campaign_slice(args.ttl);
    args.conflict_exit_code = exit_code::busy;
    sigset_t handled;
    sigemptyset(&handled);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
        sigaddset(&handled, sig);
    for (;;) {
        // While campaigning, SIGINT and SIGTERM end dlock (run blocks them
        // once it holds the lease, to forward them to COMMAND).
        pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
        wait_for_vacancy(observer);
        const int status = run_under_lease(client, args);
        if (status == exit_code::busy) continue; // the campaign slice ran out
        if (status == exit_code::lost) {
            std::cerr << "dlock: leadership of " << args.name << " lost; campaigning again\n";
            continue;
        }
        const bool stopped = status == 128 + SIGINT || status == 128 + SIGTERM;
        const bool could_not_run =
            status == exit_code::not_found || status == exit_code::cannot_run || status == exit_code::failed;
        if (restart_always && !stopped && !could_not_run) {
            std::cerr << "dlock: " << args.command[0] << " exited with status " << status
                      << "; resigned, campaigning again in " << format_duration(restart_delay) << "\n";
            std::this_thread::sleep_for(restart_delay);
            continue;
        }
        return status;
    }
}

} // namespace

election_commands::election_commands(CLI::App& app) {
    m_watch = app.add_subcommand("watch", "Print lock events of NAME... as they happen");
    m_watch->add_option("NAME", m_watch_names, "lock names")->required();
    m_watch->add_flag("--json", m_watch_json, "print each event's JSON payload");
    m_watch->add_option("--count", m_watch_count, "exit after this many events (default: run until killed)")
        ->check(CLI::NonNegativeNumber);
    m_watch->footer(R"TXT(One line per grant, takeover, release, force release and expiry of NAME:
  EVENT NAME token=TOKEN holder=HOLDER lease_until=TIME
The server sends events only with dlock.events = on (docs/events.md);
expiries need the expiry worker.

Examples:
  dlock watch scheduler
  dlock watch --json settlement:eu settlement:us)TXT");

    m_elect = app.add_subcommand("elect", "Run COMMAND while leader of the election NAME; campaign again on loss");
    m_elect->add_option("NAME", m_elect_name, "election (lock) name")->required();
    m_elect->add_option("--ttl", m_elect_ttl, "leader lease time-to-live, renewed every ttl/3")->capture_default_str();
    m_elect->add_option("--holder", m_elect_holder, "text observers see as the leader (default hostname:pid)");
    m_elect->add_option("--kill-after", m_elect_kill_after, "after a lost lease, SIGKILL this long after SIGTERM")
        ->capture_default_str();
    m_elect
        ->add_option("--restart", m_elect_restart,
                     "lost: campaign again only after losing leadership, exit when COMMAND exits; "
                     "always: also campaign again when COMMAND exits")
        ->capture_default_str()
        ->check(CLI::IsMember({"lost", "always"}));
    m_elect
        ->add_option("--restart-delay", m_elect_restart_delay, "with --restart always: pause before campaigning again")
        ->capture_default_str();
    m_elect->footer(R"TXT(Usage: dlock elect [OPTIONS] NAME -- COMMAND [ARG...]

Waits to become leader, then runs COMMAND as `dlock run` does (same
environment, signals and exit statuses). On loss of leadership COMMAND is
terminated and dlock campaigns again. A standby follows the leader through
lock events (dlock.events = on) and re-reads it when its lease_until passes,
so it takes over within the ttl even without events.

Example (one scheduler active, the others standing by):
  dlock elect --ttl 10s --holder "$(hostname)" scheduler -- ./scheduler)TXT");
}

bool election_commands::takes_command() const {
    return m_elect->parsed();
}

std::vector<std::string> election_commands::names() const {
    if (m_watch->parsed()) return m_watch_names;
    if (m_elect->parsed()) return {m_elect_name};
    return {};
}

std::optional<int> election_commands::run(const dlock::client_options& options,
                                          const std::vector<std::string>& command) {
    if (m_watch->parsed()) return watch_events(options.connection_string, m_watch_names, m_watch_json, m_watch_count);
    if (!m_elect->parsed()) return std::nullopt;
    if (command.empty()) throw usage_error{"elect: missing COMMAND after \"--\""};
    check_lock_name(m_elect_name);
    run_args args;
    args.name = m_elect_name;
    args.ttl = parse_duration(m_elect_ttl, "--ttl");
    args.holder = m_elect_holder;
    args.kill_after = parse_duration(m_elect_kill_after, "--kill-after");
    args.command = command;
    return elect(options, args, m_elect_restart == "always", parse_duration(m_elect_restart_delay, "--restart-delay"));
}

} // namespace dlock_cli
