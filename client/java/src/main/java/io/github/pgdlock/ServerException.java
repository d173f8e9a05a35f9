package io.github.pgdlock;

/** Any other server error; see sqlState(). */
public class ServerException extends DlockException {
    private static final long serialVersionUID = 1L;

    public ServerException(String message, String subject, String sqlState, Throwable cause) {
        super(message, subject, sqlState, cause);
    }
}
