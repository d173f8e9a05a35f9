package io.github.pgdlock;

import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java client of pg_dlock. Thread safe: each call takes one of the
 * client's own connections (up to four kept idle).
 *
 * <pre>{@code
 * try (DlockClient locks = new DlockClient(ClientOptions.defaults());
 *      Lease lease = locks.acquire("nightly-export", Duration.ofSeconds(5), LeaseOptions.ttl(Duration.ofSeconds(10)))) {
 *     export(lease.fencingToken());
 * }
 * }</pre>
 */
public final class DlockClient implements AutoCloseable {
    /** The project's version, carried by every package of pg_dlock. */
    public static final String VERSION = "1.6.0";

    static final String LEASE_COLUMNS = "SELECT l.lock_name, l.owner_token::text, l.fencing_token, "
            + "pg_catalog.date_part('epoch', l.lease_until), "
            + "pg_catalog.date_part('epoch', l.lease_until - ?::bigint * interval '1 millisecond' "
            + "- pg_catalog.statement_timestamp()) * 1000 ";
    static final String TRY_ACQUIRE = LEASE_COLUMNS
            + "FROM dlock.try_acquire(?, ?::bigint * interval '1 millisecond', ?::uuid, NULLIF(?::text, '')) l";
    static final String ACQUIRE = LEASE_COLUMNS
            + "FROM dlock.acquire(?, ?::bigint * interval '1 millisecond', ?::bigint * interval '1 millisecond', "
            + "?::uuid, NULLIF(?::text, '')) l";
    static final String RENEW = "SELECT pg_catalog.date_part('epoch', r.lease_until), "
            + "pg_catalog.date_part('epoch', r.lease_until - ?::bigint * interval '1 millisecond' "
            + "- pg_catalog.statement_timestamp()) * 1000 "
            + "FROM dlock.renew(?, ?::uuid, ?::bigint * interval '1 millisecond') AS r(lease_until)";
    static final String RELEASE = "SELECT dlock.release(?, ?::uuid)";

    final ClientOptions options;
    final String holder;
    private final ArrayDeque<Session> idle = new ArrayDeque<>();
    final ScheduledThreadPoolExecutor watcher;
    /** 0: not known yet, 1: direct, 2: behind a pooler. */
    private final AtomicInteger pooledSeen = new AtomicInteger();
    final AtomicLong acquisitions = new AtomicLong();
    final AtomicLong busy = new AtomicLong();
    final AtomicLong renewals = new AtomicLong();
    final AtomicLong renewalsRefused = new AtomicLong();
    final AtomicLong releases = new AtomicLong();
    final AtomicLong lost = new AtomicLong();
    final AtomicLong unknownOutcomes = new AtomicLong();
    final AtomicLong retries = new AtomicLong();

    public DlockClient(ClientOptions options) {
        this.options = options;
        this.holder = options.holderOrDefault();
        this.watcher = WATCHER;
    }

    /**
     * Watches the deadlines of every lease of the process (one daemon thread, shared
     * by all clients, so that a closed client leaves no thread behind).
     */
    private static final ScheduledThreadPoolExecutor WATCHER = newWatcher();

