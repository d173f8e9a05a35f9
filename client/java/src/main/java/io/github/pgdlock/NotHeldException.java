package io.github.pgdlock;

/** The token is not the live lease of the lock (PD002). */
public class NotHeldException extends DlockException {
    private static final long serialVersionUID = 1L;

    public NotHeldException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
