package gate

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/testenv"
)

// TestPassSettlesWhatWasSpent: through a real limiter, a policy of
// database time is charged the measured milliseconds, and the next
// request of the same kind reserves what was learned; a policy of
// requests is charged what the handler reported.
func TestPassSettlesWhatWasSpent(t *testing.T) {
	rdb := testenv.Redis(t)
	ms, err := ratelimit.ParseWindows("1000ms/1m")
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := ratelimit.ParseWindows("100/1m")
	ps := map[string]ratelimit.Policy{}
	ps["db"] = ratelimit.NewPolicy("db", ms...)
	ps["pages"] = ratelimit.NewPolicy("pages", reqs...)
	lim, err := ratelimit.New(rdb, ps, ratelimit.Options{Registerer: prometheus.NewRegistry(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id := testenv.Prefix(t)
	g := New(access.Settings{}, lim, nil)
	// The request's meter: what its statements took, growing as they
	// run; each request below spends spent of it.
	var meter time.Duration
	spent := 30 * time.Millisecond
	g.DBTime = func(context.Context) time.Duration { return meter }
	serveAs := func(policy string, ask Ask, u Usage) {
		t.Helper()
		w := serve(g, nil, func(c *gin.Context) {
			c.Request = c.Request.WithContext(As(c.Request.Context(), id, ""))
			p, ok := admit(c, g, Ask{Layers: ask.Layers, Cost: ask.Cost, Policy: policy})
			if !ok {
				return
			}
			p.Spent(u)
			meter += spent
			p.Done()
			c.Status(http.StatusOK)
		})
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", policy, w.Code, w.Body)
		}
	}
	used := func(policy string) int {
		t.Helper()
		u, err := lim.Usage(context.Background(), ratelimit.Request{Policy: policy, Identity: id})
		if err != nil {
			t.Fatal(err)
		}
		return u.Windows[0].Used
	}
	serveAs("db", Ask{Layers: []string{"places"}}, Usage{})
	if got := used("db"); got != 30 {
		t.Errorf("after one request of 30 ms: %d used, want 30", got)
	}
	if got := g.est.of(learnKey("GET /x", "db", Ask{Layers: []string{"places"}}), 1); got != 30 {
		t.Errorf("the next reservation is %d ms, want the 30 learned", got)
	}
	spent = 400 * time.Microsecond // below a millisecond: still 1
	serveAs("db", Ask{Layers: []string{"places"}}, Usage{})
	if got := used("db"); got != 31 {
		t.Errorf("after a request of 0.4 ms: %d used, want 31", got)
	}
	serveAs("pages", Ask{Cost: 10}, Usage{Cost: 2})
	if got := used("pages"); got != 2 {
		t.Errorf("a page reserving 10 and reporting 2: %d used, want 2", got)
	}
	serveAs("pages", Ask{Cost: 3}, Usage{})
	if got := used("pages"); got != 5 {
		t.Errorf("a page reserving 3 and reporting nothing: %d used, want 5", got)
	}
}

// newLimiter is a limiter on the test's Redis with windows (in the
// ParseWindows syntax) per policy.
func newLimiter(t *testing.T, windows map[string]string) *ratelimit.Limiter {
	t.Helper()
	ps := map[string]ratelimit.Policy{}
	for name, w := range windows {
		ws, err := ratelimit.ParseWindows(w)
		if err != nil {
			t.Fatal(err)
		}
		ps[name] = ratelimit.NewPolicy(name, ws...)
	}
	lim, err := ratelimit.New(testenv.Redis(t), ps, ratelimit.Options{Registerer: prometheus.NewRegistry(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	return lim
}

// usedOf reads what identity has used of policy's first window.
func usedOf(t *testing.T, lim *ratelimit.Limiter, policy, identity string) int {
	t.Helper()
	u, err := lim.Usage(context.Background(), ratelimit.Request{Policy: policy, Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	return u.Windows[0].Used
}

// TestMultiplierUnderDatabaseTime: a layer of cost 5 whose request held
// a connection 30 ms is charged 150 ms; two layers share the time
// measured equally, each share counted its own multiplier times.
func TestMultiplierUnderDatabaseTime(t *testing.T) {
	lim := newLimiter(t, map[string]string{"db": "100000ms/1m"})
	rules := access.Settings{Layers: map[string]access.Rule{"roads": {Cost: 5}}}
	for _, tc := range []struct {
		name   string
		layers []string
		want   int
	}{
		{"OneLayer", []string{"roads"}, 150},
		{"Plain", []string{"places"}, 30},
		{"Both", []string{"roads", "places"}, 90}, // 15 ms each: 75 + 15
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := testenv.Prefix(t)
			g := New(rules, lim, nil)
			var meter time.Duration
			g.DBTime = func(context.Context) time.Duration { return meter }
			p, err := g.Admit(As(context.Background(), id, ""), Ask{Layers: tc.layers, Policy: "db"})
			if err != nil {
				t.Fatal(err)
			}
			meter += 30 * time.Millisecond
			p.Done()
			if got := usedOf(t, lim, "db", id); got != tc.want {
				t.Errorf("charged %d ms, want %d", got, tc.want)
			}
		})
	}
}

// TestRefusalSpendsNothing: a request refused by its second policy
// spends nothing on its first, however often it is refused.
func TestRefusalSpendsNothing(t *testing.T) {
	lim := newLimiter(t, map[string]string{"route": "100/1m", "heavy": "1/1m"})
	rules := access.Settings{Layers: map[string]access.Rule{"roads": {Policy: "heavy"}}}
	id := testenv.Prefix(t)
	g := New(rules, lim, nil)
	ask := Ask{Layers: []string{"places", "roads"}, Policy: "route"}
	p, err := g.Admit(As(context.Background(), id, ""), ask)
	if err != nil {
		t.Fatalf("first request refused: %v", err)
	}
	p.Done()
	for range 5 {
		if _, err := g.Admit(As(context.Background(), id, ""), ask); err == nil {
			t.Fatal("a request over heavy's limit was admitted")
		}
	}
	if got := usedOf(t, lim, "route", id); got != 1 {
		t.Errorf("route policy used %d after 1 admitted and 5 refused, want 1", got)
	}
	if got := usedOf(t, lim, "heavy", id); got != 1 {
		t.Errorf("heavy policy used %d, want 1", got)
	}
}

// TestCachedAndRenderedTogether: a tile whose render is refused spends
// nothing on the cached policy for the layers found in the cache.
func TestCachedAndRenderedTogether(t *testing.T) {
	lim := newLimiter(t, map[string]string{"tiles": "1/1m", "tiles-cached": "100/1m"})
	id := testenv.Prefix(t)
	g := New(access.Settings{}, lim, nil)
	ctx, _ := WithRoute(As(context.Background(), id, ""), "GET /tiles", Spend{Policy: "tiles", Cached: "tiles-cached", Layers: true})
	ask := Ask{Layers: []string{"roads"}, Cached: []string{"places"}}
	for i := range 4 {
		p, err := g.Admit(ctx, ask)
		if (err == nil) != (i == 0) {
			t.Fatalf("request %d: err %v", i, err)
		}
		if p != nil {
			p.Done()
		}
	}
	if got := usedOf(t, lim, "tiles-cached", id); got != 1 {
		t.Errorf("tiles-cached used %d after 1 tile admitted and 3 refused renders, want 1", got)
	}
}

// TestHeaderAsSettled: once settled, a pass's RateLimit fields show the
// request's true cost, not its reservation: 1 ms reserved, 30 measured,
// 970 of 1000 remain.
func TestHeaderAsSettled(t *testing.T) {
	lim := newLimiter(t, map[string]string{"db": "1000ms/1m"})
	id := testenv.Prefix(t)
	g := New(access.Settings{}, lim, nil)
	var meter time.Duration
	g.DBTime = func(context.Context) time.Duration { return meter }
	p, err := g.Admit(As(context.Background(), id, ""), Ask{Policy: "db"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Header().Get("RateLimit-Remaining"); got != "999" {
		t.Errorf("RateLimit-Remaining at admission = %q, want 999 (1 ms reserved)", got)
	}
	meter += 30 * time.Millisecond
	p.Settle()
	if got := p.Header().Get("RateLimit-Remaining"); got != "970" {
		t.Errorf("RateLimit-Remaining once settled = %q, want 970", got)
	}
	p.Done()
	if got := usedOf(t, lim, "db", id); got != 30 {
		t.Errorf("used %d ms after Settle and Done, want 30 (settled once)", got)
	}
}
