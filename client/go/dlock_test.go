package dlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The tests connect with the PG* environment (a server with pg_dlock);
// DLOCK_PGBOUNCER_PORT names a PgBouncer in transaction pooling in front of it
// (tests/lib/pgbouncer.sh: databases DB and DB_pool2).

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func admin(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

var seq atomic.Int64

func lockName(t *testing.T) string {
	return fmt.Sprintf("go-%s-%d-%d", t.Name(), os.Getpid(), seq.Add(1))
}

func mustAcquire(t *testing.T, c *Client, name string, opts LeaseOptions) *Lease {
	t.Helper()
	l, err := c.TryAcquire(context.Background(), name, opts)
	if err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	return l
}

func TestGrantRefusalReleaseAndHigherToken(t *testing.T) {
	ctx := context.Background()
	a, b := newClient(t, Options{}), newClient(t, Options{})
	name := lockName(t)
	l := mustAcquire(t, a, name, LeaseOptions{TTL: 10 * time.Second})
	if l.FencingToken() <= 0 || !l.Valid() || l.Name() != name {
		t.Fatalf("bad lease: %d %v %q", l.FencingToken(), l.Valid(), l.Name())
	}
	if _, err := b.TryAcquire(ctx, name, LeaseOptions{TTL: time.Second}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second owner: want ErrBusy, got %v", err)
	}
	if out := l.Release(ctx); out != Done {
		t.Fatalf("release: %v", out)
	}
	if out := l.Release(ctx); out != Refused {
		t.Fatalf("second release: %v", out)
	}
	l2 := mustAcquire(t, b, name, LeaseOptions{TTL: time.Second})
	defer l2.Release(ctx)
	if l2.FencingToken() <= l.FencingToken() {
		t.Fatalf("token did not grow: %d then %d", l.FencingToken(), l2.FencingToken())
	}
}

func TestSameOwnerRetryKeepsTheToken(t *testing.T) {
	c := newClient(t, Options{})
	name, owner := lockName(t), newOwnerToken()
	l1 := mustAcquire(t, c, name, LeaseOptions{TTL: 10 * time.Second, OwnerToken: owner, NoKeepAlive: true})
	l2 := mustAcquire(t, c, name, LeaseOptions{TTL: 10 * time.Second, OwnerToken: owner, NoKeepAlive: true})
	if l1.FencingToken() != l2.FencingToken() || l2.OwnerToken() != owner {
		t.Fatalf("retry changed the lease: %d/%s then %d/%s", l1.FencingToken(), l1.OwnerToken(),
			l2.FencingToken(), l2.OwnerToken())
	}
	l2.Release(context.Background())
}

func TestDeadlineIsNeverLaterThanTheServersLeaseUntil(t *testing.T) {
	c := newClient(t, Options{})
	l := mustAcquire(t, c, lockName(t), LeaseOptions{TTL: 5 * time.Second})
	defer l.Release(context.Background())
	if left, server := time.Until(l.Deadline()), time.Until(l.LeaseUntil()); left > server || left < 4*time.Second {
		t.Fatalf("deadline in %v, server's lease_until in %v", left, server)
	}
}

func TestLeaseGrantedAfterAWaitLongerThanItsTTLIsAlive(t *testing.T) {
	ctx := context.Background()
	a, b := newClient(t, Options{}), newClient(t, Options{})
	name := lockName(t)
	holder := mustAcquire(t, a, name, LeaseOptions{TTL: 30 * time.Second})
	time.AfterFunc(1500*time.Millisecond, func() { holder.Release(ctx) })
	l, err := b.Acquire(ctx, name, 5*time.Second, LeaseOptions{TTL: time.Second, NoKeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if !l.Valid() || l.TimeLeft() < 500*time.Millisecond {
		t.Fatalf("born lost: valid %v, left %v", l.Valid(), l.TimeLeft())
	}
}

func TestKeepAliveHoldsAcrossSeveralTTLs(t *testing.T) {
	c := newClient(t, Options{})
	l := mustAcquire(t, c, lockName(t), LeaseOptions{TTL: 600 * time.Millisecond})
	time.Sleep(2 * time.Second)
	held, err := Holds(context.Background(), admin(t), l.Name(), l.FencingToken())
	if err != nil || !held || !l.Valid() || c.Metrics().Renewals < 3 {
		t.Fatalf("held %v (%v), valid %v, renewals %d", held, err, l.Valid(), c.Metrics().Renewals)
	}
	if out := l.Release(context.Background()); out != Done {
		t.Fatalf("release: %v", out)
	}
}

func TestWithoutKeepAliveTheLeaseIsLostAtItsDeadline(t *testing.T) {
	c := newClient(t, Options{})
	var called atomic.Int32
	l := mustAcquire(t, c, lockName(t), LeaseOptions{TTL: 400 * time.Millisecond, NoKeepAlive: true,
		OnLost: func(*Lease, error) { called.Add(1) }})
	select {
	case <-l.LostC():
	case <-time.After(2 * time.Second):
		t.Fatal("not lost after its deadline")
	}
	if !errors.Is(l.Err(), ErrLost) || l.Valid() || called.Load() != 1 {
		t.Fatalf("err %v, valid %v, on_lost %d", l.Err(), l.Valid(), called.Load())
	}
}

// A lease forced away: the keep-alive's next renewal is refused, Do's context
// is cancelled, Do reports ErrLost, and the body that ignores it and writes
// with its old token after a takeover is refused by the fence.
func TestLostLeaseStopsTheBodyAndTheFenceRefusesTheOneThatIgnoresIt(t *testing.T) {
	ctx := context.Background()
	a, b := newClient(t, Options{}), newClient(t, Options{})
	adm := admin(t)
	name := lockName(t)
	resource := name + "/data"
	var stale int64
	stopped := make(chan time.Duration, 1)
	err := a.Do(ctx, name, LeaseOptions{TTL: 900 * time.Millisecond}, func(ctx context.Context, l *Lease) error {
		stale = l.FencingToken()
		if err := Fence(ctx, adm, resource, stale); err != nil {
			return err
		}
		forced := time.Now()
		if _, err := adm.Exec(ctx, "SELECT dlock.force_release($1, 'test')", name); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			stopped <- time.Since(forced)
			if !errors.Is(context.Cause(ctx), ErrLost) {
				return fmt.Errorf("cause %v", context.Cause(ctx))
			}
		case <-time.After(3 * time.Second):
			return errors.New("the body's context was not cancelled")
		}
		return nil
	})
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Do: want ErrLost, got %v", err)
	}
	if d := <-stopped; d > 900*time.Millisecond {
		t.Fatalf("body stopped %v after the loss", d)
	}
	l2 := mustAcquire(t, b, name, LeaseOptions{TTL: 5 * time.Second})
	defer l2.Release(ctx)
	if err := Fence(ctx, adm, resource, l2.FencingToken()); err != nil {
		t.Fatal(err)
	}
	err = Fence(ctx, adm, resource, stale)
	var pg *pgconn.PgError
	if !errors.Is(err, ErrStaleToken) || !errors.As(err, &pg) || pg.Code != "PD001" {
		t.Fatalf("stale fence: want ErrStaleToken/PD001, got %v", err)
	}
}

// The stale holder's fenced write is refused inside the caller's transaction,
// and the business row it tried to write is not there.
func TestFencedWriteWithAStaleTokenIsRefusedInTheCallersTransaction(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, Options{})
	adm := admin(t)
	name := lockName(t)
	table := "go_fenced_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(fmt.Sprint(os.Getpid())))
	if _, err := adm.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (k text, token bigint)"); err != nil {
		t.Fatal(err)
	}
	old := mustAcquire(t, c, name, LeaseOptions{TTL: 5 * time.Second, NoKeepAlive: true})
	if _, err := adm.Exec(ctx, "SELECT dlock.force_release($1, 'test')", name); err != nil {
		t.Fatal(err)
	}
	cur := mustAcquire(t, c, name, LeaseOptions{TTL: 5 * time.Second})
	defer cur.Release(ctx)
	write := func(token int64, key string) error {
		tx, err := adm.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := Fence(ctx, tx, name, token); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1, $2)", key, token); err != nil {
			return err
		}
		_, err = Commit(ctx, tx)
		return err
	}
	if err := write(cur.FencingToken(), name+"-new"); err != nil {
		t.Fatal(err)
	}
	if err := write(old.FencingToken(), name+"-old"); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("stale write: want ErrStaleToken, got %v", err)
	}
	if err := AssertHolds(ctx, adm, name, old.FencingToken()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("assert_holds of the old token: want ErrNotHeld, got %v", err)
	}
	var n int
	if err := adm.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE k = $1", name+"-old").Scan(&n); err != nil || n != 0 {
		t.Fatalf("stale row written: %d %v", n, err)
	}
	if out := old.Renew(ctx); out != Refused || !old.Lost() {
		t.Fatalf("stale renew: %v, lost %v", out, old.Lost())
	}
}

