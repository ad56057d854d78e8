package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestLocalMatchesRedis feeds the same (time, identity, cost) sequence to
// the Redis scripts and to the in-process store, on the caller clock, and
// requires identical decisions and window states.
func TestLocalMatchesRedis(t *testing.T) {
	rdb := testenv.Redis(t)
	cases := []struct {
		alg     Algorithm
		windows string
	}{
		{Log, "5/1s"},
		{Log, "5/1s,12/5s"},
		{Log, "3/2s,30/1m"},
		{Counter, "5/1s"},
		{Counter, "5/1s,12/5s"},
		{Counter, "40/3s,100/1m"},
	}
	for _, tc := range cases {
		t.Run(string(tc.alg)+"/"+tc.windows, func(t *testing.T) {
			ws, err := ParseWindows(tc.windows)
			if err != nil {
				t.Fatal(err)
			}
			set := newWindowSet("p", ws)
			rs, ls := newRedisStore(rdb), newLocalStore()
			prefix := testenv.Prefix(t)
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.windows))))
			now := int64(1_780_000_000_000_000) + rng.Int64N(1_000_000)
			var admitted, rejected int
			for i := range 600 {
				now += rng.Int64N(250_000)
				key := fmt.Sprintf("%s:%s:%d", tc.alg, prefix, rng.IntN(3))
				cost := 1 + rng.IntN(3)
				if rng.IntN(20) == 0 {
					cost = 20
				}
				want, err := rs.decide(context.Background(), tc.alg, key, now, cost, set, fmt.Sprintf("m%d", i), nil)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := ls.decide(context.Background(), tc.alg, key, now, cost, set, "", nil)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (t=%d key=%s cost=%d): local = %+v, redis = %+v", i, now, key, cost, got, want)
				}
				if want.admitted {
					admitted++
				} else {
					rejected++
				}
			}
			if admitted < 50 || rejected < 50 {
				t.Errorf("admitted %d, rejected %d: the sequence should exercise both", admitted, rejected)
			}
		})
	}
}

// TestNoBurstAcrossWindowBoundary fires the whole limit at the end of one
// second and again at the start of the next, then random traffic, and
// checks that no interval of the window's length ever holds more
// admissions than the limit.
func TestNoBurstAcrossWindowBoundary(t *testing.T) {
	rdb := testenv.Redis(t)
	l := newLimiter(t, rdb, Log, "10/1s")
	id := testenv.Prefix(t)
	base := time.UnixMicro(1_780_000_000_000_000)
	var admitted []time.Time
	check := func(at time.Time) bool {
		d, err := l.Check(context.Background(), Request{Policy: "p", Identity: id, Cost: 1, At: at})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted = append(admitted, at)
		}
		return d.Allowed
	}
	for i := range 10 {
		if !check(base.Add(990*time.Millisecond + time.Duration(i)*time.Millisecond)) {
			t.Fatalf("request %d at the end of the first window rejected", i)
		}
	}
	for i := range 10 {
		if check(base.Add(time.Second + time.Duration(i)*time.Millisecond)) {
			t.Fatalf("request %d at the start of the next window admitted: 20 within 20ms", i)
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	at := base.Add(1010 * time.Millisecond)
	for range 2000 {
		at = at.Add(time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
		check(at)
	}
	for i, a := range admitted {
		n := 0
		for _, b := range admitted[:i+1] {
			if a.Sub(b) < time.Second {
				n++
			}
		}
		if n > 10 {
			t.Fatalf("%d admissions within the second ending %v, want at most 10", n, a.Sub(base))
		}
	}
	if len(admitted) < 100 {
		t.Errorf("only %d admitted over ~40s of traffic at 50/s, want the limit used", len(admitted))
	}
}

// TestRetryAfterIsExact: a request rejected with RetryAfter r succeeds when
// repeated r later, and fails 100ms (and 1µs) earlier.
func TestRetryAfterIsExact(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, tc := range []struct {
		alg     Algorithm
		windows string
		cost    int
	}{
		{Log, "10/1s", 1},
		{Log, "10/1s,15/10s", 3},
		{Counter, "10/1s", 1},
		{Counter, "10/2s,30/1m", 4},
	} {
		t.Run(fmt.Sprintf("%s/%s/cost%d", tc.alg, tc.windows, tc.cost), func(t *testing.T) {
			l := newLimiter(t, rdb, tc.alg, tc.windows)
			id := testenv.Prefix(t)
			at := time.UnixMicro(1_780_000_000_123_456)
			check := func(at time.Time) Decision {
				d, err := l.Check(context.Background(), Request{Policy: "p", Identity: id, Cost: tc.cost, At: at})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			rng := rand.New(rand.NewPCG(3, 3))
			for round := range 5 {
				var d Decision
				for d = check(at); d.Allowed; d = check(at) {
					at = at.Add(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("round %d: rejected with RetryAfter %v", round, d.RetryAfter)
				}
				for _, early := range []time.Duration{100 * time.Millisecond, time.Microsecond} {
					if d.RetryAfter > early {
						if e := check(at.Add(d.RetryAfter - early)); e.Allowed {
							t.Fatalf("round %d: admitted %v before RetryAfter %v", round, early, d.RetryAfter)
						}
					}
				}
				at = at.Add(d.RetryAfter)
				if e := check(at); !e.Allowed {
					t.Fatalf("round %d: rejected at RetryAfter %v: %+v", round, d.RetryAfter, e)
				}
			}
		})
	}
}

// TestRetryAfterRealClock checks Retry-After against the Redis clock,
// which the test cannot move: it asks again until it is admitted, which
// must not happen before RetryAfter has passed, and must have happened for
// a request sent once it has (within a millisecond; TestRetryAfterIsExact
// checks to the microsecond on the caller clock). Retry-After is RetryAfter
// rounded up to whole seconds.
func TestRetryAfterRealClock(t *testing.T) {
	rdb := testenv.Redis(t)
	l := newLimiter(t, rdb, Log, "10/1s")
	id := testenv.Prefix(t)
	ctx := context.Background()
	for range 10 {
		if d, _ := l.Allow(ctx, "p", id, 1); !d.Allowed {
			t.Fatal("rejected below the limit")
		}
	}
	before := time.Now() // at most the Redis time of the 11th decision
	d, err := l.Allow(ctx, "p", id, 1)
	start := time.Now() // at least that time
	if err != nil || d.Allowed {
		t.Fatalf("11th = %+v, %v; want rejected", d, err)
	}
	if s := d.RetryAfterSeconds(); s != 1 {
		t.Errorf("Retry-After = %d, want 1", s)
	}
	// A rejected request is not recorded, so asking again until admitted
	// observes the moment room comes back.
	// Redis and this process read one system clock; a millisecond of
	// leeway for rounding.
	retryAt := start.Add(d.RetryAfter + time.Millisecond)
	testenv.WaitFor(t, time.Until(retryAt)+5*time.Second, "admission after Retry-After", func() bool {
		sent := time.Now()
		e, err := l.Allow(ctx, "p", id, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !e.Allowed {
			if sent.After(retryAt) {
				t.Fatalf("rejected %v after the 11th, past its RetryAfter %v: %+v", sent.Sub(start), d.RetryAfter, e)
			}
			return false
		}
		if early := d.RetryAfter - time.Since(before); early > time.Millisecond {
			t.Fatalf("admitted %v before RetryAfter %v", early, d.RetryAfter)
		}
		return true
	})
}
