package io.github.pgdlock.shedlock;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

import io.github.pgdlock.DlockClient;
import io.github.pgdlock.DlockException;
import io.github.pgdlock.Lease;
import io.github.pgdlock.LeaseOptions;
import io.github.pgdlock.Outcome;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.support.LockException;

/**
 * A ShedLock {@link LockProvider} on pg_dlock leases: a {@code @SchedulerLock}
 * job's lock is a lease whose {@code lockAtMostFor} is counted on the
 * server's clock (no keep-alive: ShedLock's lock ends at lockAtMostFor unless
 * the job extends it), {@code lockAtLeastFor} is kept by shortening the lease
 * at unlock, and the job reaches its fencing token with
 * {@link #currentFencingToken()} on its own thread.
 */
public final class DlockLockProvider implements LockProvider {
    private static final ThreadLocal<Lease> CURRENT = new ThreadLocal<>();

    private final DlockClient client;
    private final String prefix;

    /**
     * @param client the pg_dlock client
     * @param prefix prepended to every job name to make the lock name
     */
    public DlockLockProvider(DlockClient client, String prefix) {
        this.client = Objects.requireNonNull(client);
        this.prefix = Objects.requireNonNull(prefix);
    }

    public DlockLockProvider(DlockClient client) {
        this(client, "shedlock:");
    }

    /** The lease of the job running on this thread, if it runs under a lock of this provider. */
    public static Optional<Lease> currentLease() {
        return Optional.ofNullable(CURRENT.get());
    }

    /** The fencing token of the job running on this thread. */
    public static OptionalLong currentFencingToken() {
        Lease l = CURRENT.get();
        return l == null ? OptionalLong.empty() : OptionalLong.of(l.fencingToken());
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration configuration) {
        try {
            Optional<Lease> lease = client.tryAcquire(prefix + configuration.getName(),
                    LeaseOptions.ttl(positive(configuration.getLockAtMostFor())).keepAlive(false));
            return lease.map(l -> {
                CURRENT.set(l);
                return new DlockSimpleLock(l, configuration, System.nanoTime());
            });
        } catch (DlockException e) {
            throw new LockException("pg_dlock could not lock " + configuration.getName(), e);
        }
    }

    private static Duration positive(Duration d) {
        return d.toMillis() < 1 ? Duration.ofMillis(1) : d;
    }

    private static final class DlockSimpleLock implements SimpleLock {
        private final Lease lease;
        private final LockConfiguration configuration;
        private final long grantedNanos;
        private boolean done;

        DlockSimpleLock(Lease lease, LockConfiguration configuration, long grantedNanos) {
            this.lease = lease;
            this.configuration = configuration;
            this.grantedNanos = grantedNanos;
        }

        @Override
        public void unlock() {
            check();
            done = true;
            if (CURRENT.get() == lease) {
                CURRENT.remove();
            }
            long left = configuration.getLockAtLeastFor().toNanos() - (System.nanoTime() - grantedNanos);
            if (left > 1_000_000) {
                // lockAtLeastFor: the lease now ends at that time, on the server's clock.
                lease.renew(Duration.ofNanos(left));
                lease.detach();
                return;
            }
            lease.release();
        }

        @Override
        public Optional<SimpleLock> extend(Duration lockAtMostFor, Duration lockAtLeastFor) {
            check();
            done = true;
            Outcome out = lease.renew(positive(lockAtMostFor));
            if (out != Outcome.DONE) {
                if (CURRENT.get() == lease) {
                    CURRENT.remove();
                }
                return Optional.empty();
            }
            return Optional.of(new DlockSimpleLock(lease,
                    new LockConfiguration(java.time.Instant.now(), configuration.getName(), lockAtMostFor,
                            lockAtLeastFor),
                    System.nanoTime()));
        }

        private void check() {
            if (done) {
                throw new IllegalStateException("the lock " + configuration.getName() + " was already unlocked or "
                        + "extended");
            }
        }
    }
}
