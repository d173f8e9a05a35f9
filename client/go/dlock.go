// Package dlock is the Go client of pg_dlock, distributed leases with fencing
// tokens kept by PostgreSQL.
//
//	locks, err := dlock.New(ctx, dlock.Options{}) // connection from PG*
//	err = locks.Do(ctx, "nightly-export", dlock.LeaseOptions{TTL: 10 * time.Second, Wait: 5 * time.Second},
//		func(ctx context.Context, l *dlock.Lease) error {
//			// ctx is cancelled the moment the lease is lost
//			return export(ctx, l.FencingToken())
//		})
//
// A lease knows its deadline on the client's monotonic clock, counted from
// when the request left; a keep-alive renews it and cancels the body's context
// when a renewal is refused or the deadline passes. Calls return done, refused
// or unknown, never a guess; an acquire whose outcome is unknown is retried
// with the same owner token. Errors are *Error values matched with errors.Is
// (ErrBusy, ErrStaleToken, ErrNotHeld, ErrUnknownOutcome, ...).
package dlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Version is the project's version, carried by every package of pg_dlock.
const Version = "1.6.0"

// Pooling says whether a connection pooler stands between client and server.
type Pooling int

const (
	// PoolingDetect finds out at each connection's first call (the default).
	PoolingDetect Pooling = iota
	// PoolingNone: a direct connection; statements prepared by name, session settings.
	PoolingNone
	// PoolingTransaction: PgBouncer in transaction pooling; self-contained calls.
	PoolingTransaction
)

// WaitMode says where an acquire with a wait waits.
type WaitMode int

const (
	// WaitAuto waits in the server on a direct connection and in the client behind a pooler.
	WaitAuto WaitMode = iota
	// WaitServer always waits in the server (dlock.acquire, first come first served).
	WaitServer
	// WaitPoll always waits in the client, trying again after jittered sleeps.
	WaitPoll
)

// Outcome of a call that changes a lease.
type Outcome int

const (
	// Done: the server confirmed it.
	Done Outcome = iota
	// Refused: the server said no (the lease was no longer held).
	Refused
	// Unknown: it may or may not have taken effect.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Done:
		return "done"
	case Refused:
		return "refused"
	default:
		return "unknown"
	}
}

// Retry bounds the retries of an acquire whose outcome is unknown.
type Retry struct {
	MaxAttempts    int           // default 5
	InitialBackoff time.Duration // default 50 ms
	MaxBackoff     time.Duration // default 2 s
}

// Options of a Client; the zero value takes the defaults.
type Options struct {
	// ConnString is a libpq-style connection string or URL; empty: the PG* environment.
	ConnString string
	// Holder describes this process in dlock.locks (default hostname:pid).
	Holder string
	// CallTimeout is the statement_timeout of every call (default 5 s); an acquire's wait adds to it.
	CallTimeout time.Duration
	// NetworkTimeout bounds connecting and TCP keepalives (default 10 s).
	NetworkTimeout time.Duration
	// DriftAllowance is the share of a lease given up for clock rate differences (default 0.01).
	DriftAllowance float64
	// SafetyMargin is taken off every deadline (default 50 ms).
	SafetyMargin time.Duration
	Retry        Retry
	Pooling      Pooling
	WaitMode     WaitMode
	// PollInterval is the longest sleep between two tries of a client-side wait (default 500 ms).
	PollInterval time.Duration
}

// LeaseOptions of one lease.
type LeaseOptions struct {
	TTL time.Duration // default 30 s
	// Wait: how long Do waits for the lock (0: one try, ErrBusy when held).
	Wait time.Duration
	// RenewEvery: the keep-alive's interval (default TTL/3).
	RenewEvery time.Duration
	// NoKeepAlive: no renewals; the lease ends at its deadline.
	NoKeepAlive bool
	Holder      string
	// OwnerToken: the owner token to acquire with (default: a new random UUID).
	OwnerToken string
	// OnLost runs once, on the keep-alive's goroutine, when the lease is lost.
	OnLost func(l *Lease, cause error)
}

// Metrics counts what the client did.
type Metrics struct {
	Acquisitions, Busy, Renewals, RenewalsRefused, Releases, Lost, UnknownOutcomes, Retries int64
}

