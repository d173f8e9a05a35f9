package dlock

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Lease is a lock held with a fencing token. Its observers may be called from
// any goroutine; Renew and Release from one at a time.
type Lease struct {
	c           *Client
	name, owner string
	token       int64
	ttl, every  time.Duration
	onLost      func(*Lease, error)
	lostCtx     context.Context
	markLost    context.CancelCauseFunc
	mu          sync.Mutex
	deadline    time.Time
	leaseUntil  time.Time
	released    bool
	timer       *time.Timer
	stopKeep    chan struct{}
	keepDone    chan struct{}
	renewing    sync.Mutex // one renewal at a time (keep-alive or Renew)
	losing      bool
}

func (c *Client) newLease(row [][]byte, opts LeaseOptions, sent, received time.Time) (*Lease, error) {
	token, err := strconv.ParseInt(string(row[2]), 10, 64)
	if err != nil {
		return nil, err
	}
	until, err := parseFloat(row[3])
	if err != nil {
		return nil, err
	}
	waited, err := parseFloat(row[4])
	if err != nil {
		return nil, err
	}
	l := &Lease{c: c, name: string(row[0]), owner: string(row[1]), token: token, ttl: opts.TTL,
		every: opts.RenewEvery, onLost: opts.OnLost}
	if l.every <= 0 {
		l.every = max(opts.TTL/3, time.Millisecond)
	}
	l.lostCtx, l.markLost = context.WithCancelCause(context.Background())
	l.deadline = c.deadline(sent, received, waited, opts.TTL)
	l.leaseUntil = time.UnixMicro(int64(until * 1e6))
	// The deadline's watcher: loss is reported at the deadline even while a
	// renewal hangs.
	l.timer = time.AfterFunc(time.Until(l.deadline), l.checkDeadline)
	if !opts.NoKeepAlive {
		l.stopKeep = make(chan struct{})
		l.keepDone = make(chan struct{})
		go l.keepAlive()
	}
	return l, nil
}

// Name, FencingToken, OwnerToken: what the lease is.
func (l *Lease) Name() string        { return l.name }
func (l *Lease) FencingToken() int64 { return l.token }
func (l *Lease) OwnerToken() string  { return l.owner }

// Deadline on the client's monotonic clock; the server's lease_until is later.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// LeaseUntil is the server's lease_until as last read.
func (l *Lease) LeaseUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaseUntil
}

// TimeLeft until the deadline (0 once lost or released).
func (l *Lease) TimeLeft() time.Duration {
	if !l.Valid() {
		return 0
	}
	return max(0, time.Until(l.Deadline()))
}

// Valid: neither lost nor released, and before its deadline.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && !l.losing && time.Now().Before(l.deadline)
}

// Lost: the lease was lost (a renewal refused, or its deadline passed).
func (l *Lease) Lost() bool { return l.lostCtx.Err() != nil }

// Err is nil while the lease is not lost, else an error matching ErrLost.
func (l *Lease) Err() error {
	if l.lostCtx.Err() == nil {
		return nil
	}
	return context.Cause(l.lostCtx)
}

// LostC is closed when the lease is lost (never after a release).
func (l *Lease) LostC() <-chan struct{} { return l.lostCtx.Done() }

func (l *Lease) lose(reason string) {
	l.mu.Lock()
	if l.released || l.losing {
		l.mu.Unlock()
		return
	}
	l.losing = true
	l.mu.Unlock()
	err := &Error{Kind: ErrLost, Subject: l.name, Message: reason}
	l.c.m.lost.Add(1)
	if l.onLost != nil {
		l.onLost(l, err)
	}
	l.markLost(err) // after OnLost: LostC is closed once it ran
}

func (l *Lease) checkDeadline() {
	l.mu.Lock()
	d := l.deadline
	l.mu.Unlock()
	if now := time.Now(); now.Before(d) {
		l.timer.Reset(d.Sub(now))
		return
	}
	l.lose("its deadline passed without a confirmed renewal")
}

// keepAlive renews every `every`; a refused renewal loses the lease at once;
// an unknown one is retried on a fresh connection until the deadline.
func (l *Lease) keepAlive() {
	defer close(l.keepDone)
	next := time.Now().Add(l.every)
	for {
		select {
		case <-l.stopKeep:
			return
		case <-l.lostCtx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		for attempt := 0; ; attempt++ {
			out := l.renewOnce()
			if out == Done {
				next = time.Now().Add(l.every)
				break
			}
			if out == Refused {
				l.lose("a renewal was refused")
				return
			}
			// Unknown: try again shortly, until the deadline's watcher says lost.
			select {
			case <-l.stopKeep:
				return
			case <-l.lostCtx.Done():
				return
			case <-time.After(min(l.c.backoff(attempt+1), max(time.Millisecond, time.Until(l.Deadline())))):
			}
		}
	}
}

// renewOnce is one renewal, bounded by the time left and CallTimeout.
func (l *Lease) renewOnce() Outcome {
	l.renewing.Lock()
	defer l.renewing.Unlock()
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released || l.Lost() {
		return Refused
	}
	bound := min(l.c.opts.CallTimeout, max(time.Millisecond, time.Until(l.Deadline())))
	ctx, cancel := context.WithTimeout(context.Background(), bound+time.Second)
	defer cancel()
	sent := time.Now()
	rows, doubt, err := l.c.call(ctx, bound, sqlRenew, []byte(l.name), []byte(l.owner), msArg(l.ttl))
	received := time.Now()
	if err != nil || doubt {
		l.c.m.unknown.Add(1)
		return Unknown
	}
	if len(rows) != 1 || rows[0][0] == nil {
		l.c.m.renewalsRefused.Add(1)
		return Refused
	}
	until, err1 := parseFloat(rows[0][0])
	waited, err2 := parseFloat(rows[0][1])
	if err1 != nil || err2 != nil {
		return Unknown
	}
	l.c.m.renewals.Add(1)
	l.mu.Lock()
	l.deadline = l.c.deadline(sent, received, waited, l.ttl)
	l.leaseUntil = time.UnixMicro(int64(until * 1e6))
	l.mu.Unlock()
	return Done
}

// Renew extends the lease by its ttl now: Done, Refused (the lease is lost
// from then on) or Unknown.
func (l *Lease) Renew(ctx context.Context) Outcome {
	out := l.renewOnce()
	if out == Refused {
		l.lose("a renewal was refused")
	}
	return out
}

// Release stops the keep-alive (waiting at most CallTimeout for a renewal in
// flight) and releases the lease: Done, Refused (it was no longer held) or
// Unknown. A second call returns Refused.
func (l *Lease) Release(ctx context.Context) Outcome {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return Refused
	}
	l.released = true
	l.mu.Unlock()
	l.timer.Stop()
	if l.stopKeep != nil {
		close(l.stopKeep)
		select {
		case <-l.keepDone:
		case <-time.After(l.c.opts.CallTimeout):
		}
	}
	rctx, cancel := context.WithTimeout(ctx, l.c.opts.CallTimeout+time.Second)
	defer cancel()
	rows, doubt, err := l.c.call(rctx, l.c.opts.CallTimeout, sqlRelease, []byte(l.name), []byte(l.owner))
	l.c.m.releases.Add(1)
	if err != nil || doubt {
		l.c.m.unknown.Add(1)
		return Unknown
	}
	if len(rows) == 1 && string(rows[0][0]) == "t" {
		return Done
	}
	return Refused
}
