package io.github.pgdlock.spring;

import java.time.Duration;
import java.util.ConcurrentModificationException;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.springframework.integration.support.locks.DistributedLock;

import io.github.pgdlock.BusyException;
import io.github.pgdlock.DlockClient;
import io.github.pgdlock.Lease;
import io.github.pgdlock.LeaseLostException;
import io.github.pgdlock.LeaseOptions;
import io.github.pgdlock.Outcome;
import io.github.pgdlock.UnknownOutcomeException;

/**
 * The lock {@link DlockLockRegistry#obtain(Object)} returns: a local
 * {@link ReentrantLock} in front of a pg_dlock lease. The lease is acquired by
 * the first lock of the holding thread and released by its last unlock.
 */
public final class DlockLock implements DistributedLock {
    /** How long one server-side wait of lock() lasts before it checks for interrupts. */
    private static final Duration SLICE = Duration.ofSeconds(1);

    private final DlockClient client;
    private final String name;
    private final Duration ttl;
    private final ReentrantLock local = new ReentrantLock();
    private volatile Lease lease;
    private volatile long lastUsed = System.currentTimeMillis();

    DlockLock(DlockClient client, String name, Duration ttl) {
        this.client = client;
        this.name = name;
        this.ttl = ttl;
    }

    /** The lock name on the server. */
    public String name() {
        return name;
    }

    /**
     * The fencing token of the lease the current thread holds: pass it to
     * {@code Fencing.fence} or {@code Fencing.assertHolds} in the transaction
     * that writes what the lock protects.
     *
     * @throws IllegalMonitorStateException when the current thread does not hold the lock
     */
    public long fencingToken() {
        return currentLease().fencingToken();
    }

    /** The lease of the current thread's hold. */
    public Lease currentLease() {
        Lease l = lease;
        if (!local.isHeldByCurrentThread() || l == null) {
            throw new IllegalMonitorStateException("the current thread does not hold the lock " + name);
        }
        return l;
    }

    /** The lease, if some thread of this process holds the lock. */
    public Optional<Lease> lease() {
        return Optional.ofNullable(lease);
    }

    boolean isHeld() {
        return local.isLocked();
    }

    boolean isHeldByCurrentThread() {
        return local.isHeldByCurrentThread();
    }

    long lastUsed() {
        return lastUsed;
    }

    @Override
    public void lock() {
        lock(ttl);
    }

    @Override
    public void lock(Duration ttl) {
        local.lock();
        if (local.getHoldCount() > 1) {
            return;
        }
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    lease = client.acquire(name, SLICE, options(ttl));
                    return;
                } catch (BusyException | UnknownOutcomeException e) {
                    // keep waiting, as Lock.lock() does
                    interrupted |= Thread.interrupted();
                }
            }
        } catch (RuntimeException e) {
            local.unlock();
            throw e;
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        local.lockInterruptibly();
        if (local.getHoldCount() > 1) {
            return;
        }
        try {
            while (true) {
                if (Thread.interrupted()) {
                    throw new InterruptedException();
                }
                try {
                    lease = client.acquire(name, SLICE, options(ttl));
                    return;
                } catch (BusyException | UnknownOutcomeException e) {
                    // try again
                }
            }
        } catch (InterruptedException | RuntimeException e) {
            local.unlock();
            throw e;
        }
    }

    @Override
    public boolean tryLock() {
        if (!local.tryLock()) {
            return false;
        }
        if (local.getHoldCount() > 1) {
            return true;
        }
        try {
            Optional<Lease> l = client.tryAcquire(name, options(ttl));
            if (l.isPresent()) {
                lease = l.get();
                return true;
            }
            local.unlock();
            return false;
        } catch (RuntimeException e) {
            local.unlock();
            throw e;
        }
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        return tryLock(Duration.ofNanos(unit.toNanos(time)), ttl);
    }

    @Override
    public boolean tryLock(Duration waitTime, Duration ttl) throws InterruptedException {
        long started = System.nanoTime();
        if (!local.tryLock(waitTime.toNanos(), TimeUnit.NANOSECONDS)) {
            return false;
        }
        if (local.getHoldCount() > 1) {
            return true;
        }
        try {
            Duration left = waitTime.minusNanos(System.nanoTime() - started);
            lease = client.acquire(name, left.isNegative() ? Duration.ZERO : left, options(ttl));
            return true;
        } catch (BusyException e) {
            local.unlock();
            return false;
        } catch (RuntimeException e) {
            local.unlock();
            throw e;
        }
    }

    private LeaseOptions options(Duration ttl) {
        lastUsed = System.currentTimeMillis();
        return LeaseOptions.ttl(ttl);
    }

    /**
     * Releases one hold; the last one releases the lease.
     *
     * @throws IllegalMonitorStateException     when the current thread does not hold the lock
     * @throws ConcurrentModificationException  when the lease had been lost (expired, forced away, taken over):
     *                                          the work done under it may have overlapped another holder's, as
     *                                          {@code JdbcLockRegistry} reports it
     * @throws UnknownOutcomeException          when the release was not confirmed
     */
    @Override
    public void unlock() {
        if (!local.isHeldByCurrentThread()) {
            throw new IllegalMonitorStateException("the current thread does not hold the lock " + name);
        }
        if (local.getHoldCount() > 1) {
            local.unlock();
            return;
        }
        Lease l = lease;
        lease = null;
        try {
            boolean wasLost = l.isLost();
            Outcome out = l.release();
            if (wasLost || out == Outcome.REFUSED) {
                throw new ConcurrentModificationException("the lease of lock " + name
                        + " was lost before its release: the integrity of the data it protects may have been "
                        + "compromised (fence the writes with its token)");
            }
            if (out == Outcome.UNKNOWN) {
                throw new UnknownOutcomeException("the release of lock " + name + " was not confirmed", name, null,
                        l.ownerToken(), null);
            }
        } finally {
            local.unlock();
        }
    }

    void renew(Duration newTtl) {
        Outcome out = newTtl == null ? currentLease().renew() : currentLease().renew(newTtl);
        if (out == Outcome.REFUSED) {
            throw new LeaseLostException("the lease of lock " + name + " was lost", name, null, null);
        }
        if (out == Outcome.UNKNOWN) {
            throw new UnknownOutcomeException("the renewal of lock " + name + " was not confirmed", name, null,
                    null, null);
        }
    }

    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("DlockLock has no conditions");
    }

    @Override
    public String toString() {
        return "DlockLock[" + name + (local.isLocked() ? ", locked" : "") + "]";
    }
}
