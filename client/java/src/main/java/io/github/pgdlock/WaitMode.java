package io.github.pgdlock;

/** Where an acquire with a wait waits. */
public enum WaitMode {
    /** In the server on a direct connection, in the client behind a transaction pooler. */
    AUTOMATIC,
    /** Always in the server (dlock.acquire): first come, first served. */
    SERVER,
    /** Always in the client: try, sleep a jittered interval, try again. */
    POLL
}
