package io.github.pgdlock;

/** The server refused an argument (22023, 22004, PD020). */
public class InvalidArgumentException extends DlockException {
    private static final long serialVersionUID = 1L;

    public InvalidArgumentException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
