// conformance_test.cpp -- the conformance scenarios of client/conformance (written once as
// data, docs in client/conformance/README.md) run with the C++ client, and their negative
// controls, each of which this runner must fail.
//
// The scenario files are found under DLOCK_CONFORMANCE_DIR (the environment, else the
// source tree's client/conformance). The environment is the runners' common one:
// DLOCK_CONFORMANCE_DSN (else PG*), DLOCK_CONFORMANCE_ADMIN_DSN, DLOCK_CONFORMANCE_POOLER,
// DLOCK_CONFORMANCE_POOL2_DSN. The scoped form of a `body` step is, in C++, a lease in a
// block whose body waits on lease::wait_lost(); stopped by a loss it ends as lease_lost.
#include <gtest/gtest.h>

#include <dlock/dlock.hpp>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string{v} : fallback;
}

std::filesystem::path conformance_dir() {
    return env_or("DLOCK_CONFORMANCE_DIR", DLOCK_SOURCE_CONFORMANCE_DIR);
}

struct environment {
    std::string dsn = env_or("DLOCK_CONFORMANCE_DSN", "");
    // Else the variables 45-pgbouncer.sh sets for the other suites.
    std::string admin_dsn = env_or("DLOCK_CONFORMANCE_ADMIN_DSN", env_or("DLOCK_ADMIN_DSN", dsn));
    std::string pool2_dsn = env_or("DLOCK_CONFORMANCE_POOL2_DSN", env_or("DLOCK_POOL2_DSN", ""));
    std::string pooler = env_or("DLOCK_CONFORMANCE_POOLER", env_or("DLOCK_TEST_POOLER", ""));
};

struct step_failed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The error names of the README's table.
std::string error_name(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const dlock::stale_token_error&) {
        return "stale_token";
    } catch (const dlock::not_held_error&) {
        return "not_held";
    } catch (const dlock::busy_error&) {
        return "busy";
    } catch (const dlock::invalid_argument_error&) {
        return "invalid_argument";
    } catch (const dlock::permission_error&) {
        return "permission";
    } catch (const dlock::unknown_outcome_error&) {
        return "unknown_outcome";
    } catch (const dlock::connection_error&) {
        return "connection";
    } catch (const dlock::server_error&) {
        return "server";
    } catch (const std::exception&) {
        return "other";
    }
}

std::string describe(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    }
}

const std::map<std::string, std::set<std::string>> result_keys = {
    {"try_acquire", {"granted", "fencing_token", "owner_token"}},
    {"acquire", {"granted", "fencing_token", "owner_token"}},
    {"renew", {"outcome"}},
    {"release", {"outcome"}},
    {"lease_state", {"valid", "lost", "time_left_ms", "on_lost_called"}},
    {"wait_lost", {"lost"}},
    {"body", {}},
    {"body_started", {}},
    {"fenced_write", {"committed"}},
    {"sql", {"rows", "value"}},
    {"new_owner", {}},
    {"sleep", {}},
    {"mark", {}},
};

struct step_result {
    json result = json::object();
    std::exception_ptr error;
    std::string error_override; // "lease_lost" for a body stopped by a loss
    double elapsed_ms = 0;
};

std::optional<long long> integer_like(const json& v) {
    if (v.is_number_integer()) return v.get<long long>();
    if (v.is_string()) {
        static const std::regex digits{"-?[0-9]+"};
        const auto s = v.get<std::string>();
        if (std::regex_match(s, digits)) return std::stoll(s);
    }
    return std::nullopt;
}

bool values_equal(const json& got, const json& want) {
    if (got.is_boolean() || want.is_boolean() || got.is_null() || want.is_null()) return got == want;
    const auto g = integer_like(got);
    const auto w = integer_like(want);
    if (g && w && !(got.is_string() && want.is_string())) return *g == *w;
    return got == want;
}

std::optional<int> order(const json& got, const json& want) {
    const auto g = integer_like(got);
    const auto w = integer_like(want);
    if (g && w) return *g < *w ? -1 : (*g > *w ? 1 : 0);
    if (got.is_number() && want.is_number()) {
        const double a = got.get<double>(), b = want.get<double>();
        return a < b ? -1 : (a > b ? 1 : 0);
    }
    return std::nullopt;
}

