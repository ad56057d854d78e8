package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// quotaLimiter returns a Limiter on rdb (nil: in process) whose policy "p"
// has the given windows, algorithm and time zone.
func quotaLimiter(t *testing.T, rdb redis.UniversalClient, alg Algorithm, windows string, loc *time.Location) *Limiter {
	t.Helper()
	ws, err := ParseWindows(windows)
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Name: "p", Windows: ws, Algorithm: alg, Failure: FailClosed, Lease: 30 * time.Second, Location: loc}
	l, err := New(rdb, map[string]Policy{"p": p}, Options{Registerer: prometheus.NewRegistry(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// stores are the places a decision is made: Redis, and the in-process twin.
func stores(t *testing.T) []struct {
	name string
	rdb  redis.UniversalClient
} {
	return []struct {
		name string
		rdb  redis.UniversalClient
	}{{"redis", testenv.Redis(t)}, {"local", nil}}
}

// step is one request of a boundary test and what it must get.
type step struct {
	at        string
	cost      int
	allowed   bool
	retry     time.Duration // RetryAfter of a refusal
	violated  string        // the window that refused it
	remaining []int         // per window, after the request
}

func runSteps(t *testing.T, l *Limiter, id string, steps []step) {
	t.Helper()
	for i, s := range steps {
		d, err := l.Check(context.Background(), Request{Policy: "p", Identity: id, Cost: s.cost, At: at(t, s.at)})
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.at, err)
		}
		var rem []int
		for _, w := range d.Windows {
			rem = append(rem, w.Remaining)
		}
		if d.Allowed != s.allowed || !reflect.DeepEqual(rem, s.remaining) {
			t.Fatalf("step %d (%s, cost %d) = allowed %v, remaining %v; want %v, %v", i, s.at, s.cost, d.Allowed, rem, s.allowed, s.remaining)
		}
		if !s.allowed {
			if d.RetryAfter != s.retry {
				t.Errorf("step %d (%s): RetryAfter %v, want %v", i, s.at, d.RetryAfter, s.retry)
			}
			if v := d.Violated(); len(v) != 1 || v[0] != s.violated {
				t.Errorf("step %d (%s): violated %v, want [%s]", i, s.at, v, s.violated)
			}
		}
	}
}

// TestCalendarDayBoundary drives a policy of a sliding hour and a daily
// quota across midnight UTC on the caller clock, in Redis and in process,
// for both algorithms: the quota refuses until midnight with RetryAfter
// exactly the time left, starts afresh at midnight while the sliding
// window keeps counting across it, and a request refused by either spends
// nothing in the other.
func TestCalendarDayBoundary(t *testing.T) {
	for _, st := range stores(t) {
		for _, alg := range []Algorithm{Log, Counter} {
			t.Run(st.name+"/"+string(alg), func(t *testing.T) {
				l := quotaLimiter(t, st.rdb, alg, "5/1h,3/1d@calendar", nil)
				id := testenv.Prefix(t)
				runSteps(t, l, id, []step{
					{at: "2026-03-10T23:59:58Z", cost: 1, allowed: true, remaining: []int{4, 2}},
					{at: "2026-03-10T23:59:58Z", cost: 2, allowed: true, remaining: []int{2, 0}},
					{at: "2026-03-10T23:59:58Z", cost: 1, allowed: false, retry: 2 * time.Second, violated: "p-1d@calendar", remaining: []int{2, 0}},
					{at: "2026-03-10T23:59:59.999999Z", cost: 1, allowed: false, retry: time.Microsecond, violated: "p-1d@calendar", remaining: []int{2, 0}},
					// Midnight: a new day, the same hour.
					{at: "2026-03-11T00:00:00Z", cost: 1, allowed: true, remaining: []int{1, 2}},
					{at: "2026-03-11T00:00:01Z", cost: 2, allowed: false, violated: "p", remaining: []int{1, 2}, retry: retryFor(alg)},
					{at: "2026-03-11T00:00:01Z", cost: 1, allowed: true, remaining: []int{0, 1}},
					// The hour refuses; the day's quota is not charged for it.
					{at: "2026-03-11T00:00:02Z", cost: 1, allowed: false, violated: "p", remaining: []int{0, 1}, retry: retryFor(alg) - time.Second},
				})
				u, err := l.Usage(context.Background(), Request{Policy: "p", Identity: id, At: at(t, "2026-03-11T00:00:02Z")})
				if err != nil || len(u.Windows) != 2 || u.Windows[1].Used != 2 {
					t.Errorf("Usage after the refusals = %v, %v; want the day's quota at 2 used", u.Windows, err)
				}
			})
		}
	}
}

// retryFor is when the hour of TestCalendarDayBoundary admits a cost of 2
// again, seen one second after midnight: the log frees its first unit an
// hour after 23:59:58; the counter weighs the previous hour's 3 units
// down to 2 by 00:20.
func retryFor(alg Algorithm) time.Duration {
	if alg == Log {
		return time.Hour - 3*time.Second
	}
	return 20*time.Minute - time.Second
}

// TestCalendarMonthBoundary: a monthly quota in a time zone resets at
// that zone's midnight on the first (23:00 UTC in Berlin's winter), and
// RetryAfter of a refusal is exactly the time until then.
func TestCalendarMonthBoundary(t *testing.T) {
	berlin := mustLocation(t, "Europe/Berlin")
	for _, st := range stores(t) {
		for _, alg := range []Algorithm{Log, Counter} {
			t.Run(st.name+"/"+string(alg), func(t *testing.T) {
				l := quotaLimiter(t, st.rdb, alg, "10/1s,4/1d@calendar,5/1mo@calendar", berlin)
				runSteps(t, l, testenv.Prefix(t), []step{
					{at: "2026-01-30T12:00:00Z", cost: 3, allowed: true, remaining: []int{7, 1, 2}},
					{at: "2026-01-30T22:59:59Z", cost: 2, allowed: false, violated: "p-1d@calendar", retry: time.Second, remaining: []int{10, 1, 2}},
					// Berlin's 31 January.
					{at: "2026-01-30T23:00:00Z", cost: 2, allowed: true, remaining: []int{8, 2, 0}},
					{at: "2026-01-31T22:59:59.5Z", cost: 1, allowed: false, violated: "p-1mo@calendar", retry: 500 * time.Millisecond, remaining: []int{10, 2, 0}},
					// Berlin's February.
					{at: "2026-01-31T23:00:00Z", cost: 4, allowed: true, remaining: []int{6, 0, 1}},
					{at: "2026-01-31T23:00:00Z", cost: 1, allowed: false, violated: "p-1d@calendar", retry: 24 * time.Hour, remaining: []int{6, 0, 1}},
				})
			})
		}
	}
}

// TestCalendarWindowState: the state of a quota reports its real period
// (23 hours on the day Berlin's clocks go forward) and when it ends.
func TestCalendarWindowState(t *testing.T) {
	berlin := mustLocation(t, "Europe/Berlin")
	l := quotaLimiter(t, testenv.Redis(t), Log, "10/1s,100/1d@calendar", berlin)
	d, err := l.Check(context.Background(), Request{Policy: "p", Identity: testenv.Prefix(t), Cost: 1, At: at(t, "2026-03-29T12:00:00Z")})
	if err != nil || len(d.Windows) != 2 {
		t.Fatalf("Check = %+v, %v", d, err)
	}
	q := d.Windows[1]
	if q.Name != "p-1d@calendar" || q.Period != 23*time.Hour || q.Reset != 10*time.Hour || !q.Ends.Equal(at(t, "2026-03-29T22:00:00Z")) || q.Used != 1 {
		t.Errorf("quota state = %+v; want p-1d@calendar, a period of 23h, reset in 10h at 22:00 UTC, 1 used", q)
	}
}

// TestQuotaKeysAndTTL: a daily quota keeps one integer per identity and
// day, next to the log, expiring a minute after the day ends; a policy of
// quotas only writes no log at all.
func TestQuotaKeysAndTTL(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		alg     Algorithm
		windows string
		main    string // the sliding-window key's prefix, "" for none
	}{
		{Log, "10/1s,1000/1d@calendar", "rl:p:"},
		{Counter, "10/1s,1000/1d@calendar", "rlc:p:"},
		{Log, "1000/1d@calendar", ""},
	} {
		t.Run(string(tc.alg)+"/"+tc.windows, func(t *testing.T) {
			l := quotaLimiter(t, rdb, tc.alg, tc.windows, nil)
			id := "key:" + testenv.Prefix(t)
			for range 7 {
				if d, err := l.Allow(ctx, "p", id, 1); err != nil || !d.Allowed {
					t.Fatalf("Allow = %+v, %v", d, err)
				}
			}
			now := time.Now().UTC()
			_, end, label := period(Day, time.UTC, now)
			main := tc.main + id
			if tc.main == "" {
				main = "rl:p:" + id
				if n := rdb.Exists(ctx, main, "rlc:p:"+id).Val(); n != 0 {
					t.Errorf("a quota-only policy wrote %d sliding-window keys", n)
				}
			}
			key := "{" + main + "}:day:" + label
			if n, err := rdb.Get(ctx, key).Int(); err != nil || n != 7 {
				t.Errorf("GET %s = %d, %v; want 7", key, n, err)
			}
			ttl := rdb.PTTL(ctx, key).Val()
			if want := time.Until(end) + quotaGrace; ttl <= 0 || ttl > want+time.Second || ttl < want-10*time.Second {
				t.Errorf("PTTL %s = %v, want about %v (the day's end and a minute)", key, ttl, want)
			}
			if tc.main != "" {
				if ttl := rdb.PTTL(ctx, main).Val(); ttl <= 0 || ttl > time.Second {
					t.Errorf("PTTL %s = %v, want at most the 1s window", main, ttl)
				}
			}
		})
	}
}

