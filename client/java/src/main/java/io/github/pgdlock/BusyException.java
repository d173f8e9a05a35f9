package io.github.pgdlock;

/** Another owner holds a live lease, or the wait ran out (55P03). */
public class BusyException extends DlockException {
    private static final long serialVersionUID = 1L;

    public BusyException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