std::string random_hex() {
    static std::mt19937_64 rng{std::random_device{}()};
    std::ostringstream s;
    s << std::hex << (rng() & 0xffffffffULL);
    return s.str();
}

// A value of a result column as JSON, by its type.
json column_value(const pqxx::field& f, pqxx::oid type) {
    if (f.is_null()) return nullptr;
    const std::string text = f.c_str();
    switch (type) {
    case 16: return text == "t";
    case 20:
    case 21:
    case 23: return std::stoll(text);
    default: return text;
    }
}

class scenario_run {
public:
    scenario_run(json scenario, environment env) : m_scenario(std::move(scenario)), m_env{std::move(env)} {
        m_ns = "conf/cpp/" + random_hex() + "/" + m_scenario["name"].get<std::string>() + "/";
        m_admin = std::make_unique<pqxx::connection>(m_env.admin_dsn);
    }

    ~scenario_run() {
        const json cleanup = m_scenario.value("cleanup", json::array());
        for (const auto& step : cleanup) {
            try {
                op_sql(step);
            } catch (...) { // NOLINT(bugprone-empty-catch): cleanup ignores outcomes
            }
        }
        for (auto& [handle, p] : m_pending)
            if (p.future.valid()) p.future.wait_for(std::chrono::seconds{30});
        m_leases.clear(); // released by their destructors
        m_clients.clear();
    }

    void run() {
        const json clients = m_scenario.value("clients", json::object());
        for (const auto& [name, spec] : clients.items())
            m_clients.emplace(name, std::make_unique<dlock::client>(client_options(name)));
        int i = 0;
        for (const auto& step : m_scenario["steps"]) {
            ++i;
            try {
                run_step(step);
            } catch (const std::exception& e) {
                throw step_failed{"step " + std::to_string(i) + " (" + step["op"].get<std::string>() + "): " +
                                  e.what()};
            }
        }
    }

private:
    struct pending {
        json step;
        clock_type::time_point started;
        std::future<step_result> future;
    };
    struct body_state {
        std::mutex m;
        std::condition_variable cv;
        bool started = false;
        std::int64_t token = 0;
    };

    json m_scenario;
    environment m_env;
    std::string m_ns;
    std::unique_ptr<pqxx::connection> m_admin;
    std::map<std::string, std::unique_ptr<pqxx::connection>> m_sessions;
    std::map<std::string, std::unique_ptr<pqxx::connection>> m_fence_conns;
    std::map<std::string, std::unique_ptr<dlock::client>> m_clients;
    std::map<std::string, json> m_vars;
    std::map<std::string, std::shared_ptr<dlock::lease>> m_lease_vars;
    std::vector<std::shared_ptr<dlock::lease>> m_leases;
    std::map<const dlock::lease*, std::shared_ptr<std::atomic<bool>>> m_lost_called;
    std::map<std::string, clock_type::time_point> m_marks;
    std::map<std::string, std::shared_ptr<body_state>> m_bodies;
    std::map<std::string, pending> m_pending;
    std::mutex m_mutex; // m_leases, m_lost_called from async steps

    std::string dsn_named(const std::string& name) const {
        if (name == "default") return m_env.dsn;
        if (name == "admin") return m_env.admin_dsn;
        if (name == "pool2") {
            if (m_env.pool2_dsn.empty())
                throw step_failed{"dsn pool2 asked for, but DLOCK_CONFORMANCE_POOL2_DSN is not set"};
            return m_env.pool2_dsn;
        }
        throw step_failed{"unknown dsn " + name};
    }

