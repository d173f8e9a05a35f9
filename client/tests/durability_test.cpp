// durability_test.cpp -- client_options::durability: fenced leases are
// granted, renewed, downgraded and released in transactions the server runs
// with dlock.durability = fenced, in every pooling mode; the durable default
// sets nothing; a server that cannot fence refuses a fenced client.
//
// What the server saw is read inside the call's own transaction: a trigger
// records current_setting('dlock.durability') for every lease event of a lock
// whose name has "/seen/" in it. The C extension writes lease rows without
// the executor (no row triggers fire), so there the trigger is on
// dlock.audit_log, which every grant, renewal, downgrade and release of any
// kind writes through the executor in its own transaction at dlock.audit =
// all (set for the database while the test observes); the SQL edition writes
// dlock.lock_holder with ordinary UPDATEs, so there the trigger is on that.
// A client that ignored the option leaves "durable" there (or nothing,
// before pg_dlock 1.4), so the fenced tests cannot pass without the setting
// reaching the transaction.
#include <dlock/dlock.hpp>

#include <thread>
#include <utility>
#include <vector>

#include "dlock_testing.hpp"

using namespace std::chrono_literals;

namespace {

class durability_test : public dlock_testing::server_test {
protected:
    void TearDown() override {
        // The trigger writes in every lease transaction, and dlock.audit = all
        // in the database's: none of it left for other tests and suites.
        if (m_observing) {
            if (m_sql_edition) {
                sql("DROP TRIGGER IF EXISTS durability_test_seen ON dlock.lock_holder");
            } else {
                sql("DROP TRIGGER IF EXISTS durability_test_seen ON dlock.audit_log");
                sql("ALTER DATABASE " + database() + " RESET dlock.audit");
                fresh_pooled_sessions();
            }
        }
        server_test::TearDown();
    }

    /// Starts recording what the server saw (see the top of the file). Only
    /// in the tests that read it: an audit row written after a lease change
    /// makes its transaction flush, and the fenced exclusive test counts the
    /// commits that did not.
    void observe() {
        m_sql_edition = !sql("SELECT 1 FROM pg_extension WHERE extname = 'pg_dlock_sql'").empty();
        sql(R"SQL(
CREATE TABLE IF NOT EXISTS public.durability_test_seen (
    lock_name text NOT NULL,
    change text NOT NULL,
    durability text,
    seen_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp());
-- The C extension: one row per audited lease event
CREATE OR REPLACE FUNCTION public.durability_test_audited() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    IF strpos(NEW.lock_name, '/seen/') > 0 THEN
        INSERT INTO public.durability_test_seen (lock_name, change, durability)
        VALUES (NEW.lock_name,
                CASE WHEN NEW.event IN ('acquire', 'takeover') THEN 'grant' ELSE NEW.event END,
                current_setting('dlock.durability', true));
    END IF;
    RETURN NULL;
END $$;
-- The SQL edition: the changes of the rows of shared leases
CREATE OR REPLACE FUNCTION public.durability_test_seen() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    change text;
BEGIN
    IF strpos(NEW.lock_name, '/seen/') = 0 THEN
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        change := CASE WHEN NEW.owner_token IS NOT NULL THEN 'grant' END;
    ELSIF NEW.owner_token IS NULL THEN
        change := CASE WHEN OLD.owner_token IS NOT NULL THEN 'release' END;
    ELSIF OLD.owner_token IS DISTINCT FROM NEW.owner_token THEN
        change := 'grant';
    ELSIF NEW.renewals > OLD.renewals THEN
        change := 'renew';
    END IF;
    IF change IS NOT NULL THEN
        INSERT INTO public.durability_test_seen (lock_name, change, durability)
        VALUES (NEW.lock_name, change, current_setting('dlock.durability', true));
    END IF;
    RETURN NULL;
END $$;
)SQL");
        m_observing = true;
        if (m_sql_edition) {
            sql("DROP TRIGGER IF EXISTS durability_test_seen ON dlock.lock_holder");
            sql("CREATE TRIGGER durability_test_seen AFTER INSERT OR UPDATE ON dlock.lock_holder "
                "FOR EACH ROW EXECUTE FUNCTION public.durability_test_seen()");
        } else {
            sql("DROP TRIGGER IF EXISTS durability_test_seen ON dlock.audit_log");
            sql("CREATE TRIGGER durability_test_seen AFTER INSERT ON dlock.audit_log "
                "FOR EACH ROW EXECUTE FUNCTION public.durability_test_audited()");
            sql("ALTER DATABASE " + database() + " SET dlock.audit = 'all'");
            fresh_pooled_sessions();
        }
    }

