package ratelimit

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/testenv"
)

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type headers struct{ Policy, Current, Limit, Remaining, Reset, RetryAfter string }

func headersOf(w *httptest.ResponseRecorder) headers {
	h := w.Header()
	return headers{h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"), h.Get("Retry-After")}
}

// TestHeadersReportTheTightestWindow: with several windows, the older trio
// describes the one with the fewest remaining (then the latest reset), on
// admitted and refused answers alike.
func TestHeadersReportTheTightestWindow(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, tc := range []struct {
		name, windows string
		n             int
		want          []int
		last          headers
	}{
		{"SecondWindowTighter", "5/1s,3/1m", 4, []int{200, 200, 200, 429},
			headers{`"p";q=5;w=1, "p-1m";q=3;w=60`, `"p";r=2;t=1, "p-1m";r=0;t=60`, "3", "0", "60", "60"}},
		{"TieGoesToTheLaterReset", "3/1s,3/1h", 3, []int{200, 200, 200},
			headers{`"p";q=3;w=1, "p-1h";q=3;w=3600`, `"p";r=0;t=1, "p-1h";r=0;t=3600`, "3", "0", "3600", ""}},
		{"FirstWindowTighter", "2/1s,30/1m", 3, []int{200, 200, 429},
			headers{`"p";q=2;w=1, "p-1m";q=30;w=60`, `"p";r=0;t=1, "p-1m";r=28;t=60`, "2", "0", "1", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter(newLimiter(t, rdb, Log, tc.windows), "p", nil, nil)
			key := testenv.Prefix(t)
			var w *httptest.ResponseRecorder
			for i, want := range tc.want {
				if w = get(r, key, ""); w.Code != want {
					t.Fatalf("request %d = %d, want %d", i, w.Code, want)
				}
				if w.Header().Get("RateLimit") == "" || w.Header().Get("RateLimit-Remaining") == "" {
					t.Errorf("request %d (%d) lacks the RateLimit headers", i, w.Code)
				}
			}
			if diff := cmp.Diff(tc.last, headersOf(w)); diff != "" {
				t.Errorf("last answer's headers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCalendarQuotaOverHTTP: on a clock the test moves, a daily quota's
// 429 names the quota, has Retry-After at midnight, and its headers report
// the quota as the tightest window; at midnight the quota admits again.
func TestCalendarQuotaOverHTTP(t *testing.T) {
	ws, _ := ParseWindows("5/1s,3/1d@calendar")
	c := &clock{t: at(t, "2026-03-10T23:59:30Z")}
	l, err := New(testenv.Redis(t), map[string]Policy{"p": NewPolicy("p", ws...)}, Options{Registerer: prometheus.NewRegistry(), Now: c.Now, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRouter(l, "p", nil, nil)
	key := testenv.Prefix(t)
	pol := `"p";q=5;w=1, "p-1d@calendar";q=3;w=86400`
	for i, want := range []struct {
		status int
		h      headers
	}{
		{200, headers{pol, `"p";r=4;t=1, "p-1d@calendar";r=2;t=30`, "3", "2", "30", ""}},
		{200, headers{pol, `"p";r=3;t=1, "p-1d@calendar";r=1;t=30`, "3", "1", "30", ""}},
		{200, headers{pol, `"p";r=2;t=1, "p-1d@calendar";r=0;t=30`, "3", "0", "30", ""}},
		{429, headers{pol, `"p";r=2;t=1, "p-1d@calendar";r=0;t=30`, "3", "0", "30", "30"}},
	} {
		w := get(r, key, "")
		if w.Code != want.status {
			t.Fatalf("request %d = %d, want %d", i, w.Code, want.status)
		}
		if diff := cmp.Diff(want.h, headersOf(w)); diff != "" {
			t.Errorf("request %d headers (-want +got):\n%s", i, diff)
		}
		if w.Code == 429 {
			var p httpx.Problem
			_ = json.Unmarshal(w.Body.Bytes(), &p)
			if !cmp.Equal(p.ViolatedPolicies, []string{"p-1d@calendar"}) {
				t.Errorf("429 names %v, want [p-1d@calendar]", p.ViolatedPolicies)
			}
		}
	}
	c.Set(at(t, "2026-03-10T23:59:59.9Z"))
	if w := get(r, key, ""); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Errorf("100ms before midnight = %d, Retry-After %q; want 429, 1", w.Code, w.Header().Get("Retry-After"))
	}
	c.Set(at(t, "2026-03-11T00:00:00Z"))
	w := get(r, key, "")
	if w.Code != 200 || w.Header().Get("RateLimit") != `"p";r=4;t=1, "p-1d@calendar";r=2;t=86400` {
		t.Errorf("at midnight = %d, RateLimit %q; want 200 with the new day's quota", w.Code, w.Header().Get("RateLimit"))
	}
}

// TestConcurrencyRefusalHasHeaders: a request refused for concurrency
// carries the RateLimit headers too, read without spending.
func TestConcurrencyRefusalHasHeaders(t *testing.T) {
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{Limit: 5, Period: time.Minute}}, Algorithm: Log, Failure: FailClosed, Concurrency: 1, Lease: 5 * time.Second}}
	l, err := New(testenv.Redis(t), ps, Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	hold, inside := make(chan struct{}), make(chan struct{})
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil, httpx.TrustedProxies{})
	r.GET("/x", l.middleware("c", nil, headerCaller), func(c *gin.Context) {
		if c.Query("hold") != "" {
			inside <- struct{}{}
			<-hold
		}
		c.Status(http.StatusOK)
	})
	key := testenv.Prefix(t)
	held := make(chan int)
	go func() { held <- get(r, key, "?hold=1").Code }()
	<-inside
	w := get(r, key, "")
	want := headers{`"c";q=5;w=60`, `"c";r=4;t=60`, "5", "4", "60", "1"}
	if diff := cmp.Diff(want, headersOf(w)); w.Code != 429 || diff != "" {
		t.Errorf("refused for concurrency = %d, headers (-want +got):\n%s", w.Code, diff)
	}
	close(hold)
	if c := <-held; c != 200 {
		t.Errorf("held request = %d", c)
	}
}

// TestHeaderFields: a decision's fields, keyed as http.Header.Get looks
// them up, with one item a window in the draft's lists.
func TestHeaderFields(t *testing.T) {
	d := Decision{Allowed: true, Windows: []WindowState{
		{Window: Window{Limit: 10, Period: time.Second}, Name: "geofence", Remaining: 7, Reset: 300 * time.Millisecond},
		{Window: Window{Limit: 1000, Period: 24 * time.Hour}, Name: "geofence-day", Remaining: 5, Reset: 90 * time.Minute},
	}}
	h := d.Header()
	for k := range h {
		if got := textproto.CanonicalMIMEHeaderKey(k); got != k {
			t.Errorf("key %q is not canonical (%q): Get misses it", k, got)
		}
	}
	want := map[string]string{
		"RateLimit-Policy":    `"geofence";q=10;w=1, "geofence-day";q=1000;w=86400`,
		"RateLimit":           `"geofence";r=7;t=1, "geofence-day";r=5;t=5400`,
		"RateLimit-Limit":     "1000",
		"RateLimit-Remaining": "5",
		"RateLimit-Reset":     "5400",
		"Retry-After":         "",
	}
	for k, w := range want {
		if got := h.Get(k); got != w {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
}
