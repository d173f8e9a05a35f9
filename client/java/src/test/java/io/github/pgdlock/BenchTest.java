package io.github.pgdlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Case 1 of make bench (uncontended pairs) for the Java client beside its
 * driver's own two statements: DLOCK_BENCH=SECONDS mvn surefire:test -Dtest=BenchTest.
 * A warm-up round of each system (not recorded) comes first, so that the JIT has compiled what the
 * measured rounds run. With DLOCK_BENCH_TSV=FILE it appends bench/run.sh's rows (case, system, clients,
 * metric, value) to FILE. It measures; it fails only when it cannot run.
 */
class BenchTest {
    interface Pair {
        long run(DlockClient c, Connection conn, String name) throws Exception;
    }

    @Test
    void uncontendedPairs() throws Exception {
        String env = System.getenv("DLOCK_BENCH");
        Assumptions.assumeTrue(env != null && !env.isEmpty(), "DLOCK_BENCH=SECONDS not set");
        long nanos = (long) (Double.parseDouble(env) * 1e9);
        Pair client = (c, conn, name) -> {
            long start = System.nanoTime();
            Lease l = c.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(30)).keepAlive(false)).orElseThrow();
            long acq = System.nanoTime() - start;
            if (l.release() != Outcome.DONE) {
                throw new IllegalStateException("release");
            }
            return acq;
        };
        Pair driver = (c, conn, name) -> {
            long start = System.nanoTime();
            String owner;
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT (dlock.try_acquire(?, interval '30 seconds')).owner_token::text")) {
                ps.setString(1, name);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    owner = rs.getString(1);
                }
            }
            long acq = System.nanoTime() - start;
            try (PreparedStatement ps = conn.prepareStatement("SELECT dlock.release(?, ?::uuid)")) {
                ps.setString(1, name);
                ps.setString(2, owner);
                ps.execute();
            }
            return acq;
        };
        String tsvPath = System.getenv("DLOCK_BENCH_TSV");
        Object[][] runs = {
            {"java-pgjdbc-sql", driver, 8, false}, {"java-client", client, 8, false},
            {"java-pgjdbc-sql", driver, 1, true}, {"java-client", client, 1, true},
            {"java-pgjdbc-sql", driver, 8, true}, {"java-client", client, 8, true}};
        for (Object[] sys : runs) {
            int workers = (Integer) sys[2];
            boolean record = (Boolean) sys[3];
            {
                List<Long> acquires = Collections.synchronizedList(new ArrayList<>());
                List<Thread> threads = new ArrayList<>();
                List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
                for (int w = 0; w < workers; w++) {
                    String name = "bench/java/" + sys[0] + "/" + ProcessHandle.current().pid() + "/" + w + "/"
                            + System.nanoTime();
                    Thread t = new Thread(() -> {
                        try (DlockClient c = TestDb.client(); Connection conn = TestDb.connect()) {
                            conn.unwrap(org.postgresql.PGConnection.class).setPrepareThreshold(1);
                            long until = System.nanoTime() + nanos;
                            List<Long> mine = new ArrayList<>();
                            while (System.nanoTime() - until < 0) {
                                mine.add(((Pair) sys[1]).run(c, conn, name));
                            }
                            acquires.addAll(mine);
                        } catch (Throwable e) {
                            failures.add(e);
                        }
                    });
                    threads.add(t);
                    t.start();
                }
                for (Thread t : threads) {
                    t.join();
                }
                if (!failures.isEmpty()) {
                    throw new AssertionError(failures.get(0));
                }
                List<Long> sorted = new ArrayList<>(acquires);
                Collections.sort(sorted);
                double rate = sorted.size() / (nanos / 1e9);
                double p50us = sorted.get(sorted.size() / 2) / 1e3;
                System.out.printf("bench: %-22s %d clients: %8.0f pairs/s, acquire p50 %.3f ms%s%n", sys[0], workers,
                        rate, p50us / 1e3, record ? "" : " (warm-up)");
                if (record && tsvPath != null) {
                    java.nio.file.Files.writeString(java.nio.file.Path.of(tsvPath),
                            String.format("uncontended\t%s\t%d\tpairs_per_s\t%.6g%nuncontended\t%s\t%d\tacq_p50_us\t%.6g%n",
                                    sys[0], workers, rate, sys[0], workers, p50us),
                            java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
                }
            }
        }
    }
}
