package io.github.pgdlock;

import java.net.InetAddress;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;

/**
 * Options of a {@link DlockClient}; fluent setters, defaults as the C++
 * client's. Without a JDBC URL the connection is taken from the PG*
 * environment (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD).
 */
public final class ClientOptions {
    String url;
    Properties properties = new Properties();
    String holder;
    Duration callTimeout = Duration.ofSeconds(5);
    Duration networkTimeout = Duration.ofSeconds(10);
    double driftAllowance = 0.01;
    Duration safetyMargin = Duration.ofMillis(50);
    int maxAttempts = 5;
    Duration initialBackoff = Duration.ofMillis(50);
    Duration maxBackoff = Duration.ofSeconds(2);
    Pooling pooling = Pooling.DETECT;
    WaitMode waitMode = WaitMode.AUTOMATIC;
    Duration pollInterval = Duration.ofMillis(500);

    public static ClientOptions defaults() {
        return new ClientOptions();
    }

    /** A JDBC URL (jdbc:postgresql://host:port/db?user=...). */
    public ClientOptions url(String value) {
        url = value;
        return this;
    }

    /** Extra pgjdbc connection properties. */
    public ClientOptions property(String key, String value) {
        properties.setProperty(key, value);
        return this;
    }

    /** Describes this process in dlock.locks (default host:pid). */
    public ClientOptions holder(String value) {
        holder = value;
        return this;
    }

    /** The statement_timeout of every call (default 5 s); an acquire's wait adds to it. */
    public ClientOptions callTimeout(Duration value) {
        callTimeout = Objects.requireNonNull(value);
        return this;
    }

    /** Bounds connecting and waiting on the network beyond a call's own bound (default 10 s). */
    public ClientOptions networkTimeout(Duration value) {
        networkTimeout = Objects.requireNonNull(value);
        return this;
    }

    /** The share of a lease given up for clock rate differences (default 0.01). */
    public ClientOptions driftAllowance(double value) {
        driftAllowance = value;
        return this;
    }

    /** Taken off every deadline (default 50 ms). */
    public ClientOptions safetyMargin(Duration value) {
        safetyMargin = Objects.requireNonNull(value);
        return this;
    }

    /** Retries of an acquire whose outcome is unknown: attempts (default 5) and backoff (50 ms to 2 s). */
    public ClientOptions retry(int attempts, Duration initial, Duration max) {
        maxAttempts = Math.max(1, attempts);
        initialBackoff = initial;
        maxBackoff = max;
        return this;
    }

    public ClientOptions pooling(Pooling value) {
        pooling = Objects.requireNonNull(value);
        return this;
    }

    public ClientOptions waitMode(WaitMode value) {
        waitMode = Objects.requireNonNull(value);
        return this;
    }

    /** The longest sleep between two tries of a client-side wait (default 500 ms). */
    public ClientOptions pollInterval(Duration value) {
        pollInterval = Objects.requireNonNull(value);
        return this;
    }

    String jdbcUrl() {
        if (url != null) {
            return url;
        }
        Map<String, String> env = System.getenv();
        String host = env.getOrDefault("PGHOST", "localhost");
        String port = env.getOrDefault("PGPORT", "5432");
        String db = env.getOrDefault("PGDATABASE", env.getOrDefault("PGUSER", System.getProperty("user.name")));
        return "jdbc:postgresql://" + host + ":" + port + "/" + db;
    }

    Properties connectionProperties() {
        Properties p = new Properties();
        Map<String, String> env = System.getenv();
        if (url == null) {
            p.setProperty("user", env.getOrDefault("PGUSER", System.getProperty("user.name")));
            if (env.containsKey("PGPASSWORD")) {
                p.setProperty("password", env.get("PGPASSWORD"));
            }
        }
        long seconds = Math.max(1, networkTimeout.toSeconds());
        p.setProperty("tcpKeepAlive", "true");
        p.setProperty("connectTimeout", Long.toString(seconds));
        p.setProperty("loginTimeout", Long.toString(seconds));
        p.setProperty("ApplicationName", "pg_dlock-java");
        // Nothing prepared by name until the first call found a direct connection.
        p.setProperty("prepareThreshold", "0");
        p.putAll(properties);
        return p;
    }

    String holderOrDefault() {
        if (holder != null) {
            return holder;
        }
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            host = "localhost";
        }
        return host + ":" + ProcessHandle.current().pid();
    }
}
