// run.cpp -- `dlock run`: run a command under a lease.
//
// The lease is acquired first; then COMMAND runs in its own process group with
// DLOCK_LOCK_NAME, DLOCK_FENCING_TOKEN and DLOCK_OWNER_TOKEN in its
// environment, while the client's keep-alive thread renews the lease. The main
// thread waits for signals (sigtimedwait, all handled signals are blocked in
// every thread): SIGCHLD ends the wait, SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/
// SIGUSR2 are forwarded to COMMAND's process group, and every 50 ms it checks
// the lease. When the lease is lost the group gets SIGTERM, then SIGKILL after
// --kill-after, and dlock exits 124. The lease is released when COMMAND exits;
// a release that is not confirmed is reported, and turns COMMAND's success
// into 125 (the lease may stay held until its ttl runs out).
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli.hpp"

extern char** environ;

namespace dlock_cli {

namespace {

sigset_t run_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
        sigaddset(&set, sig);
    return set;
}

bool is_lease_variable(const char* entry) {
    for (const char* prefix : {"DLOCK_LOCK_NAME=", "DLOCK_FENCING_TOKEN=", "DLOCK_OWNER_TOKEN="})
        if (std::strncmp(entry, prefix, std::strlen(prefix)) == 0) return true;
    return false;
}

int status_of(int wait_status) {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return exit_code::failed;
}

} // namespace

