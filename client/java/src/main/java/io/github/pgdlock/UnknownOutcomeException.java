package io.github.pgdlock;

/**
 * The call may or may not have taken effect: the connection broke while it was
 * in flight (08xxx, 57P01-57P03, 40003, a network timeout) or a commit's wait
 * for synchronous replication was canceled. For an acquire,
 * {@link #ownerToken()} lets the caller resolve it later (an acquire with the
 * same owner token returns the same lease).
 */
public class UnknownOutcomeException extends DlockException {
    private static final long serialVersionUID = 1L;
    private final String ownerToken;

    public UnknownOutcomeException(String message, String subject, String sqlState, String ownerToken,
            Throwable cause) {
        super(message, subject, sqlState, cause);
        this.ownerToken = ownerToken;
    }

    /** The owner token of the acquire whose outcome is unknown, or null. */
    public String ownerToken() {
        return ownerToken;
    }
}
