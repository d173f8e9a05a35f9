package io.github.pgdlock;

/** Whether a connection pooler stands between the client and the server. */
public enum Pooling {
    /** Find out at each connection's first call (the default). */
    DETECT,
    /** A direct connection: statements prepared by name, session settings. */
    NONE,
    /** PgBouncer in transaction pooling: self-contained calls, unnamed statements. */
    TRANSACTION
}
