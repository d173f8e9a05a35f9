package io.github.pgdlock;

/**
 * A failed call. The subclass says which kind (one SQLSTATE mapping,
 * {@link Errors}); {@link #subject()} names the lock or resource and
 * {@link #sqlState()} is the server's code when there is one.
 */
public class DlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final String subject;
    private final String sqlState;

    public DlockException(String message, String subject, String sqlState, Throwable cause) {
        super(message, cause);
        this.subject = subject;
        this.sqlState = sqlState;
    }

    /**
     * The library's exception for a driver error on the caller's own connection,
     * through the one SQLSTATE mapping.
     */
    public static DlockException of(java.sql.SQLException e, String subject) {
        return Errors.map(e, subject, null);
    }

    /** The lock or resource the call was about. */
    public String subject() {
        return subject;
    }

    /** The server's SQLSTATE, or null when the server did not answer. */
    public String sqlState() {
        return sqlState;
    }
}
