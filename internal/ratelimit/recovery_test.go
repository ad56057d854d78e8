package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// recoveryLimiter has one policy, p, deciding in process while Redis is
// down. The window is long, so that however slowly a busy machine runs a
// burst, every request of it falls in one window and the count is exact.
func recoveryLimiter(t *testing.T, rdb redis.UniversalClient, alg Algorithm, windows string, now func() time.Time) *Limiter {
	t.Helper()
	ws, err := ParseWindows(windows)
	if err != nil {
		t.Fatal(err)
	}
	ps := map[string]Policy{"p": {Name: "p", Windows: ws, Algorithm: alg, Failure: FailLocal, Lease: 30 * time.Second}}
	l, err := New(rdb, ps, Options{Registerer: prometheus.NewRegistry(), Timeout: 200 * time.Millisecond, BreakerCooldown: 100 * time.Millisecond, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// openBreaker sends requests by id until the breaker opens.
func openBreaker(t *testing.T, l *Limiter, id string) {
	t.Helper()
	testenv.WaitFor(t, 5*time.Second, "breaker opens while Redis is down", func() bool {
		if _, err := l.Allow(context.Background(), "p", id, 1); err != nil {
			t.Fatal(err)
		}
		return l.br.isOpen()
	})
}

// waitClosed waits, without sending any request, until the breaker has
// closed: Redis is back and the limiter knows it.
func waitClosed(t *testing.T, l *Limiter) {
	t.Helper()
	testenv.WaitFor(t, 3*time.Second, "breaker closes after Redis returns, with no traffic", func() bool {
		return !l.br.isOpen() && metricSum(l.m.breaker) == 0
	})
}

// TestFirstBurstAfterRecoveryIsExact is an idle service whose Redis went
// away long enough to open the breaker and came back: its first burst, 30
// concurrent requests at a limit of 10, must admit exactly 10, all decided
// by Redis. When a request of the burst was itself the probe, the others
// went to the in-process limiter meanwhile, and the two together admitted
// up to 20.
func TestFirstBurstAfterRecoveryIsExact(t *testing.T) {
	p := testenv.StartRedis(t)
	c := fastClient(p)
	defer c.Close()
	l := recoveryLimiter(t, c, Log, "10/1m", nil)
	prefix := testenv.Prefix(t)
	for trial := range 5 {
		p.Stop()
		openBreaker(t, l, fmt.Sprintf("%s-outage-%d", prefix, trial))
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l)
		id := fmt.Sprintf("%s-burst-%d", prefix, trial)
		got, local := recoveryBurst(t, l, id, 30)
		if got != 10 || local != 0 {
			t.Errorf("trial %d: admitted %d of 30 (%d decided in process), want 10, none in process", trial, got, local)
		}
		if n := c.ZCard(context.Background(), logKey("p", id)).Val(); n != 10 {
			t.Errorf("trial %d: Redis log holds %d, want 10", trial, n)
		}
	}
}

// recoveryBurst fires n concurrent checks by id under p and returns how many were
// admitted and how many were decided in process.
func recoveryBurst(t *testing.T, l *Limiter, id string, n int) (admitted, local int) {
	t.Helper()
	ds := make(chan Decision, n)
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			d, err := l.Allow(context.Background(), "p", id, 1)
			errs <- err
			ds <- d
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		d := <-ds
		if d.Allowed {
			admitted++
		}
		if d.Backend == BackendLocal {
			local++
		}
	}
	return admitted, local
}

// TestRecoveryCarriesInProcessCounts: what the in-process limiter admitted
// while Redis was away is handed over to Redis when it returns, so the
// window (or quota) it filled stays filled: a burst after the return admits
// only what is left. The clock is fixed, so that the counter's buckets and
// the day stay the same throughout.
//
// Each case admits 3 through Redis, then, once other requests have opened
// the breaker, 6 in process. A killed Redis comes back empty: 10 - 6 = 4
// are left. A frozen one (SIGSTOP) kept its 3: 10 - 3 - 6 = 1 is left.
// Without the hand-over the burst would get 10 and 7. (The requests that
// open the breaker are another identity's: a frozen Redis still runs, on
// resuming, calls that had timed out, and those were decided in process
// too.)
func TestRecoveryCarriesInProcessCounts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		alg     Algorithm
		windows string
		pause   bool // SIGSTOP, keeping Redis's counts; else killed
		want    int  // admitted of the burst
	}{
		{"log restarted", Log, "10/1m", false, 4},
		{"log resumed", Log, "10/1m", true, 1},
		{"counter restarted", Counter, "10/1m", false, 4},
		{"counter resumed", Counter, "10/1m", true, 1},
		{"day quota restarted", Log, "100/1m,10/1d@calendar", false, 4},
		{"day quota resumed", Counter, "100/1m,10/1d@calendar", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.StartRedis(t)
			c := fastClient(p)
			defer c.Close()
			at := time.Now()
			l := recoveryLimiter(t, c, tc.alg, tc.windows, func() time.Time { return at })
			id := testenv.Prefix(t)
			ctx := context.Background()
			for range 3 {
				if d, err := l.Allow(ctx, "p", id, 1); err != nil || !d.Allowed || d.Backend != BackendRedis {
					t.Fatalf("before the outage: %+v, %v", d, err)
				}
			}
			outage(t, p, tc.pause)
			openBreaker(t, l, id+"-other")
			for i := range 6 {
				if d, err := l.Allow(ctx, "p", id, 1); err != nil || !d.Allowed || d.Backend != BackendLocal {
					t.Fatalf("outage #%d: %+v, %v; want admitted in process", i, d, err)
				}
			}
			back(t, p, tc.pause)
			waitClosed(t, l)
			if hs := l.local.held(at.UnixMicro()); len(hs) != 0 {
				t.Errorf("in-process store still holds %d keys after the hand-over", len(hs))
			}
			got, local := recoveryBurst(t, l, id, 30)
			if got != tc.want || local != 0 {
				t.Errorf("burst after the return: admitted %d of 30 (%d in process), want %d, none in process", got, local, tc.want)
			}
		})
	}
}

