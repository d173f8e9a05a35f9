// main.cpp -- the dlock command-line tool: run a command under a lease, show
// and manage leases from a shell. Argument parsing with CLI11.
#include <CLI/CLI.hpp>

#include <pqxx/pqxx>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>
#include <tuple>

#include <dlock/farm.hpp>

#include <dlock/json.hpp>

#include "cli.hpp"
#include "election_commands.hpp"

using namespace dlock_cli;
using dlock::json_quote;

namespace {

constexpr const char* exit_status_help = R"TXT(Exit status:
  0      success (run: COMMAND's own status; 128+N when COMMAND died of signal N)
  1      renew / release / force-release: the lease was not held
  64     bad usage (EX_USAGE, as flock(1))
  69     cannot connect to the server (EX_UNAVAILABLE)
  75     busy: the lock is held by another owner, or --wait ran out (EX_TEMPFAIL; run -E N changes it, as flock -E)
  124    run: the lease was lost and COMMAND was terminated (as timeout(1) when time runs out)
  125    dlock itself failed: server error, or the outcome of a call is unknown (as timeout(1));
         run: also when COMMAND succeeded but the release of the lease was not confirmed
  126    run: COMMAND cannot be executed
  127    run: COMMAND not found)TXT";

struct lease_view {
    std::string name;
    std::string owner_token;
    std::int64_t fencing_token = 0;
    std::chrono::system_clock::time_point lease_until;
};

void print_lease(const lease_view& l, bool json) {
    if (json) {
        std::cout << "{\"lock_name\": " << json_quote(l.name);
        if (l.fencing_token != 0) std::cout << ", \"fencing_token\": " << l.fencing_token;
        std::cout << ", \"owner_token\": " << json_quote(l.owner_token)
                  << ", \"lease_until\": " << json_quote(format_time(l.lease_until)) << "}\n";
        return;
    }
    // KEY=value lines a shell can eval.
    std::cout << "DLOCK_LOCK_NAME=" << shell_quote(l.name) << "\n";
    if (l.fencing_token != 0) std::cout << "DLOCK_FENCING_TOKEN=" << l.fencing_token << "\n";
    std::cout << "DLOCK_OWNER_TOKEN=" << l.owner_token << "\n"
              << "DLOCK_LEASE_UNTIL=" << format_time(l.lease_until) << "\n";
}

std::string field_text(const pqxx::field& f) {
    return f.is_null() ? std::string{} : f.as<std::string>();
}

std::string duration_field(const pqxx::field& f) {
    if (f.is_null()) return "-";
    return format_duration(std::chrono::milliseconds{static_cast<long long>(f.as<double>() * 1000.0)});
}

/// What `dlock status` shows: one lock, a prefix or all held ones, in which order.
struct status_query {
    std::string name;
    std::string prefix;
    std::string sort = "name";
    bool all = false;
    bool json = false;
};

/// The rows of dlock.locks that `dlock status` shows, in its order.
pqxx::result status_rows(pqxx::connection& conn, const status_query& q) {
    pqxx::nontransaction tx{conn};
    // kind, holders and waiters are read through to_jsonb so an older server (without
    // them) works too; waiters is NULL when pg_dlock is not preloaded
    return tx.exec_params("SELECT lock_name, state, holder, fencing_token,"
                          " extract(epoch FROM held_for)::float8, extract(epoch FROM expires_in)::float8,"
                          " renewals, acquisitions, takeovers,"
                          " coalesce(to_jsonb(l) ->> 'kind', 'exclusive'),"
                          " coalesce((to_jsonb(l) ->> 'holders')::int, (state = 'held')::int),"
                          " (to_jsonb(l) ->> 'waiters')::int AS waiters"
                          " FROM dlock.locks l"
                          " WHERE ($1 = '' OR lock_name = $1) AND ($2 = '' OR starts_with(lock_name, $2))"
                          " AND ($3 OR $1 <> '' OR state <> 'free' OR coalesce((to_jsonb(l) ->> 'waiters')::int, 0) > 0)"
                          " ORDER BY CASE WHEN $4 = 'waiters' THEN coalesce((to_jsonb(l) ->> 'waiters')::int, -1) END"
                          " DESC NULLS LAST,"
                          " CASE WHEN $4 = 'held-for' THEN held_for END DESC NULLS LAST, lock_name",
                          q.name, q.prefix, q.all, q.sort);
}

/// The order of status_rows for rows gathered from several partitions: the
/// same keys, names compared byte by byte (each server sorts by its collation).
bool status_before(const pqxx::row& a, const pqxx::row& b, const std::string& sort) {
    const auto desc_nulls_last = [](const pqxx::field& x, const pqxx::field& y) -> int {
        if (x.is_null() || y.is_null()) return x.is_null() == y.is_null() ? 0 : (x.is_null() ? 1 : -1);
        const double dx = x.as<double>(), dy = y.as<double>();
        return dx == dy ? 0 : (dx > dy ? -1 : 1);
    };
    int c = 0;
    if (sort == "waiters") {
        const auto w = [](const pqxx::field& f) { return f.is_null() ? -1 : f.as<int>(); };
        c = w(a[11]) == w(b[11]) ? 0 : (w(a[11]) > w(b[11]) ? -1 : 1);
    } else if (sort == "held-for") {
        c = desc_nulls_last(a[4], b[4]);
    }
    if (c != 0) return c < 0;
    return field_text(a[0]) < field_text(b[0]);
}

/// Prints dlock.locks of every connection (a farm's partitions) as one table
/// or JSON array; true when it found a row.
bool print_status(std::vector<std::unique_ptr<pqxx::connection>>& conns, const status_query& q) {
    std::vector<pqxx::result> results;
    std::vector<pqxx::row> r;
    for (auto& conn : conns) {
        results.push_back(status_rows(*conn, q));
        for (const auto& row : results.back())
            r.push_back(row);
    }
    if (conns.size() > 1)
        std::stable_sort(r.begin(), r.end(),
                         [&q](const pqxx::row& a, const pqxx::row& b) { return status_before(a, b, q.sort); });
    const auto or_null = [](const pqxx::field& f) { return f.is_null() ? std::string{"null"} : field_text(f); };
    if (q.json) {
        std::cout << "[";
        for (std::size_t i = 0; i < r.size(); ++i) {
            const auto& row = r[i];
            std::cout << (i == 0 ? "\n" : ",\n") << "  {\"lock_name\": " << json_quote(field_text(row[0]))
                      << ", \"state\": " << json_quote(field_text(row[1]))
                      << ", \"holder\": " << (row[2].is_null() ? "null" : json_quote(field_text(row[2])))
                      << ", \"kind\": " << json_quote(field_text(row[9]))
                      << ", \"holders\": " << field_text(row[10])
                      << ", \"waiters\": " << or_null(row[11])
                      << ", \"fencing_token\": " << or_null(row[3])
                      << ", \"held_for_seconds\": " << or_null(row[4])
                      << ", \"expires_in_seconds\": " << or_null(row[5])
                      << ", \"renewals\": " << or_null(row[6])
                      << ", \"acquisitions\": " << or_null(row[7])
                      << ", \"takeovers\": " << or_null(row[8]) << "}";
        }
        std::cout << (r.empty() ? "]\n" : "\n]\n");
        return !r.empty();
    }
    std::vector<std::vector<std::string>> rows{{"NAME", "STATE", "HOLDER", "TOKEN", "HELD FOR", "EXPIRES IN",
                                                "RENEWALS", "TAKEOVERS", "KIND", "HOLDERS", "WAITERS"}};
    const auto or_dash = [](const pqxx::field& f) { return f.is_null() ? std::string{"-"} : field_text(f); };
    for (const auto& row : r)
        rows.push_back({field_text(row[0]), field_text(row[1]), or_dash(row[2]), or_dash(row[3]),
                        duration_field(row[4]), duration_field(row[5]), or_dash(row[6]), or_dash(row[8]),
                        field_text(row[9]), field_text(row[10]), or_dash(row[11])});
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (std::size_t c = 0; c < row.size(); ++c)
            width[c] = std::max(width[c], row[c].size());
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            const bool numeric = c == 3 || c == 6 || c == 7 || c == 9 || c == 10;
            std::string cell = row[c];
            const std::string pad(width[c] - cell.size(), ' ');
            line += (numeric ? pad + cell : cell + pad) + (c + 1 < row.size() ? "  " : "");
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        std::cout << line << "\n";
    }
    return !r.empty();
}