// An acquire whose server process is terminated while it waits has an
// unknown outcome: it is retried with the same owner token and returns the
// lease once the holder lets go.
func TestUnknownAcquireIsRetriedWithTheSameOwner(t *testing.T) {
	ctx := context.Background()
	a, b := newClient(t, Options{}), newClient(t, Options{Retry: Retry{MaxAttempts: 5, InitialBackoff: 200 * time.Millisecond}})
	adm := admin(t)
	name := lockName(t)
	holder := mustAcquire(t, a, name, LeaseOptions{TTL: 30 * time.Second})
	owner := newOwnerToken()
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			var n int
			_ = adm.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "+
				"WHERE query LIKE '%dlock.acquire(%' AND state = 'active' AND pid <> pg_backend_pid()").Scan(&n)
			if n > 0 {
				time.Sleep(300 * time.Millisecond)
				holder.Release(ctx)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	l, err := b.Acquire(ctx, name, 10*time.Second, LeaseOptions{TTL: 10 * time.Second, OwnerToken: owner})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	m := b.Metrics()
	if l.OwnerToken() != owner || m.UnknownOutcomes < 1 || m.Retries < 1 || m.Acquisitions != 1 {
		t.Fatalf("owner %s (want %s), metrics %+v", l.OwnerToken(), owner, m)
	}
}

