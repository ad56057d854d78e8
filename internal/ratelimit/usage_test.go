package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// replicaLimiters returns n limiters sharing rdb, each with policy "p" of
// the given windows, as n replicas would have.
func replicaLimiters(t *testing.T, rdb redis.UniversalClient, n int, alg Algorithm, windows string) []*Limiter {
	t.Helper()
	ws, err := ParseWindows(windows)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*Limiter, n)
	for i := range out {
		p := Policy{Name: "p", Windows: ws, Algorithm: alg, Failure: FailClosed, Lease: 30 * time.Second}
		// The second replica pipelines, as api serve does.
		o := Options{Registerer: prometheus.NewRegistry(), Timeout: 5 * time.Second}
		if i == 1 {
			o.Pipeline = 8
		}
		if out[i], err = New(rdb, map[string]Policy{"p": p}, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(out[i].Close)
	}
	return out
}

// burst fires n concurrent requests of cost 1 by id, spread over ls, and
// returns how many were admitted.
func burst(t *testing.T, ls []*Limiter, id string, n int) int {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, err := ls[i%len(ls)].Allow(context.Background(), "p", id, 1)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(admitted.Load())
}

func remaining(t *testing.T, l *Limiter, id string) []int {
	t.Helper()
	u, err := l.Usage(context.Background(), Request{Policy: "p", Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, w := range u.Windows {
		out = append(out, w.Remaining)
	}
	return out
}

// TestUsageIsExact: after one replica has spent some of a budget, Usage
// through another reports per window a remaining r, and a concurrent burst
// through three replicas then admits exactly the smallest r; Usage itself
// spends nothing. Each case makes a different window the tightest.
func TestUsageIsExact(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, tc := range []struct {
		alg     Algorithm
		windows string
		spend   int
		want    []int // remaining per window after spend
	}{
		{Log, "10/1m", 3, []int{7}},
		{Log, "10/1m,12/1h", 3, []int{7, 9}},
		{Log, "20/1m,12/1h", 4, []int{16, 8}},
		{Log, "20/1m,40/1h,9/1d@calendar", 2, []int{18, 38, 7}},
		{Log, "20/1m,7/1mo@calendar,9/1d@calendar", 2, []int{18, 7, 5}},
		{Counter, "10/1m", 3, []int{7}},
		{Counter, "30/1m,50/1h,6/1d@calendar", 1, []int{29, 49, 5}},
		{Log, "8/1d@calendar", 5, []int{3}},
	} {
		t.Run(string(tc.alg)+"/"+tc.windows, func(t *testing.T) {
			ls := replicaLimiters(t, rdb, 3, tc.alg, tc.windows)
			id := "key:" + testenv.Prefix(t)
			t.Cleanup(func() { dropKeys(t, rdb, id) })
			if n := burst(t, ls[:1], id, tc.spend); n != tc.spend {
				t.Fatalf("spent %d of %d", n, tc.spend)
			}
			var got []int
			for range 5 { // reading again changes nothing
				got = remaining(t, ls[1], id)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("remaining = %v, want %v", got, tc.want)
			}
			if n, want := burst(t, ls, id, 60), slices.Min(tc.want); n != want {
				t.Errorf("a burst of 60 through 3 replicas admitted %d, want exactly %d as Usage said", n, want)
			}
			if got := remaining(t, ls[2], id); slices.Min(got) != 0 {
				t.Errorf("after the burst remaining = %v, want a window at 0", got)
			}
		})
	}
}

// TestUsageDuringBursts reads while three replicas admit requests of cost 3
// concurrently: every read sees whole requests only, the same count in the
// sliding windows and in the daily quota (all or nothing, in one run), and
// the last read sees everything admitted.
func TestUsageDuringBursts(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, alg := range []Algorithm{Log, Counter} {
		t.Run(string(alg), func(t *testing.T) {
			ls := replicaLimiters(t, rdb, 3, alg, "45/1m,300/1h,60/1d@calendar")
			id := "key:" + testenv.Prefix(t)
			t.Cleanup(func() { dropKeys(t, rdb, id) })
			var admitted atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var reads atomic.Int64
			for r := range 3 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						u, err := ls[r].Usage(context.Background(), Request{Policy: "p", Identity: id})
						if err != nil {
							t.Error(err)
							return
						}
						reads.Add(1)
						m, h, d := u.Windows[0].Used, u.Windows[1].Used, u.Windows[2].Used
						if m%3 != 0 || m != h || m != d || m > 45 {
							t.Errorf("a read saw %d, %d and %d units used; want the same multiple of 3, at most 45", m, h, d)
						}
					}
				})
			}
			var senders sync.WaitGroup
			for i := range 30 {
				senders.Go(func() {
					d, err := ls[i%3].Check(context.Background(), Request{Policy: "p", Identity: id, Cost: 3})
					if err != nil {
						t.Error(err)
					} else if d.Allowed {
						admitted.Add(1)
					}
				})
			}
			senders.Wait()
			testenv.WaitFor(t, 10*time.Second, "reads after the burst", func() bool { return reads.Load() >= 10 })
			close(stop)
			wg.Wait()
			if n := admitted.Load(); n != 15 {
				t.Errorf("admitted %d requests of cost 3 at 45/1m, want 15", n)
			}
			if got := remaining(t, ls[0], id); fmt.Sprint(got) != "[0 255 15]" {
				t.Errorf("remaining after the burst = %v, want [0 255 15]", got)
			}
		})
	}
}