void block_run_signals() {
    const sigset_t set = run_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int run_under_lease(dlock::client& client, const run_args& args) {
    dlock::lease_options options;
    options.ttl = args.ttl;
    options.holder = args.holder;
    options.session_bound = args.session_bound;
    options.max_hold = args.max_hold;
    options.min_hold = args.min_hold;
    options.lock_delay = args.lock_delay;
    // one lease, or one per name of a set (all or none)
    std::vector<dlock::lease> leases;
    // callers that name one lock (dlock elect) set only args.name
    const std::vector<std::string> names = args.names.empty() ? std::vector<std::string>{args.name} : args.names;
    try {
        if (names.size() > 1) {
            if (args.wait)
                leases = client.acquire_all(names, *args.wait, options);
            else if (auto set = client.try_acquire_all(names, options))
                leases = std::move(*set);
        } else {
            std::optional<dlock::lease> one;
            const std::string& name = names.front();
            if (args.shared)
                one = args.wait ? client.acquire_shared(name, *args.wait, options)
                                : client.try_acquire_shared(name, options);
            else if (args.permits > 0)
                one = args.wait ? client.acquire_permit(name, args.permits, *args.wait, options)
                                : client.try_acquire_permit(name, args.permits, options);
            else if (args.wait)
                one.emplace(client.acquire(name, *args.wait, options));
            else
                one = client.try_acquire(name, options);
            if (one) leases.push_back(std::move(*one));
        }
    } catch (const dlock::busy_error&) {
        leases.clear();
    }
    if (leases.empty()) {
        std::cerr << "dlock: " << args.name << " is busy" << (args.wait ? " (the wait ran out)" : "") << "\n";
        return args.conflict_exit_code;
    }

    // Until here SIGINT/SIGTERM simply end dlock (the server drops a wait of a
    // client that went away). From here on they are forwarded; the library's
    // threads block all signals, so this thread is the one that sees them.
    block_run_signals();

    // Everything the child needs is prepared before fork: after it, the child
    // may only exec (the keep-alive thread exists in this process).
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e)
        if (!is_lease_variable(*e)) env_strings.emplace_back(*e);
    // a set: names and their tokens comma-separated, in the same (name) order
    std::string names_text, tokens_text;
    for (const auto& l : leases) {
        names_text += (names_text.empty() ? "" : ",") + l.name();
        tokens_text += (tokens_text.empty() ? "" : ",") + std::to_string(l.fencing_token());
    }
    env_strings.push_back("DLOCK_LOCK_NAME=" + names_text);
    env_strings.push_back("DLOCK_FENCING_TOKEN=" + tokens_text);
    env_strings.push_back("DLOCK_OWNER_TOKEN=" + leases.front().owner_token());
    std::vector<char*> envp;
    envp.reserve(env_strings.size() + 1);
    for (auto& s : env_strings)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_strings = args.command;
    std::vector<char*> argv;
    argv.reserve(argv_strings.size() + 1);
    for (auto& s : argv_strings)
        argv.push_back(s.data());
    argv.push_back(nullptr);

    int error_pipe[2];
    if (pipe2(error_pipe, O_CLOEXEC) != 0) {
        std::cerr << "dlock: pipe: " << std::strerror(errno) << "\n";
        return exit_code::failed;
    }
    sigset_t no_signals;
    sigemptyset(&no_signals);
    const pid_t child = fork();
    if (child < 0) {
        std::cerr << "dlock: fork: " << std::strerror(errno) << "\n";
        return exit_code::failed;
    }
    if (child == 0) {
        setpgid(0, 0);
        pthread_sigmask(SIG_SETMASK, &no_signals, nullptr);
        close(error_pipe[0]);
        execvpe(argv[0], argv.data(), envp.data());
        const int err = errno;
        (void)!write(error_pipe[1], &err, sizeof err);
        _exit(err == ENOENT ? exit_code::not_found : exit_code::cannot_run);
    }
    setpgid(child, child); // also here, so signals to the group work at once
    close(error_pipe[1]);
    int exec_errno = 0;
    const ssize_t got = read(error_pipe[0], &exec_errno, sizeof exec_errno);
    close(error_pipe[0]);
    if (got == static_cast<ssize_t>(sizeof exec_errno)) {
        int ignored = 0;
        waitpid(child, &ignored, 0);
        std::cerr << "dlock: cannot run " << args.command[0] << ": " << std::strerror(exec_errno) << "\n";
        return exec_errno == ENOENT ? exit_code::not_found : exit_code::cannot_run;
    }

    const sigset_t handled = run_signals();
    bool lost = false;
    bool killed = false;
    auto kill_at = std::chrono::steady_clock::time_point::max();
    int wait_status = 0;
    for (;;) {
        const pid_t done = waitpid(child, &wait_status, WNOHANG);
        if (done == child) break;
        timespec tick{0, 50L * 1000 * 1000};
        siginfo_t info{};
        const int sig = sigtimedwait(&handled, &info, &tick);
        if (sig > 0 && sig != SIGCHLD) kill(-child, sig);
        const auto lost_lease = std::find_if(leases.begin(), leases.end(), [](const dlock::lease& l) { return l.lost(); });
        if (!lost && lost_lease != leases.end()) {
            lost = true;
            const auto reason = lost_lease->loss();
            std::cerr << "dlock: lease on " << args.name << " lost ("
                      << (reason ? dlock::to_string(*reason) : "expired") << "); terminating the command\n";
            kill(-child, SIGTERM);
            kill_at = std::chrono::steady_clock::now() + args.kill_after;
        }
        if (lost && !killed && std::chrono::steady_clock::now() >= kill_at) {
            kill(-child, SIGKILL);
            killed = true;
        }
    }
    if (lost) {
        kill(-child, SIGKILL); // nothing of the job may go on writing without the lease
        return exit_code::lost;
    }
    const int status = status_of(wait_status);
    // the worst outcome of releasing each lease
    dlock::outcome released = dlock::outcome::done;
    for (auto& l : leases) {
        const dlock::outcome o = l.release();
        if (o == dlock::outcome::unknown || (o == dlock::outcome::refused && released == dlock::outcome::done))
            released = o;
    }
    switch (released) {
    case dlock::outcome::done: return status;
    case dlock::outcome::refused:
        std::cerr << "dlock: lease on " << args.name
                  << " was no longer held at release (it expired or was taken over as COMMAND ended)\n";
        break;
    case dlock::outcome::unknown:
        std::cerr << "dlock: release of " << args.name
                  << " was not confirmed (timeout or connection lost); the lease ends at its ttl at the latest\n";
        break;
    }
    return status == exit_code::ok ? exit_code::failed : status;
}

} // namespace dlock_cli
