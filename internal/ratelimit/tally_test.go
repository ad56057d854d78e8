package ratelimit

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// tallyLimiter has policies "p" (log, 5/1m and 7/1d@calendar) and "c"
// (counter, 3/1m), tallying identities that start with "key:" for days.
func tallyLimiter(t *testing.T, rdb redis.UniversalClient, days int) *Limiter {
	t.Helper()
	p := NewPolicy("p", mustWindows(t, "5/1m,7/1d@calendar")...)
	c := NewPolicy("c", mustWindows(t, "3/1m")...)
	c.Algorithm = Counter
	p.Failure, c.Failure = FailClosed, FailClosed
	l, err := New(rdb, map[string]Policy{"p": p, "c": c}, Options{
		Registerer: prometheus.NewRegistry(), Timeout: 5 * time.Second, TallyDays: days,
		TallyOf: func(id string) bool { return strings.HasPrefix(id, "key:") },
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustWindows(t *testing.T, s string) []Window {
	t.Helper()
	ws, err := ParseWindows(s)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestTallyCountsEveryDecision checks that the tally holds exactly the
// requests admitted and refused, per policy and day, under concurrency,
// for both algorithms and on a Cluster; that reads and untallied
// identities leave none; and that it expires days after its day.
func TestTallyCountsEveryDecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdb  func(testing.TB) redis.UniversalClient
	}{{"redis", testenv.Redis}, {"cluster", testenv.RedisCluster}} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := tc.rdb(t)
			l := tallyLimiter(t, rdb, 3)
			ctx := context.Background()
			id := "key:" + testenv.Prefix(t)
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					if _, err := l.Allow(ctx, "p", id, 1); err != nil {
						t.Error(err)
					}
				})
				wg.Go(func() {
					if _, err := l.Allow(ctx, "c", id, 1); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if _, err := l.Usage(ctx, Request{Policy: "p", Identity: id}); err != nil {
				t.Fatal(err)
			}
			anon := "ip:" + testenv.Prefix(t)
			if _, err := l.Allow(ctx, "p", anon, 1); err != nil {
				t.Fatal(err)
			}
			got, err := l.Tallies(ctx, id, 2)
			if err != nil {
				t.Fatal(err)
			}
			today := time.Now().UTC().Format(time.DateOnly)
			want := []DayTally{{today, "c", 3, 17, 3, Requests}, {today, "p", 5, 15, 5, Requests}}
			if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
				t.Fatalf("Tallies = %+v, want %+v", got, want)
			}
			if got, _ := l.Tallies(ctx, anon, 2); len(got) != 0 {
				t.Errorf("an identity TallyOf leaves out has tallies %+v", got)
			}
			key := tallyKey(logKey("p", id), today)
			ttl := rdb.PTTL(ctx, key).Val()
			if min, max := 3*24*time.Hour, 4*24*time.Hour; ttl <= min || ttl > max {
				t.Errorf("PTTL %s = %s, want in (%s, %s]", key, ttl, min, max)
			}
		})
	}
}

// TestTallyDaysApart tallies decisions on a moved clock: each lands on
// its UTC day, and a limiter without TallyDays writes none.
func TestTallyDaysApart(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := tallyLimiter(t, rdb, 2)
	id := "key:" + testenv.Prefix(t)
	for _, s := range []string{"2026-03-28T23:59:59.9Z", "2026-03-29T00:00:00Z", "2026-03-29T00:00:01Z"} {
		if _, err := l.Check(ctx, Request{Policy: "p", Identity: id, At: at(t, s)}); err != nil {
			t.Fatal(err)
		}
	}
	for day, want := range map[string]string{"2026-03-28": "1", "2026-03-29": "2"} {
		if got := rdb.HGet(ctx, tallyKey(logKey("p", id), day), "a").Val(); got != want {
			t.Errorf("admitted on %s = %q, want %q", day, got, want)
		}
	}
	off := tallyLimiter(t, rdb, 0)
	other := "key:" + testenv.Prefix(t) + "-off"
	if _, err := off.Allow(ctx, "p", other, 1); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, tallyKey(logKey("p", other), time.Now().UTC().Format(time.DateOnly))).Val(); n != 0 {
		t.Errorf("a limiter without TallyDays wrote a tally")
	}
}