// Client is safe for concurrent use. Each call takes one of its own
// connections; a lease's keep-alive renews on connections of the same pool.
type Client struct {
	opts   Options
	pgcfg  *pgconn.Config
	pool   pool
	closed atomic.Bool
	m      struct {
		acquisitions, busy, renewals, renewalsRefused, releases, lost, unknown, retries atomic.Int64
	}
	pooledSeen atomic.Int32 // 0 unknown, 1 direct, 2 pooled
}

// New makes a client; it connects on the first call.
func New(ctx context.Context, opts Options) (*Client, error) {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 5 * time.Second
	}
	if opts.NetworkTimeout <= 0 {
		opts.NetworkTimeout = 10 * time.Second
	}
	if opts.DriftAllowance <= 0 {
		opts.DriftAllowance = 0.01
	}
	if opts.SafetyMargin <= 0 {
		opts.SafetyMargin = 50 * time.Millisecond
	}
	if opts.Retry.MaxAttempts <= 0 {
		opts.Retry.MaxAttempts = 5
	}
	if opts.Retry.InitialBackoff <= 0 {
		opts.Retry.InitialBackoff = 50 * time.Millisecond
	}
	if opts.Retry.MaxBackoff <= 0 {
		opts.Retry.MaxBackoff = 2 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.Holder == "" {
		host, _ := os.Hostname()
		opts.Holder = host + ":" + strconv.Itoa(os.Getpid())
	}
	cfg, err := pgconn.ParseConfig(opts.ConnString)
	if err != nil {
		return nil, &Error{Kind: ErrInvalidArgument, Message: err.Error(), Err: err}
	}
	cfg.DialFunc = dialer(opts.NetworkTimeout).DialContext
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = opts.NetworkTimeout
	}
	return &Client{opts: opts, pgcfg: cfg}, nil
}

// Close closes the idle connections. Leases still held keep their own state.
func (c *Client) Close() {
	c.closed.Store(true)
	c.pool.closeAll()
}

// Metrics returns the counters.
func (c *Client) Metrics() Metrics {
	return Metrics{c.m.acquisitions.Load(), c.m.busy.Load(), c.m.renewals.Load(), c.m.renewalsRefused.Load(),
		c.m.releases.Load(), c.m.lost.Load(), c.m.unknown.Load(), c.m.retries.Load()}
}