    /// Behind a pooler, the server sessions it keeps read the database's
    /// settings when they started: end the idle ones, so that the pooler opens
    /// new ones that read them now.
    void fresh_pooled_sessions() {
        if (!dlock_testing::through_transaction_pooler()) return;
        const std::string others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> "
                                   "pg_backend_pid() AND backend_type = 'client backend' AND state = 'idle'";
        sql("SELECT pg_terminate_backend(pid) " + others);
        EXPECT_TRUE(eventually([&] { return sql("SELECT 1 " + others).empty(); }, 5s));
        std::this_thread::sleep_for(200ms); // the pooler reads each closed connection's end
    }

    std::string database() { return sql("SELECT quote_ident(current_database())")[0][0].as<std::string>(); }

    /// The lease events of `name` in order, each "change:durability"
    /// ("grant:fenced", "renew:durable", "release:" when the setting is
    /// unknown); the SQL edition's are of shared leases only, and have no
    /// downgrade.
    std::vector<std::string> seen(const std::string& name) {
        pqxx::nontransaction tx{admin()};
        std::vector<std::string> changes;
        for (const auto& row :
             tx.exec_params("SELECT change, coalesce(durability, '') FROM public.durability_test_seen "
                            "WHERE lock_name = $1 ORDER BY seen_at",
                            name))
            changes.push_back(row[0].as<std::string>() + ":" + row[1].as<std::string>());
        return changes;
    }

    /// The pooling modes a client can use here: behind a transaction pooler a
    /// client set to none would leave its session settings in pooled connections.
    static std::vector<dlock::pooling> pooling_modes() {
        if (dlock_testing::through_transaction_pooler()) return {dlock::pooling::detect, dlock::pooling::transaction};
        return {dlock::pooling::detect, dlock::pooling::none, dlock::pooling::transaction};
    }

    static const char* mode_name(dlock::pooling mode) {
        switch (mode) {
        case dlock::pooling::detect: return "detect";
        case dlock::pooling::none: return "none";
        case dlock::pooling::transaction: return "transaction";
        }
        return "?";
    }

    static dlock::client_options options(dlock::pooling mode, dlock::durability durability) {
        dlock::client_options o;
        o.pooling = mode;
        o.durability = durability;
        o.wait_mode = dlock::wait_mode::server; // a wait's own bound: the pipeline on a direct connection
        return o;
    }

    static dlock::lease_options manual(std::chrono::milliseconds ttl = 30s) {
        dlock::lease_options o;
        o.ttl = ttl;
        o.keep_alive = false;
        return o;
    }