    dlock::client_options client_options(const std::string& name) const {
        const json spec = m_scenario.value("clients", json::object()).value(name, json::object());
        dlock::client_options o;
        for (const auto& [key, value] : spec.items()) {
            if (key == "dsn") continue;
            if (key == "pooling") {
                const auto p = value.get<std::string>();
                o.pooling = p == "none" ? dlock::pooling::none
                                        : (p == "transaction" ? dlock::pooling::transaction : dlock::pooling::detect);
            } else if (key == "wait_mode") {
                const auto w = value.get<std::string>();
                o.wait_mode = w == "server" ? dlock::wait_mode::server
                                            : (w == "poll" ? dlock::wait_mode::poll : dlock::wait_mode::automatic);
            } else if (key == "call_timeout_ms") {
                o.call_timeout = milliseconds{value.get<long long>()};
            } else if (key == "poll_interval_ms") {
                o.poll_interval = milliseconds{value.get<long long>()};
            } else {
                throw step_failed{"unknown client option " + key};
            }
        }
        o.connection_string = dsn_named(spec.value("dsn", "default"));
        return o;
    }

    json resolve(const json& value) const {
        if (!value.is_string()) return value;
        const auto s = value.get<std::string>();
        static const std::regex reference{R"(\$([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?)"};
        std::smatch m;
        if (std::regex_match(s, m, reference)) {
            const auto it = m_vars.find(m[1]);
            if (it == m_vars.end()) throw step_failed{"unknown variable $" + m[1].str()};
            const std::string field = m[2].matched ? m[2].str() : "_";
            if (!it->second.is_object()) return it->second;
            if (!it->second.contains(field)) throw step_failed{"variable $" + m[1].str() + " has no field " + field};
            return it->second[field];
        }
        std::string out = s;
        for (std::size_t at = out.find("${ns}"); at != std::string::npos; at = out.find("${ns}", at + m_ns.size()))
            out.replace(at, 5, m_ns);
        return out;
    }

    std::string lock_name(const json& value) const {
        if (value.is_object()) {
            if (!value.contains("exact")) throw step_failed{"a name object needs exact"};
            std::string out;
            for (int i = 0; i < value.value("repeat", 1); ++i)
                out += value["exact"].get<std::string>();
            return out;
        }
        return m_ns + value.get<std::string>();
    }

    void compare(const std::string& what, const json& got, const json& want) const {
        static const std::set<std::string> comparators{"eq", "ne", "gt", "ge", "lt", "le"};
        if (want.is_object() && !want.empty()) {
            bool all = true;
            for (const auto& [k, v] : want.items())
                all = all && comparators.count(k) > 0;
            if (all) {
                for (const auto& [op, operand] : want.items()) {
                    const json w = resolve(operand);
                    const auto o = order(got, w);
                    const bool ok = op == "eq"   ? values_equal(got, w)
                                    : op == "ne" ? !values_equal(got, w)
                                    : !o         ? false
                                    : op == "gt" ? *o > 0
                                    : op == "ge" ? *o >= 0
                                    : op == "lt" ? *o < 0
                                                 : *o <= 0;
                    if (!ok) throw step_failed{what + ": got " + got.dump() + ", expected " + op + " " + w.dump()};
                }
                return;
            }
        }
        if (want.is_array()) {
            if (!got.is_array() || got.size() != want.size())
                throw step_failed{what + ": got " + got.dump() + ", expected " + want.dump()};
            for (std::size_t i = 0; i < want.size(); ++i)
                compare(what + "[" + std::to_string(i) + "]", got[i], want[i]);
            return;
        }
        const json w = resolve(want);
        if (!values_equal(got, w)) throw step_failed{what + ": got " + got.dump() + ", expected " + w.dump()};
    }

