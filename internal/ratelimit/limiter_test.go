package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/testenv"
)

// newLimiter returns a Limiter on the test Redis with the given windows
// under policy "p" (and the built-in policies).
func newLimiter(t *testing.T, rdb redis.UniversalClient, alg Algorithm, windows string) *Limiter {
	t.Helper()
	ws, err := ParseWindows(windows)
	if err != nil {
		t.Fatal(err)
	}
	ps := seedPolicies()
	ps["p"] = Policy{Name: "p", Windows: ws, Algorithm: alg, Failure: FailClosed, Lease: 30 * time.Second}
	// Generous deadlines: these tests check exactness, and a loaded CI
	// machine must not turn a slow answer into a failed decision.
	l, err := New(rdb, ps, Options{Registerer: prometheus.NewRegistry(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSeedPolicyKeyAndTTL(t *testing.T) {
	rdb := testenv.Redis(t)
	l := newLimiter(t, rdb, Log, "1/1s")
	ctx := context.Background()
	id := "key:" + testenv.Prefix(t)
	var got []bool
	for range 12 {
		d, err := l.Allow(ctx, "geofence", id, 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Allowed)
	}
	admitted := 0
	for i, a := range got {
		if a != (i < 10) {
			t.Fatalf("decisions = %v, want ten admitted then two rejected", got)
		}
		if a {
			admitted++
		}
	}
	key := "rl:geofence:" + id
	if n := rdb.ZCard(ctx, key).Val(); n != 10 {
		t.Errorf("ZCARD %s = %d, want 10 (rejected requests are not recorded)", key, n)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Second {
		t.Errorf("PTTL %s = %v, want in (0, 1s]", key, ttl)
	}
}

// TestKeyTTLAtMostLongestWindow: right after an admission on the Redis
// clock, the key of either algorithm expires within the policy's longest
// window, so idle identities leave nothing behind for longer.
func TestKeyTTLAtMostLongestWindow(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, tc := range []struct {
		alg     Algorithm
		windows string
		prefix  string
		longest time.Duration
	}{
		{Log, "5/1s", "rl:p:", time.Second},
		{Log, "5/1s,20/3s", "rl:p:", 3 * time.Second},
		{Counter, "5/1s", "rlc:p:", time.Second},
		{Counter, "5/1s,20/3s", "rlc:p:", 3 * time.Second},
		{Counter, "3000/1m", "rlc:p:", time.Minute},
	} {
		t.Run(string(tc.alg)+"/"+tc.windows, func(t *testing.T) {
			l := newLimiter(t, rdb, tc.alg, tc.windows)
			id := testenv.Prefix(t)
			ctx := context.Background()
			for i := range 3 {
				if d, err := l.Allow(ctx, "p", id, 1); err != nil || !d.Allowed {
					t.Fatalf("request %d = %+v, %v; want admitted", i, d, err)
				}
				ttl := rdb.PTTL(ctx, tc.prefix+id).Val()
				if ttl <= 0 || ttl > tc.longest {
					t.Fatalf("after request %d: PTTL %s = %v, want in (0, %v]", i, tc.prefix+id, ttl, tc.longest)
				}
				time.Sleep(20 * time.Millisecond) // pacing: each admission sets the TTL anew, a little later
			}
		})
	}
}

// TestCounterForgetsOneLongestPeriodAfterLastAdmission: on the caller
// clock, the counter keeps over-counting a full bucket until one longest
// period after the last admission (when every sliding window is empty) and
// forgets it exactly then, in Redis and in process alike; a rejection just
// before says to retry at that moment.
func TestCounterForgetsOneLongestPeriodAfterLastAdmission(t *testing.T) {
	rdb := testenv.Redis(t)
	// Periods of minutes: the keys' real TTLs then outlast any stall of a
	// loaded machine between the checks, so only the caller clock decides.
	// base is 100ms into a bucket of every period in the table (buckets
	// start at multiples of their period since the epoch), so that just
	// before the longest period ends the previous bucket still weighs
	// nearly whole.
	const buckets = 3 * time.Minute
	base := time.UnixMilli(1_780_000_000_000 / buckets.Milliseconds() * buckets.Milliseconds()).Add(100 * time.Millisecond)
	for _, tc := range []struct {
		windows string
		cost    int
		longest time.Duration
	}{
		{"5/1m", 5, time.Minute},
		{"5/1m,8/3m", 5, 3 * time.Minute},
	} {
		for _, backend := range []string{"redis", "local"} {
			t.Run(backend+"/"+tc.windows, func(t *testing.T) {
				var c redis.UniversalClient
				if backend == "redis" {
					c = rdb
				}
				l := newLimiter(t, c, Counter, tc.windows)
				id := testenv.Prefix(t)
				check := func(at time.Time) Decision {
					d, err := l.Check(context.Background(), Request{Policy: "p", Identity: id, Cost: tc.cost, At: at})
					if err != nil {
						t.Fatal(err)
					}
					return d
				}
				if d := check(base); !d.Allowed {
					t.Fatalf("first = %+v, want admitted", d)
				}
				early := base.Add(tc.longest - time.Millisecond)
				d := check(early)
				if d.Allowed {
					t.Fatalf("cost %d %v after the last admission = admitted, want rejected (the window still holds it)", tc.cost, tc.longest-time.Millisecond)
				}
				if d.RetryAfter != time.Millisecond {
					t.Errorf("RetryAfter %v before the state is forgotten = %v, want 1ms", tc.longest-time.Millisecond, d.RetryAfter)
				}
				if d := check(base.Add(tc.longest)); !d.Allowed {
					t.Fatalf("cost %d one longest period after the last admission = %+v, want admitted", tc.cost, d)
				}
			})
		}
	}
}

func TestConcurrentChecksAdmitExactlyTheLimit(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, alg := range []Algorithm{Log, Counter} {
		t.Run(string(alg), func(t *testing.T) {
			l := newLimiter(t, rdb, alg, "10/1m")
			prefix := testenv.Prefix(t)
			for trial := range 20 {
				id := fmt.Sprintf("%s-%d", prefix, trial)
				var mu sync.Mutex
				admitted := 0
				var wg sync.WaitGroup
				for range 50 {
					wg.Go(func() {
						d, err := l.Allow(context.Background(), "p", id, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admitted++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				if admitted != 10 {
					t.Fatalf("trial %d: 50 concurrent checks admitted %d, want exactly 10", trial, admitted)
				}
			}
		})
	}
}

func TestScriptFlushCostsNoRequest(t *testing.T) {
	// A Redis of its own, for the reason TestPipelinedDecisionsStayExact
	// gives.
	p := testenv.StartRedis(t)
	rdb := redis.NewClient(p.Options())
	defer rdb.Close()
	reg := prometheus.NewRegistry()
	ps := seedPolicies()
	l, err := New(rdb, ps, Options{Registerer: reg, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := testenv.Prefix(t)
	for i := range 3 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := l.Allow(ctx, "geofence", id, 1)
		if err != nil || !d.Allowed || d.Backend != BackendRedis {
			t.Fatalf("Allow after SCRIPT FLUSH #%d = %+v, %v; want admitted by redis", i, d, err)
		}
	}
	if n := metricSum(l.m.reloads); n < 3 {
		t.Errorf("script reloads = %v, want >= 3", n)
	}
}

// metricSum adds up every counter or gauge c collects.
func metricSum(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		_ = m.Write(&pb)
		switch {
		case pb.Counter != nil:
			sum += pb.Counter.GetValue()
		case pb.Gauge != nil:
			sum += pb.Gauge.GetValue()
		}
	}
	return sum
}

func TestPipelinedDecisionsStayExact(t *testing.T) {
	// A Redis of its own: on the shared one, any other test's EVAL of the
	// same script after the SCRIPT FLUSH loads it again, and this
	// limiter then never meets the NOSCRIPT it must recover from.
	p := testenv.StartRedis(t)
	rdb := redis.NewClient(p.Options())
	defer rdb.Close()
	ws, _ := ParseWindows("10/1m,15/1h")
	ps := map[string]Policy{"p": {Windows: ws, Algorithm: Log, Failure: FailClosed}}
	reg := prometheus.NewRegistry()
	l, err := New(rdb, ps, Options{Registerer: reg, Timeout: time.Second, Pipeline: 16, PipelineWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	prefix := testenv.Prefix(t)
	for trial := range 10 {
		if trial == 5 {
			if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if n := concurrentAdmissions(t, l, fmt.Sprintf("%s-%d", prefix, trial), 50); n != 10 {
			t.Fatalf("trial %d: pipelined: admitted %d of 50, want exactly 10", trial, n)
		}
	}
	if n := metricSum(l.m.reloads); n < 1 {
		t.Errorf("script reloads = %v after SCRIPT FLUSH, want >= 1", n)
	}
	l.Close()
	if _, err := l.Allow(context.Background(), "p", prefix, 1); apperr.KindOf(err) != apperr.Unavailable {
		t.Errorf("after Close: err = %v, want Unavailable (fail closed)", err)
	}
}
