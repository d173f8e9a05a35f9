package io.github.pgdlock.conformance;

import java.math.BigInteger;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;

import io.github.pgdlock.BusyException;
import io.github.pgdlock.ClientOptions;
import io.github.pgdlock.ConnectionException;
import io.github.pgdlock.DlockClient;
import io.github.pgdlock.DlockException;
import io.github.pgdlock.Fencing;
import io.github.pgdlock.InvalidArgumentException;
import io.github.pgdlock.Lease;
import io.github.pgdlock.LeaseLostException;
import io.github.pgdlock.LeaseOptions;
import io.github.pgdlock.NotHeldException;
import io.github.pgdlock.Outcome;
import io.github.pgdlock.PermissionException;
import io.github.pgdlock.Pooling;
import io.github.pgdlock.StaleTokenException;
import io.github.pgdlock.UnknownOutcomeException;
import io.github.pgdlock.WaitMode;

/** One scenario's run: its clients, sessions, variables and background steps. */
final class Runner {
    private static final Map<String, Set<String>> KNOWN = Map.ofEntries(
            Map.entry("try_acquire", Set.of("granted", "fencing_token", "owner_token", "error", "elapsed_ms")),
            Map.entry("acquire", Set.of("granted", "fencing_token", "owner_token", "error", "elapsed_ms")),
            Map.entry("renew", Set.of("outcome", "error", "elapsed_ms")),
            Map.entry("release", Set.of("outcome", "elapsed_ms")),
            Map.entry("lease_state", Set.of("valid", "lost", "time_left_ms", "on_lost_called")),
            Map.entry("wait_lost", Set.of("lost", "elapsed_ms")),
            Map.entry("body", Set.of("error", "elapsed_ms")),
            Map.entry("body_started", Set.of()),
            Map.entry("fenced_write", Set.of("committed", "error")),
            Map.entry("sql", Set.of("rows", "value", "error")),
            Map.entry("new_owner", Set.of()),
            Map.entry("sleep", Set.of()),
            Map.entry("mark", Set.of()));
    private static final Pattern PARAM = Pattern.compile("\\$(\\d+)");

    private final ConformanceTest.Env env;
    private final JsonNode scenario;
    private final String ns;
    private final Map<String, DlockClient> clients = new HashMap<>();
    private final Map<String, String> urls = new HashMap<>();
    private final Map<String, Connection> sessions = new HashMap<>();
    private final Map<String, Object> vars = new ConcurrentHashMap<>();
    private final Map<String, Held> leases = new ConcurrentHashMap<>();
    private final Map<String, Pending> handles = new ConcurrentHashMap<>();
    private final Map<String, Long> marks = new ConcurrentHashMap<>();

    /** A lease and whether its loss callback ran. */
    static final class Held {
        volatile Lease lease;
        final AtomicBoolean onLost = new AtomicBoolean();
    }

    /** A step running in the background (async, or a body). */
    static final class Pending {
        final JsonNode op;
        final long started = System.nanoTime();
        final CountDownLatch done = new CountDownLatch(1);
        final CountDownLatch bodyStarted = new CountDownLatch(1);
        volatile Map<String, Object> result;
        volatile Throwable error;
        volatile long doneAt;
        volatile long token;

        Pending(JsonNode op) {
            this.op = op;
        }
    }

    /** A scenario that failed at a step (counted from 1). */
    static final class StepFailure extends AssertionError {
        private static final long serialVersionUID = 1L;
        final int step;

        StepFailure(int step, String op, AssertionError cause) {
            super("step " + step + " (" + op + "): " + cause.getMessage(), cause);
            this.step = step;
        }
    }

    Runner(ConformanceTest.Env env, JsonNode scenario) {
        this.env = env;
        this.scenario = scenario;
        this.ns = "conf/java/" + UUID.randomUUID().toString().substring(0, 8) + "/" + scenario.path("name").asText()
                + "/";
    }

