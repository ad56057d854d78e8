package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// flight is a request admitted and not yet settled in a trace.
type flight struct {
	at, ends       int64 // admitted, settled (microseconds)
	reserved, true int
	redis, local   *reservation
}

// TestSettleBound runs random traces of requests that reserve an
// estimate, run for a while and settle their true cost, on the Redis
// scripts and the in-process store at once, on the caller clock. The two
// must decide alike at every step, and at every admission the true cost
// of the requests admitted within any window must stay within the limit
// plus what the requests still in flight (the new one included) had
// under-reserved: the bound docs/design/rate-limiter.md states.
func TestSettleBound(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, tc := range []struct {
		alg     Algorithm
		windows string
	}{
		{Log, "50/1s"},
		{Log, "50/1s,300/10s"},
		{Log, "40/1s,1000/1d@calendar"},
		{Counter, "50/1s"},
		{Counter, "50/1s,300/10s"},
	} {
		t.Run(string(tc.alg)+"/"+tc.windows, func(t *testing.T) {
			ws, err := ParseWindows(tc.windows)
			if err != nil {
				t.Fatal(err)
			}
			set := newWindowSet("p", ws)
			rs, ls := newRedisStore(rdb), newLocalStore()
			key := fmt.Sprintf("rl:settle:%s:%s", testenv.Prefix(t), tc.alg)
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.windows))))
			now := int64(1_780_000_000_000_000)
			var inFlight []*flight
			var done []*flight // settled, for the bound
			var admitted, refused, refunds, excesses int
			for step := range 1500 {
				now += rng.Int64N(20_000)
				// Settle what has finished, oldest first.
				for i := 0; i < len(inFlight); {
					f := inFlight[i]
					if f.ends > now {
						i++
						continue
					}
					delta := f.true - f.reserved
					if err := rs.settle(context.Background(), f.redis, delta, f.ends, false); err != nil {
						t.Fatal(err)
					}
					ls.settle(f.local, delta, f.ends)
					switch {
					case delta < 0:
						refunds++
					case delta > 0:
						excesses++
					}
					done = append(done, f)
					inFlight = append(inFlight[:i], inFlight[i+1:]...)
				}
				est := 1 + rng.IntN(8)
				truth := max(0, est+rng.IntN(9)-4) // off by up to 4 either way
				member := fmt.Sprintf("m%d", step)
				want, err := rs.decide(context.Background(), tc.alg, key, now, est, set, member, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := ls.decide(context.Background(), tc.alg, key, now, est, set, "", nil)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (t=%d cost=%d): local = %+v, redis = %+v", step, now, est, got, want)
				}
				if !want.admitted {
					refused++
					continue
				}
				admitted++
				f := &flight{at: now, ends: now + rng.Int64N(300_000), reserved: est, true: truth}
				res := func() *reservation {
					return &reservation{alg: tc.alg, key: key, member: member, cost: est, at: now, set: set, quotas: quotas(key, set, now)}
				}
				f.redis, f.local = res(), res()
				inFlight = append(inFlight, f)
				if tc.alg == Log {
					checkBound(t, ws, now, append(append([]*flight{}, done...), inFlight...))
				}
			}
			if admitted < 150 || refused < 150 || refunds < 50 || excesses < 50 {
				t.Errorf("admitted %d, refused %d, refunds %d, excesses %d: the trace should exercise each", admitted, refused, refunds, excesses)
			}
		})
	}
}

// checkBound checks, at admission time now, every sliding window: the
// true cost of the requests admitted within it is at most its limit plus
// the under-reservation of those among them still in flight.
func checkBound(t *testing.T, ws []Window, now int64, fs []*flight) {
	t.Helper()
	for _, w := range ws {
		if w.Calendar != "" {
			continue
		}
		var truth, slack int
		for _, f := range fs {
			if f.at <= now-w.Period.Microseconds() {
				continue
			}
			truth += f.true
			if f.ends > now || f.at == now {
				slack += max(0, f.true-f.reserved)
			}
		}
		if truth > w.Limit+slack {
			t.Fatalf("t=%d window %s: true cost %d admitted, above limit %d + in-flight slack %d", now, w, truth, w.Limit, slack)
		}
	}
}

// TestLimiterSettle goes through the Limiter: a refund gives the units
// back at once, an excess takes more, and a refused or shadowed decision
// has nothing to settle.
func TestLimiterSettle(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, alg := range []Algorithm{Log, Counter} {
		t.Run(string(alg), func(t *testing.T) {
			l := newLimiter(t, rdb, alg, "10/1m")
			id := testenv.Prefix(t) + string(alg)
			ctx := context.Background()
			check := func(cost int) Decision {
				t.Helper()
				d, err := l.Check(ctx, Request{Policy: "p", Identity: id, Cost: cost})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			remaining := func() int {
				t.Helper()
				d, err := l.Usage(ctx, Request{Policy: "p", Identity: id})
				if err != nil {
					t.Fatal(err)
				}
				return d.Windows[0].Remaining
			}
			d := check(8)
			if err := l.Settle(ctx, d, 3); err != nil {
				t.Fatal(err)
			}
			if got := remaining(); got != 7 {
				t.Errorf("after reserving 8 and settling 3: remaining %d, want 7", got)
			}
			d = check(2)
			if err := l.Settle(ctx, d, 6); err != nil {
				t.Fatal(err)
			}
			if got := remaining(); got != 1 {
				t.Errorf("after reserving 2 and settling 6: remaining %d, want 1", got)
			}
			refused := check(5)
			if refused.Allowed {
				t.Fatalf("a cost of 5 with 1 left was admitted")
			}
			if err := l.Settle(ctx, refused, 0); err != nil || remaining() != 1 {
				t.Errorf("settling a refused decision changed the window: remaining %d, %v", remaining(), err)
			}
		})
	}
}