// TestUsageInFlight: a policy's in-flight requests show in Usage until
// they are released; reading takes no slot.
func TestUsageInFlight(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{Limit: 5, Period: time.Minute}}, Algorithm: Log, Failure: FailClosed, Concurrency: 2, Lease: 5 * time.Second}}
	for _, st := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"redis", rdb}, {"local", nil}} {
		t.Run(st.name, func(t *testing.T) {
			l, err := New(st.rdb, ps, Options{Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id := testenv.Prefix(t)
			inFlight := func() int {
				u, err := l.Usage(ctx, Request{Policy: "c", Identity: id})
				if err != nil || u.Concurrency != 2 {
					t.Fatalf("Usage = %+v, %v", u, err)
				}
				return u.InFlight
			}
			rel1, ok1, _ := l.acquire(ctx, "c", id)
			rel2, ok2, _ := l.acquire(ctx, "c", id)
			if !ok1 || !ok2 {
				t.Fatal("two slots of a cap of 2 not taken")
			}
			if n := inFlight(); n != 2 {
				t.Errorf("in flight = %d, want 2", n)
			}
			rel1()
			if n := inFlight(); n != 1 {
				t.Errorf("after one release, in flight = %d, want 1", n)
			}
			rel2()
			if n := inFlight(); n != 0 {
				t.Errorf("after both, in flight = %d, want 0", n)
			}
		})
	}
}

// TestUsageFailureModes: while Redis is unreachable Usage reads where
// decisions are made: the replica's own counts (local), nothing (open), or
// an error (closed).
func TestUsageFailureModes(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer dead.Close()
	l := failureLimiter(t, dead)
	ctx := context.Background()
	id := testenv.Prefix(t)
	if d, err := l.Allow(ctx, "fail-local", id, 2); err != nil || !d.Allowed {
		t.Fatalf("local decision = %+v, %v", d, err)
	}
	for _, tc := range []struct {
		policy, backend string
		windows         int
		remaining       int
		wantErr         bool
	}{
		{"fail-local", BackendLocal, 1, 3, false},
		{"fail-open", BackendNone, 0, 0, false},
		{"fail-closed", "", 0, 0, true},
	} {
		u, err := l.Usage(ctx, Request{Policy: tc.policy, Identity: id})
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: Usage = %+v, want an error", tc.policy, u)
			}
			continue
		}
		if err != nil || u.Backend != tc.backend || len(u.Windows) != tc.windows || tc.windows > 0 && u.Windows[0].Remaining != tc.remaining {
			t.Errorf("%s: Usage = %+v, %v; want backend %s, %d windows, %d remaining", tc.policy, u, err, tc.backend, tc.windows, tc.remaining)
		}
	}
}

// dropKeys deletes a test identity's keys, quotas included (their
// lifetimes follow the caller clock's periods, not the test).
func dropKeys(t *testing.T, rdb redis.UniversalClient, id string) {
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, "*"+id+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for _, k := range keys {
		_ = rdb.Del(ctx, k).Err()
	}
}