    void run() throws Exception {
        try {
            if (env.pool2 != null && has(scenario.path("requires"), "transaction_pooler")) {
                resetPooled(env.pool2); // what an earlier run left there is not this scenario's
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = scenario.path("clients").properties().iterator(); it.hasNext();) {
                Map.Entry<String, JsonNode> c = it.next();
                JsonNode o = c.getValue();
                String url = url(o.path("dsn").asText("default"));
                ClientOptions opts = ClientOptions.defaults().url(url);
                switch (o.path("pooling").asText("detect")) {
                    case "detect" -> {
                    }
                    case "none" -> opts.pooling(Pooling.NONE);
                    case "transaction" -> opts.pooling(Pooling.TRANSACTION);
                    default -> throw new AssertionError("unknown pooling " + o.path("pooling"));
                }
                switch (o.path("wait_mode").asText("automatic")) {
                    case "automatic" -> {
                    }
                    case "server" -> opts.waitMode(WaitMode.SERVER);
                    case "poll" -> opts.waitMode(WaitMode.POLL);
                    default -> throw new AssertionError("unknown wait_mode " + o.path("wait_mode"));
                }
                if (o.has("call_timeout_ms")) {
                    opts.callTimeout(Duration.ofMillis(o.get("call_timeout_ms").asLong()));
                }
                if (o.has("poll_interval_ms")) {
                    opts.pollInterval(Duration.ofMillis(o.get("poll_interval_ms").asLong()));
                }
                clients.put(c.getKey(), new DlockClient(opts));
                urls.put(c.getKey(), url);
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = scenario.path("sessions").properties().iterator(); it.hasNext();) {
                Map.Entry<String, JsonNode> s = it.next();
                String dsn = s.getValue().path("dsn").asText("admin");
                sessions.put(s.getKey(), DriverManager.getConnection(dsn.equals("admin") ? env.admin : url(dsn)));
            }
            int i = 0;
            for (JsonNode step : scenario.path("steps")) {
                i++;
                try {
                    step(step);
                } catch (AssertionError e) {
                    throw new StepFailure(i, step.path("op").asText(), e);
                }
            }
        } finally {
            cleanup();
        }
    }

    private static boolean has(JsonNode list, String value) {
        for (JsonNode n : list) {
            if (n.asText().equals(value)) {
                return true;
            }
        }
        return false;
    }

    /** Drops prepared statements and settings on both server connections of the pool of two. */
    private static void resetPooled(String url) throws SQLException {
        try (Connection x = DriverManager.getConnection(url); Connection y = DriverManager.getConnection(url)) {
            x.setAutoCommit(false);
            y.setAutoCommit(false);
            for (Connection c : List.of(x, y)) {
                try (Statement st = c.createStatement()) {
                    st.execute("DEALLOCATE ALL");
                    st.execute("RESET ALL");
                }
            }
            x.commit();
            y.commit();
        }
    }

    private String url(String dsn) {
        return dsn.equals("pool2") ? env.pool2 : env.dsn;
    }

