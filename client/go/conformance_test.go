package dlock

// The conformance runner: executes the scenarios of client/conformance (format
// 1, described in client/conformance/README.md) with this client against a
// real server. Each scenario is a subtest of TestConformance; each negative
// control a subtest of TestConformanceNegativeControls, which passes only
// when the scenario fails.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// conformanceDir holds the scenarios; DLOCK_CONFORMANCE_DIR names another
// (the suite's negative control runs a wrong scenario from a copy).
var conformanceDir = func() string {
	if d := os.Getenv("DLOCK_CONFORMANCE_DIR"); d != "" {
		return d
	}
	return "../conformance"
}()

type scenario struct {
	Format      int                       `json:"format"`
	FailsAtStep int                       `json:"fails_at_step"`
	Name        string                    `json:"name"`
	Requires    []string                  `json:"requires"`
	ServerWide  bool                      `json:"server_wide"`
	Clients     map[string]map[string]any `json:"clients"`
	Sessions    map[string]map[string]any `json:"sessions"`
	Steps       []map[string]any          `json:"steps"`
	Cleanup     []map[string]any          `json:"cleanup"`
}

func loadScenarios(t *testing.T, dir string) map[string]*scenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(conformanceDir, dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in %s: %v", dir, err)
	}
	out := map[string]*scenario{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var s scenario
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if s.Format != 1 {
			t.Fatalf("%s: format %d, this runner reads 1", f, s.Format)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = &s
	}
	return out
}

type confEnv struct {
	dsn, admin, pool2, pooler string
	waitQueue                 bool
}

