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
	g := New(access.Settings{}, lim, func(*http.Request) (string, string) { return id, "" }, nil)
	spent := 30 * time.Millisecond
	g.DBTime = func(context.Context) time.Duration { return spent }
	serveAs := func(policy string, ask Ask, u Usage) {
		t.Helper()
		w := serve(g, nil, func(c *gin.Context) {
			p, ok := g.Admit(c, Ask{Layers: ask.Layers, Cost: ask.Cost, Policy: policy})
			if !ok {
				return
			}
			p.Spent(u)
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
	if got := g.est.of(learnKey("GET /x", charge{policy: "db"}, Ask{Layers: []string{"places"}}), 1); got != 30 {
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
