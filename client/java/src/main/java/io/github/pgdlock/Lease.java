package io.github.pgdlock;

import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A lock held with a fencing token; released by {@link #close()} at the end of
 * a try-with-resources block. Its observers may be called from any thread;
 * renew and release from one thread at a time.
 */
public final class Lease implements AutoCloseable {
    private final DlockClient client;
    private final String name;
    private final String ownerToken;
    private final long fencingToken;
    private final LeaseOptions options;
    private final Thread acquirer;
    private volatile long ttlMs;
    private volatile long deadlineNanos;
    private volatile Instant leaseUntil;
    private volatile boolean released;
    private final AtomicReference<LeaseLostException> loss = new AtomicReference<>();
    private final CountDownLatch lostLatch = new CountDownLatch(1);
    private final ReentrantLock renewing = new ReentrantLock();
    private final Thread keeper;
    private volatile ScheduledFuture<?> deadlineCheck;

    Lease(DlockClient client, String name, String ownerToken, long fencingToken, LeaseOptions options,
            double leaseUntilEpoch, long deadlineNanos) {
        this.client = client;
        this.name = name;
        this.ownerToken = ownerToken;
        this.fencingToken = fencingToken;
        this.options = options;
        this.acquirer = Thread.currentThread();
        this.ttlMs = options.ttl.toMillis();
        this.deadlineNanos = deadlineNanos;
        this.leaseUntil = Instant.ofEpochSecond(0, (long) (leaseUntilEpoch * 1e9));
        scheduleDeadlineCheck();
        if (options.keepAlive) {
            keeper = new Thread(this::keepAlive, "pg_dlock-keep-alive " + name);
            keeper.setDaemon(true);
            keeper.start();
        } else {
            keeper = null;
        }
    }

    public String name() {
        return name;
    }

    public long fencingToken() {
        return fencingToken;
    }

    public String ownerToken() {
        return ownerToken;
    }

    /** The server's lease_until as last read. */
    public Instant leaseUntil() {
        return leaseUntil;
    }

    /** The deadline on System.nanoTime(): never later than the server's lease_until. */
    public long deadlineNanos() {
        return deadlineNanos;
    }

    /** Time left until the deadline; zero once lost or released. */
    public Duration timeLeft() {
        if (!isValid()) {
            return Duration.ZERO;
        }
        return Duration.ofNanos(Math.max(0, deadlineNanos - System.nanoTime()));
    }

    /** Neither lost nor released, and before its deadline. */
    public boolean isValid() {
        return !released && loss.get() == null && deadlineNanos - System.nanoTime() > 0;
    }

    public boolean isLost() {
        return loss.get() != null;
    }

    /** Why the lease was lost, when it was. */
    public Optional<LeaseLostException> loss() {
        return Optional.ofNullable(loss.get());
    }

    /** Throws {@link LeaseLostException} when the lease is lost. */
    public void checkValid() {
        LeaseLostException e = loss.get();
        if (e != null) {
            throw e;
        }
    }

    /** Waits until the lease is lost (true) or the timeout passes (false). */
    public boolean awaitLost(Duration timeout) throws InterruptedException {
        return lostLatch.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    private void scheduleDeadlineCheck() {
        long delay = Math.max(0, deadlineNanos - System.nanoTime());
        deadlineCheck = client.watcher.schedule(this::checkDeadline, delay, TimeUnit.NANOSECONDS);
    }

    private void checkDeadline() {
        if (released || loss.get() != null) {
            return;
        }
        if (deadlineNanos - System.nanoTime() > 0) {
            scheduleDeadlineCheck();
            return;
        }
        lose("its deadline passed without a confirmed renewal");
    }

    void lose(String reason) {
        if (released) {
            return;
        }
        LeaseLostException e = new LeaseLostException("lease lost: " + reason, name, null, null);
        if (!loss.compareAndSet(null, e)) {
            return;
        }
        client.lost.incrementAndGet();
        if (options.interruptOnLoss) {
            acquirer.interrupt();
        }
        if (options.onLost != null) {
            try {
                options.onLost.accept(this, e);
            } catch (RuntimeException ignored) {
                // a callback's failure changes nothing
            }
        }
        lostLatch.countDown(); // after onLost: awaitLost returns once it ran
    }

    private long renewEveryMs() {
        if (options.renewEvery != null && !options.renewEvery.isZero()) {
            return options.renewEvery.toMillis();
        }
        return Math.max(1, ttlMs / 3);
    }

    private void keepAlive() {
        long next = System.nanoTime() + renewEveryMs() * 1_000_000;
        try {
            while (!released && loss.get() == null) {
                long sleep = next - System.nanoTime();
                if (sleep > 0) {
                    TimeUnit.NANOSECONDS.sleep(sleep);
                    continue;
                }
                Outcome out = renewOnce(ttlMs);
                if (out == Outcome.DONE) {
                    next = System.nanoTime() + renewEveryMs() * 1_000_000;
                } else if (out == Outcome.REFUSED) {
                    lose("a renewal was refused");
                    return;
                } else {
                    // Unknown: try again on a fresh connection until the deadline.
                    long left = (deadlineNanos - System.nanoTime()) / 1_000_000;
                    TimeUnit.MILLISECONDS.sleep(Math.max(1, Math.min(client.backoffMillis(1), left)));
                }
            }
        } catch (InterruptedException e) {
            // released: stop
        }
    }

    private Outcome renewOnce(long ttl) {
        renewing.lock();
        try {
            if (released || loss.get() != null) {
                return Outcome.REFUSED;
            }
            long left = (deadlineNanos - System.nanoTime()) / 1_000_000;
            long bound = Math.min(client.options.callTimeout.toMillis(), Math.max(1, left));
            long sent = System.nanoTime();
            DlockClient.Answer a;
            try {
                a = client.call(bound, DlockClient.RENEW, ttl, name, ownerToken, ttl);
            } catch (SQLException e) {
                client.unknownOutcomes.incrementAndGet();
                DlockException mapped = Errors.map(e, name, null);
                if (mapped instanceof InvalidArgumentException || mapped instanceof PermissionException) {
                    throw mapped;
                }
                return Outcome.UNKNOWN;
            } catch (ConnectionException e) {
                return Outcome.UNKNOWN;
            }
            long received = System.nanoTime();
            if (a.uncertain()) {
                client.unknownOutcomes.incrementAndGet();
                return Outcome.UNKNOWN;
            }
            if (a.rows().size() != 1 || a.rows().get(0)[0] == null) {
                client.renewalsRefused.incrementAndGet();
                return Outcome.REFUSED;
            }
            String[] row = a.rows().get(0);
            client.renewals.incrementAndGet();
            ttlMs = ttl;
            deadlineNanos = client.deadline(sent, received, Double.parseDouble(row[1]), ttl);
            leaseUntil = Instant.ofEpochSecond(0, (long) (Double.parseDouble(row[0]) * 1e9));
            return Outcome.DONE;
        } finally {
            renewing.unlock();
        }
    }

    /** Extends the lease by its ttl now: DONE, REFUSED (lost from then on) or UNKNOWN. */
    public Outcome renew() {
        return renew(Duration.ofMillis(ttlMs));
    }

    /** Sets the lease to end {@code ttl} from now on the server's clock (also shorter than before). */
    public Outcome renew(Duration ttl) {
        Outcome out = renewOnce(ttl.toMillis());
        if (out == Outcome.REFUSED) {
            lose("a renewal was refused");
        }
        return out;
    }

    /** Stops the keep-alive and stops watching the deadline, leaving the lease to run out on the server. */
    public void detach() {
        released = true;
        stopWatching();
    }

    private void stopWatching() {
        ScheduledFuture<?> f = deadlineCheck;
        if (f != null) {
            f.cancel(false);
        }
        if (keeper != null && keeper != Thread.currentThread()) {
            keeper.interrupt();
        }
    }

    /**
     * Releases the lease: DONE, REFUSED (it was no longer held) or UNKNOWN. Waits
     * at most the call timeout for a renewal in flight; a second call is REFUSED.
     */
    public Outcome release() {
        if (released) {
            return Outcome.REFUSED;
        }
        released = true;
        stopWatching();
        boolean locked = false;
        try {
            locked = renewing.tryLock(client.options.callTimeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            client.releases.incrementAndGet();
            DlockClient.Answer a = client.call(client.options.callTimeout.toMillis(), DlockClient.RELEASE, name,
                    ownerToken);
            if (a.uncertain()) {
                client.unknownOutcomes.incrementAndGet();
                return Outcome.UNKNOWN;
            }
            return a.rows().size() == 1 && "t".equals(a.rows().get(0)[0]) ? Outcome.DONE : Outcome.REFUSED;
        } catch (SQLException | DlockException e) {
            client.unknownOutcomes.incrementAndGet();
            return Outcome.UNKNOWN;
        } finally {
            if (locked) {
                renewing.unlock();
            }
        }
    }

    /** Releases the lease; never throws. */
    @Override
    public void close() {
        release();
    }
}
