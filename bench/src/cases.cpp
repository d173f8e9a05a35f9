// The benchmark cases; see cases.hpp.
//
// Every case visits its systems in alternation: round r runs each
// configuration once per system, starting the system order at a different
// place every round, so that load from outside the benchmark spreads over all
// systems instead of falling on one. Latency percentiles come from the samples
// of all rounds together; rates are the mean of the rounds.
#include "cases.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

namespace bench {

namespace {

struct aggregate {
    std::vector<std::int64_t> a;
    std::vector<std::int64_t> b;
    std::vector<std::int64_t> gaps;
    double rate_sum = 0;
    double server_cpu_s = 0;
    double driver_cpu_s = 0;
    std::uint64_t done = 0; // operations the CPU figures are divided by
    int rounds = 0;
    int errors = 0;
    std::uint64_t busy = 0;
    long overlaps = 0;
    double worst_fairness = 0;
    std::uint64_t most = 0;
    std::uint64_t fewest = 0;
    std::string first_error;

    double rate_min = INFINITY;
    double rate_max = 0;

    [[nodiscard]] double rate() const { return rounds > 0 ? rate_sum / rounds : 0.0; }
    void add_rate(double r) {
        rate_sum += r;
        rate_min = std::min(rate_min, r);
        rate_max = std::max(rate_max, r);
    }
    void fail(const std::string& what) {
        if (errors == 0) first_error = what;
        ++errors;
    }
};

std::vector<std::string> rotated(const std::vector<std::string>& v, int round) {
    std::vector<std::string> out(v);
    if (!out.empty()) std::rotate(out.begin(), out.begin() + (round % static_cast<int>(out.size())), out.end());
    return out;
}

bool extension_present(const std::string& conninfo) {
    pg_conn c(conninfo);
    return c.exec("SELECT 1 FROM pg_extension WHERE extname = 'pg_dlock'").rows() == 1;
}

// Whether this pg_dlock has fenced grants (1.4 and later, and loaded): an
// older one refuses SET dlock.durability.
bool fenced_mode_present(const std::string& conninfo) {
    pg_conn c(conninfo);
    return c.exec("SELECT 1 FROM pg_settings WHERE name = 'dlock.durability' AND vartype = 'enum'").rows() == 1;
}

// Whether the database holds the SQL edition, by CREATE EXTENSION or psql -f:
// dlock.settings is a table of the SQL edition only.
bool sql_edition_present(const std::string& conninfo) {
    if (conninfo.empty()) return false;
    pg_conn c(conninfo);
    return c.exec("SELECT to_regclass('dlock.settings') IS NOT NULL").boolean(0, 0);
}

// The systems of a case: the selection (or the case's defaults) without those
// this run cannot offer, each skip noted in the results.
std::vector<std::string> choose_systems(const std::string& case_id, const bench_config& cfg,
                                        const std::vector<std::string>& defaults, sink& out) {
    const std::vector<std::string>& wanted = cfg.systems.empty() ? defaults : cfg.systems;
    bool have_ext = extension_present(cfg.base.conninfo);
    std::vector<std::string> chosen;
    for (const auto& s : wanted) {
        if (std::find(defaults.begin(), defaults.end(), s) == defaults.end()) continue; // not part of this case
        if (system_uses_pg_dlock(s) && !have_ext) {
            out.note(case_id, s, "skipped: extension pg_dlock is not installed in the benchmark database");
            continue;
        }
        if (s == "dlock-fenced" && !fenced_mode_present(cfg.base.conninfo)) {
            out.note(case_id, s,
                     "skipped: this pg_dlock has no setting dlock.durability (fenced grants need 1.4, preloaded)");
            continue;
        }
        if (system_uses_sql_edition(s) && !sql_edition_present(cfg.base.sql_edition_conninfo)) {
            out.note(case_id, s, "skipped: no database with the SQL edition (--pg-sql-edition)");
            continue;
        }
        if (!system_available(s)) {
            out.note(case_id, s, "skipped: the driver was built without the C++ client library (client/)");
            continue;
        }
        chosen.push_back(s);
    }
    return chosen;
}

std::vector<int> choose_clients(const bench_config& cfg, const std::vector<int>& defaults) {
    return cfg.clients.empty() ? defaults : cfg.clients;
}

void collect(aggregate& ag, std::vector<worker>& ws, const run_result& r) {
    for (auto& w : ws) {
        ag.a.insert(ag.a.end(), w.lat_a.begin(), w.lat_a.end());
        ag.b.insert(ag.b.end(), w.lat_b.begin(), w.lat_b.end());
        ag.busy += w.busy;
    }
    if (r.errors > 0) ag.fail(r.first_error);
}

void put_latency(sink& out, const std::string& case_id, const std::string& sys, long x, aggregate& ag,
                 const std::string& a_name, const std::string& b_name) {
    if (!ag.a.empty()) {
        out.put(case_id, sys, x, a_name + "_p50_us", percentile_us(ag.a, 0.50));
        out.put(case_id, sys, x, a_name + "_p99_us", percentile_us(ag.a, 0.99));
    }
    if (!ag.b.empty()) {
        out.put(case_id, sys, x, b_name + "_p50_us", percentile_us(ag.b, 0.50));
        out.put(case_id, sys, x, b_name + "_p99_us", percentile_us(ag.b, 0.99));
    }
}

// The lowest and highest rate of the rounds: how much the machine moved.
void put_spread(sink& out, const std::string& case_id, const std::string& sys, long x, const std::string& metric,
                const aggregate& ag) {
    if (ag.rounds > 1) {
        out.put(case_id, sys, x, metric + "_min", ag.rate_min);
        out.put(case_id, sys, x, metric + "_max", ag.rate_max);
    }
}

void put_cpu(sink& out, const std::string& case_id, const std::string& sys, long x, const aggregate& ag) {
    if (ag.done == 0) return;
    if (!std::isnan(ag.server_cpu_s))
        out.put(case_id, sys, x, "server_cpu_us", ag.server_cpu_s * 1e6 / static_cast<double>(ag.done));
    out.put(case_id, sys, x, "driver_cpu_us", ag.driver_cpu_s * 1e6 / static_cast<double>(ag.done));
}

void put_errors(sink& out, const std::string& case_id, const std::string& sys, long x, const aggregate& ag) {
    out.put(case_id, sys, x, "errors", ag.errors);
    if (ag.errors > 0) out.note(case_id, sys, "error: " + ag.first_error);
}

// ---------------------------------------------------------------------------
// uncontended: acquire + release pairs, distinct names per client.
// ---------------------------------------------------------------------------
int case_uncontended(const bench_config& cfg, sink& out) {
    const std::string id = "uncontended";
    std::vector<std::string> case_systems;
    for (const auto& sys : known_systems())
        if (sys != "floor-handoff-durable" && sys != "floor-handoff-async")
            case_systems.push_back(sys); // case-2 floors
    auto systems = choose_systems(id, cfg, case_systems, out);
    auto clients = choose_clients(cfg, {1, 8, 32});
    std::map<std::pair<std::string, int>, aggregate> aggs;

    for (int round = 0; round < cfg.rounds; ++round) {
        for (int c : clients) {
            for (const auto& sys : rotated(systems, round)) {
                aggregate& ag = aggs[{sys, c}];
                try {
                    auto ws = open_workers(sys, c, cfg.base);
                    cpu_meter cpu(ws);
                    std::string prefix = "u" + std::to_string(c) + "-";
                    auto r = run_workers(
                        ws, cfg.warmup_s, cfg.duration_s,
                        [&prefix](worker& w, bool m) {
                            std::string name = prefix + std::to_string(w.id) + "-" + std::to_string(w.cursor++ % 64);
                            std::int64_t t0 = now_ns();
                            lease l = w.session->try_acquire(name);
                            std::int64_t t1 = now_ns();
                            if (!l.held) {
                                if (m) ++w.busy;
                                return;
                            }
                            w.session->release(l);
                            std::int64_t t2 = now_ns();
                            if (m) {
                                w.lat_a.push_back(t1 - t0);
                                if (w.session->release_costs_round_trip()) w.lat_b.push_back(t2 - t1);
                            }
                        },
                        std::ref(cpu));
                    std::size_t before = ag.a.size();
                    collect(ag, ws, r);
                    ag.add_rate(static_cast<double>(ag.a.size() - before) / r.seconds);
                    ag.server_cpu_s += cpu.server_seconds();
                    ag.driver_cpu_s += cpu.driver_seconds();
                    ag.done += ag.a.size() - before;
                    ++ag.rounds;
                } catch (const std::exception& e) {
                    ag.fail(e.what());
                }
            }
        }
    }

    int failed = 0;
    for (int c : clients) {
        for (const auto& sys : systems) {
            aggregate& ag = aggs[{sys, c}];
            if (ag.rounds > 0) out.put(id, sys, c, "pairs_per_s", ag.rate());
            put_spread(out, id, sys, c, "pairs_per_s", ag);
            put_cpu(out, id, sys, c, ag);
            put_latency(out, id, sys, c, ag, "acq", "rel");
            if (ag.busy > 0) out.put(id, sys, c, "busy", static_cast<double>(ag.busy));
            put_errors(out, id, sys, c, ag);
            failed += ag.errors > 0;
        }
    }
    return failed;
}

// ---------------------------------------------------------------------------
// contended: all clients on one name, short critical section.
// ---------------------------------------------------------------------------
struct contended_outcome {
    run_result run;
    std::size_t sections = 0;
    long overlaps = 0;
    std::uint64_t most = 0;
    std::uint64_t fewest = 0;
    double server_cpu_s = 0;
    double driver_cpu_s = 0;
};

contended_outcome run_contended(std::vector<worker>& ws, const std::string& name, int cs_us, double warmup_s,
                                double duration_s, std::vector<std::int64_t>& gaps) {
    std::atomic<int> in_cs{0};
    std::atomic<long> overlaps{0};
    cpu_meter cpu(ws);
    auto r = run_workers(
        ws, warmup_s, duration_s,
        [&](worker& w, bool m) {
            std::int64_t t0 = now_ns();
            lease l = w.session->acquire(name);
            if (!l.held) {
                ++w.busy; // a wait that ran out counts whenever it happens
                return;
            }
            std::int64_t entered = now_ns();
            if (in_cs.fetch_add(1) != 0) overlaps.fetch_add(1);
            if (cs_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(cs_us));
            in_cs.fetch_sub(1);
            std::int64_t left = now_ns();
            w.session->release(l);
            if (m) {
                w.lat_a.push_back(entered - t0);
                w.sections.emplace_back(entered, left);
            }
        },
        std::ref(cpu));
    contended_outcome o;
    o.run = r;
    o.server_cpu_s = cpu.server_seconds();
    o.driver_cpu_s = cpu.driver_seconds();
    o.overlaps = overlaps.load();
    std::vector<std::pair<std::int64_t, std::int64_t>> all;
    o.fewest = UINT64_MAX;
    for (auto& w : ws) {
        all.insert(all.end(), w.sections.begin(), w.sections.end());
        o.most = std::max<std::uint64_t>(o.most, w.sections.size());
        o.fewest = std::min<std::uint64_t>(o.fewest, w.sections.size());
    }
    std::sort(all.begin(), all.end());
    for (std::size_t i = 1; i < all.size(); ++i) {
        std::int64_t gap = all[i].first - all[i - 1].second;
        if (gap >= 0) gaps.push_back(gap);
    }
    o.sections = all.size();
    return o;
}

// Whether a system's blocking acquire waits inside PostgreSQL, where a
// waiter can be seen waiting (the others retry from the client). The SQL
// edition polls inside the server (pg_sleep) and keeps no order among its
// waiters: it has no order to measure.
bool waits_in_server(const std::string& sys) {
    return system_uses_pg_dlock(sys) || sys == "advisory" || sys == "advisory-xact";
}

// Grant order against arrival order. Worker 0 holds the lock; workers 1..n-1
// ask for it one after another, each seen waiting in the server
// (pg_stat_activity) before the next asks, so the arrival order is known.
// Then worker 0 releases, and each waiter releases as soon as it is granted.
// Returns the pairs of waiters granted against their arrival order.
struct order_outcome {
    long inversions = 0;
    long pairs = 0;
};

order_outcome run_ordered(std::vector<worker>& ws, const std::string& name, const std::string& conninfo) {
    pg_conn monitor(conninfo);
    lease held = ws[0].session->acquire(name);
    if (!held.held) throw std::runtime_error("the ordered run could not take \"" + name + "\" first");
    std::atomic<int> grants{0};
    std::vector<int> granted_as(ws.size(), -1);
    std::vector<std::string> failures(ws.size());
    std::vector<std::thread> threads;
    std::string unseen;
    for (std::size_t k = 1; k < ws.size(); ++k) {
        std::string pid = std::to_string(ws[k].session->server_pid());
        threads.emplace_back([&ws, &grants, &granted_as, &failures, &name, k] {
            try {
                lease l = ws[k].session->acquire(name);
                if (!l.held) throw std::runtime_error("a queued waiter timed out");
                granted_as[k] = grants.fetch_add(1);
                ws[k].session->release(l);
            } catch (const std::exception& e) {
                failures[k] = e.what();
            }
        });
        bool seen = false;
        for (int i = 0; i < 5000 && !seen; ++i) {
            seen = monitor
                       .query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'"
                              " AND wait_event_type IN ('Extension', 'Lock')",
                              {pid.c_str()})
                       .int64(0, 0) == 1;
            if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (!seen) {
            unseen = "waiter " + std::to_string(k) + " was never seen waiting in the server";
            break;
        }
    }
    ws[0].session->release(held);
    for (auto& t : threads)
        t.join();
    if (!unseen.empty()) throw std::runtime_error(unseen);
    for (const auto& f : failures)
        if (!f.empty()) throw std::runtime_error(f);
    order_outcome o;
    for (std::size_t i = 1; i < ws.size(); ++i)
        for (std::size_t j = i + 1; j < ws.size(); ++j) {
            ++o.pairs;
            if (granted_as[j] < granted_as[i]) ++o.inversions;
        }
    return o;
}

int case_contended(const bench_config& cfg, sink& out) {
    const std::string id = "contended";
    auto systems =
        choose_systems(id, cfg,
                       {"dlock-sql", "dlock-fenced", "dlock-cpp", "dlock-sql-edition", "sql-lease", "advisory",
                        "advisory-xact", "redis", "floor-handoff-durable", "floor-handoff-async"},
                       out);
    // 50: the many-waiter handoff and order targets
    auto clients = choose_clients(cfg, {8, 32, 50});
    std::map<std::pair<std::string, int>, aggregate> aggs;
    std::map<std::pair<std::string, int>, order_outcome> orders;
    // A blocking acquire gives up after 5 s (counted as a timeout): ample for
    // a 100 us critical section even behind 31 other clients.
    system_options opts = cfg.base;
    opts.wait = std::chrono::seconds(5);

    for (int round = 0; round < cfg.rounds; ++round) {
        for (int c : clients) {
            for (const auto& sys : rotated(systems, round)) {
                aggregate& ag = aggs[{sys, c}];
                try {
                    auto ws = open_workers(sys, c, opts);
                    auto o = run_contended(ws, "hot-" + sys + "-" + std::to_string(c), cfg.cs_us, cfg.warmup_s,
                                           cfg.duration_s, ag.gaps);
                    collect(ag, ws, o.run);
                    ag.add_rate(static_cast<double>(o.sections) / o.run.seconds);
                    ag.server_cpu_s += o.server_cpu_s;
                    ag.driver_cpu_s += o.driver_cpu_s;
                    ag.done += o.sections;
                    ++ag.rounds;
                    ag.overlaps += o.overlaps;
                    double fair =
                        o.fewest == 0 ? INFINITY : static_cast<double>(o.most) / static_cast<double>(o.fewest);
                    if (fair >= ag.worst_fairness) {
                        ag.worst_fairness = fair;
                        ag.most = o.most;
                        ag.fewest = o.fewest;
                    }
                    if (c >= 50 && waits_in_server(sys)) {
                        auto ordered =
                            run_ordered(ws, "order-" + sys + "-" + std::to_string(c) + "-" + std::to_string(round),
                                        cfg.base.conninfo);
                        orders[{sys, c}].inversions += ordered.inversions;
                        orders[{sys, c}].pairs += ordered.pairs;
                    }
                } catch (const std::exception& e) {
                    ag.fail(e.what());
                }
            }
        }
    }

    int failed = 0;
    for (int c : clients) {
        for (const auto& sys : systems) {
            aggregate& ag = aggs[{sys, c}];
            if (ag.rounds > 0) out.put(id, sys, c, "cs_per_s", ag.rate());
            put_spread(out, id, sys, c, "cs_per_s", ag);
            put_cpu(out, id, sys, c, ag);
            if (!ag.gaps.empty()) {
                out.put(id, sys, c, "handoff_p50_us", percentile_us(ag.gaps, 0.50));
                out.put(id, sys, c, "handoff_p99_us", percentile_us(ag.gaps, 0.99));
            }
            put_latency(out, id, sys, c, ag, "wait", "unused");
            out.put(id, sys, c, "most", static_cast<double>(ag.most));
            out.put(id, sys, c, "fewest", static_cast<double>(ag.fewest));
            out.put(id, sys, c, "fairness", ag.worst_fairness);
            out.put(id, sys, c, "overlaps", static_cast<double>(ag.overlaps));
            if (orders.count({sys, c})) {
                out.put(id, sys, c, "order_inversions", static_cast<double>(orders[{sys, c}].inversions));
                out.put(id, sys, c, "order_pairs", static_cast<double>(orders[{sys, c}].pairs));
            }
            out.put(id, sys, c, "timeouts", static_cast<double>(ag.busy));
            put_errors(out, id, sys, c, ag);
            failed += ag.errors > 0 || ag.overlaps > 0;
        }
    }
    return failed;
}

// ---------------------------------------------------------------------------
// scale: acquire latency against the number of lock rows.
// ---------------------------------------------------------------------------
struct rel_size {
    double table = 0;
    double index = 0;
};

rel_size sizes(pg_conn& c, const std::string& rel) {
    auto r = c.query("SELECT pg_relation_size($1::regclass), pg_indexes_size($1::regclass)", {rel.c_str()});
    return rel_size{static_cast<double>(r.int64(0, 0)), static_cast<double>(r.int64(0, 1))};
}

const char* table_of(const std::string& sys) {
    return system_uses_pg_dlock(sys) ? "dlock.distributed_lock" : "bench.distributed_lock";
}

// Brings the lock table of sys to n rows named scale-0 .. scale-(n-1). For
// pg_dlock the rows are free locks shaped exactly like a row the extension
// left behind after one acquire and release (a template row made through the
// API, copied with INSERT ... SELECT: a million durable acquires would take
// longer than the whole benchmark may). For the hand-written lease they are
// live leases of other owners: that table only has rows for held locks.
void populate(pg_conn& c, const std::string& sys, long from, long to, const system_options& base) {
    std::string lo = std::to_string(from);
    std::string hi = std::to_string(to - 1);
    if (system_uses_pg_dlock(sys)) {
        {
            auto s = make_session(sys == "dlock-cpp" ? "dlock-sql" : sys, base);
            lease l = s->try_acquire("scale-template");
            if (l.held) s->release(l);
        }
        auto cols = c.exec("SELECT attname FROM pg_attribute WHERE attrelid = 'dlock.distributed_lock'::regclass"
                           " AND attnum > 0 AND NOT attisdropped ORDER BY attnum");
        std::string names;
        std::string values;
        for (int i = 0; i < cols.rows(); ++i) {
            std::string col = cols.text(i, 0);
            if (i > 0) {
                names += ", ";
                values += ", ";
            }
            names += '"' + col + '"';
            values += col == "lock_name" ? std::string("'scale-' || g") : "t.\"" + col + '"';
        }
        c.query("INSERT INTO dlock.distributed_lock (" + names + ") SELECT " + values +
                    " FROM dlock.distributed_lock t, generate_series($1::bigint, $2::bigint) g"
                    " WHERE t.lock_name = 'scale-template' ON CONFLICT DO NOTHING",
                {lo.c_str(), hi.c_str()});
    } else {
        c.query("INSERT INTO bench.distributed_lock SELECT 'scale-' || g, md5(g::text), 1,"
                " now() + interval '1 day', now() FROM generate_series($1::bigint, $2::bigint) g"
                " ON CONFLICT DO NOTHING",
                {lo.c_str(), hi.c_str()});
    }
}

int case_scale(const bench_config& cfg, sink& out) {
    const std::string id = "scale";
    auto systems = choose_systems(id, cfg, {"dlock-sql", "sql-lease"}, out);
    pg_conn admin(cfg.base.conninfo);
    prepare_schema(admin);
    std::vector<long> rows = cfg.rows;
    std::sort(rows.begin(), rows.end());
    std::map<std::string, long> populated;
    int failed = 0;

    for (long n : rows) {
        std::set<std::string> tables;
        for (const auto& sys : systems) {
            std::string t = table_of(sys);
            if (tables.insert(t).second) {
                std::int64_t t0 = now_ns();
                populate(admin, sys, populated[t], n, cfg.base);
                populated[t] = n;
                admin.exec("VACUUM (ANALYZE) " + t);
                out.note(id, sys,
                         "populated " + t + " to " + std::to_string(n) + " rows in " +
                             std::to_string((now_ns() - t0) / 1000000) + " ms");
            }
        }
        admin.exec("CHECKPOINT");
        std::map<std::string, aggregate> aggs;
        for (int round = 0; round < cfg.rounds; ++round) {
            for (const auto& sys : rotated(systems, round)) {
                aggregate& ag = aggs[sys];
                try {
                    auto ws = open_workers(sys, 1, cfg.base);
                    bool dlock = system_uses_pg_dlock(sys);
                    auto r = run_workers(ws, cfg.warmup_s, cfg.duration_s, [n, dlock](worker& w, bool m) {
                        std::uniform_int_distribution<long> pick(0, n - 1);
                        std::string name = dlock ? "scale-" + std::to_string(pick(w.rng))
                                                 : "free-" + std::to_string(w.rng() % 1000000000);
                        std::int64_t t0 = now_ns();
                        lease l = w.session->try_acquire(name);
                        std::int64_t t1 = now_ns();
                        if (!l.held) {
                            if (m) ++w.busy;
                            return;
                        }
                        w.session->release(l);
                        std::int64_t t2 = now_ns();
                        if (m) {
                            w.lat_a.push_back(t1 - t0);
                            w.lat_b.push_back(t2 - t1);
                        }
                    });
                    std::size_t before = ag.a.size();
                    collect(ag, ws, r);
                    ag.add_rate(static_cast<double>(ag.a.size() - before) / r.seconds);
                    ++ag.rounds;
                } catch (const std::exception& e) {
                    ag.fail(e.what());
                }
            }
        }
        for (const auto& sys : systems) {
            aggregate& ag = aggs[sys];
            rel_size s = sizes(admin, table_of(sys));
            if (ag.rounds > 0) out.put(id, sys, n, "pairs_per_s", ag.rate());
            put_spread(out, id, sys, n, "pairs_per_s", ag);
            put_latency(out, id, sys, n, ag, "acq", "rel");
            out.put(id, sys, n, "table_bytes", s.table);
            out.put(id, sys, n, "index_bytes", s.index);
            put_errors(out, id, sys, n, ag);
            failed += ag.errors > 0;
        }
    }
    return failed;
}

// ---------------------------------------------------------------------------
// churn: table size and HOT share after many cycles over a set of names.
// ---------------------------------------------------------------------------
struct table_stats {
    double upd = 0;
    double hot = 0;
    double ins = 0;
    double del = 0;
    double autovacuums = 0;
};

table_stats read_stats(pg_conn& c, const std::string& rel) {
    c.exec("SELECT pg_stat_clear_snapshot()");
    auto r = c.query("SELECT n_tup_upd, n_tup_hot_upd, n_tup_ins, n_tup_del, autovacuum_count"
                     " FROM pg_stat_all_tables WHERE relid = $1::regclass",
                     {rel.c_str()});
    if (r.rows() != 1) return {};
    return table_stats{static_cast<double>(r.int64(0, 0)), static_cast<double>(r.int64(0, 1)),
                       static_cast<double>(r.int64(0, 2)), static_cast<double>(r.int64(0, 3)),
                       static_cast<double>(r.int64(0, 4))};
}

// Runs acquire + release on the given names until target cycles are done or
// max_s passed, on every worker; returns the cycles done.
long cycle_names(std::vector<worker>& ws, long names, long target, double max_s, bool sequential, std::string& error) {
    std::atomic<long> done{0};
    std::atomic<long> next{0};
    std::int64_t deadline = now_ns() + static_cast<std::int64_t>(max_s * 1e9);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(ws.size());
    for (std::size_t i = 0; i < ws.size(); ++i) {
        threads.emplace_back([&, i] {
            worker& w = ws[i];
            std::uniform_int_distribution<long> pick(0, names - 1);
            try {
                while (now_ns() < deadline) {
                    long k;
                    if (sequential) {
                        k = next.fetch_add(1);
                        if (k >= target) break;
                    } else {
                        if (done.load(std::memory_order_relaxed) >= target) break;
                        k = pick(w.rng);
                    }
                    lease l = w.session->try_acquire("churn-" + std::to_string(k % names));
                    if (!l.held) {
                        ++w.busy;
                        continue;
                    }
                    w.session->release(l);
                    done.fetch_add(1, std::memory_order_relaxed);
                }
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        });
    }
    for (auto& t : threads)
        t.join();
    for (const auto& e : errors)
        if (!e.empty() && error.empty()) error = e;
    return done.load();
}

int case_churn(const bench_config& cfg, sink& out) {
    const std::string id = "churn";
    auto systems = choose_systems(id, cfg, {"dlock-sql", "sql-lease"}, out);
    pg_conn admin(cfg.base.conninfo);
    prepare_schema(admin);
    int failed = 0;
    for (const auto& sys : systems) {
        std::string rel = table_of(sys);
        long x = cfg.churn_names;
        // pg_dlock is what this case is about; the baseline runs fewer cycles
        // to fit the time budget (its table shows the trend well before).
        long target = system_uses_pg_dlock(sys) ? cfg.churn_cycles : cfg.churn_baseline_cycles;
        std::string error;
        try {
            std::int64_t t0 = now_ns();
            {
                auto ws = open_workers(sys, cfg.churn_clients, cfg.base);
                cycle_names(ws, cfg.churn_names, cfg.churn_names, 600, true, error);
            }
            double first_s = static_cast<double>(now_ns() - t0) / 1e9;
            std::this_thread::sleep_for(std::chrono::milliseconds(1500)); // backends flush stats at exit
            rel_size s0 = sizes(admin, rel);
            table_stats st0 = read_stats(admin, rel);

            t0 = now_ns();
            long cycles = 0;
            std::uint64_t busy = 0;
            {
                auto ws = open_workers(sys, cfg.churn_clients, cfg.base);
                cycles = cycle_names(ws, cfg.churn_names, target, cfg.churn_max_s, false, error);
                for (auto& w : ws)
                    busy += w.busy;
            }
            double churn_s = static_cast<double>(now_ns() - t0) / 1e9;
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            rel_size s1 = sizes(admin, rel);
            table_stats st1 = read_stats(admin, rel);

            out.put(id, sys, x, "first_pass_s", first_s);
            out.put(id, sys, x, "first_table_bytes", s0.table);
            out.put(id, sys, x, "first_index_bytes", s0.index);
            out.put(id, sys, x, "cycles", static_cast<double>(cycles));
            out.put(id, sys, x, "cycles_target", static_cast<double>(target));
            out.put(id, sys, x, "churn_s", churn_s);
            out.put(id, sys, x, "cycles_per_s", static_cast<double>(cycles) / churn_s);
            out.put(id, sys, x, "busy", static_cast<double>(busy));
            out.put(id, sys, x, "table_bytes", s1.table);
            out.put(id, sys, x, "index_bytes", s1.index);
            out.put(id, sys, x, "table_growth", s0.table > 0 ? s1.table / s0.table : NAN);
            out.put(id, sys, x, "index_growth", s0.index > 0 ? s1.index / s0.index : NAN);
            double upd = st1.upd - st0.upd;
            out.put(id, sys, x, "updates", upd);
            out.put(id, sys, x, "inserts", st1.ins - st0.ins);
            out.put(id, sys, x, "deletes", st1.del - st0.del);
            out.put(id, sys, x, "autovacuums", st1.autovacuums - st0.autovacuums);
            if (upd > 0) out.put(id, sys, x, "hot_share", (st1.hot - st0.hot) / upd);
        } catch (const std::exception& e) {
            error = e.what();
        }
        aggregate ag;
        if (!error.empty()) ag.fail(error);
        put_errors(out, id, sys, x, ag);
        failed += ag.errors > 0;
    }
    return failed;
}

// ---------------------------------------------------------------------------
// keep-alive: renewals per second over many live leases.
// ---------------------------------------------------------------------------
void parallel_each(std::vector<worker>& ws, const std::function<void(worker&)>& fn, std::string& error) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(ws.size());
    for (std::size_t i = 0; i < ws.size(); ++i)
        threads.emplace_back([&, i] {
            try {
                fn(ws[i]);
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        });
    for (auto& t : threads)
        t.join();
    for (const auto& e : errors)
        if (!e.empty() && error.empty()) error = e;
}

int case_keepalive(const bench_config& cfg, sink& out) {
    const std::string id = "keep-alive";
    // Fenced renewals commit asynchronously: measured beside the durable ones.
    auto systems =
        choose_systems(id, cfg, {"dlock-sql", "dlock-fenced", "dlock-cpp", "sql-lease", "redis", "floor-update"}, out);
    int c = choose_clients(cfg, {8}).front();
    std::map<std::string, std::vector<worker>> pools;
    std::map<std::string, aggregate> aggs;
    long per_client = std::max(1L, cfg.leases / c);

    // Leases of one system wait while the others run: a long TTL keeps them live.
    system_options opts = cfg.base;
    opts.ttl = std::chrono::minutes(10);
    for (const auto& sys : systems) {
        std::string error;
        try {
            pools[sys] = open_workers(sys, c, opts);
            std::int64_t t0 = now_ns();
            parallel_each(
                pools[sys],
                [&](worker& w) {
                    long n = system_is_floor(sys) ? 1 : per_client;
                    for (long k = 0; k < n; ++k) {
                        lease l =
                            w.session->try_acquire("ka-" + sys + "-" + std::to_string(w.id) + "-" + std::to_string(k));
                        if (!l.held) throw std::runtime_error("could not take keep-alive lease " + l.name);
                        w.leases.push_back(l);
                    }
                },
                error);
            out.note(id, sys,
                     "took " + std::to_string(system_is_floor(sys) ? c : per_client * c) + " leases in " +
                         std::to_string((now_ns() - t0) / 1000000) + " ms");
        } catch (const std::exception& e) {
            error = e.what();
        }
        if (!error.empty()) {
            aggs[sys].fail(error);
            pools.erase(sys);
        }
    }

    for (int round = 0; round < cfg.rounds; ++round) {
        for (const auto& sys : rotated(systems, round)) {
            if (pools.count(sys) == 0) continue;
            auto& ws = pools[sys];
            for (auto& w : ws) {
                w.lat_a.clear();
                w.ops = 0;
            }
            aggregate& ag = aggs[sys];
            cpu_meter cpu(ws);
            auto r = run_workers(
                ws, cfg.warmup_s, cfg.duration_s,
                [](worker& w, bool m) {
                    const lease& l = w.leases[w.cursor++ % w.leases.size()];
                    std::int64_t t0 = now_ns();
                    if (!w.session->renew(l)) throw std::runtime_error("renew found lease " + l.name + " not held");
                    if (m) w.lat_a.push_back(now_ns() - t0);
                },
                std::ref(cpu));
            std::size_t before = ag.a.size();
            collect(ag, ws, r);
            ag.add_rate(static_cast<double>(ag.a.size() - before) / r.seconds);
            ag.server_cpu_s += cpu.server_seconds();
            ag.driver_cpu_s += cpu.driver_seconds();
            ag.done += ag.a.size() - before;
            ++ag.rounds;
            for (auto& w : ws)
                if (!w.error.empty()) w.leases.clear();
        }
    }

    for (auto& [sys, ws] : pools) {
        std::string error;
        if (!system_is_floor(sys))
            parallel_each(
                ws,
                [](worker& w) {
                    for (const auto& l : w.leases)
                        w.session->release(l);
                },
                error);
        if (!error.empty()) aggs[sys].fail("releasing keep-alive leases: " + error);
    }
    pools.clear();

    int failed = 0;
    for (const auto& sys : systems) {
        aggregate& ag = aggs[sys];
        long leases = system_is_floor(sys) ? c : per_client * c;
        out.put(id, sys, c, "leases", static_cast<double>(leases));
        if (ag.rounds > 0) out.put(id, sys, c, "renewals_per_s", ag.rate());
        put_spread(out, id, sys, c, "renewals_per_s", ag);
        put_cpu(out, id, sys, c, ag);
        put_latency(out, id, sys, c, ag, "renew", "unused");
        put_errors(out, id, sys, c, ag);
        failed += ag.errors > 0;
    }
    return failed;
}

// ---------------------------------------------------------------------------
// business-write: lock + business write in one transaction against lock, write and
// release as three transactions.
// ---------------------------------------------------------------------------
struct variant {
    std::string label;
    std::string system;
    enum kind { one_tx, three_tx, three_tx_fenced, write_only } how;
};

const std::vector<variant>& all_variants() {
    static const std::vector<variant> v = {
        {"dlock-sql 1 tx", "dlock-sql", variant::one_tx},
        {"dlock-sql 3 tx", "dlock-sql", variant::three_tx},
        {"dlock-sql 3 tx fenced", "dlock-sql", variant::three_tx_fenced},
        {"sql-lease 1 tx", "sql-lease", variant::one_tx},
        {"sql-lease 3 tx", "sql-lease", variant::three_tx},
        {"advisory-xact 1 tx", "advisory-xact", variant::one_tx},
        {"redis + pg 3 tx", "redis", variant::three_tx},
        {"write only", "floor-update", variant::write_only},
    };
    return v;
}

const char* const business_write = "UPDATE bench.account SET balance = balance + 1, fencing_token = $2::bigint"
                                   " WHERE id = $1::int";

void business_unit(worker& w, const variant& v, bool m) {
    pg_conn* conn = w.extra ? w.extra.get() : w.session->pg();
    if (conn == nullptr) throw std::logic_error("no PostgreSQL connection for the business write");
    pg_conn& pg = *conn;
    std::string name = "acct-" + std::to_string(w.id);
    std::string row = std::to_string(w.id);
    std::int64_t t0 = now_ns();
    switch (v.how) {
    case variant::write_only: pg.run("biz", {row.c_str(), "0"}); break;
    case variant::one_tx: {
        lease l;
        if (v.system == "advisory-xact") {
            l = w.session->acquire(name); // BEGIN + pg_advisory_xact_lock
        } else {
            pg.exec("BEGIN");
            l = w.session->try_acquire(name);
        }
        if (!l.held) {
            pg.exec("ROLLBACK");
            if (m) ++w.busy;
            return;
        }
        std::string fence = std::to_string(l.fence);
        pg.run("biz", {row.c_str(), fence.c_str()});
        if (v.system == "advisory-xact") {
            w.session->release(l); // COMMIT
        } else {
            w.session->release(l);
            pg.exec("COMMIT");
        }
        break;
    }
    case variant::three_tx:
    case variant::three_tx_fenced: {
        lease l = w.session->try_acquire(name);
        if (!l.held) {
            if (m) ++w.busy;
            return;
        }
        std::string fence = std::to_string(l.fence);
        if (v.how == variant::three_tx_fenced) {
            pg.exec("BEGIN");
            pg.run("assert", {l.name.c_str(), fence.c_str()});
            pg.run("biz", {row.c_str(), fence.c_str()});
            pg.exec("COMMIT");
        } else {
            pg.run("biz", {row.c_str(), fence.c_str()});
        }
        w.session->release(l);
        break;
    }
    }
    if (m) w.lat_a.push_back(now_ns() - t0);
}

int case_transactions(const bench_config& cfg, sink& out) {
    const std::string id = "business-write";
    std::vector<std::string> base_systems;
    for (const auto& v : all_variants())
        if (std::find(base_systems.begin(), base_systems.end(), v.system) == base_systems.end())
            base_systems.push_back(v.system);
    auto systems = choose_systems(id, cfg, base_systems, out);
    std::vector<std::string> labels;
    std::map<std::string, const variant*> by_label;
    for (const auto& v : all_variants())
        if (std::find(systems.begin(), systems.end(), v.system) != systems.end()) {
            labels.push_back(v.label);
            by_label[v.label] = &v;
        }
    auto clients = choose_clients(cfg, {1, 8});
    {
        pg_conn admin(cfg.base.conninfo);
        prepare_schema(admin);
    }
    std::map<std::pair<std::string, int>, aggregate> aggs;

    for (int round = 0; round < cfg.rounds; ++round) {
        for (int c : clients) {
            for (const auto& label : rotated(labels, round)) {
                const variant& v = *by_label[label];
                aggregate& ag = aggs[{label, c}];
                try {
                    auto ws = open_workers(v.system, c, cfg.base);
                    for (auto& w : ws) {
                        if (w.session->pg() == nullptr) w.extra = std::make_unique<pg_conn>(cfg.base.conninfo);
                        pg_conn& pg = w.extra ? *w.extra : *w.session->pg();
                        pg.prepare("biz", business_write);
                        if (v.how == variant::three_tx_fenced)
                            pg.prepare("assert", "SELECT dlock.assert_holds($1, $2::bigint)");
                    }
                    auto r = run_workers(ws, cfg.warmup_s, cfg.duration_s,
                                         [&v](worker& w, bool m) { business_unit(w, v, m); });
                    std::size_t before = ag.a.size();
                    collect(ag, ws, r);
                    ag.add_rate(static_cast<double>(ag.a.size() - before) / r.seconds);
                    ++ag.rounds;
                } catch (const std::exception& e) {
                    ag.fail(e.what());
                }
            }
        }
    }

    int failed = 0;
    for (int c : clients) {
        for (const auto& label : labels) {
            aggregate& ag = aggs[{label, c}];
            if (ag.rounds > 0) out.put(id, label, c, "units_per_s", ag.rate());
            put_spread(out, id, label, c, "units_per_s", ag);
            put_latency(out, id, label, c, ag, "unit", "unused");
            put_errors(out, id, label, c, ag);
            failed += ag.errors > 0;
        }
    }
    return failed;
}

// ---------------------------------------------------------------------------
// function-cost: what the lease functions cost the server per call, inside one
// transaction (no commit, no round trip per call), against a plain UPDATE by
// primary key. Each statement runs n times in a PL/pgSQL loop sent as one
// statement; the loop's own cost (an assignment per iteration) is measured
// the same way and subtracted. The lock rows exist and are free, and the
// UPDATE's table has the same fillfactor and a text primary key. The SQL
// edition's functions run the same way in its own database.
// ---------------------------------------------------------------------------
int case_function_cost(const bench_config& cfg, sink& out) {
    const std::string id = "function-cost";
    const long n = 5000;
    // PL/pgSQL calls cost the SQL edition tens of times more: fewer calls keep
    // its part to seconds, and each of its loops still runs for a tenth of a
    // second or more, long against the timer and the round trip.
    const long sql_edition_n = 500;
    const std::string owner = "'00000000-0000-0000-0000-0000000000f1'";
    auto loop = [](long calls, const std::string& body) {
        return "DO $$DECLARE k text; BEGIN FOR i IN 0.." + std::to_string(calls - 1) + " LOOP k := 'fn-' || i; " +
               body + " END LOOP; END$$";
    };
    struct statement {
        std::string system, metric, body;
    };
    const std::string try_acquire_body = "PERFORM dlock.try_acquire(k, '1 minute', " + owner + ");";
    const std::string release_body = "PERFORM dlock.release(k, " + owner + ");";
    const std::vector<statement> statements = {
        {"dlock-sql", "try_acquire_us", try_acquire_body},
        {"dlock-sql", "release_us", release_body},
        {"floor-update", "update_us",
         "UPDATE bench_fn_row SET owner = " + owner + ", v = v + 1, t = clock_timestamp() WHERE key = k;"},
        {"floor-select1", "select_us", "PERFORM k;"},
    };
    const std::vector<statement> sql_edition_statements = {
        {"dlock-sql-edition", "try_acquire_us", try_acquire_body},
        {"dlock-sql-edition", "release_us", release_body},
    };

    auto make_lock_rows = [&](pg_conn& pg, long calls) {
        pg.exec("SELECT count(dlock.release('fn-' || g, (dlock.try_acquire('fn-' || g, '1 minute', " + owner +
                ")).owner_token)) FROM generate_series(0, " + std::to_string(calls - 1) + ") g");
    };
    // One pass: every statement once, each try_acquire loop followed by
    // its release loop in the same transaction, rolled back so every
    // pass starts from the same rows. loop_system, when given, records the
    // loop's own cost under that system.
    using per_call_map = std::map<std::string, std::vector<double>>;
    auto pass = [&](pg_conn& pg, long calls, const std::vector<statement>& sts, const std::string& loop_system,
                    per_call_map& per_call) {
        auto timed = [&](const std::string& sql) {
            std::int64_t t0 = now_ns();
            pg.exec(sql);
            return static_cast<double>(now_ns() - t0) / 1e3;
        };
        pg.exec("BEGIN");
        double empty = timed(loop(calls, ""));
        for (const auto& st : sts) {
            double us = (timed(loop(calls, st.body)) - empty) / static_cast<double>(calls);
            per_call[st.system + "\t" + st.metric].push_back(us);
        }
        if (!loop_system.empty()) per_call[loop_system + "\tloop_us"].push_back(empty / static_cast<double>(calls));
        pg.exec("ROLLBACK");
    };
    auto measure = [&](pg_conn& pg, long calls, const std::vector<statement>& sts, const std::string& loop_system) {
        per_call_map warm;
        pass(pg, calls, sts, loop_system, warm);
        per_call_map per_call;
        int passes = std::max(3, cfg.rounds * 3);
        for (int i = 0; i < passes; ++i)
            pass(pg, calls, sts, loop_system, per_call);
        for (auto& [key, v] : per_call) {
            std::sort(v.begin(), v.end());
            auto tab = key.find('\t');
            out.put(id, key.substr(0, tab), 1, key.substr(tab + 1), v[v.size() / 2]);
        }
    };

    int failed = 0;
    try {
        pg_conn pg(cfg.base.conninfo);
        pg.exec("DROP TABLE IF EXISTS bench_fn_row");
        pg.exec("CREATE TABLE bench_fn_row (key text PRIMARY KEY, owner uuid, v bigint NOT NULL, t timestamptz) "
                "WITH (fillfactor = 50)");
        pg.exec("INSERT INTO bench_fn_row SELECT 'fn-' || g, NULL, 0, now() FROM generate_series(0, " +
                std::to_string(n - 1) + ") g");
        make_lock_rows(pg, n);
        pg.exec("VACUUM ANALYZE bench_fn_row");
        pg.exec("VACUUM ANALYZE dlock.distributed_lock");
        measure(pg, n, statements, "floor-select1");
        pg.exec("DROP TABLE bench_fn_row");
    } catch (const std::exception& e) {
        out.note(id, "dlock-sql", std::string("error: ") + e.what());
        ++failed;
    }
    if (!choose_systems(id, cfg, {"dlock-sql-edition"}, out).empty()) {
        try {
            pg_conn pg(cfg.base.sql_edition_conninfo);
            make_lock_rows(pg, sql_edition_n);
            pg.exec("VACUUM ANALYZE dlock.distributed_lock");
            measure(pg, sql_edition_n, sql_edition_statements, "");
        } catch (const std::exception& e) {
            out.note(id, "dlock-sql-edition", std::string("error: ") + e.what());
            ++failed;
        }
    }
    return failed;
}

} // namespace

int run_case(const std::string& id, const bench_config& cfg, sink& out) {
    {
        pg_conn admin(cfg.base.conninfo);
        prepare_schema(admin);
    }
    if (id == "uncontended") return case_uncontended(cfg, out);
    if (id == "contended") return case_contended(cfg, out);
    if (id == "scale") return case_scale(cfg, out);
    if (id == "churn") return case_churn(cfg, out);
    if (id == "keep-alive") return case_keepalive(cfg, out);
    if (id == "business-write") return case_transactions(cfg, out);
    if (id == "function-cost") return case_function_cost(cfg, out);
    if (id == "events") return case_events(cfg, out);
    if (id == "lock-kinds") return case_kinds(cfg, out);
    throw std::invalid_argument("unknown case \"" + id + "\"");
}

int run_smoke(const bench_config& cfg, sink& out) {
    const std::string id = "smoke";
    std::vector<std::string> systems = cfg.systems;
    if (systems.empty())
        for (const auto& s : known_systems())
            if (system_available(s) && (!system_uses_sql_edition(s) || !cfg.base.sql_edition_conninfo.empty()))
                systems.push_back(s);
    {
        pg_conn admin(cfg.base.conninfo);
        prepare_schema(admin);
    }
    int failed = 0;
    for (const auto& sys : systems) {
        std::string why;
        double pairs = 0;
        double sections = 0;
        double renewals = 0;
        try {
            // Uncontended pairs on two clients.
            auto ws = open_workers(sys, 2, cfg.base);
            auto r = run_workers(ws, cfg.warmup_s, cfg.duration_s, [](worker& w, bool m) {
                lease l =
                    w.session->try_acquire("smoke-" + std::to_string(w.id) + "-" + std::to_string(w.cursor++ % 8));
                if (!l.held) throw std::runtime_error("uncontended try_acquire found " + l.name + " busy");
                w.session->release(l);
                if (m) w.lat_a.push_back(1);
            });
            if (r.errors > 0) throw std::runtime_error(r.first_error);
            for (auto& w : ws)
                pairs += static_cast<double>(w.lat_a.size());
            pairs /= r.seconds;
            if (pairs <= 0) throw std::runtime_error("no acquire + release pair completed");

            // Two clients on one name, blocking acquire (not for the floors,
            // which lock nothing).
            if (!system_is_floor(sys)) {
                system_options opts = cfg.base;
                opts.wait = std::chrono::seconds(2);
                auto cw = open_workers(sys, 2, opts);
                std::vector<std::int64_t> gaps;
                // At least a second: on a loaded machine two clients' first handoffs
                // can take a good part of a quarter second, and this checks that
                // sections complete, not how many.
                auto o = run_contended(cw, "smoke-hot-" + sys, 100, cfg.warmup_s / 2,
                                       std::max(cfg.duration_s / 2, 1.0), gaps);
                if (o.run.errors > 0) throw std::runtime_error(o.run.first_error);
                std::uint64_t timeouts = 0;
                for (auto& w : cw)
                    timeouts += w.busy;
                if (timeouts > 0)
                    throw std::runtime_error("a blocking acquire waited 2 s in vain while the other client held the "
                                             "lock for 100 us at a time");
                if (o.overlaps > 0) throw std::runtime_error("two clients were inside the critical section at once");
                if (o.sections == 0) throw std::runtime_error("no critical section completed under contention");
                sections = static_cast<double>(o.sections) / o.run.seconds;
            }

            // Renewal of a few live leases.
            auto rw = open_workers(sys, 1, cfg.base);
            if (rw[0].session->can_renew()) {
                for (int k = 0; k < 4; ++k) {
                    lease l = rw[0].session->try_acquire("smoke-ka-" + std::to_string(k));
                    if (!l.held) throw std::runtime_error("could not take lease " + l.name);
                    rw[0].leases.push_back(l);
                }
                auto rr = run_workers(rw, 0.0, cfg.duration_s / 4, [](worker& w, bool m) {
                    const lease& l = w.leases[w.cursor++ % w.leases.size()];
                    if (!w.session->renew(l)) throw std::runtime_error("renew found " + l.name + " not held");
                    if (m) w.lat_a.push_back(1);
                });
                if (rr.errors > 0) throw std::runtime_error(rr.first_error);
                renewals = static_cast<double>(rw[0].lat_a.size()) / rr.seconds;
                if (renewals <= 0) throw std::runtime_error("no renewal completed");
                if (!system_is_floor(sys))
                    for (const auto& l : rw[0].leases)
                        rw[0].session->release(l);
            }
        } catch (const std::exception& e) {
            why = e.what();
        }
        if (why.empty()) {
            out.put(id, sys, 2, "pairs_per_s", pairs);
            if (sections > 0) out.put(id, sys, 2, "cs_per_s", sections);
            if (renewals > 0) out.put(id, sys, 1, "renewals_per_s", renewals);
            std::printf("ok %s\n", sys.c_str());
        } else {
            out.note(id, sys, "error: " + why);
            std::printf("FAIL %s: %s\n", sys.c_str(), why.c_str());
            ++failed;
        }
        std::fflush(stdout);
    }
    return failed;
}

} // namespace bench
