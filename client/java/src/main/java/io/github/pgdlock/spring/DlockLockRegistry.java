package io.github.pgdlock.spring;

import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

import org.springframework.integration.support.locks.DistributedLock;
import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.RenewableLockRegistry;

import io.github.pgdlock.DlockClient;

/**
 * A Spring Integration {@code LockRegistry} on pg_dlock leases, following the
 * contract of {@code JdbcLockRegistry}: {@link #obtain(Object)} takes a String
 * key and returns the same {@link DlockLock} for the same key; a lock is
 * reentrant for the thread that holds it and blocks other threads of this
 * process locally before it asks the server; the lease's ttl is counted on the
 * server's clock and a keep-alive renews it while it is held. The fencing
 * token of a held lock is {@link DlockLock#fencingToken()}.
 */
public final class DlockLockRegistry
        implements ExpirableLockRegistry<DistributedLock>, RenewableLockRegistry<DistributedLock> {
    private final DlockClient client;
    private final String prefix;
    private final Duration ttl;
    private final Map<String, DlockLock> locks = new ConcurrentHashMap<>();

    /**
     * @param client the pg_dlock client
     * @param prefix prepended to every key to make the lock name (a naming convention per service)
     * @param ttl    the default lease ttl of {@code lock()} and {@code tryLock()}
     */
    public DlockLockRegistry(DlockClient client, String prefix, Duration ttl) {
        this.client = Objects.requireNonNull(client);
        this.prefix = Objects.requireNonNull(prefix);
        this.ttl = Objects.requireNonNull(ttl);
    }

    public DlockLockRegistry(DlockClient client) {
        this(client, "", Duration.ofSeconds(30));
    }

    @Override
    public DlockLock obtain(Object lockKey) {
        if (!(lockKey instanceof String)) {
            throw new IllegalArgumentException("DlockLockRegistry takes String keys only");
        }
        return locks.computeIfAbsent((String) lockKey, k -> new DlockLock(client, prefix + k, ttl));
    }

    /** Forgets unlocked lock objects obtained longer than {@code age} milliseconds ago. */
    @Override
    public void expireUnusedOlderThan(long age) {
        long now = System.currentTimeMillis();
        locks.entrySet().removeIf(e -> !e.getValue().isHeld() && now - e.getValue().lastUsed() > age);
    }

    /** Renews the lease of a lock the current thread holds, by its ttl. */
    @Override
    public void renewLock(Object lockKey) {
        held(lockKey).renew(null);
    }

    /** Renews the lease of a lock the current thread holds, to end {@code ttl} from now. */
    @Override
    public void renewLock(Object lockKey, Duration ttl) {
        held(lockKey).renew(ttl);
    }

    private DlockLock held(Object lockKey) {
        DlockLock lock = locks.get(String.valueOf(lockKey));
        if (lock == null || !lock.isHeldByCurrentThread()) {
            throw new IllegalMonitorStateException("the current thread does not hold the lock " + lockKey);
        }
        return lock;
    }
}