func TestAWaitThatRunsOutIsBusy(t *testing.T) {
	ctx := context.Background()
	a, b := newClient(t, Options{}), newClient(t, Options{})
	name := lockName(t)
	l := mustAcquire(t, a, name, LeaseOptions{TTL: 10 * time.Second})
	defer l.Release(ctx)
	started := time.Now()
	_, err := b.Acquire(ctx, name, 400*time.Millisecond, LeaseOptions{TTL: time.Second})
	var e *Error
	if !errors.Is(err, ErrBusy) || !errors.As(err, &e) || e.SQLState != "55P03" || time.Since(started) < 400*time.Millisecond {
		t.Fatalf("want ErrBusy/55P03 after the wait, got %v after %v", err, time.Since(started))
	}
}

func TestBadArgumentsAreTypedErrors(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, Options{})
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"", time.Second}, {strings.Repeat("x", 201), time.Second}, {lockName(t), -time.Second}} {
		_, err := c.TryAcquire(ctx, tc.name, LeaseOptions{TTL: tc.ttl})
		var e *Error
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || e.SQLState != "22023" {
			t.Fatalf("%q/%v: want ErrInvalidArgument 22023, got %v", tc.name, tc.ttl, err)
		}
	}
	if _, err := c.Acquire(ctx, lockName(t), -time.Second, LeaseOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative wait: %v", err)
	}
}

func TestEveryCallIsBoundedByItsStatementTimeout(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, Options{CallTimeout: 500 * time.Millisecond})
	adm := admin(t)
	name := lockName(t)
	l := mustAcquire(t, c, name, LeaseOptions{TTL: 10 * time.Second})
	// A pin held by another transaction makes the release wait for the row.
	tx, err := adm.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := Holds(ctx, tx, name, l.FencingToken()); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	out := l.Release(ctx)
	if d := time.Since(started); out != Unknown || d > 2500*time.Millisecond {
		t.Fatalf("release behind a pin: %v after %v", out, d)
	}
}

// Behind PgBouncer in transaction pooling.

