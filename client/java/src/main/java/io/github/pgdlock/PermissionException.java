package io.github.pgdlock;

/** The role lacks a grant (42501). */
public class PermissionException extends DlockException {
    private static final long serialVersionUID = 1L;

    public PermissionException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