    /// The text of the last statement of the client's most recently used
    /// session (the one its next call gets); on a direct connection only.
    std::string last_statement(dlock::client& c) {
        const auto r = sql("SELECT query FROM pg_stat_activity WHERE pid = " + std::to_string(c.backend_pid()));
        return r.size() == 1 ? r[0][0].as<std::string>() : std::string{};
    }

private:
    bool m_observing = false; // observe() ran
    bool m_sql_edition = false; // pg_dlock_sql, not the C extension
};

TEST_F(durability_test, durable_is_the_default_and_sends_no_setting) {
    observe();
    EXPECT_EQ(dlock::client_options{}.durability, dlock::durability::durable);
    for (const auto mode : pooling_modes()) {
        SCOPED_TRACE(mode_name(mode));
        dlock::client_options co;
        co.pooling = mode;
        dlock::client c{co};
        const auto name = unique_name("seen");
        auto l = c.try_acquire_shared(name, manual());
        ASSERT_TRUE(l.has_value());
        EXPECT_EQ(l->renew(), dlock::outcome::done);
        EXPECT_EQ(l->release(), dlock::outcome::done);
        const auto changes = seen(name);
        ASSERT_FALSE(changes.empty()) << "the trigger saw nothing of " << name;
        EXPECT_EQ(changes.front().rfind("grant:", 0), 0u) << changes.front();
        for (const auto& change : changes)
            EXPECT_EQ(change.find(":fenced"), std::string::npos) << change;
        if (mode == dlock::pooling::transaction && !dlock_testing::through_transaction_pooler()) {
            // The self-contained release, exactly as before dlock.durability existed.
            const auto text = last_statement(c);
            EXPECT_EQ(text.rfind("SELECT pg_catalog.set_config('statement_timeout', '", 0), 0u) << text;
            EXPECT_NE(text.find("pg_catalog.set_config('client_connection_check_interval', '1000', true); SELECT "),
                      std::string::npos)
                << text;
            EXPECT_EQ(text.find("dlock.durability"), std::string::npos) << text;
        }
    }
}

// Grant, explicit renewal, release, a grant after a wait (on a direct
// connection with a bound of its own: the pipeline), a keep-alive renewal (on
// the keep-alive's own connection) and a downgrade: each in a transaction the
// server ran as fenced, in every pooling mode; the tokens grow.
TEST_F(durability_test, fenced_leases_are_granted_renewed_and_released_in_fenced_transactions) {
    observe();
    for (const auto mode : pooling_modes()) {
        SCOPED_TRACE(mode_name(mode));
        dlock::client c{options(mode, dlock::durability::fenced)};

        const auto name = unique_name("seen");
        auto first = c.try_acquire_shared(name, manual());
        ASSERT_TRUE(first.has_value());
        EXPECT_EQ(first->renew(), dlock::outcome::done);
        EXPECT_EQ(first->release(), dlock::outcome::done);
        auto second = c.acquire_shared(name, 2s, manual());
        EXPECT_GT(second.fencing_token(), first->fencing_token());
        EXPECT_EQ(second.release(), dlock::outcome::done);
        EXPECT_EQ(seen(name),
                  (std::vector<std::string>{"grant:fenced", "renew:fenced", "release:fenced", "grant:fenced",
                                            "release:fenced"}));
        if (mode == dlock::pooling::transaction && !dlock_testing::through_transaction_pooler()) {
            const auto text = last_statement(c);
            EXPECT_NE(text.find("pg_catalog.set_config('dlock.durability', CASE WHEN "), std::string::npos) << text;
            EXPECT_NE(text.find(" END, true); SELECT "), std::string::npos) << text;
        }

        const auto kept = unique_name("seen");
        dlock::lease_options renewing;
        renewing.ttl = 3s;
        renewing.renew_every = 100ms;
        auto alive = c.try_acquire_shared(kept, renewing);
        ASSERT_TRUE(alive.has_value());
        EXPECT_TRUE(eventually([&] { return seen(kept).size() >= 2; }, 5s)) << "no keep-alive renewal of " << kept;
        EXPECT_EQ(alive->release(), dlock::outcome::done);
        const auto kept_changes = seen(kept);
        ASSERT_GE(kept_changes.size(), 3u);
        EXPECT_EQ(kept_changes[1], "renew:fenced");
        for (const auto& change : kept_changes)
            EXPECT_EQ(change.substr(change.find(':')), ":fenced") << change;

        const auto down = unique_name("seen");
        auto exclusive = c.try_acquire(down, manual());
        ASSERT_TRUE(exclusive.has_value());
        const auto exclusive_token = exclusive->fencing_token();
        EXPECT_EQ(exclusive->downgrade(), dlock::outcome::done);
        EXPECT_GT(exclusive->fencing_token(), exclusive_token);
        EXPECT_EQ(exclusive->release(), dlock::outcome::done);
        // the exclusive grant, its end by the downgrade and the shared lease's grant, then its release
        EXPECT_EQ(seen(down), (std::vector<std::string>{"grant:fenced", "downgrade:fenced", "grant:fenced",
                                                        "release:fenced"}));
    }
}

// An exclusive lease under fenced: granted, renewed (by the lease and by
// name), released, and the next grant's token is higher. The server counts
// the six calls among the lease transactions that committed without the
// flush (dlock.durability_stats; a durable client's grants and renewals
// would be counted as durable, only its releases as unflushed).
TEST_F(durability_test, fenced_exclusive_lease_is_granted_renewed_and_released_and_its_token_grows) {
    const auto unflushed = [&] {
        return sql("SELECT unflushed_commits FROM dlock.durability_stats()")[0][0].as<long long>();
    };
    for (const auto mode : pooling_modes()) {
        SCOPED_TRACE(mode_name(mode));
        const auto unflushed_before = unflushed();
        dlock::client c{options(mode, dlock::durability::fenced)};
        const auto name = unique_name("exclusive");
        auto first = c.try_acquire(name, manual());
        ASSERT_TRUE(first.has_value());
        EXPECT_EQ(state_of(name), "held");
        EXPECT_EQ(first->renew(), dlock::outcome::done);
        EXPECT_TRUE(c.renew(name, first->owner_token(), 30s).has_value());
        EXPECT_EQ(column_of(name, "renewals"), 2);
        EXPECT_EQ(first->release(), dlock::outcome::done);
        EXPECT_EQ(state_of(name), "free");
        auto second = c.acquire(name, 2s, manual());
        EXPECT_GT(second.fencing_token(), first->fencing_token());
        EXPECT_EQ(second.release(), dlock::outcome::done);
        const auto m = c.metrics();
        EXPECT_EQ(m.acquisitions, 2u);
        EXPECT_EQ(m.unknown_outcomes, 0u);
        EXPECT_GE(unflushed() - unflushed_before, 6);
    }
}

// Where the server cannot fence -- a database without pg_dlock, the SQL
// edition (which reads no setting, even on a server whose preloaded pg_dlock
// defines it) -- a fenced client's calls are refused before anything runs:
// server_error 0A000 naming fenced, nothing granted; a renewal is refused the
// same way (not an unknown outcome), and a release, which never throws, says
// unknown. In both ways of sending (the session settings of a direct
// connection, the self-contained call of a pooler).
TEST_F(durability_test, fenced_is_refused_where_the_server_cannot_fence) {
    const char* admin_dsn = std::getenv("DLOCK_ADMIN_DSN");
    std::vector<std::pair<std::string, std::string>> targets{
        {"a database without pg_dlock", std::string{admin_dsn != nullptr ? admin_dsn : ""} + " dbname=postgres"}};
    const bool sql_edition = !sql("SELECT 1 FROM pg_extension WHERE extname = 'pg_dlock_sql'").empty();
    if (sql_edition) targets.emplace_back("the SQL edition", "");
    for (const auto& [label, dsn] : targets) {
        for (const auto mode : {dlock::pooling::none, dlock::pooling::transaction}) {
            SCOPED_TRACE(label + ", pooling " + mode_name(mode));
            if (mode == dlock::pooling::none && dsn.empty() && dlock_testing::through_transaction_pooler()) continue;
            auto co = options(mode, dlock::durability::fenced);
            co.connection_string = dsn;
            dlock::client c{co};
            const auto name = unique_name("refused");
            try {
                auto l = c.try_acquire(name, manual());
                ADD_FAILURE() << "a fenced lease was granted";
            } catch (const dlock::server_error& e) {
                EXPECT_EQ(e.sqlstate(), "0A000");
                EXPECT_NE(std::string{e.what()}.find("fenced"), std::string::npos) << e.what();
                EXPECT_EQ(e.subject(), name);
            }
            EXPECT_THROW(static_cast<void>(c.acquire_shared(name, 1s, manual())), dlock::server_error);
            if (dsn.empty()) {
                EXPECT_EQ(state_of(name), "free");
                // A lease of a durable client: the fenced one can neither renew nor release it.
                dlock::client durable;
                auto held = durable.try_acquire(name, manual());
                ASSERT_TRUE(held.has_value());
                EXPECT_THROW(static_cast<void>(c.renew(name, held->owner_token(), 30s)), dlock::server_error);
                EXPECT_EQ(c.release(name, held->owner_token()), dlock::outcome::unknown);
                EXPECT_EQ(state_of(name), "held");
                EXPECT_EQ(held->release(), dlock::outcome::done);
            }
        }
    }
}

} // namespace