/// `dlock status`: once, or with watch > 0 again every watch on the same
/// connections, the screen cleared first, as top does, until interrupted. With
/// several connection strings (a farm's partitions) their rows are shown as one.
int show_status(const std::vector<std::string>& dsns, const status_query& q, std::chrono::milliseconds watch) {
    std::vector<std::unique_ptr<pqxx::connection>> conns;
    for (const auto& dsn : dsns) {
        try {
            conns.push_back(std::make_unique<pqxx::connection>(dsn));
        } catch (const std::exception& e) {
            std::cerr << "dlock: could not connect";
            if (dsns.size() > 1) std::cerr << " to partition " << conns.size();
            std::cerr << ": " << e.what();
            return exit_code::unavailable;
        }
    }
    if (watch.count() <= 0) {
        if (!print_status(conns, q) && (!q.name.empty() || !q.prefix.empty())) std::cerr << "dlock: no such lock\n";
        return exit_code::ok;
    }
    for (;;) {
        const std::time_t now = std::time(nullptr);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
        std::cout << "\033[H\033[2J" << "every " << format_duration(watch) << ": dlock status"
                  << (q.sort == "name" ? "" : " --sort " + q.sort) << "    " << stamp << "\n\n";
        print_status(conns, q);
        std::cout << std::flush;
        std::this_thread::sleep_for(watch);
    }
}