    void check(const json& step, const std::string& op, const step_result& r, double elapsed_ms) const {
        const json expect = step.value("expect", json::object());
        for (const auto& [key, v] : expect.items())
            if (result_keys.at(op).count(key) == 0 && key != "error" && key != "elapsed_ms")
                throw step_failed{"unknown expectation key " + key + " for op " + op};
        const std::string got_error =
            !r.error_override.empty() ? r.error_override : (r.error ? error_name(r.error) : std::string{});
        if (expect.contains("error")) {
            if (got_error.empty()) throw step_failed{"expected error " + expect["error"].dump() + ", but it succeeded"};
            if (got_error != expect["error"].get<std::string>())
                throw step_failed{"expected error " + expect["error"].dump() + ", got " + got_error +
                                  (r.error ? ": " + describe(r.error) : std::string{})};
        } else if (!got_error.empty()) {
            throw step_failed{"raised " + got_error + (r.error ? ": " + describe(r.error) : std::string{})};
        }
        for (const auto& [key, want] : expect.items()) {
            if (key == "error") continue;
            if (key == "elapsed_ms") {
                compare(key, elapsed_ms, want);
                continue;
            }
            if (!r.result.contains(key)) throw step_failed{"no " + key + " in the result " + r.result.dump()};
            compare(key, r.result[key], want);
        }
    }

    dlock::client& client(const std::string& name) {
        const auto it = m_clients.find(name);
        if (it == m_clients.end()) throw step_failed{"unknown client " + name};
        return *it->second;
    }

    std::shared_ptr<dlock::lease> lease_var(const json& step) {
        const auto it = m_lease_vars.find(step["lease"].get<std::string>());
        if (it == m_lease_vars.end()) throw step_failed{"no lease " + step["lease"].dump()};
        return it->second;
    }

    // Every lease is made with an on_lost that records the call.
    dlock::lease_options lease_options(const json& step, std::shared_ptr<std::atomic<bool>> called) const {
        dlock::lease_options o;
        o.ttl = milliseconds{step["ttl_ms"].get<long long>()};
        o.keep_alive = step.value("keep_alive", true);
        if (step.contains("owner")) o.owner_token = resolve(step["owner"]).get<std::string>();
        o.on_lost = [called](const dlock::lost_lease&) { called->store(true); };
        return o;
    }

    std::shared_ptr<dlock::lease> track(dlock::lease lease, std::shared_ptr<std::atomic<bool>> called) {
        auto p = std::make_shared<dlock::lease>(std::move(lease));
        std::lock_guard<std::mutex> guard{m_mutex};
        m_leases.push_back(p);
        m_lost_called[p.get()] = std::move(called);
        return p;
    }

    json op_acquire(const json& step, const std::string& op) {
        auto& locks = client(step["client"].get<std::string>());
        const std::string name = lock_name(step["name"]);
        auto called = std::make_shared<std::atomic<bool>>(false);
        const auto options = lease_options(step, called);
        std::optional<dlock::lease> lease;
        if (op == "try_acquire")
            lease = locks.try_acquire(name, options);
        else
            lease = locks.acquire(name, milliseconds{step["wait_ms"].get<long long>()}, options);
        if (!lease) return {{"granted", false}};
        auto p = track(std::move(*lease), called);
        const json fields = {{"fencing_token", p->fencing_token()}, {"owner_token", p->owner_token()},
                             {"name", p->name()}};
        if (step.contains("as")) {
            std::lock_guard<std::mutex> guard{m_mutex};
            m_vars[step["as"].get<std::string>()] = fields;
            m_lease_vars[step["as"].get<std::string>()] = p;
        }
        return {{"granted", true}, {"fencing_token", p->fencing_token()}, {"owner_token", p->owner_token()}};
    }

    step_result op_body(const json& step) {
        const auto started = clock_type::now();
        auto body = m_bodies.at(step["as"].get<std::string>());
        step_result r;
        try {
            auto& locks = client(step["client"].get<std::string>());
            auto called = std::make_shared<std::atomic<bool>>(false);
            auto options = lease_options(step, called);
            options.keep_alive = true;
            // The scoped form: the lease lives in this block, released at its end.
            dlock::lease lease =
                locks.acquire(lock_name(step["name"]), milliseconds{step.value("wait_ms", 0LL)}, options);
            {
                std::lock_guard<std::mutex> guard{body->m};
                body->token = lease.fencing_token();
                body->started = true;
            }
            body->cv.notify_all();
            if (lease.wait_lost(milliseconds{step["max_ms"].get<long long>()})) r.error_override = "lease_lost";
        } catch (...) {
            r.error = std::current_exception();
        }
        r.elapsed_ms = std::chrono::duration<double, std::milli>(clock_type::now() - started).count();
        return r;
    }

