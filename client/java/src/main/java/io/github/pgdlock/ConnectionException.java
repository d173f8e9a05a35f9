package io.github.pgdlock;

/** Could not connect; nothing was sent. */
public class ConnectionException extends DlockException {
    private static final long serialVersionUID = 1L;

    public ConnectionException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