struct connection_args {
    std::string dsn;
    std::string timeout = "5s";
    std::string wait_mode = "auto";
    std::string pooling = "detect";
    std::string durability = "durable";
    std::vector<std::string> partitions; // --partition: a lock farm's, in its order
};

/// The client's options for calls on these names. With --partition, the
/// connection string is that of the one partition that owns them all, by the
/// farm's rule (dlock::farm_client, docs/farm.md); names of several partitions
/// or a partition count that is not a power of two are usage errors.
dlock::client_options client_options_of(const connection_args& c, const std::vector<std::string>& names = {}) {
    dlock::client_options o;
    o.connection_string = c.dsn;
    o.call_timeout = parse_duration(c.timeout, "--timeout");
    o.wait_mode = parse_wait_mode(c.wait_mode);
    o.pooling = parse_pooling(c.pooling);
    o.durability = parse_durability(c.durability);
    if (!c.partitions.empty()) {
        dlock::client_options farm_options;
        farm_options.partitions = c.partitions;
        try {
            const dlock::farm_client farm{farm_options};
            o.connection_string = c.partitions[farm.partition_of_all(names)];
        } catch (const dlock::invalid_argument_error& e) {
            throw usage_error{std::string{"--partition: "} + e.what()};
        }
    }
    return o;
}

dlock::client make_client(const connection_args& c, const std::vector<std::string>& names) {
    return dlock::client{client_options_of(c, names)};
}

} // namespace