// outage kills or freezes p.
func outage(t *testing.T, p *testenv.RedisProcess, pause bool) {
	t.Helper()
	if !pause {
		p.Stop()
		return
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Resume() })
}

// back ends the outage.
func back(t *testing.T, p *testenv.RedisProcess, pause bool) {
	t.Helper()
	err := p.Resume()
	if !pause {
		err = p.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestInProcessOnlyWhileOpen: a request the breaker kept from Redis is
// decided in process only while the breaker is still open; one whose own
// Redis call failed is decided in process either way.
func TestInProcessOnlyWhileOpen(t *testing.T) {
	for _, tc := range []struct {
		name       string
		open, kept bool
		want       bool
	}{
		{"kept, still open", true, true, true},
		{"kept, closed since", false, true, false},
		{"call failed, closed", false, false, true},
		{"call failed, open", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBreaker(3, time.Hour, time.Second)
			b.open.Store(tc.open)
			ran := false
			got := b.inProcess(tc.kept, func() { ran = true })
			if got != tc.want || ran != tc.want {
				t.Errorf("inProcess = %v (ran %v), want %v", got, ran, tc.want)
			}
		})
	}
}

// TestCloseStopsProbing: Close ends the probing goroutine, which then no
// longer closes the breaker when Redis returns.
func TestCloseStopsProbing(t *testing.T) {
	p := testenv.StartRedis(t)
	c := fastClient(p)
	defer c.Close()
	l := recoveryLimiter(t, c, Log, "10/1m", nil)
	p.Stop()
	openBreaker(t, l, testenv.Prefix(t))
	done := make(chan struct{})
	go func() { l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return: the prober did not stop")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	// With the prober gone, nothing closes the breaker; give a running one
	// ample chances (its interval is 100ms) to show it would.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if !l.br.isOpen() {
			t.Fatal("breaker closed after Close")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}