// TestLocalMatchesRedisWithQuotas is TestLocalMatchesRedis for policies
// with calendar quotas, on a sequence that crosses the end of a day and
// of a month.
func TestLocalMatchesRedisWithQuotas(t *testing.T) {
	rdb := testenv.Redis(t)
	berlin := mustLocation(t, "Europe/Berlin")
	for _, tc := range []struct {
		alg     Algorithm
		windows string
		loc     *time.Location
	}{
		{Log, "5/1s,20/1d@calendar", nil},
		{Log, "3/2s,30/1m,40/1d@calendar,60/1mo@calendar", nil},
		{Log, "25/1d@calendar", berlin},
		{Counter, "5/1s,20/1d@calendar", nil},
		{Counter, "40/3s,100/1m,45/1d@calendar,70/1mo@calendar", berlin},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.alg, tc.windows, tc.loc), func(t *testing.T) {
			ws, err := ParseWindows(tc.windows)
			if err != nil {
				t.Fatal(err)
			}
			set := newWindowSetIn("p", ws, tc.loc)
			rs, ls := newRedisStore(rdb), newLocalStore()
			prefix := testenv.Prefix(t)
			rng := rand.New(rand.NewPCG(2, uint64(len(tc.windows))))
			// 40 s before the month ends where the policy lives.
			loc := tc.loc
			if loc == nil {
				loc = time.UTC
			}
			now := time.Date(2026, 2, 1, 0, 0, 0, 0, loc).Add(-40 * time.Second).UnixMicro()
			var admitted, rejected, crossed int
			for i := range 600 {
				now += rng.Int64N(250_000)
				key := fmt.Sprintf("%s:%s:%d", tc.alg, prefix, rng.IntN(3))
				cost := 1 + rng.IntN(3)
				if rng.IntN(20) == 0 {
					cost = 20
				}
				if rng.IntN(10) == 0 {
					cost = 0 // a read
				}
				want, err := rs.decide(context.Background(), tc.alg, key, now, cost, set, fmt.Sprintf("m%d", i), nil)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := ls.decide(context.Background(), tc.alg, key, now, cost, set, "", nil)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (t=%d key=%s cost=%d): local = %+v, redis = %+v", i, now, key, cost, got, want)
				}
				if now >= time.Date(2026, 2, 1, 0, 0, 0, 0, loc).UnixMicro() {
					crossed++
				}
				if cost > 0 && want.admitted {
					admitted++
				} else if cost > 0 {
					rejected++
				}
			}
			if admitted < 50 || rejected < 50 || crossed < 100 {
				t.Errorf("admitted %d, rejected %d, %d after the month's end: the sequence should exercise all", admitted, rejected, crossed)
			}
		})
	}
}