int main(int argc, char** argv) {
    // `dlock run ... -- COMMAND`: everything after the first "--" is COMMAND.
    std::vector<std::string> command;
    int parse_argc = argc;
    bool saw_separator = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") == 0) {
            saw_separator = true;
            for (int j = i + 1; j < argc; ++j)
                command.emplace_back(argv[j]);
            parse_argc = i;
            break;
        }
    }

    CLI::App app{"dlock: distributed locks on PostgreSQL (pg_dlock) from the shell", "dlock"};
    app.set_version_flag("--version", std::string{"dlock "} + DLOCK_VERSION + " (pg_dlock client, libpqxx " + PQXX_VERSION + ")");
    app.require_subcommand(1);
    app.fallthrough(); // --dsn, --partition, --timeout, --wait-mode, --pooling, --durability also after the subcommand
    app.footer(std::string{"Examples:\n"
                           "  dlock run nightly-report -- /usr/local/bin/report --all\n"
                           "  dlock status --prefix settlement:\n"
                           "  dlock force-release nightly-report --reason \"host-3 hung\"\n\n"
                           "Connection: --dsn, or the PG* environment (PGHOST, PGPORT, PGUSER, PGDATABASE, ...);\n"
                           "a lock farm: --partition CONNINFO once for each of its partitions, in order.\n\n"} +
               exit_status_help);
    connection_args conn;
    std::string& dsn = conn.dsn;
    auto* dsn_opt = app.add_option("--dsn", dsn, "libpq connection string or URI (default: PG* environment)");
    app.add_option("--partition", conn.partitions,
                   "a partition of a lock farm (docs/farm.md), once for each in the farm's order (a power of two "
                   "of them): each command goes straight to the partition that owns its names, as the farm's "
                   "proxy routes them; status without NAME gathers every partition")
        ->excludes(dsn_opt)
        ->allow_extra_args(false);
    app.add_option("--timeout", conn.timeout,
                   "bound of each call to the server (statement timeout; a --wait adds to it)")
        ->capture_default_str();
    app.add_option("--wait-mode", conn.wait_mode,
                   "how --wait waits: auto (server on a direct connection, poll behind a transaction pooler such "
                   "as PgBouncer in transaction pooling, configured with --pooling or detected), server (in the "
                   "server, first come first served, also behind a pooler) or poll (retry from the client with "
                   "jittered backoff; no first come first served)")
        ->capture_default_str();
    app.add_option("--pooling", conn.pooling,
                   "what stands between dlock and the server: detect (find out), none (a direct connection or "
                   "session pooling: prepared statements) or transaction (a transaction pooler such as PgBouncer "
                   "in transaction pooling: self-contained calls)")
        ->capture_default_str();
    app.add_option("--durability", conn.durability,
                   "how the server commits dlock's grants, renewals and releases: durable (each waits for its WAL "
                   "flush) or fenced (no flush wait; a crash may lose a grant, which its holder learns at its next "
                   "renewal; needs the C extension pg_dlock 1.4 or later, preloaded)")
        ->capture_default_str();

    // run
    run_args ra;
    std::string ttl_text = "30s", wait_text, kill_after_text = "10s", max_hold_text, min_hold_text, lock_delay_text;
    bool no_wait = false;
    auto* run = app.add_subcommand("run", "Run COMMAND while holding the lock NAME");
    run->add_option("NAME", ra.names, "lock name; several names: all of them or none")->required();
    auto* shared_opt = run->add_flag("--shared", ra.shared, "a shared lease: many --shared holders at once, no exclusive one");
    auto* permits_opt = run->add_option("--permits", ra.permits, "one permit of a semaphore of N permits")
                            ->check(CLI::Range(1, 1000000));
    shared_opt->excludes(permits_opt);
    run->add_option("--ttl", ttl_text, "lease time-to-live, renewed every ttl/3")->capture_default_str();
    auto* wait_opt = run->add_option("--wait", wait_text, "wait up to this long for the lock (default: do not wait)");
    auto* no_wait_opt = run->add_flag("--no-wait", no_wait, "fail at once when the lock is busy (the default)");
    wait_opt->excludes(no_wait_opt);
    run->add_option("--holder", ra.holder, "text shown as holder in dlock status (default hostname:pid)");
    run->add_option("--kill-after", kill_after_text, "after a lost lease, SIGKILL this long after SIGTERM")
        ->capture_default_str();
    run->add_flag("--session-bound", ra.session_bound,
                  "the lease also ends at once if dlock's database session ends (dlock killed, connection lost)");
    run->add_option("--max-hold", max_hold_text,
                    "stop renewing after holding this long: the command is then stopped as for a lost lease");
    run->add_option("--min-hold", min_hold_text,
                    "if the command ends sooner, keep the lock from others until this long after the grant");
    run->add_option("--lock-delay", lock_delay_text,
                    "if the lease is lost (not released), nobody gets the lock for this long");
    run->add_option("-E,--conflict-exit-code", ra.conflict_exit_code, "exit status when busy (as flock -E)")
        ->capture_default_str()
        ->check(CLI::Range(0, 255));
    run->footer(R"TXT(Usage: dlock run [OPTIONS] NAME [NAME...] -- COMMAND [ARG...]

COMMAND runs with DLOCK_LOCK_NAME, DLOCK_FENCING_TOKEN and DLOCK_OWNER_TOKEN set,
in its own process group. The lease is kept alive while it runs and released
when it exits. If the lease is lost, the group gets SIGTERM, then SIGKILL after
--kill-after, and dlock exits 124. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
and SIGUSR2 sent to dlock are forwarded to COMMAND.

Examples:
  dlock run nightly-report -- /usr/local/bin/report --all
  dlock run --wait 5m --ttl 1m db-migrate -- ./migrate.sh
  dlock run --shared report:2026-09 -- ./read-report.sh   (readers; a plain run is the writer)
  dlock run --permits 2 --wait 10m export:tenant-42 -- ./export.sh
  dlock run item:7 item:42 -- ./transfer.sh   (both or none; tokens comma-separated)
  dlock run --session-bound --ttl 5m --lock-delay 30s payments -- ./settle.sh
  dlock run --min-hold 1m nightly-report -- ./report.sh   (no second run on a lagging node)
  dlock --wait-mode server run --wait 5m jobs -- ./job.sh   (FIFO even behind a pooler)
  */5 * * * * dlock run --holder "$(hostname)" sync-job -- sync.sh   (crontab))TXT");

    // status
    status_query sq;
    std::string status_watch;
    auto* status = app.add_subcommand("status", "Show locks from dlock.locks");
    auto* status_name_opt = status->add_option("NAME", sq.name, "only this lock");
    auto* prefix_opt = status->add_option("--prefix", sq.prefix, "only locks whose name starts with P");
    prefix_opt->excludes(status_name_opt);
    auto* status_json_opt = status->add_flag("--json", sq.json, "JSON instead of a table");
    status->add_flag("--all", sq.all, "also list free locks (default: held and expired leases, and names waited for)");
    status->add_option("--sort", sq.sort, "order: name, waiters (most waiting sessions first) or held-for (longest first)")
        ->check(CLI::IsMember({"name", "waiters", "held-for"}))
        ->capture_default_str();
    status->add_option("--watch", status_watch, "show it again every INTERVAL (e.g. 2s), as top does, until interrupted")
        ->expected(0, 1)
        ->default_str("2s")
        ->excludes(status_json_opt);
    status->footer(
        "Examples:\n  dlock status\n  dlock status nightly-report\n  dlock status --prefix settlement: --json\n"
        "  dlock status --sort waiters --watch 1s   (the most contended names, refreshed every second)");

    // acquire
    std::string acq_name, acq_ttl = "30s", acq_wait, acq_holder;
    bool acq_no_wait = false, acq_json = false;
    auto* acquire = app.add_subcommand("acquire", "Take a lease and print it (it is not released on exit)");
    acquire->add_option("NAME", acq_name, "lock name")->required();
    acquire->add_option("--ttl", acq_ttl, "lease time-to-live")->capture_default_str();
    auto* acq_wait_opt = acquire->add_option("--wait", acq_wait, "wait up to this long (default: do not wait)");
    acq_wait_opt->excludes(acquire->add_flag("--no-wait", acq_no_wait, "fail at once when busy (the default)"));
    acquire->add_option("--holder", acq_holder, "holder text");
    acquire->add_flag("--json", acq_json, "print JSON instead of KEY=value lines");
    acquire->footer("Examples:\n  eval \"$(dlock acquire --ttl 5m deploy)\"\n"
                    "  dlock renew deploy --owner-token \"$DLOCK_OWNER_TOKEN\" --ttl 5m\n"
                    "  dlock release deploy --owner-token \"$DLOCK_OWNER_TOKEN\"");

    // renew
    std::string ren_name, ren_owner, ren_ttl = "30s";
    bool ren_json = false;
    auto* renew = app.add_subcommand("renew", "Extend a lease by its owner token");
    renew->add_option("NAME", ren_name, "lock name")->required();
    renew->add_option("--owner-token", ren_owner, "owner token (default: $DLOCK_OWNER_TOKEN)");
    renew->add_option("--ttl", ren_ttl, "new time-to-live from now")->capture_default_str();
    renew->add_flag("--json", ren_json, "print JSON");
    renew->footer("Example:\n  dlock renew deploy --owner-token \"$DLOCK_OWNER_TOKEN\" --ttl 5m");

    // release
    std::string rel_name, rel_owner;
    auto* release = app.add_subcommand("release", "End a lease by its owner token");
    release->add_option("NAME", rel_name, "lock name")->required();
    release->add_option("--owner-token", rel_owner, "owner token (default: $DLOCK_OWNER_TOKEN)");
    release->footer("Example:\n  dlock release deploy --owner-token \"$DLOCK_OWNER_TOKEN\"");

    // force-release
    std::string fr_name, fr_reason;
    auto* force = app.add_subcommand("force-release", "End whoever's lease on NAME (audited; needs a grant)");
    force->add_option("NAME", fr_name, "lock name")->required();
    force->add_option("--reason", fr_reason, "why (recorded in dlock.audit_log)")->required();
    force->footer("Example:\n  dlock force-release nightly-report --reason \"job hung on host-3, ticket 1234\"");

    election_commands election{app};

    try {
        app.parse(parse_argc, argv);
        if (saw_separator && !run->parsed() && !election.takes_command())
            throw usage_error{"\"--\" is only used by dlock run and dlock elect"};
        if (run->parsed()) {
            if (!saw_separator) throw usage_error{"run: missing \"--\" before COMMAND"};
            if (command.empty()) throw usage_error{"run: missing COMMAND after \"--\""};
            for (const auto& n : ra.names)
                check_lock_name(n);
            if (ra.names.size() > 1 && (ra.shared || ra.permits > 0))
                throw CLI::ValidationError("NAME", "several names are taken exclusively; --shared and --permits take one name");
            ra.name.clear();
            for (const auto& n : ra.names)
                ra.name += (ra.name.empty() ? "" : ",") + n;
            ra.ttl = parse_duration(ttl_text, "--ttl");
            if (!wait_text.empty()) ra.wait = parse_duration(wait_text, "--wait");
            ra.kill_after = parse_duration(kill_after_text, "--kill-after");
            if (!max_hold_text.empty()) ra.max_hold = parse_duration(max_hold_text, "--max-hold");
            if (!min_hold_text.empty()) ra.min_hold = parse_duration(min_hold_text, "--min-hold");
            if (!lock_delay_text.empty()) ra.lock_delay = parse_duration(lock_delay_text, "--lock-delay");
            for (const auto& [text, value, flag] :
                 {std::tuple{&max_hold_text, ra.max_hold, "--max-hold"}, std::tuple{&min_hold_text, ra.min_hold, "--min-hold"},
                  std::tuple{&lock_delay_text, ra.lock_delay, "--lock-delay"}})
                if (!text->empty() && value.count() == 0) throw usage_error{std::string{flag} + " must be positive"};
            ra.command = command;
        }
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);
        std::cerr << "dlock: " << e.what() << "\nRun with --help for usage.\n";
        return exit_code::usage;
    } catch (const usage_error& e) {
        std::cerr << "dlock: " << e.what() << "\nRun with --help for usage.\n";
        return exit_code::usage;
    }

    try {
        if (const auto status = election.run(client_options_of(conn, election.names()), command)) return *status;
        if (run->parsed()) {
            auto client = make_client(conn, ra.names);
            return run_under_lease(client, ra);
        }
        if (status->parsed()) {
            std::chrono::milliseconds watch{0};
            if (status->count("--watch") > 0)
                watch = parse_duration(status_watch.empty() ? std::string{"2s"} : status_watch, "--watch");
            if (conn.partitions.empty()) return show_status({dsn}, sq, watch);
            if (sq.name.empty()) return show_status(conn.partitions, sq, watch);
            return show_status({client_options_of(conn, {sq.name}).connection_string}, sq, watch);
        }
        if (acquire->parsed()) {
            check_lock_name(acq_name);
            dlock::lease_options o;
            o.ttl = parse_duration(acq_ttl, "--ttl");
            o.holder = acq_holder;
            o.keep_alive = false;
            auto client = make_client(conn, {acq_name});
            std::optional<dlock::lease> l;
            try {
                if (!acq_wait.empty())
                    l.emplace(client.acquire(acq_name, parse_duration(acq_wait, "--wait"), o));
                else
                    l = client.try_acquire(acq_name, o);
            } catch (const dlock::busy_error&) {
            }
            if (!l) {
                std::cerr << "dlock: " << acq_name << " is busy\n";
                return exit_code::busy;
            }
            const dlock::grant g = l->detach();
            print_lease({g.lock_name, g.owner_token, g.fencing_token, g.lease_until}, acq_json);
            return exit_code::ok;
        }
        if (renew->parsed() || release->parsed()) {
            std::string& owner = renew->parsed() ? ren_owner : rel_owner;
            const std::string& name = renew->parsed() ? ren_name : rel_name;
            if (owner.empty() && std::getenv("DLOCK_OWNER_TOKEN") != nullptr) owner = std::getenv("DLOCK_OWNER_TOKEN");
            check_lock_name(name);
            check_owner_token(owner);
            auto client = make_client(conn, {name});
            if (renew->parsed()) {
                const auto g = client.renew(name, owner, parse_duration(ren_ttl, "--ttl"));
                if (!g) {
                    std::cerr << "dlock: " << name << " is not held with this owner token\n";
                    return exit_code::not_held;
                }
                print_lease({g->lock_name, g->owner_token, 0, g->lease_until}, ren_json);
                return exit_code::ok;
            }
            switch (client.release(name, owner)) {
            case dlock::outcome::done: return exit_code::ok;
            case dlock::outcome::refused:
                std::cerr << "dlock: " << name << " was not held with this owner token\n";
                return exit_code::not_held;
            case dlock::outcome::unknown:
                std::cerr << "dlock: outcome of the release is unknown (the lease ends at its ttl at the latest)\n";
                return exit_code::failed;
            }
        }
        if (force->parsed()) {
            check_lock_name(fr_name);
            auto client = make_client(conn, {fr_name});
            if (!client.force_release(fr_name, fr_reason)) {
                std::cerr << "dlock: " << fr_name << " was not held\n";
                return exit_code::not_held;
            }
            std::cout << "released " << fr_name << "\n";
            return exit_code::ok;
        }
    } catch (const usage_error& e) {
        std::cerr << "dlock: " << e.what() << "\nRun with --help for usage.\n";
        return exit_code::usage;
    } catch (const dlock::connection_error& e) {
        std::cerr << "dlock: " << e.what() << (std::strchr(e.what(), '\n') ? "" : "\n");
        return exit_code::unavailable;
    } catch (const dlock::unknown_outcome_error& e) {
        std::cerr << "dlock: outcome unknown: " << e.what() << "\n";
        return exit_code::failed;
    } catch (const dlock::error& e) {
        std::cerr << "dlock: " << e.what() << "\n";
        return exit_code::failed;
    } catch (const std::exception& e) {
        std::cerr << "dlock: " << e.what() << "\n";
        return exit_code::failed;
    }
    return exit_code::failed;
}