    json op_body_started(const json& step) {
        const auto name = step["body"].get<std::string>();
        const auto it = m_bodies.find(name);
        if (it == m_bodies.end()) throw step_failed{"no body " + name};
        std::unique_lock<std::mutex> lock{it->second->m};
        if (!it->second->cv.wait_for(lock, milliseconds{step["within_ms"].get<long long>()},
                                     [&] { return it->second->started; }))
            throw step_failed{"the body did not start in time"};
        m_vars[name] = {{"fencing_token", it->second->token}, {"_", it->second->token}};
        return json::object();
    }

    json op_fenced_write(const json& step) {
        const auto client_name = step["client"].get<std::string>();
        auto& conn = m_fence_conns[client_name];
        if (!conn) conn = std::make_unique<pqxx::connection>(client_options(client_name).connection_string);
        const auto token = integer_like(resolve(step["token"]));
        if (!token) throw step_failed{"token is not an integer"};
        pqxx::work w{*conn};
        if (step.contains("role")) w.exec("SET LOCAL ROLE " + w.quote_name(step["role"].get<std::string>()));
        if (step.contains("lock")) dlock::assert_holds(w, lock_name(step["lock"]), *token);
        dlock::fence(w, lock_name(step["resource"]), *token);
        w.exec_params("INSERT INTO public.dlock_conformance_ledger (ns, writer, fencing_token) VALUES ($1, $2, $3)",
                      m_ns, step["writer"].get<std::string>(), *token);
        w.commit();
        return {{"committed", true}};
    }

    pqxx::connection& session(const json& step) {
        if (!step.contains("session")) return *m_admin;
        const auto name = step["session"].get<std::string>();
        auto& conn = m_sessions[name];
        if (!conn) {
            const json sessions = m_scenario.value("sessions", json::object());
            if (!sessions.contains(name)) throw step_failed{"unknown session " + name};
            conn = std::make_unique<pqxx::connection>(dsn_named(sessions[name].value("dsn", "admin")));
        }
        return *conn;
    }

    json op_sql(const json& step) {
        pqxx::connection& conn = session(step);
        // Parameters go in as literals quoted by libpq (libpqxx 6.4 has no dynamic parameter lists).
        std::string query = step["query"].get<std::string>();
        const json params = step.value("params", json::array());
        for (std::size_t i = params.size(); i > 0; --i) {
            const json v = resolve(params[i - 1]);
            std::string literal = v.is_null()      ? "NULL"
                                  : v.is_string()  ? conn.quote(v.get<std::string>())
                                  : v.is_boolean() ? (v.get<bool>() ? "true" : "false")
                                                   : conn.quote(v.dump());
            const std::string placeholder = "$" + std::to_string(i);
            for (std::size_t at = query.find(placeholder); at != std::string::npos;
                 at = query.find(placeholder, at + literal.size()))
                query.replace(at, placeholder.size(), literal);
        }
        const std::string until = step.value("until", "");
        if (!until.empty() && until != "rows" && until != "true") throw step_failed{"unknown until " + until};
        const auto deadline = clock_type::now() + milliseconds{step.value("within_ms", 0LL)};
        json rows = json::array();
        std::vector<std::string> columns;
        for (;;) {
            pqxx::nontransaction tx{conn};
            const pqxx::result res = tx.exec(query);
            rows = json::array();
            columns.clear();
            for (pqxx::row_size_type c = 0; c < res.columns(); ++c)
                columns.emplace_back(res.column_name(c));
            for (const auto& row : res) {
                json r = json::array();
                for (pqxx::row_size_type c = 0; c < res.columns(); ++c)
                    r.push_back(column_value(row[c], res.column_type(c)));
                rows.push_back(r);
            }
            const bool done = until.empty() || (until == "rows" && !rows.empty()) ||
                              (until == "true" && !rows.empty() && rows[0][0] == json(true));
            if (done) break;
            if (clock_type::now() >= deadline) throw step_failed{query + " did not return " + until + " in time"};
            std::this_thread::sleep_for(milliseconds{50});
        }
        const json first = !rows.empty() && !rows[0].empty() ? rows[0][0] : json(nullptr);
        if (step.contains("as")) {
            json saved = {{"_", first}};
            if (!rows.empty())
                for (std::size_t c = 0; c < columns.size(); ++c)
                    saved[columns[c]] = rows[0][c];
            m_vars[step["as"].get<std::string>()] = saved;
        }
        return {{"rows", rows}, {"value", first}};
    }

