package io.github.pgdlock;

import java.io.IOException;
import java.sql.SQLException;

/** The one mapping of SQLSTATEs to the library's exceptions. */
final class Errors {
    private Errors() {
    }

    /** SQLSTATEs after which the statement may or may not have taken effect. */
    static boolean unknownState(String state) {
        return state != null && (state.startsWith("08") || state.equals("57P01") || state.equals("57P02")
                || state.equals("57P03") || state.equals("40003"));
    }

    /** True when e leaves a call's outcome unknown (the connection broke in flight). */
    static boolean isUnknown(SQLException e) {
        if (unknownState(e.getSQLState())) {
            return true;
        }
        for (Throwable t = e.getCause(); t != null; t = t.getCause()) {
            if (t instanceof IOException) {
                return true;
            }
        }
        return false;
    }

    static DlockException map(SQLException e, String subject, String ownerToken) {
        String state = e.getSQLState();
        String message = e.getMessage();
        if (isUnknown(e)) {
            return new UnknownOutcomeException(message, subject, state, ownerToken, e);
        }
        if (state == null) {
            return new ServerException(message, subject, null, e);
        }
        switch (state) {
            case "PD001":
            case "DL001":
                return new StaleTokenException(message, subject, state, e);
            case "PD002":
            case "DL002":
                return new NotHeldException(message, subject, state, e);
            case "55P03":
                return new BusyException(message, subject, state, e);
            case "22023":
            case "22004":
            case "PD020":
                return new InvalidArgumentException(message, subject, state, e);
            case "42501":
                return new PermissionException(message, subject, state, e);
            default:
                return new ServerException(message, subject, state, e);
        }
    }
}