func conformanceEnv(t *testing.T) confEnv {
	e := confEnv{dsn: os.Getenv("DLOCK_CONFORMANCE_DSN"), admin: os.Getenv("DLOCK_CONFORMANCE_ADMIN_DSN"),
		pool2: os.Getenv("DLOCK_CONFORMANCE_POOL2_DSN"), pooler: os.Getenv("DLOCK_CONFORMANCE_POOLER")}
	if e.admin == "" {
		e.admin = e.dsn
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	setup, err := os.ReadFile(filepath.Join(conformanceDir, "setup.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PgConn().Exec(ctx, string(setup)).ReadAll(); err != nil {
		t.Fatalf("setup.sql: %v", err)
	}
	if err := conn.QueryRow(ctx, "SELECT dlock.waiters('x') IS NOT NULL").Scan(&e.waitQueue); err != nil {
		t.Fatal(err)
	}
	return e
}

func loadSkips(t *testing.T) map[string]string {
	skips := map[string]string{}
	data, err := os.ReadFile("conformance-skip.json")
	if err == nil {
		if err := json.Unmarshal(data, &skips); err != nil {
			t.Fatalf("conformance-skip.json: %v", err)
		}
	}
	return skips
}

func TestConformance(t *testing.T) {
	env := conformanceEnv(t)
	skips := loadScenarios(t, "scenarios")
	names := sortedKeys(skips)
	skipList := loadSkips(t)
	for _, name := range names {
		s := skips[name]
		t.Run(name, func(t *testing.T) {
			if reason, ok := skipList[s.Name]; ok {
				t.Skipf("skipped by the Go client: %s", reason)
			}
			if reason := env.unmet(s); reason != "" {
				t.Skip(reason)
			}
			if err := runScenario(env, s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every negative control must fail; one that passes fails the test.
func TestConformanceNegativeControls(t *testing.T) {
	env := conformanceEnv(t)
	all := loadScenarios(t, "negative")
	for _, name := range sortedKeys(all) {
		s := all[name]
		t.Run(name, func(t *testing.T) {
			if reason := env.unmet(s); reason != "" {
				t.Skip(reason)
			}
			err := runScenario(env, s)
			if err == nil {
				t.Fatal("the negative control passed: the runner does not check what it should")
			}
			var se *stepError
			if !errors.As(err, &se) || se.step != s.FailsAtStep {
				t.Fatalf("the negative control failed, but not at step %d: %v", s.FailsAtStep, err)
			}
			t.Logf("failed as it must: %v", err)
		})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (e confEnv) unmet(s *scenario) string {
	for _, r := range s.Requires {
		switch r {
		case "direct":
			if e.pooler != "" {
				return "needs a direct connection (DLOCK_CONFORMANCE_POOLER is set)"
			}
		case "transaction_pooler":
			if e.pooler == "" || e.pool2 == "" {
				return "needs a transaction pooler (DLOCK_CONFORMANCE_POOLER and _POOL2_DSN)"
			}
		case "wait_queue":
			if !e.waitQueue {
				return "needs the wait queue (pg_dlock preloaded)"
			}
		default:
			return "" // an unknown need: run it, and let it fail where it must
		}
	}
	return ""
}

// run is the state of one scenario.
type run struct {
	env      confEnv
	ns       string
	clients  map[string]*Client
	dsns     map[string]string
	sessions map[string]*pgx.Conn
	mu       sync.Mutex
	vars     map[string]any
	leases   map[string]*confLease
	handles  map[string]*pending
	marks    map[string]time.Time
}

type confLease struct {
	l      *Lease
	mu     sync.Mutex
	onLost bool
}

type pending struct {
	op      map[string]any
	started time.Time
	done    chan struct{}
	result  map[string]any
	err     error
	// a body's
	bodyStarted chan struct{}
	token       int64
}

func runScenario(env confEnv, s *scenario) (err error) {
	ctx := context.Background()
	r := &run{env: env, ns: fmt.Sprintf("conf/go/%08x/%s/", time.Now().UnixNano()&0xffffffff, s.Name),
		clients: map[string]*Client{}, dsns: map[string]string{}, sessions: map[string]*pgx.Conn{},
		vars: map[string]any{}, leases: map[string]*confLease{}, handles: map[string]*pending{},
		marks: map[string]time.Time{}}
	defer r.cleanup(s)
	if env.pool2 != "" && contains(s.Requires, "transaction_pooler") {
		// What an earlier run left on the pooled server connections is not this scenario's.
		if err := resetPooled(ctx, env.pool2); err != nil {
			return fmt.Errorf("resetting the pool: %w", err)
		}
	}
	for name, o := range s.Clients {
		opts := Options{ConnString: r.dsn(o["dsn"])}
		r.dsns[name] = opts.ConnString
		switch o["pooling"] {
		case nil, "detect":
		case "none":
			opts.Pooling = PoolingNone
		case "transaction":
			opts.Pooling = PoolingTransaction
		default:
			return fmt.Errorf("client %s: unknown pooling %v", name, o["pooling"])
		}
		switch o["wait_mode"] {
		case nil, "automatic":
		case "server":
			opts.WaitMode = WaitServer
		case "poll":
			opts.WaitMode = WaitPoll
		default:
			return fmt.Errorf("client %s: unknown wait_mode %v", name, o["wait_mode"])
		}
		if v, ok := o["call_timeout_ms"]; ok {
			opts.CallTimeout = msOf(v)
		}
		if v, ok := o["poll_interval_ms"]; ok {
			opts.PollInterval = msOf(v)
		}
		c, err := New(ctx, opts)
		if err != nil {
			return err
		}
		r.clients[name] = c
	}
	for name, o := range s.Sessions {
		dsn := env.admin
		if o["dsn"] != nil && o["dsn"] != "admin" {
			dsn = r.dsn(o["dsn"])
		}
		conn, err := plainConn(ctx, dsn)
		if err != nil {
			return fmt.Errorf("session %s: %w", name, err)
		}
		r.sessions[name] = conn
	}
	for i, step := range s.Steps {
		if err := r.step(ctx, step); err != nil {
			return &stepError{step: i + 1, op: fmt.Sprint(step["op"]), err: err}
		}
	}
	return nil
}

// stepError is a scenario that failed at a step (counted from 1).
type stepError struct {
	step int
	op   string
	err  error
}

func (e *stepError) Error() string { return fmt.Sprintf("step %d (%s): %v", e.step, e.op, e.err) }
func (e *stepError) Unwrap() error { return e.err }

func plainConn(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec // unnamed statements: also behind a pooler
	return pgx.ConnectConfig(ctx, cfg)
}

func (r *run) dsn(v any) string {
	if v == "pool2" {
		return r.env.pool2
	}
	return r.env.dsn
}

func (r *run) cleanup(s *scenario) {
	ctx := context.Background()
	for _, step := range s.Cleanup {
		_ = r.step(ctx, step)
	}
	for _, p := range r.handles {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
		}
	}
	for _, l := range r.leases {
		l.l.Release(ctx)
	}
	for _, c := range r.clients {
		c.Close()
	}
	for _, s := range r.sessions {
		s.Close(ctx)
	}
}

func msOf(v any) time.Duration {
	n, _ := toInt(v)
	return time.Duration(n) * time.Millisecond
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int:
		return int64(x), true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// resolve turns references ($x, $x.field) and ${ns} into values.
func (r *run) resolve(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	if strings.HasPrefix(s, "$") && !strings.HasPrefix(s, "${") {
		r.mu.Lock()
		defer r.mu.Unlock()
		name, field, _ := strings.Cut(s[1:], ".")
		val, ok := r.vars[name]
		if !ok {
			return fmt.Sprintf("<undefined %s>", s)
		}
		if field == "" {
			if m, ok := val.(map[string]any); ok {
				return m[""]
			}
			return val
		}
		if m, ok := val.(map[string]any); ok {
			return m[field]
		}
		return fmt.Sprintf("<no field %s>", s)
	}
	return strings.ReplaceAll(s, "${ns}", r.ns)
}

func (r *run) name(v any) string {
	if m, ok := v.(map[string]any); ok {
		s, _ := m["exact"].(string)
		if n, ok := toInt(m["repeat"]); ok {
			return strings.Repeat(s, int(n))
		}
		return s
	}
	return r.ns + fmt.Sprint(v)
}

func (r *run) set(name string, val any) {
	if name == "" {
		return
	}
	r.mu.Lock()
	r.vars[name] = val
	r.mu.Unlock()
}

func errorName(err error) string {
	switch {
	case errors.Is(err, ErrLost):
		return "lease_lost"
	case errors.Is(err, ErrBusy):
		return "busy"
	case errors.Is(err, ErrStaleToken):
		return "stale_token"
	case errors.Is(err, ErrNotHeld):
		return "not_held"
	case errors.Is(err, ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, ErrPermission):
		return "permission"
	case errors.Is(err, ErrUnknownOutcome):
		return "unknown_outcome"
	case errors.Is(err, ErrConnection):
		return "connection"
	default:
		return "server"
	}
}

// The expect keys each op knows.
var knownKeys = map[string][]string{
	"try_acquire":  {"granted", "fencing_token", "owner_token", "error", "elapsed_ms"},
	"acquire":      {"granted", "fencing_token", "owner_token", "error", "elapsed_ms"},
	"renew":        {"outcome", "error", "elapsed_ms"},
	"release":      {"outcome", "elapsed_ms"},
	"lease_state":  {"valid", "lost", "time_left_ms", "on_lost_called"},
	"wait_lost":    {"lost", "elapsed_ms"},
	"body":         {"error", "elapsed_ms"},
	"body_started": {},
	"fenced_write": {"committed", "error"},
	"sql":          {"rows", "value", "error"},
	"new_owner":    {},
	"sleep":        {},
	"mark":         {},
}

func (r *run) step(ctx context.Context, st map[string]any) error {
	op, _ := st["op"].(string)
	if op == "await" {
		return r.await(st)
	}
	if _, ok := knownKeys[op]; !ok {
		return fmt.Errorf("unknown op %q", op)
	}
	if h, ok := st["async"].(string); ok {
		p := &pending{op: st, started: time.Now(), done: make(chan struct{})}
		r.handles[h] = p
		go func() {
			defer close(p.done)
			p.result, p.err = r.exec(ctx, op, st)
		}()
		return nil
	}
	if op == "body" {
		return r.body(ctx, st)
	}
	started := time.Now()
	res, err := r.exec(ctx, op, st)
	if res != nil {
		if _, has := res["elapsed_ms"]; !has {
			res["elapsed_ms"] = time.Since(started).Milliseconds()
		}
	}
	return r.check(op, st["expect"], res, err)
}

func (r *run) await(st map[string]any) error {
	h, _ := st["handle"].(string)
	p, ok := r.handles[h]
	if !ok {
		return fmt.Errorf("no handle %q", h)
	}
	<-p.done
	since := p.started
	if m, ok := st["since"].(string); ok {
		since = r.marks[m]
	}
	res := p.result
	if res == nil {
		res = map[string]any{}
	}
	res["elapsed_ms"] = p.doneAt().Sub(since).Milliseconds()
	op, _ := p.op["op"].(string)
	return r.check(op, st["expect"], res, p.err)
}

func (p *pending) doneAt() time.Time {
	if t, ok := p.result["_done"].(time.Time); ok {
		return t
	}
	return time.Now()
}

// check compares a result with an expectation.
func (r *run) check(op string, expect any, res map[string]any, err error) error {
	exp, _ := expect.(map[string]any)
	known := map[string]bool{}
	for _, k := range knownKeys[op] {
		known[k] = true
	}
	for k := range exp {
		if !known[k] {
			return fmt.Errorf("unknown expectation %q for %s", k, op)
		}
	}
	if err != nil {
		want, ok := exp["error"]
		if !ok {
			return fmt.Errorf("unexpected error: %w", err)
		}
		if got := errorName(err); got != want {
			return fmt.Errorf("error %s (%v), expected %v", got, err, want)
		}
	} else if want, ok := exp["error"]; ok {
		return fmt.Errorf("expected error %v, got none (%v)", want, res)
	}
	for _, k := range sortedKeys(exp) {
		if k == "error" {
			continue
		}
		got, ok := res[k]
		if !ok {
			return fmt.Errorf("%s: no such result (%v)", k, res)
		}
		if k == "rows" {
			if err := r.compareRows(got, exp[k]); err != nil {
				return err
			}
			continue
		}
		if err := r.compare(k, got, exp[k]); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) compareRows(got, want any) error {
	g, _ := got.([][]any)
	w, _ := want.([]any)
	if len(g) != len(w) {
		return fmt.Errorf("rows: got %v, want %v", g, w)
	}
	for i := range g {
		wr, _ := w[i].([]any)
		if len(wr) != len(g[i]) {
			return fmt.Errorf("rows: got %v, want %v", g, w)
		}
		for j := range wr {
			if !r.equal(g[i][j], r.resolve(wr[j])) {
				return fmt.Errorf("rows: got %v, want %v (row %d column %d)", g, w, i+1, j+1)
			}
		}
	}
	return nil
}

func (r *run) compare(key string, got, want any) error {
	m, ok := want.(map[string]any)
	if !ok {
		if !r.equal(got, r.resolve(want)) {
			return fmt.Errorf("%s: got %v, want %v", key, got, r.resolve(want))
		}
		return nil
	}
	for _, opName := range sortedKeys(m) {
		w := r.resolve(m[opName])
		gi, gok := toBig(got)
		wi, wok := toBig(w)
		var holds bool
		switch opName {
		case "eq":
			holds = r.equal(got, w)
		case "ne":
			holds = !r.equal(got, w)
		case "gt", "ge", "lt", "le":
			if !gok || !wok {
				return fmt.Errorf("%s: %v %s %v: not numbers", key, got, opName, w)
			}
			c := gi.Cmp(wi)
			holds = map[string]bool{"gt": c > 0, "ge": c >= 0, "lt": c < 0, "le": c <= 0}[opName]
		default:
			return fmt.Errorf("%s: unknown comparison %q", key, opName)
		}
		if !holds {
			return fmt.Errorf("%s: got %v, want %s %v", key, got, opName, w)
		}
	}
	return nil
}

func toBig(v any) (*big.Int, bool) {
	if n, ok := toInt(v); ok {
		if _, isString := v.(string); isString {
			return nil, false
		}
		return big.NewInt(n), true
	}
	return nil, false
}

// equal compares as JSON values, integers by value whatever their type.
func (r *run) equal(got, want any) bool {
	if gi, ok := toBig(got); ok {
		if wi, ok := toBig(want); ok {
			return gi.Cmp(wi) == 0
		}
		return false
	}
	switch g := got.(type) {
	case nil:
		return want == nil
	case bool:
		w, ok := want.(bool)
		return ok && w == g
	case string:
		w, ok := want.(string)
		return ok && w == g
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

func (r *run) exec(ctx context.Context, op string, st map[string]any) (map[string]any, error) {
	switch op {
	case "try_acquire", "acquire":
		return r.acquire(ctx, op, st)
	case "renew", "release":
		cl := r.lease(st["lease"])
		if cl == nil {
			return nil, fmt.Errorf("no lease %v", st["lease"])
		}
		var out Outcome
		if op == "renew" {
			if _, ok := st["ttl_ms"]; ok {
				return nil, errors.New("renew with ttl_ms: not offered by the Go client")
			}
			out = cl.l.Renew(ctx)
		} else {
			out = cl.l.Release(ctx)
		}
		return map[string]any{"outcome": out.String()}, nil
	case "lease_state":
		cl := r.lease(st["lease"])
		if cl == nil {
			return nil, fmt.Errorf("no lease %v", st["lease"])
		}
		cl.mu.Lock()
		called := cl.onLost
		cl.mu.Unlock()
		return map[string]any{"valid": cl.l.Valid(), "lost": cl.l.Lost(),
			"time_left_ms": cl.l.TimeLeft().Milliseconds(), "on_lost_called": called}, nil
	case "wait_lost":
		cl := r.lease(st["lease"])
		if cl == nil {
			return nil, fmt.Errorf("no lease %v", st["lease"])
		}
		since := time.Now()
		if m, ok := st["since"].(string); ok {
			since = r.marks[m]
		}
		lost := false
		select {
		case <-cl.l.LostC():
			lost = true
		case <-time.After(msOf(st["within_ms"])):
		}
		return map[string]any{"lost": lost, "elapsed_ms": time.Since(since).Milliseconds()}, nil
	case "body_started":
		h, _ := st["body"].(string)
		p, ok := r.handles[h]
		if !ok || p.bodyStarted == nil {
			return nil, fmt.Errorf("no body %q", h)
		}
		select {
		case <-p.bodyStarted:
			r.set(h, map[string]any{"fencing_token": p.token})
			return map[string]any{}, nil
		case <-time.After(msOf(st["within_ms"])):
			return nil, errors.New("the body did not start")
		}
	case "fenced_write":
		return r.fencedWrite(ctx, st)
	case "sql":
		return r.sql(ctx, st)
	case "new_owner":
		r.set(fmt.Sprint(st["as"]), newOwnerToken())
		return map[string]any{}, nil
	case "sleep":
		time.Sleep(msOf(st["ms"]))
		return map[string]any{}, nil
	case "mark":
		r.mu.Lock()
		r.marks[fmt.Sprint(st["as"])] = time.Now()
		r.mu.Unlock()
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

func (r *run) lease(v any) *confLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leases[fmt.Sprint(v)]
}

func (r *run) leaseOptions(st map[string]any, cl *confLease) LeaseOptions {
	opts := LeaseOptions{TTL: msOf(st["ttl_ms"]), OnLost: func(*Lease, error) {
		cl.mu.Lock()
		cl.onLost = true
		cl.mu.Unlock()
	}}
	if opts.TTL == 0 {
		// In Go a zero TTL is the default (30 s); the scenario's zero ttl is sent as
		// a non-positive one the server refuses (listed in the Go client's docs).
		opts.TTL = -time.Millisecond
	}
	if ka, ok := st["keep_alive"].(bool); ok && !ka {
		opts.NoKeepAlive = true
	}
	if o, ok := st["owner"]; ok {
		opts.OwnerToken = fmt.Sprint(r.resolve(o))
	}
	return opts
}

func (r *run) acquire(ctx context.Context, op string, st map[string]any) (map[string]any, error) {
	c := r.clients[fmt.Sprint(st["client"])]
	if c == nil {
		return nil, fmt.Errorf("no client %v", st["client"])
	}
	cl := &confLease{}
	opts := r.leaseOptions(st, cl)
	name := r.name(st["name"])
	var l *Lease
	var err error
	started := time.Now()
	if op == "try_acquire" {
		l, err = c.TryAcquire(ctx, name, opts)
		if errors.Is(err, ErrBusy) {
			return map[string]any{"granted": false, "_done": time.Now()}, nil
		}
	} else {
		l, err = c.Acquire(ctx, name, msOf(st["wait_ms"]), opts)
	}
	done := time.Now()
	if err != nil {
		return map[string]any{"_done": done}, err
	}
	cl.l = l
	if as, ok := st["as"].(string); ok {
		r.mu.Lock()
		r.leases[as] = cl
		r.mu.Unlock()
		r.set(as, map[string]any{"fencing_token": l.FencingToken(), "owner_token": l.OwnerToken(), "name": l.Name()})
	} else {
		r.mu.Lock()
		r.leases[fmt.Sprintf("_anon%d", len(r.leases))] = cl
		r.mu.Unlock()
	}
	return map[string]any{"granted": true, "fencing_token": l.FencingToken(), "owner_token": l.OwnerToken(),
		"elapsed_ms": done.Sub(started).Milliseconds(), "_done": done}, nil
}

// body runs the scoped form (Do) in the background until its context says the
// lease is lost, or max_ms.
func (r *run) body(ctx context.Context, st map[string]any) error {
	c := r.clients[fmt.Sprint(st["client"])]
	if c == nil {
		return fmt.Errorf("no client %v", st["client"])
	}
	h := fmt.Sprint(st["as"])
	p := &pending{op: st, started: time.Now(), done: make(chan struct{}), bodyStarted: make(chan struct{})}
	r.handles[h] = p
	opts := LeaseOptions{TTL: msOf(st["ttl_ms"]), Wait: msOf(st["wait_ms"])}
	name := r.name(st["name"])
	maxMs := msOf(st["max_ms"])
	go func() {
		defer close(p.done)
		err := c.Do(ctx, name, opts, func(ctx context.Context, l *Lease) error {
			p.token = l.FencingToken()
			close(p.bodyStarted)
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(maxMs):
				return nil
			}
		})
		p.result = map[string]any{"_done": time.Now()}
		p.err = err
	}()
	return nil
}

func (r *run) fencedWrite(ctx context.Context, st map[string]any) (map[string]any, error) {
	dsn, ok := r.dsns[fmt.Sprint(st["client"])]
	if !ok {
		return nil, fmt.Errorf("no client %v", st["client"])
	}
	conn, err := plainConn(ctx, dsn)
	if err != nil {
		return nil, &Error{Kind: ErrConnection, Message: err.Error(), Err: err}
	}
	defer conn.Close(ctx)
	token, _ := toInt(r.resolve(st["token"]))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, mapError(err, "", "")
	}
	defer tx.Rollback(ctx)
	if role, ok := st["role"].(string); ok {
		if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('role', $1, true)", role); err != nil {
			return nil, mapError(err, "", "")
		}
	}
	if lock, ok := st["lock"]; ok {
		if err := AssertHolds(ctx, tx, r.name(lock), token); err != nil {
			return nil, err
		}
	}
	if err := Fence(ctx, tx, r.name(st["resource"]), token); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO public.dlock_conformance_ledger (ns, writer, fencing_token) VALUES ($1, $2, $3)",
		r.ns, fmt.Sprint(st["writer"]), token); err != nil {
		return nil, mapError(err, "", "")
	}
	if out, err := Commit(ctx, tx); err != nil || out != Done {
		return nil, err
	}
	return map[string]any{"committed": true}, nil
}

func (r *run) sql(ctx context.Context, st map[string]any) (map[string]any, error) {
	conn := r.sessions[fmt.Sprint(st["session"])]
	if st["session"] == nil {
		var err error
		if conn, err = plainConn(ctx, r.env.admin); err != nil {
			return nil, err
		}
		defer conn.Close(ctx)
	} else if conn == nil {
		return nil, fmt.Errorf("no session %v", st["session"])
	}
	var args []any
	if ps, ok := st["params"].([]any); ok {
		for _, p := range ps {
			v := r.resolve(p)
			if n, ok := v.(json.Number); ok {
				v = n.String()
			}
			args = append(args, v)
		}
	}
	query := fmt.Sprint(st["query"])
	until, _ := st["until"].(string)
	deadline := time.Now().Add(msOf(st["within_ms"]))
	for {
		rows, names, err := queryRows(ctx, conn, query, args)
		if err != nil {
			return nil, mapError(err, "", "")
		}
		done := until == "" || (until == "rows" && len(rows) > 0) ||
			(until == "true" && len(rows) > 0 && len(rows[0]) > 0 && rows[0][0] == true)
		if done {
			res := map[string]any{"rows": rows}
			if len(rows) > 0 && len(rows[0]) > 0 {
				res["value"] = rows[0][0]
			} else {
				res["value"] = nil
			}
			if as, ok := st["as"].(string); ok {
				v := map[string]any{}
				if len(rows) > 0 {
					v[""] = rows[0][0]
					for i, f := range rows[0] {
						v[names[i]] = f
					}
				}
				r.set(as, v)
			}
			return res, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("sql: no result until %q within %v", until, msOf(st["within_ms"]))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func queryRows(ctx context.Context, conn *pgx.Conn, query string, args []any) ([][]any, []string, error) {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var names []string
	for _, fd := range rows.FieldDescriptions() {
		names = append(names, fd.Name)
	}
	var out [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, nil, err
		}
		out = append(out, vals)
	}
	return out, names, rows.Err()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// resetPooled drops prepared statements and session settings on both server
// connections of the pool of two: two transactions at once hold both.
func resetPooled(ctx context.Context, dsn string) error {
	var txs []pgx.Tx
	for i := 0; i < 2; i++ {
		c, err := pgx.Connect(ctx, dsn+" default_query_exec_mode=simple_protocol")
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DEALLOCATE ALL; RESET ALL"); err != nil {
			return err
		}
		txs = append(txs, tx)
	}
	for _, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}