// call runs stmt on a connection of the pool, bounded by `bound` in the
// server and bound + NetworkTimeout on the client. A connection that broke is
// dropped. uncertain reports a commit that is only local.
func (c *Client) call(ctx context.Context, bound time.Duration, stmt string, args ...[]byte) (rows [][][]byte,
	uncertain bool, err error) {
	s := c.pool.get()
	if s == nil {
		if s, err = newSession(ctx, c); err != nil {
			return nil, false, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, bound+c.opts.NetworkTimeout)
	defer cancel()
	rows, err = s.run(cctx, c.opts.Pooling, bound, stmt, args...)
	if s.pooled {
		c.pooledSeen.Store(2)
	} else if s.settled {
		c.pooledSeen.Store(1)
	}
	uncertain = s.uncertain
	if err != nil && isUnknown(err) {
		s.close()
	} else {
		c.pool.put(s)
	}
	return rows, uncertain, err
}

// waitsInClient: whether an acquire with a wait polls from the client.
func (c *Client) waitsInClient(ctx context.Context) bool {
	switch c.opts.WaitMode {
	case WaitServer:
		return false
	case WaitPoll:
		return true
	}
	switch c.opts.Pooling {
	case PoolingNone:
		return false
	case PoolingTransaction:
		return true
	}
	if seen := c.pooledSeen.Load(); seen != 0 {
		return seen == 2
	}
	// Find out on a connection the first try would most likely get.
	s := c.pool.get()
	if s == nil {
		var err error
		if s, err = newSession(ctx, c); err != nil {
			return true // the try reports what is wrong
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout+c.opts.NetworkTimeout)
	defer cancel()
	if err := s.settle(cctx, c.opts.Pooling); err != nil {
		s.close()
		return true
	}
	c.pool.put(s)
	if s.pooled {
		c.pooledSeen.Store(2)
	} else {
		c.pooledSeen.Store(1)
	}
	return s.pooled
}

func newOwnerToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func jitter(bound time.Duration, low float64) time.Duration {
	if bound <= 0 {
		return 0
	}
	lo := int64(float64(bound) * low)
	n, _ := rand.Int(rand.Reader, big.NewInt(int64(bound)-lo+1))
	return time.Duration(lo + n.Int64())
}

// backoff: full jitter, uniform in [0, min(max, initial * 2^(retry-1))].
func (c *Client) backoff(retry int) time.Duration {
	bound := c.opts.Retry.InitialBackoff
	for i := 1; i < retry && bound < c.opts.Retry.MaxBackoff; i++ {
		bound *= 2
	}
	if bound > c.opts.Retry.MaxBackoff {
		bound = c.opts.Retry.MaxBackoff
	}
	return jitter(bound, 0)
}

const leaseColumns = "SELECT l.lock_name, l.owner_token::text, l.fencing_token, " +
	"pg_catalog.date_part('epoch', l.lease_until), " +
	"pg_catalog.date_part('epoch', l.lease_until - $2::bigint * interval '1 millisecond' " +
	"- pg_catalog.statement_timestamp()) * 1000 "

const (
	sqlTryAcquire = leaseColumns +
		"FROM dlock.try_acquire($1, $2::bigint * interval '1 millisecond', $3::uuid, NULLIF($4::text, '')) l"
	sqlAcquire = leaseColumns +
		"FROM dlock.acquire($1, $2::bigint * interval '1 millisecond', $5::bigint * interval '1 millisecond', " +
		"$3::uuid, NULLIF($4::text, '')) l"
	sqlRenew = "SELECT pg_catalog.date_part('epoch', r.lease_until), " +
		"pg_catalog.date_part('epoch', r.lease_until - $3::bigint * interval '1 millisecond' " +
		"- pg_catalog.statement_timestamp()) * 1000 " +
		"FROM dlock.renew($1, $2::uuid, $3::bigint * interval '1 millisecond') AS r(lease_until)"
	sqlRelease = "SELECT dlock.release($1, $2::uuid)"
)

func msArg(d time.Duration) []byte { return []byte(strconv.FormatInt(d.Milliseconds(), 10)) }

// TryAcquire takes the lock if it is free: ErrBusy when another owner holds a
// live lease.
func (c *Client) TryAcquire(ctx context.Context, name string, opts LeaseOptions) (*Lease, error) {
	return c.acquire(ctx, name, -1, opts)
}

// Acquire waits up to wait for the lock (in the server on a direct connection,
// in the client behind a transaction pooler: Options.WaitMode); ErrBusy when
// the wait runs out.
func (c *Client) Acquire(ctx context.Context, name string, wait time.Duration, opts LeaseOptions) (*Lease, error) {
	if wait < 0 {
		return nil, &Error{Kind: ErrInvalidArgument, Subject: name, Message: "wait must not be negative"}
	}
	return c.acquire(ctx, name, wait, opts)
}

func (c *Client) acquire(ctx context.Context, name string, wait time.Duration, opts LeaseOptions) (*Lease, error) {
	if opts.TTL == 0 {
		opts.TTL = 30 * time.Second
	}
	owner := opts.OwnerToken
	if owner == "" {
		owner = newOwnerToken()
	}
	started := time.Now()
	if wait < 0 || !c.waitsInClient(ctx) {
		l, err := c.acquireOnce(ctx, name, wait, opts, owner, started)
		if err == nil && l == nil {
			c.m.busy.Add(1)
			return nil, &Error{Kind: ErrBusy, Subject: name, Message: "another owner holds a live lease"}
		}
		return l, err
	}
	// Client-side wait: no server connection is held between tries.
	until := started.Add(wait)
	bound := 20 * time.Millisecond
	for {
		l, err := c.acquireOnce(ctx, name, -1, opts, owner, started)
		if err != nil || l != nil {
			return l, err
		}
		now := time.Now()
		if !now.Before(until) {
			c.m.busy.Add(1)
			return nil, &Error{Kind: ErrBusy, Subject: name, SQLState: "55P03", Message: "the wait ran out"}
		}
		sleep := min(jitter(bound, 0.5), until.Sub(now))
		select {
		case <-ctx.Done():
			return nil, mapError(ctx.Err(), name, "")
		case <-time.After(sleep):
		}
		bound = min(bound*2, c.opts.PollInterval)
	}
}

// acquireOnce is one try (wait < 0: try_acquire), retried with the same owner
// token while its outcome is unknown. nil, nil: busy.
func (c *Client) acquireOnce(ctx context.Context, name string, wait time.Duration, opts LeaseOptions, owner string,
	started time.Time) (*Lease, error) {
	holder := opts.Holder
	if holder == "" {
		holder = c.opts.Holder
	}
	uncertain := false
	var last error
	for attempt := 0; attempt < c.opts.Retry.MaxAttempts; attempt++ {
		if attempt > 0 {
			c.m.retries.Add(1)
			select {
			case <-ctx.Done():
				return nil, &Error{Kind: ErrUnknownOutcome, Subject: name, OwnerToken: owner,
					Message: "canceled while the outcome of the acquire was unknown", Err: ctx.Err()}
			case <-time.After(c.backoff(attempt)):
			}
		}
		sent := time.Now()
		var rows [][][]byte
		var err error
		var doubt bool
		if wait < 0 {
			rows, doubt, err = c.call(ctx, c.opts.CallTimeout, sqlTryAcquire, []byte(name), msArg(opts.TTL),
				[]byte(owner), []byte(holder))
		} else {
			left := max(0, wait-sent.Sub(started))
			rows, doubt, err = c.call(ctx, left+c.opts.CallTimeout, sqlAcquire, []byte(name), msArg(opts.TTL),
				[]byte(owner), []byte(holder), msArg(left))
		}
		received := time.Now()
		if err != nil {
			if nothingSent(err) && !uncertain {
				return nil, mapError(err, name, owner)
			}
			if nothingSent(err) || isUnknown(err) {
				c.m.unknown.Add(1)
				uncertain = true
				last = err
				continue
			}
			return nil, mapError(err, name, owner)
		}
		if doubt {
			c.m.unknown.Add(1)
			uncertain = true
			last = errors.New("commit only local: synchronous replication wait canceled")
			continue
		}
		if len(rows) != 1 || rows[0][2] == nil {
			return nil, nil
		}
		l, err := c.newLease(rows[0], opts, sent, received)
		if err != nil {
			return nil, mapError(err, name, owner)
		}
		c.m.acquisitions.Add(1)
		return l, nil
	}
	return nil, &Error{Kind: ErrUnknownOutcome, Subject: name, OwnerToken: owner,
		Message: fmt.Sprintf("outcome of the acquire is unknown after %d attempts", c.opts.Retry.MaxAttempts),
		Err:     last}
}

// deadline counts from the send: sent + waited + ttl - (waited+ttl)*drift -
// margin, where waited is the server's own wait before the grant (lease_until
// - ttl - statement_timestamp()), capped at the measured round trip.
func (c *Client) deadline(sent, received time.Time, waitedMs float64, ttl time.Duration) time.Time {
	rt := float64(received.Sub(sent)) / float64(time.Millisecond)
	waited := max(0, min(waitedMs, rt))
	span := waited + float64(ttl)/float64(time.Millisecond)
	local := span - span*c.opts.DriftAllowance - float64(c.opts.SafetyMargin)/float64(time.Millisecond)
	return sent.Add(time.Duration(local * float64(time.Millisecond)))
}

func parseFloat(b []byte) (float64, error) { return strconv.ParseFloat(string(b), 64) }

// Do acquires name (waiting up to opts.Wait), runs fn with a context that is
// cancelled when the lease is lost, and releases the lease. It returns fn's
// error; when the lease was lost while fn ran, an error that matches ErrLost
// too (fn may have worked without the lock: fence its writes); when the
// release's outcome is unknown, one that matches ErrUnknownOutcome.
func (c *Client) Do(ctx context.Context, name string, opts LeaseOptions, fn func(ctx context.Context, l *Lease) error) error {
	var l *Lease
	var err error
	if opts.Wait > 0 {
		l, err = c.Acquire(ctx, name, opts.Wait, opts)
	} else {
		l, err = c.TryAcquire(ctx, name, opts)
	}
	if err != nil {
		return err
	}
	body, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.lostCtx, func() { cancel(l.Err()) })
	defer stop()
	ferr := fn(body, l)
	out := l.Release(context.Background())
	var errs []error
	if ferr != nil {
		errs = append(errs, ferr)
	}
	if lost := l.Err(); lost != nil {
		errs = append(errs, lost)
	} else if out == Unknown {
		errs = append(errs, &Error{Kind: ErrUnknownOutcome, Subject: name, Message: "release not confirmed"})
	}
	return errors.Join(errs...)
}
