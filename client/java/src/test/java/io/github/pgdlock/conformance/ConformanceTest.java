package io.github.pgdlock.conformance;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.DynamicTest.dynamicTest;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Runs the scenarios of client/conformance (format 1, described in its
 * README) with the Java client against a real server: one dynamic test per
 * scenario, and per negative control one that passes only when the scenario
 * fails. Skipped scenarios say why.
 */
class ConformanceTest {
    /** The scenarios; DLOCK_CONFORMANCE_DIR names another (the suite's negative control uses a copy). */
    static final Path DIR = System.getenv("DLOCK_CONFORMANCE_DIR") != null
            ? Path.of(System.getenv("DLOCK_CONFORMANCE_DIR")) : Path.of("..", "conformance");
    static final ObjectMapper JSON = new ObjectMapper();

    static Env env() throws Exception {
        Env e = Env.fromEnvironment();
        try (Connection c = DriverManager.getConnection(e.admin); Statement st = c.createStatement()) {
            st.execute(Files.readString(DIR.resolve("setup.sql")));
            try (var rs = st.executeQuery("SELECT dlock.waiters('x') IS NOT NULL")) {
                rs.next();
                e.waitQueue = rs.getBoolean(1);
            }
        }
        return e;
    }

    static List<Path> files(String dir) throws Exception {
        try (Stream<Path> s = Files.list(DIR.resolve(dir))) {
            List<Path> out = new ArrayList<>(s.filter(p -> p.toString().endsWith(".json")).sorted().toList());
            if (out.isEmpty()) {
                throw new IllegalStateException("no scenarios in " + dir);
            }
            return out;
        }
    }

    static JsonNode load(Path p) throws Exception {
        JsonNode n = JSON.readTree(p.toFile());
        if (n.path("format").asInt() != 1) {
            throw new IllegalStateException(p + ": format " + n.path("format") + ", this runner reads 1");
        }
        return n;
    }

    @TestFactory
    Stream<DynamicTest> scenarios() throws Exception {
        Env env = env();
        JsonNode skips = JSON.readTree(Path.of("conformance-skip.json").toFile());
        List<DynamicTest> tests = new ArrayList<>();
        for (Path p : files("scenarios")) {
            JsonNode s = load(p);
            tests.add(dynamicTest(p.getFileName().toString().replace(".json", ""), () -> {
                String name = s.path("name").asText();
                String why = skips.has(name) ? "skipped by the Java client: " + skips.get(name).asText() : env.unmet(s);
                if (why != null) {
                    System.out.println("conformance: skipped " + p.getFileName() + ": " + why);
                }
                Assumptions.assumeTrue(why == null, why);
                new Runner(env, s).run();
            }));
        }
        return tests.stream();
    }

    @TestFactory
    Stream<DynamicTest> negativeControls() throws Exception {
        Env env = env();
        List<DynamicTest> tests = new ArrayList<>();
        for (Path p : files("negative")) {
            JsonNode s = load(p);
            tests.add(dynamicTest(p.getFileName().toString().replace(".json", ""), () -> {
                String unmet = env.unmet(s);
                if (unmet != null) {
                    System.out.println("conformance: skipped " + p.getFileName() + ": " + unmet);
                }
                Assumptions.assumeTrue(unmet == null, unmet);
                AssertionError e = assertThrows(AssertionError.class, () -> new Runner(env, s).run(),
                        "the negative control passed: the runner does not check what it should");
                int at = s.path("fails_at_step").asInt();
                if (!(e instanceof Runner.StepFailure f) || f.step != at) {
                    throw new AssertionError("the negative control failed, but not at step " + at + ": " + e.getMessage(), e);
                }
                System.out.println("conformance: " + p.getFileName() + " failed as it must: " + e.getMessage());
            }));
        }
        return tests.stream();
    }

    /** What the runner is given (client/conformance/README.md), as JDBC URLs. */
    static final class Env {
        String dsn;
        String admin;
        String pool2;
        String pooler;
        boolean waitQueue;

        static Env fromEnvironment() {
            Map<String, String> e = System.getenv();
            Env env = new Env();
            env.dsn = jdbc(e.get("DLOCK_CONFORMANCE_DSN"));
            env.admin = e.containsKey("DLOCK_CONFORMANCE_ADMIN_DSN") ? jdbc(e.get("DLOCK_CONFORMANCE_ADMIN_DSN")) : env.dsn;
            env.pool2 = e.containsKey("DLOCK_CONFORMANCE_POOL2_DSN") ? jdbc(e.get("DLOCK_CONFORMANCE_POOL2_DSN")) : null;
            env.pooler = e.getOrDefault("DLOCK_CONFORMANCE_POOLER", "");
            return env;
        }

        String unmet(JsonNode s) {
            for (Iterator<JsonNode> it = s.path("requires").elements(); it.hasNext();) {
                String r = it.next().asText();
                if (r.equals("direct") && !pooler.isEmpty()) {
                    return "needs a direct connection (DLOCK_CONFORMANCE_POOLER is set)";
                }
                if (r.equals("transaction_pooler") && (pooler.isEmpty() || pool2 == null)) {
                    return "needs a transaction pooler (DLOCK_CONFORMANCE_POOLER and _POOL2_DSN)";
                }
                if (r.equals("wait_queue") && !waitQueue) {
                    return "needs the wait queue (pg_dlock preloaded)";
                }
            }
            return null;
        }

        /**
         * A libpq connection string (key=value ..., or empty: the PG* environment)
         * as a JDBC URL; nothing prepared by name, so it also works behind a pooler.
         */
        static String jdbc(String dsn) {
            Map<String, String> env = System.getenv();
            String host = env.getOrDefault("PGHOST", "localhost");
            String port = env.getOrDefault("PGPORT", "5432");
            String db = env.getOrDefault("PGDATABASE", "postgres");
            String user = env.getOrDefault("PGUSER", "postgres");
            if (dsn != null) {
                for (String kv : dsn.trim().split("\\s+")) {
                    int eq = kv.indexOf('=');
                    if (eq < 0) {
                        continue;
                    }
                    String k = kv.substring(0, eq);
                    String v = kv.substring(eq + 1);
                    switch (k) {
                        case "host" -> host = v;
                        case "port" -> port = v;
                        case "dbname" -> db = v;
                        case "user" -> user = v;
                        default -> {
                        }
                    }
                }
            }
            return "jdbc:postgresql://" + host + ":" + port + "/" + db + "?user=" + user + "&prepareThreshold=0";
        }
    }
}