    step_result execute(const json& step) {
        const auto op = step["op"].get<std::string>();
        if (op == "body") return op_body(step);
        const auto started = clock_type::now();
        step_result r;
        try {
            if (op == "try_acquire" || op == "acquire") {
                r.result = op_acquire(step, op);
            } else if (op == "renew") {
                r.result = {{"outcome", dlock::to_string(lease_var(step)->renew())}};
            } else if (op == "release") {
                r.result = {{"outcome", dlock::to_string(lease_var(step)->release())}};
            } else if (op == "lease_state") {
                auto l = lease_var(step);
                std::lock_guard<std::mutex> guard{m_mutex};
                r.result = {{"valid", l->valid()},
                            {"lost", l->lost()},
                            {"time_left_ms", static_cast<double>(l->time_left().count())},
                            {"on_lost_called", m_lost_called[l.get()] && m_lost_called[l.get()]->load()}};
            } else if (op == "wait_lost") {
                r.result = {{"lost", lease_var(step)->wait_lost(milliseconds{step["within_ms"].get<long long>()})}};
            } else if (op == "body_started") {
                r.result = op_body_started(step);
            } else if (op == "fenced_write") {
                r.result = op_fenced_write(step);
            } else if (op == "sql") {
                r.result = op_sql(step);
            } else if (op == "new_owner") {
                pqxx::nontransaction tx{*m_admin};
                m_vars[step["as"].get<std::string>()] = tx.exec("SELECT gen_random_uuid()::text")[0][0].c_str();
            } else if (op == "sleep") {
                std::this_thread::sleep_for(milliseconds{step["ms"].get<long long>()});
            } else if (op == "mark") {
                m_marks[step["as"].get<std::string>()] = clock_type::now();
            } else {
                throw step_failed{"unknown op " + op};
            }
        } catch (const step_failed&) {
            throw;
        } catch (...) {
            r.error = std::current_exception();
        }
        r.elapsed_ms = std::chrono::duration<double, std::milli>(clock_type::now() - started).count();
        return r;
    }

    static double since(clock_type::time_point t) {
        return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
    }

    void run_step(const json& step) {
        const auto op = step["op"].get<std::string>();
        if (op == "await") {
            const auto handle = step["handle"].get<std::string>();
            auto it = m_pending.find(handle);
            if (it == m_pending.end()) throw step_failed{"no async step or body " + handle};
            pending p = std::move(it->second);
            m_pending.erase(it);
            const step_result r = p.future.get();
            const auto from = step.contains("since") ? m_marks.at(step["since"].get<std::string>()) : p.started;
            check(step, p.step["op"].get<std::string>(), r, since(from));
            return;
        }
        if (result_keys.count(op) == 0) throw step_failed{"unknown op " + op};
        if (step.contains("async") || op == "body") {
            const auto handle = step.contains("async") ? step["async"].get<std::string>() : step["as"].get<std::string>();
            if (op == "body") m_bodies[handle] = std::make_shared<body_state>();
            m_pending[handle] = pending{step, clock_type::now(), std::async(std::launch::async, [this, step] {
                                            try {
                                                return execute(step);
                                            } catch (...) {
                                                step_result r;
                                                r.error = std::current_exception();
                                                return r;
                                            }
                                        })};
            return;
        }
        const auto started = clock_type::now();
        const step_result r = execute(step);
        const double elapsed =
            (op == "wait_lost" && step.contains("since")) ? since(m_marks.at(step["since"].get<std::string>()))
                                                          : r.elapsed_ms;
        (void)started;
        check(step, op, r, elapsed);
    }
};

