package ratelimit

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/testenv"
)

func TestMain(m *testing.M) {
	if id := os.Getenv(workerEnv); id != "" {
		os.Exit(worker(id)) // a process of TestProcessesShareOneLimit
	}
	code := m.Run()
	testenv.StopRedisCluster()
	os.Exit(code)
}

// failureLimiter has one policy per failure mode, each 5/1m, on rdb.
func failureLimiter(t *testing.T, rdb redis.UniversalClient) *Limiter {
	t.Helper()
	ps := map[string]Policy{}
	for _, m := range []FailureMode{FailLocal, FailOpen, FailClosed} {
		name := "fail-" + string(m)
		ps[name] = Policy{Name: name, Windows: []Window{{Limit: 5, Period: time.Minute}}, Algorithm: Log, Failure: m, Concurrency: 2, Lease: 30 * time.Second}
	}
	l, err := New(rdb, ps, Options{Registerer: prometheus.NewRegistry(), Timeout: 100 * time.Millisecond, BreakerCooldown: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func fastClient(p *testenv.RedisProcess) *redis.Client {
	o := p.Options()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	o.MaxRetries, o.ContextTimeoutEnabled = -1, true
	return redis.NewClient(o)
}

// checkModes asserts how each failure mode behaves while Redis is down.
func checkModes(t *testing.T, l *Limiter, id string) {
	t.Helper()
	ctx := context.Background()
	for i := range 8 {
		start := time.Now()
		d, err := l.Allow(ctx, "fail-local", id, 1)
		if err != nil || d.Backend != BackendLocal || d.Allowed != (i < 5) {
			t.Fatalf("local #%d = %+v, %v; want the in-process limiter, admitting 5 of 8", i, d, err)
		}
		if el := time.Since(start); el > 500*time.Millisecond {
			t.Errorf("local #%d took %v: a dead Redis must not hang requests", i, el)
		}
		d, err = l.Allow(ctx, "fail-open", id, 1)
		if err != nil || !d.Allowed || d.Backend != BackendNone {
			t.Fatalf("open #%d = %+v, %v; want admitted unchecked", i, d, err)
		}
		_, err = l.Allow(ctx, "fail-closed", id, 1)
		if apperr.KindOf(err) != apperr.Unavailable {
			t.Fatalf("closed #%d: err = %v, want Unavailable", i, err)
		}
	}
	rel, ok, err := l.acquire(ctx, "fail-local", id)
	if err != nil || !ok {
		t.Fatalf("local Acquire = %v, %v", ok, err)
	}
	rel()
	if _, _, err := l.acquire(ctx, "fail-closed", id); apperr.KindOf(err) != apperr.Unavailable {
		t.Fatalf("closed Acquire err = %v, want Unavailable", err)
	}
}

func TestFailureModesWithUnreachableRedis(t *testing.T) {
	// A port nobody listens on: connections are refused at once.
	p := testenv.StartRedis(t)
	p.Stop()
	c := fastClient(p)
	defer c.Close()
	l := failureLimiter(t, c)
	checkModes(t, l, testenv.Prefix(t))
	if !l.br.isOpen() {
		t.Error("breaker closed after repeated failures")
	}
	if n := metricSum(l.m.trips); n < 1 {
		t.Errorf("fallback activations = %v, want >= 1", n)
	}
}

func TestFailureModesWithHungRedis(t *testing.T) {
	// A Redis that accepts connections but never answers: every call must
	// end at the deadline, and the breaker must then stop waiting at all.
	p := testenv.StartRedis(t)
	c := fastClient(p)
	defer c.Close()
	l := failureLimiter(t, c)
	ctx := context.Background()
	if d, err := l.Allow(ctx, "fail-closed", "warm", 1); err != nil || !d.Allowed {
		t.Fatalf("with redis up: %+v, %v", d, err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Resume() }()
	start := time.Now()
	checkModes(t, l, testenv.Prefix(t))
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("27 decisions against a hung Redis took %v; the breaker should cut them short", el)
	}
}

func TestRecoveryAfterRedisRestart(t *testing.T) {
	p := testenv.StartRedis(t)
	c := fastClient(p)
	defer c.Close()
	l := failureLimiter(t, c)
	ctx := context.Background()
	id := testenv.Prefix(t)
	if d, err := l.Allow(ctx, "fail-closed", id, 1); err != nil || d.Backend != BackendRedis {
		t.Fatalf("before restart: %+v, %v", d, err)
	}
	p.Stop()
	for range 5 {
		if _, err := l.Allow(ctx, "fail-closed", id, 1); apperr.KindOf(err) != apperr.Unavailable {
			t.Fatalf("while down: err = %v, want Unavailable", err)
		}
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for {
		d, err := l.Allow(ctx, "fail-closed", id, 1)
		if err == nil && d.Backend == BackendRedis {
			break
		}
		if err != nil && apperr.KindOf(err) != apperr.Unavailable {
			t.Fatalf("unexpected error: %v", err)
		}
		if time.Since(back) > time.Second {
			t.Fatalf("still not limiting through Redis %v after it came back: %v", time.Since(back), err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	// The restarted Redis lost its scripts and the log; both come back.
	for i := range 6 {
		d, err := l.Allow(ctx, "fail-closed", id, 1)
		if err != nil || d.Backend != BackendRedis || d.Allowed != (i < 4) {
			t.Fatalf("after restart #%d = %+v, %v", i, d, err)
		}
	}
	if n := metricSum(l.m.reloads); n < 1 {
		t.Errorf("script reloads = %v after a restart, want >= 1", n)
	}
}

func TestCallerCancellationIsNotARedisFailure(t *testing.T) {
	l := failureLimiter(t, testenv.Redis(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		if _, err := l.Allow(ctx, "fail-closed", "x", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	}
	if l.br.isOpen() {
		t.Error("breaker opened because callers gave up")
	}
}
