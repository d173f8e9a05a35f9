package io.github.pgdlock;

/** How a call that changes a lease ended. */
public enum Outcome {
    /** The server confirmed it. */
    DONE,
    /** The server said no: the lease was no longer held. */
    REFUSED,
    /** It may or may not have taken effect. */
    UNKNOWN
}