// TestSetPoliciesKeepsCounts changes a policy while it runs: the counts of
// an unchanged window survive, a new limit judges the same log at once,
// and a set that drops a policy or fails validation changes nothing.
func TestSetPoliciesKeepsCounts(t *testing.T) {
	for _, st := range stores(t) {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			p := NewPolicy("p", mustWindows(t, "4/1m")...)
			p.Failure = FailClosed
			l, err := New(st.rdb, map[string]Policy{"p": p, "q": p}, Options{Registerer: prometheus.NewRegistry(), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			id := "key:" + testenv.Prefix(t)
			admit := func(n int) (got int) {
				for range n {
					d, err := l.Allow(ctx, "p", id, 1)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						got++
					}
				}
				return got
			}
			if got := admit(3); got != 3 {
				t.Fatalf("admitted %d of 3 under 4/1m", got)
			}
			q := p
			q.Windows = mustWindows(t, "4/1m,100/1h")
			if err := l.SetPolicies(map[string]Policy{"p": q, "q": p}); err != nil {
				t.Fatal(err)
			}
			if got := admit(3); got != 1 {
				t.Errorf("after adding a window, admitted %d of 3, want 1 (the 1m window kept its 3)", got)
			}
			q.Windows = mustWindows(t, "6/1m")
			if err := l.SetPolicies(map[string]Policy{"p": q, "q": p}); err != nil {
				t.Fatal(err)
			}
			if got := admit(3); got != 2 {
				t.Errorf("after raising the limit to 6, admitted %d of 3, want 2", got)
			}
			for _, bad := range []map[string]Policy{
				{"p": q},
				{"p": {Name: "p", Windows: mustWindows(t, "1/1s"), Algorithm: "fast", Failure: FailLocal}, "q": p},
			} {
				if err := l.SetPolicies(bad); err == nil {
					t.Errorf("SetPolicies(%v) = nil, want an error", bad)
				}
			}
			if got, _ := l.Policy("p"); got.Windows[0].Limit != 6 {
				t.Errorf("a refused set changed p to %v", got.Windows)
			}
		})
	}
}

// TestTallySpentAsSettled: a key's tally says what its admitted requests
// spent in the policy's unit once settled, refunds included: three
// requests reserving a unit each, settled at 0, 2 and 9, spent 11.
func TestTallySpentAsSettled(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := tallyLimiter(t, rdb, 2)
	id := "key:" + testenv.Prefix(t)
	for _, actual := range []int{0, 2, 9} {
		d, err := l.Allow(ctx, "p", id, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v", d, err)
		}
		if err := l.Settle(ctx, d, actual); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Tallies(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Admitted != 3 || got[0].Spent != 11 {
		t.Errorf("Tallies = %+v, want 3 admitted that spent 11", got)
	}
}

// TestRefundLeavesNoTally: a decision refunded because another policy
// refused its request is taken back out of the day's tally, units and
// admission alike.
func TestRefundLeavesNoTally(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := tallyLimiter(t, rdb, 2)
	id := "key:" + testenv.Prefix(t)
	d, err := l.Allow(ctx, "p", id, 2)
	if err != nil || !d.Allowed {
		t.Fatalf("Allow = %+v, %v", d, err)
	}
	if err := l.Refund(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Tallies(ctx, id, 1); err != nil || len(got) != 0 {
		t.Errorf("Tallies after a refund = %+v, %v; want none", got, err)
	}
	u, err := l.Usage(ctx, Request{Policy: "p", Identity: id})
	if err != nil || u.Windows[0].Used != 0 {
		t.Errorf("used after a refund = %+v, %v; want 0", u, err)
	}
}
