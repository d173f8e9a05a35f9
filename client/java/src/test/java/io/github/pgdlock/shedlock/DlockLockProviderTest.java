package io.github.pgdlock.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;

import io.github.pgdlock.DlockClient;
import io.github.pgdlock.Fencing;
import io.github.pgdlock.StaleTokenException;
import io.github.pgdlock.TestDb;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.spring.annotation.EnableSchedulerLock;
import net.javacrumbs.shedlock.spring.annotation.SchedulerLock;

class DlockLockProviderTest {
    static final String PREFIX = TestDb.name("shedlock") + ":";
    static final List<long[]> RUNS = new CopyOnWriteArrayList<>(); // start, end, token
    static final AtomicInteger INSIDE = new AtomicInteger();
    static final AtomicInteger OVERLAPS = new AtomicInteger();
    static final List<Throwable> FAILURES = new CopyOnWriteArrayList<>();

    /** The job: fenced writes with the lease's token while it runs. */
    public static class Job {
        @Scheduled(fixedDelay = 50)
        @SchedulerLock(name = "nightly", lockAtMostFor = "PT10S")
        public void run() {
            long start = System.nanoTime();
            if (INSIDE.incrementAndGet() > 1) {
                OVERLAPS.incrementAndGet();
            }
            try (Connection db = TestDb.connect()) {
                long token = DlockLockProvider.currentFencingToken().orElseThrow();
                Fencing.fence(db, PREFIX + "nightly/output", token);
                Thread.sleep(120);
                RUNS.add(new long[] {start, System.nanoTime(), token});
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt(); // the context is closing
            } catch (Throwable e) {
                FAILURES.add(e);
            } finally {
                INSIDE.decrementAndGet();
            }
        }
    }

    @Configuration
    @EnableScheduling
    @EnableSchedulerLock(defaultLockAtMostFor = "PT10S")
    public static class Instance {
        @Bean(destroyMethod = "close")
        public DlockClient dlockClient() {
            return TestDb.client();
        }

        @Bean
        public LockProvider lockProvider(DlockClient client) {
            return new DlockLockProvider(client, PREFIX);
        }

        @Bean
        public Job job() {
            return new Job();
        }
    }

    /** Two instances run the @SchedulerLock job: never at once, each run with a higher token; a stale token is refused. */
    @Test
    void aSchedulerLockJobRunsInOneInstanceAtATimeWithFencing() throws Exception {
        try (AnnotationConfigApplicationContext one = new AnnotationConfigApplicationContext(Instance.class);
                AnnotationConfigApplicationContext two = new AnnotationConfigApplicationContext(Instance.class)) {
            Thread.sleep(2000);
        }
        assertTrue(FAILURES.isEmpty(), FAILURES.toString());
        assertTrue(RUNS.size() >= 4, "runs: " + RUNS.size());
        assertEquals(0, OVERLAPS.get());
        long[][] runs = RUNS.toArray(new long[0][]);
        java.util.Arrays.sort(runs, (x, y) -> Long.compare(x[0], y[0]));
        for (int i = 1; i < runs.length; i++) {
            assertTrue(runs[i][0] >= runs[i - 1][1], "runs overlap");
            assertTrue(runs[i][2] > runs[i - 1][2], "token did not grow");
        }
        try (Connection db = TestDb.connect()) {
            long stale = runs[0][2];
            assertThrows(StaleTokenException.class, () -> Fencing.fence(db, PREFIX + "nightly/output", stale));
        }
    }

    @Test
    void lockAtLeastForKeepsTheLockAfterUnlockOnTheServersClock() throws Exception {
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client()) {
            DlockLockProvider one = new DlockLockProvider(a, PREFIX);
            DlockLockProvider two = new DlockLockProvider(b, PREFIX);
            LockConfiguration cfg = new LockConfiguration(Instant.now(), "atleast", Duration.ofSeconds(10),
                    Duration.ofMillis(800));
            SimpleLock lock = one.lock(cfg).orElseThrow();
            assertTrue(DlockLockProvider.currentFencingToken().isPresent());
            lock.unlock();
            assertFalse(DlockLockProvider.currentFencingToken().isPresent());
            assertThrows(IllegalStateException.class, lock::unlock);
            assertTrue(two.lock(cfg).isEmpty(), "taken before lockAtLeastFor");
            Thread.sleep(1000);
            Optional<SimpleLock> later = two.lock(cfg);
            assertTrue(later.isPresent(), "not free after lockAtLeastFor");
            later.get().unlock();
        }
    }

    @Test
    void lockAtMostForEndsTheLockAndExtendMovesIt() throws Exception {
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client()) {
            DlockLockProvider one = new DlockLockProvider(a, PREFIX);
            DlockLockProvider two = new DlockLockProvider(b, PREFIX);
            LockConfiguration cfg = new LockConfiguration(Instant.now(), "atmost", Duration.ofMillis(500), Duration.ZERO);
            SimpleLock lock = one.lock(cfg).orElseThrow();
            SimpleLock extended = lock.extend(Duration.ofSeconds(2), Duration.ZERO).orElseThrow();
            Thread.sleep(700);
            assertTrue(two.lock(cfg).isEmpty(), "extend did not hold the lock");
            extended.unlock();
            SimpleLock short2 = two.lock(cfg).orElseThrow();
            Thread.sleep(700); // past lockAtMostFor: free for the other instance
            SimpleLock again = one.lock(cfg).orElseThrow();
            assertTrue(short2.extend(Duration.ofSeconds(1), Duration.ZERO).isEmpty(), "extended a lost lock");
            again.unlock();
        }
    }
}
