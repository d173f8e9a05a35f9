package io.github.pgdlock;

/** The lease was lost: a renewal was refused, or its deadline passed without a confirmed renewal. */
public class LeaseLostException extends DlockException {
    private static final long serialVersionUID = 1L;

    public LeaseLostException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
