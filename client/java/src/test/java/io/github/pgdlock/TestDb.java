package io.github.pgdlock;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Assumptions;

/**
 * The tests connect with the PG* environment (a server with pg_dlock);
 * DLOCK_PGBOUNCER_PORT names a PgBouncer in transaction pooling in front of it
 * (tests/lib/pgbouncer.sh: databases DB and DB_pool2).
 */
public final class TestDb {
    private static final AtomicLong SEQ = new AtomicLong();

    private TestDb() {
    }

    public static String name(String what) {
        return "java-" + what + "-" + ProcessHandle.current().pid() + "-" + SEQ.incrementAndGet();
    }

    /** A plain JDBC connection to the test database (superuser). */
    public static Connection connect() throws SQLException {
        Properties p = new Properties();
        p.setProperty("user", System.getenv().getOrDefault("PGUSER", "postgres"));
        return DriverManager.getConnection(ClientOptions.defaults().jdbcUrl(), p);
    }

    public static DlockClient client() {
        return new DlockClient(ClientOptions.defaults());
    }

    /** JDBC URL of PgBouncer's database db (skips the test without a PgBouncer). */
    public static String bouncerUrl(String suffix) {
        String port = System.getenv("DLOCK_PGBOUNCER_PORT");
        Assumptions.assumeTrue(port != null && !port.isEmpty(), "DLOCK_PGBOUNCER_PORT not set: no PgBouncer");
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + System.getenv("PGDATABASE") + suffix + "?user="
                + System.getenv().getOrDefault("PGUSER", "postgres");
    }

    public static void forceRelease(String name) throws SQLException {
        try (Connection c = connect(); var st = c.prepareStatement("SELECT dlock.force_release(?, 'test')")) {
            st.setString(1, name);
            st.execute();
        }
    }
}
