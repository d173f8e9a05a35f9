package io.github.pgdlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

import org.postgresql.PGStatement;

/**
 * Fencing inside the caller's transaction: the check and the business write
 * commit together or not at all. Statements are unnamed (never prepared by
 * name on the caller's connection), so they also work behind a transaction
 * pooler.
 */
public final class Fencing {
    private Fencing() {
    }

    /** Records token as the highest accepted for resource; {@link StaleTokenException} (PD001) for a lower one. */
    public static void fence(Connection conn, String resource, long token) {
        exec(conn, "SELECT dlock.fence(?, ?)", resource, token);
    }

    /** Pins the lease until the transaction ends; {@link NotHeldException} (PD002) when token is not live. */
    public static void assertHolds(Connection conn, String lockName, long token) {
        exec(conn, "SELECT dlock.assert_holds(?, ?)", lockName, token);
    }

    /** Whether token is the live lease of lockName; pins it until the transaction ends when true. */
    public static boolean holds(Connection conn, String lockName, long token) {
        try (PreparedStatement ps = unnamed(conn, "SELECT dlock.holds(?, ?)", lockName, token);
                ResultSet rs = ps.executeQuery()) {
            return rs.next() && rs.getBoolean(1);
        } catch (SQLException e) {
            throw Errors.map(e, lockName, null);
        }
    }

    /**
     * Commits the connection's transaction: DONE, or UNKNOWN when the connection
     * broke during the COMMIT (it may or may not have committed).
     */
    public static Outcome commit(Connection conn) {
        try {
            conn.commit();
            return Outcome.DONE;
        } catch (SQLException e) {
            if (Errors.isUnknown(e)) {
                return Outcome.UNKNOWN;
            }
            throw Errors.map(e, null, null);
        }
    }

    private static void exec(Connection conn, String sql, String subject, long token) {
        try (PreparedStatement ps = unnamed(conn, sql, subject, token)) {
            ps.execute();
        } catch (SQLException e) {
            throw Errors.map(e, subject, null);
        }
    }

    private static PreparedStatement unnamed(Connection conn, String sql, String subject, long token)
            throws SQLException {
        PreparedStatement ps = conn.prepareStatement(sql);
        if (ps.isWrapperFor(PGStatement.class)) {
            ps.unwrap(PGStatement.class).setPrepareThreshold(0);
        }
        ps.setString(1, subject);
        ps.setLong(2, token);
        return ps;
    }
}
