package dlock

// Case 1 of make bench (uncontended pairs) for the Go client beside its
// driver's own two statements: DLOCK_BENCH=SECONDS go test -run TestBenchUncontended -v.
// With DLOCK_BENCH_TSV=FILE it appends bench/run.sh's rows (case, system,
// clients, metric, value) to FILE. A short warm-up run of each system comes
// first. It measures; it fails only when it cannot run.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestBenchUncontended(t *testing.T) {
	secs, _ := strconv.ParseFloat(os.Getenv("DLOCK_BENCH"), 64)
	if secs <= 0 {
		t.Skip("DLOCK_BENCH=SECONDS not set")
	}
	d := time.Duration(secs * float64(time.Second))
	ctx := context.Background()
	type system struct {
		name string
		pair func(c *Client, conn *pgconn.PgConn, name string) (time.Duration, error)
	}
	systems := []system{
		{"go-client", func(c *Client, _ *pgconn.PgConn, name string) (time.Duration, error) {
			start := time.Now()
			l, err := c.TryAcquire(ctx, name, LeaseOptions{TTL: 30 * time.Second, NoKeepAlive: true})
			if err != nil {
				return 0, err
			}
			acq := time.Since(start)
			if out := l.Release(ctx); out != Done {
				return 0, fmt.Errorf("release %v", out)
			}
			return acq, nil
		}},
		{"go-pgx-sql", func(_ *Client, conn *pgconn.PgConn, name string) (time.Duration, error) {
			start := time.Now()
			res := conn.ExecPrepared(ctx, "acq", [][]byte{[]byte(name)}, nil, nil).Read()
			if res.Err != nil {
				return 0, res.Err
			}
			acq := time.Since(start)
			rel := conn.ExecPrepared(ctx, "rel", [][]byte{[]byte(name), res.Rows[0][0]}, nil, nil).Read()
			return acq, rel.Err
		}},
	}
	var tsv *os.File
	if path := os.Getenv("DLOCK_BENCH_TSV"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tsv = f
	}
	type run struct {
		sys     system
		workers int
		d       time.Duration
		record  bool
	}
	var runs []run
	for _, sys := range systems {
		runs = append(runs, run{sys, 1, 300 * time.Millisecond, false})
	}
	for _, workers := range []int{1, 8} {
		for _, sys := range systems {
			runs = append(runs, run{sys, workers, d, true})
		}
	}
	for _, r := range runs {
		sys, workers, d := r.sys, r.workers, r.d
		{
			var wg sync.WaitGroup
			var mu sync.Mutex
			var acquires []time.Duration
			pairs := 0
			var failure error
			for w := 0; w < workers; w++ {
				c, err := New(ctx, Options{})
				if err != nil {
					t.Fatal(err)
				}
				conn, err := pgconn.Connect(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range [][2]string{
					{"acq", "SELECT (dlock.try_acquire($1, interval '30 seconds')).owner_token::text"},
					{"rel", "SELECT dlock.release($1, $2::uuid)"},
				} {
					if _, err := conn.Prepare(ctx, p[0], p[1], nil); err != nil {
						t.Fatal(err)
					}
				}
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					defer c.Close()
					defer conn.Close(ctx)
					name := fmt.Sprintf("bench/go/%s/%d/%d/%d", sys.name, os.Getpid(), w, time.Now().UnixNano())
					var mine []time.Duration
					n := 0
					until := time.Now().Add(d)
					for time.Now().Before(until) {
						acq, err := sys.pair(c, conn, name)
						if err != nil {
							mu.Lock()
							failure = err
							mu.Unlock()
							return
						}
						mine = append(mine, acq)
						n++
					}
					mu.Lock()
					acquires = append(acquires, mine...)
					pairs += n
					mu.Unlock()
				}(w)
			}
			wg.Wait()
			if failure != nil {
				t.Fatal(failure)
			}
			sort.Slice(acquires, func(i, j int) bool { return acquires[i] < acquires[j] })
			if !r.record {
				continue
			}
			rate, p50 := float64(pairs)/d.Seconds(), acquires[len(acquires)/2]
			t.Logf("%-20s %d clients: %8.0f pairs/s, acquire p50 %v", sys.name, workers, rate, p50)
			if tsv != nil {
				fmt.Fprintf(tsv, "uncontended\t%s\t%d\tpairs_per_s\t%.6g\n", sys.name, workers, rate)
				fmt.Fprintf(tsv, "uncontended\t%s\t%d\tacq_p50_us\t%.6g\n", sys.name, workers,
					float64(p50)/float64(time.Microsecond))
			}
		}
	}
}
