package ratelimit

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/testenv"
)

func newRouter(l *Limiter, policy string, cost func(*gin.Context) int, h gin.HandlerFunc) *gin.Engine {
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil, httpx.TrustedProxies{})
	if h == nil {
		h = func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"ok": true}) }
	}
	r.GET("/x", l.middleware(policy, cost, headerCaller), h)
	return r
}

// headerCaller names a test request by its x-api-key header, as
// auth.Identity.LimitKey would for an API key whose id is the header's
// value.
func headerCaller(r *http.Request) (string, string) { return "key:" + r.Header.Get("x-api-key"), "" }

// queryCost prices a test request by its cost parameter.
func queryCost(c *gin.Context) int {
	n, _ := strconv.Atoi(c.Query("cost"))
	return n
}

func get(r http.Handler, key, query string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/x"+query, nil)
	req.Header.Set("x-api-key", key)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

func TestHeadersAndProblemBody(t *testing.T) {
	l := newLimiter(t, testenv.Redis(t), Log, "3/1s,5/1m")
	r := newRouter(l, "p", nil, nil)
	key := testenv.Prefix(t)
	type hdrs struct{ Policy, Current, Limit, Remaining, Reset, RetryAfter string }
	wants := []struct {
		status int
		h      hdrs
	}{
		{200, hdrs{`"p";q=3;w=1, "p-1m";q=5;w=60`, `"p";r=2;t=1, "p-1m";r=4;t=60`, "3", "2", "1", ""}},
		{200, hdrs{`"p";q=3;w=1, "p-1m";q=5;w=60`, `"p";r=1;t=1, "p-1m";r=3;t=60`, "3", "1", "1", ""}},
		{200, hdrs{`"p";q=3;w=1, "p-1m";q=5;w=60`, `"p";r=0;t=1, "p-1m";r=2;t=60`, "3", "0", "1", ""}},
		{429, hdrs{`"p";q=3;w=1, "p-1m";q=5;w=60`, `"p";r=0;t=1, "p-1m";r=2;t=60`, "3", "0", "1", "1"}},
	}
	for i, want := range wants {
		w := get(r, key, "")
		h := w.Header()
		got := hdrs{h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"), h.Get("Retry-After")}
		if w.Code != want.status {
			t.Fatalf("request %d: status = %d, want %d", i, w.Code, want.status)
		}
		if diff := cmp.Diff(want.h, got); diff != "" {
			t.Errorf("request %d headers (-want +got):\n%s", i, diff)
		}
		if w.Code == 429 {
			if ct := h.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("429 Content-Type = %q", ct)
			}
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"type": "https://iana.org/assignments/http-problem-types#quota-exceeded", "title": "Too Many Requests",
				"status": 429.0, "detail": "Rate limit exceeded.", "violated-policies": []any{"p"},
			}
			if diff := cmp.Diff(want, body); diff != "" {
				t.Errorf("429 body (-want +got):\n%s", diff)
			}
		}
	}
}

func TestImpossibleCostIsRefusedWithoutRetryAfter(t *testing.T) {
	l := newLimiter(t, testenv.Redis(t), Log, "10/1s")
	r := newRouter(l, "p", queryCost, nil)
	key := testenv.Prefix(t)
	// A cost of 8 is admitted once, then too little room is left.
	if w := get(r, key, "?cost=8"); w.Code != 200 || w.Header().Get("RateLimit-Remaining") != "2" {
		t.Fatalf("cost 8: %d remaining %s, want 200 with 2 left", w.Code, w.Header().Get("RateLimit-Remaining"))
	}
	if w := get(r, key, "?cost=8"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("second cost 8: %d Retry-After %q, want 429 with Retry-After 1", w.Code, w.Header().Get("Retry-After"))
	}
	l2 := newLimiter(t, testenv.Redis(t), Log, "5/1s")
	r2 := newRouter(l2, "p", queryCost, nil)
	w := get(r2, key, "?cost=8")
	if w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("cost 8 under 5/1s: %d Retry-After %q, want 429 without Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	var p httpx.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if want := `Rate limit exceeded: this request costs 8 units but policy "p" allows at most 5 per 1s, so it can never be admitted; make it cheaper.`; p.Detail != want {
		t.Errorf("detail = %q, want %q", p.Detail, want)
	}
}