json load(const std::filesystem::path& path) {
    std::ifstream in{path};
    json s = json::parse(in);
    if (s.value("format", 0) != 1) throw std::runtime_error{path.string() + ": format is not 1"};
    return s;
}

std::set<std::string> capabilities(const environment& env) {
    std::set<std::string> caps{env.pooler.empty() ? "direct" : "transaction_pooler"};
    pqxx::connection admin{env.admin_dsn};
    pqxx::nontransaction tx{admin};
    if (tx.exec("SELECT dlock.waiters('x') IS NOT NULL")[0][0].as<bool>()) caps.insert("wait_queue");
    return caps;
}

void setup(const environment& env) {
    static std::once_flag once;
    std::call_once(once, [&] {
        std::ifstream in{conformance_dir() / "setup.sql"};
        std::stringstream text;
        text << in.rdbuf();
        pqxx::connection admin{env.admin_dsn};
        pqxx::nontransaction tx{admin};
        tx.exec(text.str());
    });
}

// Scenarios the C++ client skips, each with its reason (none so far).
const std::map<std::string, std::string> skipped_by_cpp = {};

enum class verdict { passed, failed, skipped };

verdict run_file(const std::filesystem::path& path, std::string& detail, bool honour_skips) {
    const environment env;
    setup(env);
    const json scenario = load(path);
    const auto name = scenario["name"].get<std::string>();
    if (honour_skips && skipped_by_cpp.count(name) > 0) {
        detail = "skipped by the C++ client: " + skipped_by_cpp.at(name);
        return verdict::skipped;
    }
    const auto caps = capabilities(env);
    for (const auto& r : scenario.value("requires", json::array()))
        if (caps.count(r.get<std::string>()) == 0) {
            detail = "requires " + r.get<std::string>();
            return verdict::skipped;
        }
    try {
        scenario_run run{scenario, env};
        run.run();
        return verdict::passed;
    } catch (const std::exception& e) {
        detail = e.what();
        return verdict::failed;
    }
}

std::vector<std::string> files(const std::string& dir) {
    std::vector<std::string> out;
    const auto d = conformance_dir() / dir;
    if (std::filesystem::is_directory(d))
        for (const auto& entry : std::filesystem::directory_iterator{d})
            if (entry.path().extension() == ".json") out.push_back(entry.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string stem = std::filesystem::path{info.param}.stem().string();
    for (char& c : stem)
        if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
    return stem;
}

class conformance : public ::testing::TestWithParam<std::string> {};
class conformance_negative : public ::testing::TestWithParam<std::string> {};

TEST_P(conformance, scenario_passes) {
    std::string detail;
    const verdict v = run_file(GetParam(), detail, true);
    if (v == verdict::skipped) GTEST_SKIP() << detail;
    EXPECT_EQ(v, verdict::passed) << detail;
}

TEST_P(conformance_negative, runner_fails_the_wrong_expectation) {
    std::string detail;
    const verdict v = run_file(GetParam(), detail, false);
    if (v == verdict::skipped) GTEST_SKIP() << detail;
    EXPECT_EQ(v, verdict::failed) << "the runner passed a scenario with a wrong expectation";
    // Caught for the planted reason, not for a fault of the runner's own.
    const std::string at = "step " + std::to_string(load(GetParam()).value("fails_at_step", 0)) + " ";
    EXPECT_EQ(detail.rfind(at, 0), 0U) << detail;
    std::cout << "caught as expected: " << detail << "\n";
}

INSTANTIATE_TEST_SUITE_P(scenarios, conformance, ::testing::ValuesIn(files("scenarios")), test_name);
INSTANTIATE_TEST_SUITE_P(negative, conformance_negative, ::testing::ValuesIn(files("negative")), test_name);

TEST(conformance_files, are_there) {
    EXPECT_GE(files("scenarios").size(), 15U) << "no scenarios under " << conformance_dir();
    EXPECT_GE(files("negative").size(), 6U);
}

} // namespace
