package dlock

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// connectionCheckInterval: how soon the server notices, while a call runs (an
// acquire waiting), that the client went away, and gives the call up.
const connectionCheckInterval = time.Second

// session is one of the client's own connections. On a direct connection it
// prepares the statements by name and keeps statement_timeout and
// client_connection_check_interval as session settings; behind a transaction
// pooler (detected at its first call, or said in Options.Pooling) every call
// is self-contained: one pipeline of unnamed statements, the settings made
// with set_config(..., true) (SET LOCAL) in the call's own implicit
// transaction, ended by one Sync.
type session struct {
	conn      *pgconn.PgConn
	pooled    bool
	settled   bool
	timeout   time.Duration // the session's statement_timeout (direct)
	prepared  map[string]string
	uncertain bool      // a notice said a commit is only local
	idleSince time.Time // when it went back to the pool
}

func newSession(ctx context.Context, c *Client) (*session, error) {
	cfg := c.pgcfg.Copy()
	s := &session{prepared: map[string]string{}, timeout: c.opts.CallTimeout,
		pooled: c.opts.Pooling == PoolingTransaction}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if commitUncertainNotice(n.Message) || commitUncertainNotice(n.Detail) {
			s.uncertain = true
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.NetworkTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, &Error{Kind: ErrConnection, Message: err.Error(), Err: err}
	}
	s.conn = conn
	return s, nil
}

// commitUncertainNotice: PostgreSQL's warning that a commit canceled its wait
// for synchronous replication (COMMIT still reports success; it is only local).
func commitUncertainNotice(m string) bool {
	return strings.Contains(m, "synchronous replication") || strings.Contains(m, "committed locally")
}

func ms(d time.Duration) string {
	v := d.Milliseconds()
	if v < 1 {
		v = 1
	}
	return strconv.FormatInt(v, 10)
}

// settle makes the session settings on a direct connection, or finds out that
// a pooler stands in between: the settings are made only WHERE
// pg_backend_pid() is the process id the connection was given at its start;
// a pooler hands out its own, so no row comes back and nothing was set.
func (s *session) settle(ctx context.Context, pooling Pooling) error {
	if s.pooled || s.settled {
		return nil
	}
	text := "SELECT pg_catalog.set_config('statement_timeout', '" + ms(s.timeout) +
		"', false), pg_catalog.set_config('client_connection_check_interval', '" + ms(connectionCheckInterval) +
		"', false)"
	if pooling == PoolingDetect {
		text += " WHERE pg_catalog.pg_backend_pid() = " + strconv.FormatUint(uint64(s.conn.PID()), 10)
	}
	res, err := s.conn.Exec(ctx, text).ReadAll()
	if err != nil {
		return err
	}
	if len(res) != 1 || len(res[0].Rows) == 0 {
		s.pooled = true
		return nil
	}
	s.settled = true
	return nil
}

const localSettings = "SELECT pg_catalog.set_config('statement_timeout', $1, true), " +
	"pg_catalog.set_config('client_connection_check_interval', $2, true)"

// run sends one call bounded by `bound` (its statement_timeout) and returns
// its rows (text format). ctx bounds the wait for the answer on the client.
func (s *session) run(ctx context.Context, pooling Pooling, bound time.Duration, stmt string,
	args ...[]byte) ([][][]byte, error) {
	s.uncertain = false
	if err := s.settle(ctx, pooling); err != nil {
		return nil, err
	}
	batch := &pgconn.Batch{}
	if s.pooled {
		batch.ExecParams(localSettings, [][]byte{[]byte(ms(bound)), []byte(ms(connectionCheckInterval))},
			nil, nil, nil)
		batch.ExecParams(stmt, args, nil, nil, nil)
	} else {
		name, err := s.prepare(ctx, stmt)
		if err != nil {
			return nil, err
		}
		if ms(bound) != ms(s.timeout) {
			set, err := s.prepare(ctx, localSettings)
			if err != nil {
				return nil, err
			}
			batch.ExecPrepared(set, [][]byte{[]byte(ms(bound)), []byte(ms(connectionCheckInterval))}, nil, nil)
		}
		batch.ExecPrepared(name, args, nil, nil)
	}
	res, err := s.conn.ExecBatch(ctx, batch).ReadAll()
	if err != nil {
		return nil, err
	}
	last := res[len(res)-1]
	if last.Err != nil {
		return nil, last.Err
	}
	return last.Rows, nil
}

// prepare names a statement after the function it calls ("dlock.acquire"),
// so that pg_stat_activity shows it.
func (s *session) prepare(ctx context.Context, stmt string) (string, error) {
	if name, ok := s.prepared[stmt]; ok {
		return name, nil
	}
	name := "dlock"
	if at := strings.Index(stmt, "dlock."); at >= 0 {
		end := strings.IndexByte(stmt[at:], '(')
		if end > 0 {
			name = stmt[at : at+end]
		}
	}
	name += " " + strconv.Itoa(len(s.prepared)+1)
	if _, err := s.conn.Prepare(ctx, name, stmt, nil); err != nil {
		return "", err
	}
	s.prepared[stmt] = name
	return name, nil
}

func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.conn.Close(ctx)
}

// pool keeps up to four idle sessions.
type pool struct {
	mu   sync.Mutex
	idle []*session
}

// get returns an idle session, or nil. One idle for a second or more is
// checked first (a read that does not wait), so that a connection the server
// closed meanwhile (terminated, restarted) is dropped here instead of turning
// the next call's outcome unknown.
func (p *pool) get() *session {
	for {
		p.mu.Lock()
		if len(p.idle) == 0 {
			p.mu.Unlock()
			return nil
		}
		s := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
		if s.conn.IsClosed() {
			continue
		}
		if time.Since(s.idleSince) >= time.Second && s.conn.CheckConn() != nil { //nolint:staticcheck // a read, not a round trip
			s.close()
			continue
		}
		return s
	}
}

func (p *pool) put(s *session) {
	if s.conn.IsClosed() || s.conn.TxStatus() != 'I' {
		s.close()
		return
	}
	s.idleSince = time.Now()
	p.mu.Lock()
	if len(p.idle) < 4 {
		p.idle = append(p.idle, s)
		s = nil
	}
	p.mu.Unlock()
	if s != nil {
		s.close()
	}
}

func (p *pool) closeAll() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
}

// dialer asks for TCP keepalives and bounds the connect.
func dialer(networkTimeout time.Duration) *net.Dialer {
	idle := networkTimeout / 3
	if idle < time.Second {
		idle = time.Second
	}
	return &net.Dialer{Timeout: networkTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: idle,
		Interval: time.Second, Count: int(idle / time.Second)}}
}
