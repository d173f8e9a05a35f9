package io.github.pgdlock;

import java.time.Duration;
import java.util.Objects;
import java.util.function.BiConsumer;

/** Options of one lease; fluent setters. */
public final class LeaseOptions {
    Duration ttl = Duration.ofSeconds(30);
    Duration renewEvery;
    boolean keepAlive = true;
    boolean interruptOnLoss;
    String holder;
    String ownerToken;
    BiConsumer<Lease, LeaseLostException> onLost;

    public static LeaseOptions ttl(Duration ttl) {
        return new LeaseOptions().withTtl(ttl);
    }

    public static LeaseOptions defaults() {
        return new LeaseOptions();
    }

    /** The lease's time to live on the server's clock (default 30 s). */
    public LeaseOptions withTtl(Duration value) {
        ttl = Objects.requireNonNull(value);
        return this;
    }

    /** The keep-alive's interval (default ttl/3). */
    public LeaseOptions renewEvery(Duration value) {
        renewEvery = value;
        return this;
    }

    /** Whether a keep-alive renews the lease (default true). */
    public LeaseOptions keepAlive(boolean value) {
        keepAlive = value;
        return this;
    }

    /** Interrupt the thread that acquired the lease when it is lost (default false). */
    public LeaseOptions interruptOnLoss(boolean value) {
        interruptOnLoss = value;
        return this;
    }

    public LeaseOptions holder(String value) {
        holder = value;
        return this;
    }

    /** The owner token to acquire with (default: a new random UUID). */
    public LeaseOptions ownerToken(String value) {
        ownerToken = value;
        return this;
    }

    /** Runs once, on a keep-alive thread, when the lease is lost. */
    public LeaseOptions onLost(BiConsumer<Lease, LeaseLostException> value) {
        onLost = value;
        return this;
    }

    LeaseOptions copy() {
        LeaseOptions o = new LeaseOptions();
        o.ttl = ttl;
        o.renewEvery = renewEvery;
        o.keepAlive = keepAlive;
        o.interruptOnLoss = interruptOnLoss;
        o.holder = holder;
        o.ownerToken = ownerToken;
        o.onLost = onLost;
        return o;
    }
}
