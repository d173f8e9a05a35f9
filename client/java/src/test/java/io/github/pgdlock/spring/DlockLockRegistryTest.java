package io.github.pgdlock.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.time.Duration;
import java.util.ConcurrentModificationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;

import org.junit.jupiter.api.Test;

import io.github.pgdlock.DlockClient;
import io.github.pgdlock.Fencing;
import io.github.pgdlock.StaleTokenException;
import io.github.pgdlock.TestDb;

/** Two registries stand for two instances of a service; the locks follow JdbcLockRegistry's contract. */
class DlockLockRegistryTest {
    @Test
    void obtainReturnsOneLockPerKeyAndOnlyOneInstanceHoldsIt() throws Exception {
        String prefix = TestDb.name("spring") + ":";
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client(); Connection db = TestDb.connect()) {
            DlockLockRegistry one = new DlockLockRegistry(a, prefix, Duration.ofSeconds(10));
            DlockLockRegistry two = new DlockLockRegistry(b, prefix, Duration.ofSeconds(10));
            Lock lock = one.obtain("orders");
            assertSame(lock, one.obtain("orders"));
            lock.lock();
            long first = ((DlockLock) lock).fencingToken();
            Fencing.fence(db, prefix + "orders/data", first);
            Lock other = two.obtain("orders");
            assertFalse(CompletableFuture.supplyAsync(other::tryLock).get());
            long started = System.nanoTime();
            assertFalse(CompletableFuture.supplyAsync(() -> {
                try {
                    return other.tryLock(400, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }).get());
            assertTrue(System.nanoTime() - started >= 400_000_000L);
            // reentrant for the holding thread; another thread may not unlock it
            assertTrue(lock.tryLock());
            lock.unlock();
            assertThrows(Exception.class, () -> CompletableFuture.runAsync(lock::unlock).join());
            lock.unlock();
            assertThrows(IllegalMonitorStateException.class, lock::unlock);

            AtomicLong second = new AtomicLong();
            two.executeLocked("orders", () -> {
                DlockLock held = two.obtain("orders");
                second.set(held.fencingToken());
                Fencing.fence(db, prefix + "orders/data", held.fencingToken());
            });
            assertTrue(second.get() > first, first + " then " + second.get());
            // the first holder, now stale, is refused by the fence
            assertThrows(StaleTokenException.class, () -> Fencing.fence(db, prefix + "orders/data", first));
        }
    }

    @Test
    void aLostLeaseIsReportedAtUnlockAsJdbcLockRegistryDoes() throws Exception {
        String prefix = TestDb.name("spring-lost") + ":";
        try (DlockClient a = TestDb.client()) {
            DlockLockRegistry registry = new DlockLockRegistry(a, prefix, Duration.ofSeconds(1));
            DlockLock lock = registry.obtain("job");
            lock.lock();
            TestDb.forceRelease(prefix + "job");
            assertTrue(lock.currentLease().awaitLost(Duration.ofSeconds(3)));
            assertThrows(ConcurrentModificationException.class, lock::unlock);
            assertFalse(lock.isHeld());
            // the key can be locked again, with a higher token
            assertTrue(lock.tryLock());
            lock.unlock();
        }
    }

    @Test
    void keepAliveAndRenewLockHoldTheLeaseBeyondItsTtl() throws Exception {
        String prefix = TestDb.name("spring-renew") + ":";
        try (DlockClient a = TestDb.client(); DlockClient b = TestDb.client()) {
            DlockLockRegistry registry = new DlockLockRegistry(a, prefix, Duration.ofMillis(600));
            DlockLockRegistry other = new DlockLockRegistry(b, prefix, Duration.ofMillis(600));
            DlockLock lock = registry.obtain("k");
            assertTrue(lock.tryLock(Duration.ofSeconds(1), Duration.ofMillis(600)));
            Thread.sleep(1500);
            registry.renewLock("k", Duration.ofSeconds(2));
            assertFalse(CompletableFuture.supplyAsync(() -> other.obtain("k").tryLock()).get());
            // only the holding thread may renew
            java.util.concurrent.CompletionException e = assertThrows(java.util.concurrent.CompletionException.class,
                    () -> CompletableFuture.runAsync(() -> registry.renewLock("k")).join());
            assertTrue(e.getCause() instanceof IllegalMonitorStateException, e.toString());
            lock.unlock();
            AtomicInteger got = new AtomicInteger();
            other.executeLocked("k", got::incrementAndGet);
            assertEquals(1, got.get());
        }
    }
}