func bouncer(t *testing.T, db string) string {
	port := os.Getenv("DLOCK_PGBOUNCER_PORT")
	if port == "" {
		t.Skip("DLOCK_PGBOUNCER_PORT not set: no PgBouncer")
	}
	return fmt.Sprintf("host=127.0.0.1 port=%s user=postgres dbname=%s", port, db)
}

func TestDetectFindsThePoolerAndLeavesNoSessionState(t *testing.T) {
	ctx := context.Background()
	db := os.Getenv("PGDATABASE")
	resetPool(t, bouncer(t, db+"_pool2"))
	defer resetPool(t, bouncer(t, db+"_pool2"))
	for _, control := range []bool{false, true} {
		// A timeout of its own, told apart from what other tests left in the pool.
		opts := Options{ConnString: bouncer(t, db+"_pool2"), CallTimeout: 4123 * time.Millisecond}
		if control {
			opts.Pooling = PoolingNone // the negative control: session settings behind a pooler
		}
		c := newClient(t, opts)
		for i := 0; i < 4; i++ {
			l, err := c.TryAcquire(ctx, lockName(t), LeaseOptions{TTL: 5 * time.Second})
			if err != nil && !control {
				t.Fatal(err)
			}
			// the control's named statements may meet their own leftovers: that is its point
			if err == nil {
				l.Release(ctx)
			}
		}
		if !control && c.pooledSeen.Load() != 2 {
			t.Fatal("detect did not find the pooler")
		}
		c.Close()
		leaked := false
		for i := 0; i < 6; i++ {
			conn, err := pgconn.Connect(ctx, bouncer(t, db+"_pool2"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := conn.Exec(ctx, "SHOW statement_timeout").ReadAll()
			conn.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if v := string(res[0].Rows[0][0]); v == "4123ms" {
				leaked = true
			}
		}
		if leaked != control {
			t.Fatalf("control %v: a pooled server connection kept statement_timeout: %v", control, leaked)
		}
	}
}

// resetPool resets statement_timeout on both server connections of the pool
// of two: two transactions at once hold both.
func resetPool(t *testing.T, conn string) {
	ctx := context.Background()
	var txs []pgx.Tx
	for i := 0; i < 2; i++ {
		c, err := pgx.Connect(ctx, conn+" default_query_exec_mode=simple_protocol")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "DEALLOCATE ALL; RESET statement_timeout"); err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
	}
	for _, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFiveClientsTakeTurnsBehindAPoolOfTwo(t *testing.T) {
	ctx := context.Background()
	conn := bouncer(t, os.Getenv("PGDATABASE")+"_pool2")
	name := lockName(t)
	var wg sync.WaitGroup
	var inside, overlaps, ok atomic.Int32
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := New(ctx, Options{ConnString: conn, PollInterval: 100 * time.Millisecond})
			if err != nil {
				return
			}
			defer c.Close()
			err = c.Do(ctx, name, LeaseOptions{TTL: 3 * time.Second, Wait: 15 * time.Second},
				func(ctx context.Context, l *Lease) error {
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(200 * time.Millisecond)
					inside.Add(-1)
					return nil
				})
			if err == nil {
				ok.Add(1)
			} else {
				t.Log(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 || overlaps.Load() != 0 {
		t.Fatalf("%d of 5 ran, %d overlaps", ok.Load(), overlaps.Load())
	}
}

// A pooled connection the server closed while it was idle is dropped when it
// is taken: the release that follows is done, not unknown.
func TestAConnectionClosedWhileIdleIsDroppedFromThePool(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, Options{Holder: "idle-" + lockName(t)})
	adm := admin(t)
	l := mustAcquire(t, c, lockName(t), LeaseOptions{TTL: 30 * time.Second, NoKeepAlive: true})
	var n int
	if err := adm.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "+
		"WHERE pid <> pg_backend_pid() AND query LIKE '%dlock.try_acquire%' AND state = 'idle' "+
		"AND datname = current_database()").Scan(&n); err != nil || n < 1 {
		t.Fatalf("terminated %d idle connections: %v", n, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if out := l.Release(ctx); out != Done {
		t.Fatalf("release after the idle connection was closed: %v", out)
	}
}
