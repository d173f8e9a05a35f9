package io.github.pgdlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

class ClientTest {
    @Test
    void grantRefusalReleaseAndAHigherToken() {
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client()) {
            String name = TestDb.name("grant");
            Lease l = a.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(10))).orElseThrow();
            assertTrue(l.fencingToken() > 0 && l.isValid());
            assertTrue(b.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(1))).isEmpty());
            assertEquals(Outcome.DONE, l.release());
            assertEquals(Outcome.REFUSED, l.release());
            try (Lease l2 = b.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(1))).orElseThrow()) {
                assertTrue(l2.fencingToken() > l.fencingToken());
            }
        }
    }

    @Test
    void sameOwnerRetryKeepsTheToken() {
        try (DlockClient c = TestDb.client()) {
            String name = TestDb.name("retry");
            String owner = UUID.randomUUID().toString();
            LeaseOptions o = LeaseOptions.ttl(Duration.ofSeconds(10)).ownerToken(owner).keepAlive(false);
            Lease l1 = c.tryAcquire(name, o).orElseThrow();
            try (Lease l2 = c.tryAcquire(name, o).orElseThrow()) {
                assertEquals(l1.fencingToken(), l2.fencingToken());
                assertEquals(owner, l2.ownerToken());
            }
        }
    }

    @Test
    void deadlineIsNeverLaterThanTheServersLeaseUntil() {
        try (DlockClient c = TestDb.client();
                Lease l = c.tryAcquire(TestDb.name("deadline"), LeaseOptions.ttl(Duration.ofSeconds(5))).orElseThrow()) {
            long left = l.deadlineNanos() - System.nanoTime();
            long server = Duration.between(Instant.now(), l.leaseUntil()).toNanos();
            assertTrue(left <= server && left > 4_000_000_000L, left + " vs " + server);
        }
    }

    @Test
    void leaseGrantedAfterAWaitLongerThanItsTtlIsAlive() throws Exception {
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client()) {
            String name = TestDb.name("born");
            Lease holder = a.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(30))).orElseThrow();
            Thread t = new Thread(() -> {
                try {
                    Thread.sleep(1500);
                } catch (InterruptedException e) {
                    return;
                }
                holder.release();
            });
            t.start();
            try (Lease l = b.acquire(name, Duration.ofSeconds(5), LeaseOptions.ttl(Duration.ofSeconds(1)).keepAlive(false))) {
                assertTrue(l.isValid() && l.timeLeft().toMillis() > 500, "born lost: " + l.timeLeft());
            }
            t.join();
        }
    }

    @Test
    void keepAliveHoldsAcrossSeveralTtls() throws Exception {
        try (DlockClient c = TestDb.client(); Connection db = TestDb.connect()) {
            Lease l = c.tryAcquire(TestDb.name("keep"), LeaseOptions.ttl(Duration.ofMillis(600))).orElseThrow();
            Thread.sleep(2000);
            assertTrue(Fencing.holds(db, l.name(), l.fencingToken()));
            assertTrue(l.isValid() && c.metrics().renewals() >= 3, c.metrics().toString());
            assertEquals(Outcome.DONE, l.release());
        }
    }

    @Test
    void withoutKeepAliveTheLeaseIsLostAtItsDeadline() throws Exception {
        AtomicInteger called = new AtomicInteger();
        try (DlockClient c = TestDb.client()) {
            Lease l = c.tryAcquire(TestDb.name("nokeep"), LeaseOptions.ttl(Duration.ofMillis(400)).keepAlive(false)
                    .onLost((lease, e) -> called.incrementAndGet())).orElseThrow();
            assertTrue(l.awaitLost(Duration.ofSeconds(2)));
            assertTrue(l.isLost() && !l.isValid() && called.get() == 1);
            assertThrows(LeaseLostException.class, l::checkValid);
        }
    }

    /** A lease forced away is reported lost, its thread interrupted; the stale token is refused by the fence. */
    @Test
    void lostLeaseStopsTheBodyAndTheFenceRefusesTheOneThatIgnoresIt() throws Exception {
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client(); Connection db = TestDb.connect()) {
            String name = TestDb.name("lost");
            String resource = name + "/data";
            long stale;
            long forced;
            boolean interrupted = false;
            try (Lease l = a.tryAcquire(name, LeaseOptions.ttl(Duration.ofMillis(900)).interruptOnLoss(true))
                    .orElseThrow()) {
                stale = l.fencingToken();
                Fencing.fence(db, resource, stale);
                TestDb.forceRelease(name);
                forced = System.nanoTime();
                try {
                    Thread.sleep(3000); // the body
                } catch (InterruptedException e) {
                    interrupted = true;
                }
                assertTrue(interrupted && l.isLost(), "the body was not stopped");
                assertTrue(System.nanoTime() - forced < 900_000_000L, "stopped too late");
            }
            try (Lease l2 = b.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(5))).orElseThrow()) {
                Fencing.fence(db, resource, l2.fencingToken());
                StaleTokenException e = assertThrows(StaleTokenException.class, () -> Fencing.fence(db, resource, stale));
                assertEquals("PD001", e.sqlState());
            }
        }
    }

    @Test
    void fencedWriteWithAStaleTokenIsRefusedInTheCallersTransaction() throws Exception {
        try (DlockClient c = TestDb.client(); Connection db = TestDb.connect()) {
            String name = TestDb.name("fenced");
            try (Statement st = db.createStatement()) {
                st.execute("CREATE TABLE IF NOT EXISTS java_fenced (k text, token bigint)");
            }
            Lease old = c.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(5)).keepAlive(false)).orElseThrow();
            TestDb.forceRelease(name);
            try (Lease cur = c.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(5))).orElseThrow()) {
                write(db, name, cur.fencingToken(), name + "-new");
                assertThrows(StaleTokenException.class, () -> write(db, name, old.fencingToken(), name + "-old"));
                assertThrows(NotHeldException.class, () -> Fencing.assertHolds(db, name, old.fencingToken()));
                try (var ps = db.prepareStatement("SELECT count(*) FROM java_fenced WHERE k = ?")) {
                    ps.setString(1, name + "-old");
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        assertEquals(0, rs.getInt(1));
                    }
                }
                assertEquals(Outcome.REFUSED, old.renew());
                assertTrue(old.isLost());
            }
        }
    }

    private static void write(Connection db, String name, long token, String key) throws Exception {
        db.setAutoCommit(false);
        try {
            Fencing.fence(db, name, token);
            try (var ps = db.prepareStatement("INSERT INTO java_fenced VALUES (?, ?)")) {
                ps.setString(1, key);
                ps.setLong(2, token);
                ps.execute();
            }
            assertEquals(Outcome.DONE, Fencing.commit(db));
        } finally {
            if (!db.getAutoCommit()) {
                db.rollback();
                db.setAutoCommit(true);
            }
        }
    }

    /** An acquire whose backend is terminated while it waits is retried with the same owner. */
    @Test
    void unknownAcquireIsRetriedWithTheSameOwner() throws Exception {
        try (DlockClient a = TestDb.client();
                DlockClient b = new DlockClient(ClientOptions.defaults().retry(5, Duration.ofMillis(200), Duration.ofSeconds(2)));
                Connection db = TestDb.connect()) {
            String name = TestDb.name("unknown");
            Lease holder = a.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(30))).orElseThrow();
            String owner = UUID.randomUUID().toString();
            Thread killer = new Thread(() -> {
                long until = System.nanoTime() + 5_000_000_000L;
                try (Statement st = db.createStatement()) {
                    while (System.nanoTime() < until) {
                        try (ResultSet rs = st.executeQuery("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                + "WHERE query LIKE '%dlock.acquire(%' AND state = 'active' AND pid <> pg_backend_pid()")) {
                            rs.next();
                            if (rs.getInt(1) > 0) {
                                Thread.sleep(300);
                                holder.release();
                                return;
                            }
                        }
                        Thread.sleep(50);
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            killer.start();
            try (Lease l = b.acquire(name, Duration.ofSeconds(10), LeaseOptions.ttl(Duration.ofSeconds(10)).ownerToken(owner))) {
                DlockClient.Metrics m = b.metrics();
                assertEquals(owner, l.ownerToken());
                assertTrue(m.unknownOutcomes() >= 1 && m.retries() >= 1 && m.acquisitions() == 1, m.toString());
            }
            killer.join();
        }
    }

    @Test
    void aWaitThatRunsOutIsBusy() {
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client()) {
            String name = TestDb.name("busy");
            try (Lease l = a.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(10))).orElseThrow()) {
                long started = System.nanoTime();
                BusyException e = assertThrows(BusyException.class,
                        () -> b.acquire(name, Duration.ofMillis(400), LeaseOptions.ttl(Duration.ofSeconds(1))));
                assertEquals("55P03", e.sqlState());
                assertTrue(System.nanoTime() - started >= 400_000_000L);
            }
        }
    }

    @Test
    void badArgumentsAreTypedErrors() {
        try (DlockClient c = TestDb.client()) {
            for (String name : List.of("", "x".repeat(201))) {
                InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                        () -> c.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(1))));
                assertEquals("22023", e.sqlState());
            }
            assertThrows(InvalidArgumentException.class,
                    () -> c.tryAcquire(TestDb.name("bad"), LeaseOptions.ttl(Duration.ofSeconds(-1))));
            assertThrows(InvalidArgumentException.class,
                    () -> c.acquire(TestDb.name("bad"), Duration.ofSeconds(-1), LeaseOptions.defaults()));
        }
    }

    /** A release behind a pin ends after its call timeout, in every way of sending. */
    @Test
    void everyCallIsBoundedByItsStatementTimeout() throws Exception {
        List<ClientOptions> modes = new ArrayList<>();
        modes.add(ClientOptions.defaults());
        if (System.getenv("DLOCK_PGBOUNCER_PORT") != null) {
            modes.add(ClientOptions.defaults().url(TestDb.bouncerUrl("")));
        }
        for (ClientOptions o : modes) {
            try (DlockClient c = new DlockClient(o.callTimeout(Duration.ofMillis(500))); Connection db = TestDb.connect()) {
                String name = TestDb.name("bounded");
                Lease l = c.tryAcquire(name, LeaseOptions.ttl(Duration.ofSeconds(10))).orElseThrow();
                db.setAutoCommit(false);
                assertTrue(Fencing.holds(db, name, l.fencingToken()));
                long started = System.nanoTime();
                Outcome out = l.release();
                long took = (System.nanoTime() - started) / 1_000_000;
                db.rollback();
                assertEquals(Outcome.UNKNOWN, out, "pooled " + c.behindPooler());
                assertTrue(took < 2500, "release took " + took + " ms");
            }
        }
    }

    @Test
    void detectFindsThePoolerAndLeavesNoSessionState() throws Exception {
        String url = TestDb.bouncerUrl("_pool2");
        resetPool(url);
        for (boolean control : new boolean[] {false, true}) {
            // A timeout of its own, told apart from what other tests left in the pool.
            ClientOptions o = ClientOptions.defaults().url(url).callTimeout(Duration.ofMillis(4321));
            if (control) {
                o.pooling(Pooling.NONE); // the negative control: session settings behind a pooler
            }
            try (DlockClient c = new DlockClient(o)) {
                for (int i = 0; i < 4; i++) {
                    try {
                        c.tryAcquire(TestDb.name("detect"), LeaseOptions.ttl(Duration.ofSeconds(5))).orElseThrow()
                                .release();
                    } catch (DlockException e) {
                        // the control's named statements may meet their own leftovers: that is its point
                        if (!control) {
                            throw e;
                        }
                    }
                }
                if (!control) {
                    assertEquals(Boolean.TRUE, c.behindPooler().orElseThrow());
                }
            }
            boolean leaked = false;
            for (int i = 0; i < 6; i++) {
                try (Connection conn = java.sql.DriverManager.getConnection(url + "&prepareThreshold=0");
                        Statement st = conn.createStatement();
                        ResultSet rs = st.executeQuery("SHOW statement_timeout")) {
                    rs.next();
                    leaked |= rs.getString(1).equals("4321ms");
                }
            }
            assertEquals(control, leaked, "control " + control);
        }
        resetPool(url);
    }

    /** Resets statement_timeout on both server connections of the pool of two. */
    private static void resetPool(String url) throws Exception {
        try (Connection x = java.sql.DriverManager.getConnection(url + "&prepareThreshold=0");
                Connection y = java.sql.DriverManager.getConnection(url + "&prepareThreshold=0")) {
            x.setAutoCommit(false);
            y.setAutoCommit(false);
            for (Connection c : List.of(x, y)) {
                try (Statement st = c.createStatement()) {
                    st.execute("DEALLOCATE ALL");
                    st.execute("RESET statement_timeout");
                }
            }
            x.commit();
            y.commit();
        }
    }

    @Test
    void fiveClientsTakeTurnsBehindAPoolOfTwo() throws Exception {
        String url = TestDb.bouncerUrl("_pool2");
        String name = TestDb.name("turns");
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger ok = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(5);
        for (int i = 0; i < 5; i++) {
            new Thread(() -> {
                try (DlockClient c = new DlockClient(ClientOptions.defaults().url(url).pollInterval(Duration.ofMillis(100)));
                        Lease l = c.acquire(name, Duration.ofSeconds(15), LeaseOptions.ttl(Duration.ofSeconds(3)))) {
                    if (inside.incrementAndGet() > 1) {
                        overlaps.incrementAndGet();
                    }
                    Thread.sleep(200);
                    inside.decrementAndGet();
                    ok.incrementAndGet();
                } catch (Exception e) {
                    e.printStackTrace();
                } finally {
                    done.countDown();
                }
            }).start();
        }
        done.await();
        assertEquals(5, ok.get());
        assertEquals(0, overlaps.get());
    }

    /** A pooled connection the server closed while idle is dropped when taken: the release is done, not unknown. */
    @Test
    void aConnectionClosedWhileIdleIsDroppedFromThePool() throws Exception {
        try (DlockClient c = TestDb.client(); Connection db = TestDb.connect(); Statement st = db.createStatement()) {
            Lease l = c.tryAcquire(TestDb.name("idle"), LeaseOptions.ttl(Duration.ofSeconds(30)).keepAlive(false))
                    .orElseThrow();
            try (ResultSet rs = st.executeQuery("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    + "WHERE pid <> pg_backend_pid() AND query LIKE '%dlock.try_acquire%' AND state = 'idle' "
                    + "AND application_name = 'pg_dlock-java' AND datname = current_database()")) {
                rs.next();
                assertTrue(rs.getInt(1) >= 1);
            }
            Thread.sleep(1100);
            assertEquals(Outcome.DONE, l.release());
        }
    }

    @Test
    void versionIsTheProjects() {
        assertNotEquals("", DlockClient.VERSION);
        assertFalse(DlockClient.VERSION.contains("SNAPSHOT"));
    }
}