    private static ScheduledThreadPoolExecutor newWatcher() {
        ScheduledThreadPoolExecutor w = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "pg_dlock-watcher");
            t.setDaemon(true);
            return t;
        });
        w.setRemoveOnCancelPolicy(true);
        return w;
    }

    /** A client on the PG* environment with the default options. */
    public static DlockClient fromEnvironment() {
        return new DlockClient(ClientOptions.defaults());
    }

    /** The counters of this client. */
    public record Metrics(long acquisitions, long busy, long renewals, long renewalsRefused, long releases,
            long lost, long unknownOutcomes, long retries) {
    }

    public Metrics metrics() {
        return new Metrics(acquisitions.get(), busy.get(), renewals.get(), renewalsRefused.get(), releases.get(),
                lost.get(), unknownOutcomes.get(), retries.get());
    }

    /** Whether the client found a transaction pooler (empty before its first call). */
    public Optional<Boolean> behindPooler() {
        int seen = pooledSeen.get();
        return seen == 0 ? Optional.empty() : Optional.of(seen == 2);
    }

    /** Takes the lock if it is free; empty when another owner holds a live lease. */
    public Optional<Lease> tryAcquire(String name, LeaseOptions opts) {
        return Optional.ofNullable(acquireOnce(name, -1, opts, ownerOf(opts), System.nanoTime()));
    }

    /**
     * Waits up to {@code wait} for the lock: in the server on a direct connection,
     * in the client behind a transaction pooler ({@link WaitMode}).
     *
     * @throws BusyException when the wait runs out
     */
    public Lease acquire(String name, Duration wait, LeaseOptions opts) {
        if (wait.isNegative()) {
            throw new InvalidArgumentException("wait must not be negative", name, null, null);
        }
        String owner = ownerOf(opts);
        long started = System.nanoTime();
        if (!waitsInClient()) {
            Lease l = acquireOnce(name, wait.toMillis(), opts, owner, started);
            if (l == null) {
                throw new BusyException("the wait ran out", name, "55P03", null);
            }
            return l;
        }
        long until = started + wait.toNanos();
        long bound = 20;
        while (true) {
            Lease l = acquireOnce(name, -1, opts, owner, started);
            if (l != null) {
                return l;
            }
            long now = System.nanoTime();
            if (now - until >= 0) {
                throw new BusyException("the wait ran out", name, "55P03", null);
            }
            long sleep = Math.min(ThreadLocalRandom.current().nextLong(bound / 2, bound + 1),
                    Math.max(1, (until - now) / 1_000_000));
            sleepInterruptibly(sleep, name);
            bound = Math.min(bound * 2, Math.max(1, options.pollInterval.toMillis()));
        }
    }

    private static void sleepInterruptibly(long millis, String name) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DlockException("interrupted", name, null, e);
        }
    }

    private static String ownerOf(LeaseOptions opts) {
        return opts.ownerToken != null ? opts.ownerToken : UUID.randomUUID().toString();
    }

    long backoffMillis(int retry) {
        long bound = Math.max(1, options.initialBackoff.toMillis());
        long cap = Math.max(bound, options.maxBackoff.toMillis());
        for (int i = 1; i < retry && bound < cap; i++) {
            bound *= 2;
        }
        return ThreadLocalRandom.current().nextLong(0, Math.min(bound, cap) + 1);
    }

    /** Result of one call: its rows, and whether its commit is only local. */
    record Answer(List<String[]> rows, boolean uncertain) {
    }

    /** Runs a call on a pooled session; a session that broke is dropped. */
    Answer call(long boundMs, String sql, Object... args) throws SQLException {
        Session s = take();
        boolean keep = false;
        try {
            List<String[]> rows = s.run(options.pooling, boundMs, sql, args);
            keep = true;
            return new Answer(rows, s.uncertain);
        } catch (SQLException e) {
            keep = !Errors.isUnknown(e) && s.isUsable();
            throw e;
        } finally {
            if (s.pooled) {
                pooledSeen.set(2);
            } else if (s.settled) {
                pooledSeen.set(1);
            }
            if (keep) {
                give(s);
            } else {
                s.close();
            }
        }
    }

    private Session take() {
        while (true) {
            Session s;
            synchronized (idle) {
                s = idle.pollLast();
            }
            if (s == null) {
                break;
            }
            if (s.stillWorks()) { // outside the lock: it may make a round trip
                return s;
            }
            s.close();
        }
        try {
            return new Session(options);
        } catch (SQLException e) {
            throw new ConnectionException("could not connect: " + e.getMessage(), null, e.getSQLState(), e);
        }
    }

    private void give(Session s) {
        s.idleSince = System.nanoTime();
        synchronized (idle) {
            if (idle.size() < 4) {
                idle.addLast(s);
                return;
            }
        }
        s.close();
    }

    private boolean waitsInClient() {
        switch (options.waitMode) {
            case SERVER:
                return false;
            case POLL:
                return true;
            default:
                break;
        }
        if (options.pooling != Pooling.DETECT) {
            return options.pooling == Pooling.TRANSACTION;
        }
        int seen = pooledSeen.get();
        if (seen != 0) {
            return seen == 2;
        }
        Session s;
        try {
            s = take();
        } catch (ConnectionException e) {
            return true; // the try reports what is wrong
        }
        try {
            s.settle(options.pooling);
            pooledSeen.set(s.pooled ? 2 : 1);
            give(s);
            return s.pooled;
        } catch (SQLException e) {
            s.close();
            return true;
        }
    }

    /**
     * One try (waitMs below 0: try_acquire), retried with the same owner token
     * while its outcome is unknown; null when busy.
     */
    private Lease acquireOnce(String name, long waitMs, LeaseOptions opts, String owner, long started) {
        String leaseHolder = opts.holder != null ? opts.holder : holder;
        long ttl = opts.ttl.toMillis();
        boolean uncertain = false;
        Exception last = null;
        for (int attempt = 0; attempt < options.maxAttempts; attempt++) {
            if (attempt > 0) {
                retries.incrementAndGet();
                sleepInterruptibly(backoffMillis(attempt), name);
            }
            long sent = System.nanoTime();
            Answer a;
            try {
                if (waitMs < 0) {
                    a = call(options.callTimeout.toMillis(), TRY_ACQUIRE, ttl, name, ttl, owner, leaseHolder);
                } else {
                    long left = Math.max(0, waitMs - (sent - started) / 1_000_000);
                    a = call(left + options.callTimeout.toMillis(), ACQUIRE, ttl, name, ttl, left, owner,
                            leaseHolder);
                }
            } catch (ConnectionException e) {
                if (!uncertain) {
                    throw e;
                }
                last = e;
                continue;
            } catch (SQLException e) {
                if (Errors.isUnknown(e)) {
                    unknownOutcomes.incrementAndGet();
                    uncertain = true;
                    last = e;
                    continue;
                }
                DlockException mapped = Errors.map(e, name, owner);
                if (mapped instanceof BusyException) {
                    busy.incrementAndGet();
                }
                throw mapped;
            }
            long received = System.nanoTime();
            if (a.uncertain()) {
                unknownOutcomes.incrementAndGet();
                uncertain = true;
                continue;
            }
            if (a.rows().size() != 1 || a.rows().get(0)[2] == null) {
                busy.incrementAndGet();
                return null;
            }
            String[] row = a.rows().get(0);
            acquisitions.incrementAndGet();
            return new Lease(this, row[0], row[1], Long.parseLong(row[2]), opts.copy(), Double.parseDouble(row[3]),
                    deadline(sent, received, Double.parseDouble(row[4]), ttl));
        }
        throw new UnknownOutcomeException(
                "outcome of the acquire is unknown after " + options.maxAttempts + " attempts", name, null, owner,
                last);
    }

    /**
     * The deadline counts from the send: sent + waited + ttl - (waited + ttl) *
     * drift - margin, where waited is the server's own wait before the grant
     * (lease_until - ttl - statement_timestamp()), capped at the measured round
     * trip. In System.nanoTime().
     */
    long deadline(long sent, long received, double waitedMs, long ttlMs) {
        double roundTrip = (received - sent) / 1e6;
        double waited = Math.max(0, Math.min(waitedMs, roundTrip));
        double span = waited + ttlMs;
        double local = span - span * options.driftAllowance - options.safetyMargin.toMillis();
        return sent + (long) (local * 1e6);
    }

    /** Closes the idle connections; leases still held keep their keep-alive. */
    @Override
    public void close() {
        synchronized (idle) {
            idle.forEach(Session::close);
            idle.clear();
        }
    }
}
