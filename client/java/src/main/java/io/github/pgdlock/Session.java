package io.github.pgdlock;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;

import org.postgresql.PGConnection;
import org.postgresql.PGStatement;

/**
 * One of the client's own connections. On a direct connection it prepares its
 * statements by name and keeps statement_timeout and
 * client_connection_check_interval as session settings; behind a transaction
 * pooler (detected at its first call, or said in ClientOptions.pooling) every
 * call is self-contained: unnamed statements sent together and ended by one
 * Sync, so the server runs them as one implicit transaction, the settings made
 * with set_config(..., true) (SET LOCAL) in it.
 */
final class Session implements AutoCloseable {
    static final long CONNECTION_CHECK_MS = 1000;
    static final String LOCAL_SETTINGS = "SELECT pg_catalog.set_config('statement_timeout', ?, true), "
            + "pg_catalog.set_config('client_connection_check_interval', ?, true)";

    private final Connection conn;
    private final int pid;
    private final long sessionTimeoutMs;
    private final long networkTimeoutMs;
    boolean pooled;
    boolean settled;
    boolean uncertain;
    long idleSince = System.nanoTime();

    Session(ClientOptions options) throws SQLException {
        conn = DriverManager.getConnection(options.jdbcUrl(), options.connectionProperties());
        conn.setAutoCommit(true);
        pid = conn.unwrap(PGConnection.class).getBackendPID();
        sessionTimeoutMs = Math.max(1, options.callTimeout.toMillis());
        networkTimeoutMs = Math.max(1000, options.networkTimeout.toMillis());
        pooled = options.pooling == Pooling.TRANSACTION;
    }

    /**
     * Makes the session settings on a direct connection, or finds a pooler: the
     * settings are made only WHERE pg_backend_pid() is the process id the
     * connection was given at its start; a pooler hands out its own, so no row
     * comes back and nothing was set.
     */
    void settle(Pooling pooling) throws SQLException {
        if (pooled || settled) {
            return;
        }
        String text = "SELECT pg_catalog.set_config('statement_timeout', '" + sessionTimeoutMs
                + "', false), pg_catalog.set_config('client_connection_check_interval', '" + CONNECTION_CHECK_MS
                + "', false)";
        if (pooling == Pooling.DETECT) {
            text += " WHERE pg_catalog.pg_backend_pid() = " + pid;
        }
        conn.setNetworkTimeout(Runnable::run, (int) (sessionTimeoutMs + networkTimeoutMs));
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(text)) {
            if (rs.next()) {
                settled = true;
                conn.unwrap(PGConnection.class).setPrepareThreshold(1);
            } else {
                pooled = true;
            }
        }
    }

    /** Runs one call bounded by boundMs in the server; the rows of its last statement, as text. */
    List<String[]> run(Pooling pooling, long boundMs, String sql, Object... args) throws SQLException {
        uncertain = false;
        settle(pooling);
        long bound = Math.max(1, boundMs);
        String text = sql;
        Object[] all = args;
        if (pooled || bound != sessionTimeoutMs) {
            text = LOCAL_SETTINGS + "; " + sql;
            all = new Object[args.length + 2];
            all[0] = Long.toString(bound);
            all[1] = Long.toString(CONNECTION_CHECK_MS);
            System.arraycopy(args, 0, all, 2, args.length);
        }
        conn.setNetworkTimeout(Runnable::run, (int) Math.min(Integer.MAX_VALUE, bound + networkTimeoutMs));
        try (PreparedStatement ps = conn.prepareStatement(text)) {
            if (pooled) {
                ps.unwrap(PGStatement.class).setPrepareThreshold(0);
            }
            for (int i = 0; i < all.length; i++) {
                Object v = all[i];
                if (v == null) {
                    ps.setNull(i + 1, Types.VARCHAR);
                } else if (v instanceof Long) {
                    ps.setLong(i + 1, (Long) v);
                } else if (v instanceof Integer) {
                    ps.setInt(i + 1, (Integer) v);
                } else {
                    ps.setString(i + 1, v.toString());
                }
            }
            List<String[]> rows = List.of();
            boolean isResult = ps.execute();
            while (true) {
                if (isResult) {
                    try (ResultSet rs = ps.getResultSet()) {
                        rows = readAll(rs);
                    }
                } else if (ps.getUpdateCount() == -1) {
                    break;
                }
                isResult = ps.getMoreResults();
            }
            for (SQLWarning w = ps.getWarnings(); w != null; w = w.getNextWarning()) {
                if (commitUncertain(w.getMessage())) {
                    uncertain = true;
                }
            }
            return rows;
        }
    }

    /** PostgreSQL's warning that a commit canceled its wait for synchronous replication. */
    static boolean commitUncertain(String message) {
        return message != null
                && (message.contains("synchronous replication") || message.contains("committed locally"));
    }

    private static List<String[]> readAll(ResultSet rs) throws SQLException {
        List<String[]> rows = new ArrayList<>();
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
            String[] row = new String[n];
            for (int i = 0; i < n; i++) {
                row[i] = rs.getString(i + 1);
            }
            rows.add(row);
        }
        return rows;
    }

    /**
     * Whether a session taken from the pool still works: one idle for a second
     * or more is asked (an empty query, one round trip), so that a connection
     * the server closed meanwhile is dropped instead of turning the next call's
     * outcome unknown.
     */
    boolean stillWorks() {
        if (!isUsable()) {
            return false;
        }
        if (System.nanoTime() - idleSince < 1_000_000_000L) {
            return true;
        }
        try {
            return conn.isValid((int) Math.max(1, networkTimeoutMs / 1000));
        } catch (SQLException e) {
            return false;
        }
    }

    boolean isUsable() {
        try {
            return !conn.isClosed();
        } catch (SQLException e) {
            return false;
        }
    }

    @Override
    public void close() {
        try {
            conn.close();
        } catch (SQLException e) {
            // closing: nothing to do
        }
    }
}