    private void cleanup() {
        for (JsonNode step : scenario.path("cleanup")) {
            try {
                step(step);
            } catch (Throwable ignored) {
                // cleanup ignores outcomes
            }
        }
        for (Pending p : handles.values()) {
            try {
                p.done.await(15, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        for (Held h : leases.values()) {
            if (h.lease != null) {
                h.lease.close();
            }
        }
        clients.values().forEach(DlockClient::close);
        for (Connection c : sessions.values()) {
            try {
                c.close();
            } catch (SQLException ignored) {
                // closing
            }
        }
    }

    private void step(JsonNode st) throws Exception {
        String op = st.path("op").asText();
        if (op.equals("await")) {
            await(st);
            return;
        }
        if (!KNOWN.containsKey(op)) {
            throw new AssertionError("unknown op " + op);
        }
        if (op.equals("body")) {
            body(st);
            return;
        }
        if (st.has("async")) {
            Pending p = new Pending(st);
            handles.put(st.get("async").asText(), p);
            Thread t = new Thread(() -> {
                try {
                    p.result = exec(op, st);
                } catch (Throwable e) {
                    p.result = new HashMap<>();
                    p.error = e;
                } finally {
                    p.doneAt = System.nanoTime();
                    p.done.countDown();
                }
            });
            t.setDaemon(true);
            t.start();
            return;
        }
        long started = System.nanoTime();
        Map<String, Object> res = null;
        Throwable error = null;
        try {
            res = exec(op, st);
        } catch (DlockException e) {
            error = e;
            res = new HashMap<>();
        }
        if (res != null) {
            res.putIfAbsent("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
        }
        check(op, st.path("expect"), res, error);
    }

    private void await(JsonNode st) throws Exception {
        Pending p = handles.get(st.path("handle").asText());
        if (p == null) {
            throw new AssertionError("no handle " + st.path("handle"));
        }
        p.done.await();
        long since = st.has("since") ? marks.get(st.get("since").asText()) : p.started;
        Map<String, Object> res = p.result == null ? new HashMap<>() : p.result;
        res.put("elapsed_ms", (p.doneAt - since) / 1_000_000);
        if (p.error != null && !(p.error instanceof DlockException)) {
            throw new AssertionError("unexpected failure: " + p.error, p.error);
        }
        check(p.op.path("op").asText(), st.path("expect"), res, p.error);
    }

    static String errorName(Throwable e) {
        if (e instanceof LeaseLostException) {
            return "lease_lost";
        } else if (e instanceof BusyException) {
            return "busy";
        } else if (e instanceof StaleTokenException) {
            return "stale_token";
        } else if (e instanceof NotHeldException) {
            return "not_held";
        } else if (e instanceof InvalidArgumentException) {
            return "invalid_argument";
        } else if (e instanceof PermissionException) {
            return "permission";
        } else if (e instanceof UnknownOutcomeException) {
            return "unknown_outcome";
        } else if (e instanceof ConnectionException) {
            return "connection";
        }
        return "server";
    }

    private void check(String op, JsonNode expect, Map<String, Object> res, Throwable error) {
        for (Iterator<String> it = expect.fieldNames(); it.hasNext();) {
            String k = it.next();
            if (!KNOWN.get(op).contains(k)) {
                throw new AssertionError("unknown expectation " + k + " for " + op);
            }
        }
        if (error != null) {
            if (!expect.has("error")) {
                throw new AssertionError("unexpected error: " + error, error);
            }
            if (!errorName(error).equals(expect.get("error").asText())) {
                throw new AssertionError("error " + errorName(error) + " (" + error + "), expected " + expect.get("error"));
            }
        } else if (expect.has("error")) {
            throw new AssertionError("expected error " + expect.get("error") + ", got none (" + res + ")");
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = expect.properties().iterator(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            String k = e.getKey();
            if (k.equals("error")) {
                continue;
            }
            if (res == null || !res.containsKey(k)) {
                throw new AssertionError(k + ": no such result (" + res + ")");
            }
            if (k.equals("rows")) {
                compareRows(res.get(k), e.getValue());
            } else {
                compare(k, res.get(k), e.getValue());
            }
        }
    }

    @SuppressWarnings("unchecked")
    private void compareRows(Object got, JsonNode want) {
        List<List<Object>> rows = (List<List<Object>>) got;
        if (rows.size() != want.size()) {
            throw new AssertionError("rows: got " + rows + ", want " + want);
        }
        for (int i = 0; i < rows.size(); i++) {
            JsonNode w = want.get(i);
            if (w.size() != rows.get(i).size()) {
                throw new AssertionError("rows: got " + rows + ", want " + want);
            }
            for (int j = 0; j < w.size(); j++) {
                if (!same(rows.get(i).get(j), resolve(w.get(j)))) {
                    throw new AssertionError("rows: got " + rows + ", want " + want + " (row " + (i + 1) + " column "
                            + (j + 1) + ")");
                }
            }
        }
    }

    private void compare(String key, Object got, JsonNode want) {
        if (!want.isObject()) {
            Object w = resolve(want);
            if (!same(got, w)) {
                throw new AssertionError(key + ": got " + got + ", want " + w);
            }
            return;
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = want.properties().iterator(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            Object w = resolve(e.getValue());
            boolean holds;
            switch (e.getKey()) {
                case "eq" -> holds = same(got, w);
                case "ne" -> holds = !same(got, w);
                case "gt", "ge", "lt", "le" -> {
                    BigInteger g = integer(got);
                    BigInteger x = integer(w);
                    if (g == null || x == null) {
                        throw new AssertionError(key + ": " + got + " " + e.getKey() + " " + w + ": not numbers");
                    }
                    int c = g.compareTo(x);
                    holds = switch (e.getKey()) {
                        case "gt" -> c > 0;
                        case "ge" -> c >= 0;
                        case "lt" -> c < 0;
                        default -> c <= 0;
                    };
                }
                default -> throw new AssertionError(key + ": unknown comparison " + e.getKey());
            }
            if (!holds) {
                throw new AssertionError(key + ": got " + got + ", want " + e.getKey() + " " + w);
            }
        }
    }

    private static BigInteger integer(Object v) {
        if (v instanceof Long || v instanceof Integer || v instanceof Short) {
            return BigInteger.valueOf(((Number) v).longValue());
        }
        if (v instanceof BigInteger) {
            return (BigInteger) v;
        }
        return null;
    }

    /** Equal as JSON values, integers by value whatever their type. */
    private static boolean same(Object got, Object want) {
        BigInteger g = integer(got);
        BigInteger w = integer(want);
        if (g != null || w != null) {
            return g != null && g.equals(w);
        }
        if (got == null || want == null) {
            return got == want;
        }
        return got.equals(want);
    }

    /** A JSON value with references ($x, $x.field) and ${ns} resolved. */
    private Object resolve(JsonNode n) {
        if (n == null || n.isNull()) {
            return null;
        }
        if (n.isIntegralNumber()) {
            return n.bigIntegerValue().bitLength() < 63 ? (Object) n.asLong() : n.bigIntegerValue();
        }
        if (n.isBoolean()) {
            return n.asBoolean();
        }
        if (!n.isTextual()) {
            return n.toString();
        }
        String s = n.asText();
        if (s.startsWith("$") && !s.startsWith("${")) {
            String[] parts = s.substring(1).split("\\.", 2);
            Object v = vars.get(parts[0]);
            if (v == null) {
                throw new AssertionError("undefined " + s);
            }
            if (v instanceof Map<?, ?> m) {
                return m.get(parts.length > 1 ? parts[1] : "");
            }
            return v;
        }
        return s.replace("${ns}", ns);
    }

    private String name(JsonNode n) {
        if (n.isObject()) {
            return n.path("exact").asText().repeat(n.has("repeat") ? n.get("repeat").asInt() : 1);
        }
        return ns + n.asText();
    }

    private Held held(JsonNode n) {
        Held h = leases.get(n.asText());
        if (h == null || h.lease == null) {
            throw new AssertionError("no lease " + n);
        }
        return h;
    }

    private Map<String, Object> exec(String op, JsonNode st) throws Exception {
        Map<String, Object> res = new HashMap<>();
        switch (op) {
            case "try_acquire", "acquire" -> {
                return acquire(op, st);
            }
            case "renew" -> {
                Held h = held(st.path("lease"));
                Outcome out = st.has("ttl_ms") ? h.lease.renew(Duration.ofMillis(st.get("ttl_ms").asLong()))
                        : h.lease.renew();
                res.put("outcome", out.name().toLowerCase());
            }
            case "release" -> res.put("outcome", held(st.path("lease")).lease.release().name().toLowerCase());
            case "lease_state" -> {
                Held h = held(st.path("lease"));
                res.put("valid", h.lease.isValid());
                res.put("lost", h.lease.isLost());
                res.put("time_left_ms", h.lease.timeLeft().toMillis());
                res.put("on_lost_called", h.onLost.get());
            }
            case "wait_lost" -> {
                Held h = held(st.path("lease"));
                long since = st.has("since") ? marks.get(st.get("since").asText()) : System.nanoTime();
                res.put("lost", h.lease.awaitLost(Duration.ofMillis(st.path("within_ms").asLong())));
                res.put("elapsed_ms", (System.nanoTime() - since) / 1_000_000);
            }
            case "body_started" -> {
                Pending p = handles.get(st.path("body").asText());
                if (p == null || !p.bodyStarted.await(st.path("within_ms").asLong(), TimeUnit.MILLISECONDS)) {
                    throw new AssertionError("the body did not start");
                }
                vars.put(st.path("body").asText(), Map.of("fencing_token", p.token));
            }
            case "fenced_write" -> {
                return fencedWrite(st);
            }
            case "sql" -> {
                return sql(st);
            }
            case "new_owner" -> vars.put(st.path("as").asText(), UUID.randomUUID().toString());
            case "sleep" -> Thread.sleep(st.path("ms").asLong());
            case "mark" -> marks.put(st.path("as").asText(), System.nanoTime());
            default -> throw new AssertionError("unknown op " + op);
        }
        return res;
    }

    private LeaseOptions options(JsonNode st, Held h) {
        LeaseOptions o = LeaseOptions.ttl(Duration.ofMillis(st.path("ttl_ms").asLong()))
                .onLost((l, e) -> h.onLost.set(true));
        if (st.has("keep_alive") && !st.get("keep_alive").asBoolean()) {
            o.keepAlive(false);
        }
        if (st.has("owner")) {
            o.ownerToken(String.valueOf(resolve(st.get("owner"))));
        }
        return o;
    }

    private DlockClient client(JsonNode st) {
        DlockClient c = clients.get(st.path("client").asText());
        if (c == null) {
            throw new AssertionError("no client " + st.path("client"));
        }
        return c;
    }

    private Map<String, Object> acquire(String op, JsonNode st) {
        DlockClient c = client(st);
        Held h = new Held();
        LeaseOptions o = options(st, h);
        String name = name(st.path("name"));
        Map<String, Object> res = new HashMap<>();
        long started = System.nanoTime();
        Lease l;
        if (op.equals("try_acquire")) {
            Optional<Lease> got = c.tryAcquire(name, o);
            if (got.isEmpty()) {
                res.put("granted", false);
                return res;
            }
            l = got.get();
        } else {
            l = c.acquire(name, Duration.ofMillis(st.path("wait_ms").asLong()), o);
        }
        res.put("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
        h.lease = l;
        String as = st.has("as") ? st.get("as").asText() : "_anon" + UUID.randomUUID();
        leases.put(as, h);
        vars.put(as, Map.of("fencing_token", l.fencingToken(), "owner_token", l.ownerToken(), "name", l.name()));
        res.put("granted", true);
        res.put("fencing_token", l.fencingToken());
        res.put("owner_token", l.ownerToken());
        return res;
    }

    /** The scoped form: try-with-resources, the body stopped by an interrupt when the lease is lost. */
    private void body(JsonNode st) {
        DlockClient c = client(st);
        Pending p = new Pending(st);
        handles.put(st.path("as").asText(), p);
        String name = name(st.path("name"));
        long wait = st.path("wait_ms").asLong();
        LeaseOptions o = LeaseOptions.ttl(Duration.ofMillis(st.path("ttl_ms").asLong())).interruptOnLoss(true);
        long max = st.path("max_ms").asLong();
        Thread t = new Thread(() -> {
            try (Lease l = wait > 0 ? c.acquire(name, Duration.ofMillis(wait), o)
                    : c.tryAcquire(name, o).orElseThrow(() -> new BusyException("busy", name, null, null))) {
                p.token = l.fencingToken();
                p.bodyStarted.countDown();
                try {
                    Thread.sleep(max);
                } catch (InterruptedException e) {
                    l.checkValid(); // throws LeaseLostException when that is why
                }
                l.checkValid();
                p.result = new HashMap<>();
            } catch (Throwable e) {
                p.error = e;
            } finally {
                p.doneAt = System.nanoTime();
                p.done.countDown();
            }
        });
        t.setDaemon(true);
        t.start();
    }

    private Map<String, Object> fencedWrite(JsonNode st) throws SQLException {
        String url = urls.get(st.path("client").asText());
        if (url == null) {
            throw new AssertionError("no client " + st.path("client"));
        }
        Object t = resolve(st.path("token"));
        long token = ((Number) t).longValue();
        try (Connection c = DriverManager.getConnection(url)) {
            c.setAutoCommit(false);
            try {
                if (st.has("role")) {
                    try (PreparedStatement ps = c.prepareStatement("SELECT pg_catalog.set_config('role', ?, true)")) {
                        ps.setString(1, st.get("role").asText());
                        ps.execute();
                    }
                }
                if (st.has("lock")) {
                    Fencing.assertHolds(c, name(st.get("lock")), token);
                }
                Fencing.fence(c, name(st.path("resource")), token);
                try (PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO public.dlock_conformance_ledger (ns, writer, fencing_token) VALUES (?, ?, ?)")) {
                    ps.setString(1, ns);
                    ps.setString(2, st.path("writer").asText());
                    ps.setLong(3, token);
                    ps.execute();
                }
                if (Fencing.commit(c) != Outcome.DONE) {
                    throw new UnknownOutcomeException("commit in doubt", null, null, null, null);
                }
            } finally {
                if (!c.getAutoCommit()) {
                    try {
                        c.rollback();
                    } catch (SQLException ignored) {
                        // already ended
                    }
                }
            }
        }
        Map<String, Object> res = new HashMap<>();
        res.put("committed", true);
        return res;
    }

    private Map<String, Object> sql(JsonNode st) throws Exception {
        Connection conn;
        boolean own = !st.has("session");
        if (own) {
            conn = DriverManager.getConnection(env.admin);
        } else {
            conn = sessions.get(st.get("session").asText());
            if (conn == null) {
                throw new AssertionError("no session " + st.get("session"));
            }
        }
        try {
            List<Object> params = new ArrayList<>();
            for (JsonNode p : st.path("params")) {
                params.add(resolve(p));
            }
            Matcher m = PARAM.matcher(st.path("query").asText());
            StringBuilder q = new StringBuilder();
            List<Object> bound = new ArrayList<>();
            while (m.find()) {
                bound.add(params.get(Integer.parseInt(m.group(1)) - 1));
                m.appendReplacement(q, "?");
            }
            m.appendTail(q);
            String until = st.path("until").asText("");
            long deadline = System.nanoTime() + st.path("within_ms").asLong() * 1_000_000;
            while (true) {
                List<List<Object>> rows = new ArrayList<>();
                List<String> names = new ArrayList<>();
                try (PreparedStatement ps = conn.prepareStatement(q.toString())) {
                    for (int i = 0; i < bound.size(); i++) {
                        ps.setObject(i + 1, bound.get(i));
                    }
                    if (ps.execute()) {
                        try (ResultSet rs = ps.getResultSet()) {
                            int n = rs.getMetaData().getColumnCount();
                            for (int i = 1; i <= n; i++) {
                                names.add(rs.getMetaData().getColumnLabel(i));
                            }
                            while (rs.next()) {
                                List<Object> row = new ArrayList<>();
                                for (int i = 1; i <= n; i++) {
                                    row.add(rs.getObject(i));
                                }
                                rows.add(row);
                            }
                        }
                    }
                } catch (SQLException e) {
                    throw mapped(e);
                }
                boolean done = until.isEmpty() || (until.equals("rows") && !rows.isEmpty())
                        || (until.equals("true") && !rows.isEmpty() && Boolean.TRUE.equals(rows.get(0).get(0)));
                if (done) {
                    Map<String, Object> res = new HashMap<>();
                    res.put("rows", rows);
                    res.put("value", rows.isEmpty() || rows.get(0).isEmpty() ? null : rows.get(0).get(0));
                    if (st.has("as")) {
                        Map<String, Object> v = new HashMap<>();
                        if (!rows.isEmpty()) {
                            v.put("", rows.get(0).get(0));
                            for (int i = 0; i < names.size(); i++) {
                                v.put(names.get(i), rows.get(0).get(i));
                            }
                        }
                        vars.put(st.get("as").asText(), v);
                    }
                    return res;
                }
                if (System.nanoTime() - deadline > 0) {
                    throw new AssertionError("sql: no result until " + until + " within " + st.path("within_ms"));
                }
                Thread.sleep(50);
            }
        } finally {
            if (own) {
                conn.close();
            }
        }
    }

    /** A plain driver error, through the client's own mapping (a stale write, a refused role). */
    private static DlockException mapped(SQLException e) {
        return DlockException.of(e, null);
    }
}