func TestConcurrencyCap(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{Limit: 1000, Period: time.Second}}, Algorithm: Log, Failure: FailClosed, Concurrency: 3, Lease: 5 * time.Second}}
	l, err := New(rdb, ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var inside sync.WaitGroup
	r := newRouter(l, "c", nil, func(c *gin.Context) {
		inside.Done()
		<-hold
		c.Status(http.StatusNoContent)
	})
	key := testenv.Prefix(t)
	codes := make(chan int, 10)
	inside.Add(3)
	for range 3 {
		go func() { codes <- get(r, key, "").Code }()
	}
	inside.Wait()
	for i := range 4 {
		if w := get(r, key, ""); w.Code != 429 {
			t.Fatalf("request %d with 3 in flight: %d, want 429", i, w.Code)
		}
	}
	close(hold)
	for range 3 {
		if c := <-codes; c != http.StatusNoContent {
			t.Errorf("held request: %d", c)
		}
	}
	// Released: there is room again.
	inside.Add(1)
	if w := get(r, key, ""); w.Code != http.StatusNoContent {
		t.Fatalf("after release: %d, want 204", w.Code)
	}
}

func TestConcurrencyLeaseExpires(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{Limit: 1000, Period: time.Second}}, Algorithm: Log, Failure: FailClosed, Concurrency: 1, Lease: time.Second}}
	l, err := New(rdb, ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const lease = time.Second
	id := testenv.Prefix(t)
	ctx := t.Context()
	// Acquired and never released, as by a replica that died. The lease
	// runs on the Redis clock, which cannot be moved: the slot must come
	// free by itself once the lease has passed, not before.
	start := time.Now() // at most the Redis time of the first Acquire
	if _, ok, err := l.acquire(ctx, "c", id); !ok || err != nil {
		t.Fatalf("first Acquire = %v, %v", ok, err)
	}
	taken := time.Now() // at least that time
	if _, ok, _ := l.acquire(ctx, "c", id); ok {
		t.Fatal("second Acquire succeeded with the only slot taken")
	}
	if ttl := rdb.PTTL(ctx, flightKey("c", id)).Val(); ttl <= 0 || ttl > lease {
		t.Errorf("in-flight key PTTL = %v, want in (0, %v]", ttl, lease)
	}
	// A refused Acquire leaves nothing behind, so asking again until one
	// succeeds observes the moment the slot comes free. Redis and this
	// process read one system clock; a millisecond of leeway for rounding.
	var rel func()
	testenv.WaitFor(t, lease+5*time.Second, "a slot after the lease ended", func() bool {
		sent := time.Now()
		r, ok, err := l.acquire(ctx, "c", id)
		if err != nil {
			t.Fatalf("Acquire while the lease runs = %v", err)
		}
		if !ok {
			if d := sent.Sub(taken); d > lease+time.Millisecond {
				t.Fatalf("Acquire sent %v after the slot was taken was refused; its lease is %v", d, lease)
			}
			return false
		}
		if d := time.Since(start); d < lease-time.Millisecond {
			t.Fatalf("the slot came free %v after it was taken, before its lease (%v) ended", d, lease)
		}
		rel = r
		return true
	})
	rel()
	if n := rdb.ZCard(ctx, flightKey("c", id)).Val(); n != 0 {
		t.Errorf("after release: %d tokens, want 0", n)
	}
}

// TestAdmitCapsConcurrency: a handler that charges through Reserve gets
// the policy's in-flight cap: over it, 429 naming the
// concurrency policy without spending the rate budget; after release, room.
func TestAdmitCapsConcurrency(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{Limit: 5, Period: time.Minute}}, Algorithm: Log, Failure: FailClosed, Concurrency: 1, Lease: 5 * time.Second}}
	l, err := New(rdb, ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := "key:" + testenv.Prefix(t)
	hold, inside := make(chan struct{}), make(chan struct{})
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil, httpx.TrustedProxies{})
	r.GET("/x", func(c *gin.Context) {
		release, ok := l.admit(c, "c", 1, func(*http.Request) (string, string) { return id, "" })
		if !ok {
			return
		}
		defer release()
		if c.Query("hold") != "" {
			inside <- struct{}{}
			<-hold
		}
		c.Status(http.StatusOK)
	})
	do := func(q string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x"+q, nil))
		return w
	}
	held := make(chan int)
	go func() { held <- do("?hold=1").Code }()
	<-inside
	w := do("")
	var p httpx.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if w.Code != 429 || !slices.Equal(p.ViolatedPolicies, []string{"c-concurrency"}) || w.Header().Get("Retry-After") != "1" {
		t.Errorf("second in flight = %d %s (Retry-After %q), want 429 naming c-concurrency, Retry-After 1", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	close(hold)
	if c := <-held; c != 200 {
		t.Errorf("held request = %d, want 200", c)
	}
	if w := do(""); w.Code != 200 || w.Header().Get("RateLimit-Remaining") != "3" {
		t.Errorf("after release = %d, remaining %q; want 200 with 3 left (the refused request spent nothing)", w.Code, w.Header().Get("RateLimit-Remaining"))
	}
	if n := rdb.ZCard(context.Background(), flightKey("c", id)).Val(); n != 0 {
		t.Errorf("in-flight tokens after both ended = %d, want 0", n)
	}
}
