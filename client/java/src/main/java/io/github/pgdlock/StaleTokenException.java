package io.github.pgdlock;

/** A fenced write with a token below the highest the resource accepted (PD001). */
public class StaleTokenException extends DlockException {
    private static final long serialVersionUID = 1L;

    public StaleTokenException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
