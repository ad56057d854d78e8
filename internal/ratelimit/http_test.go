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
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil)
	if h == nil {
		h = func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"ok": true}) }
	}
	r.GET("/x", l.Middleware(policy, headerIdentity, cost), h)
	return r
}

// headerIdentity names a test request by its x-api-key header, as
// auth.LimitKey would for an API key whose id is the header's value.
func headerIdentity(c *gin.Context) string {
	if k := c.GetHeader("x-api-key"); k != "" {
		return "key:" + k
	}
	return ""
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
	r := newRouter(l, "p", RadiusCostFrom("radius"), nil)
	key := testenv.Prefix(t)
	// Just over 64 km costs 8: admitted once, then too little room is left.
	if w := get(r, key, "?radius=64001"); w.Code != 200 || w.Header().Get("RateLimit-Remaining") != "2" {
		t.Fatalf("radius 64km: %d remaining %s, want 200 with 2 left", w.Code, w.Header().Get("RateLimit-Remaining"))
	}
	if w := get(r, key, "?radius=64001"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("second radius 64km: %d Retry-After %q, want 429 with Retry-After 1", w.Code, w.Header().Get("Retry-After"))
	}
	l2 := newLimiter(t, testenv.Redis(t), Log, "5/1s")
	r2 := newRouter(l2, "p", RadiusCostFrom("radius"), nil)
	w := get(r2, key, "?radius=1000000")
	if w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("cost 8 under 5/1s: %d Retry-After %q, want 429 without Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	var p Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if want := `Rate limit exceeded: this request costs 8 units but policy "p" allows at most 5 per 1s, so it can never be admitted; make it cheaper.`; p.Detail != want {
		t.Errorf("detail = %q, want %q", p.Detail, want)
	}
}

func TestConcurrencyCap(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{1000, time.Second}}, Algorithm: Log, Failure: FailClosed, Concurrency: 3, Lease: 5 * time.Second}}
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
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{1000, time.Second}}, Algorithm: Log, Failure: FailClosed, Concurrency: 1, Lease: time.Second}}
	l, err := New(rdb, ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := testenv.Prefix(t)
	ctx := t.Context()
	// Acquired and never released, as by a replica that died.
	if _, ok, err := l.Acquire(ctx, "c", id); !ok || err != nil {
		t.Fatalf("first Acquire = %v, %v", ok, err)
	}
	if _, ok, _ := l.Acquire(ctx, "c", id); ok {
		t.Fatal("second Acquire succeeded with the only slot taken")
	}
	if ttl := rdb.PTTL(ctx, flightKey("c", id)).Val(); ttl <= 0 || ttl > time.Second {
		t.Errorf("in-flight key PTTL = %v, want in (0, 1s]", ttl)
	}
	time.Sleep(1100 * time.Millisecond)
	rel, ok, err := l.Acquire(ctx, "c", id)
	if !ok || err != nil {
		t.Fatalf("Acquire after the lease ended = %v, %v", ok, err)
	}
	rel()
	if n := rdb.ZCard(ctx, flightKey("c", id)).Val(); n != 0 {
		t.Errorf("after release: %d tokens, want 0", n)
	}
}

func TestRadiusCost(t *testing.T) {
	for _, tc := range []struct {
		m    float64
		want int
	}{{-5, 1}, {0, 1}, {500, 1}, {1000, 1}, {1001, 2}, {2000, 2}, {2001, 3}, {4000, 3}, {8000, 4}, {16000, 5}, {50000, 7}, {64000, 7}, {64001, 8}, {1e9, 8}} {
		if got := RadiusCost(tc.m); got != tc.want {
			t.Errorf("RadiusCost(%v) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

func TestMiddlewareWithoutIdentityPanics(t *testing.T) {
	l := newLimiter(t, nil, Log, "1/1s")
	defer func() {
		if recover() == nil {
			t.Error("Middleware(p, nil identity) did not panic")
		}
	}()
	l.Middleware("p", nil, nil)
}

// TestEmptyIdentityIsTheConnectionAddress: a request its identity func
// cannot name is limited by the connection's address, whatever its
// x-api-key or X-Forwarded-For say; no Redis key holds the header's value.
func TestEmptyIdentityIsTheConnectionAddress(t *testing.T) {
	rdb := testenv.Redis(t)
	l := newLimiter(t, rdb, Log, "2/1m")
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil)
	r.GET("/x", l.Middleware("p", func(*gin.Context) string { return "" }, nil), func(c *gin.Context) { c.Status(http.StatusOK) })
	p := testenv.Prefix(t) // t + 12 hex digits: a documentation-range IPv6 address of this test's own
	addr := "2001:db8:" + p[1:5] + ":" + p[5:9] + ":" + p[9:13] + "::1"
	secret := "s3cret-" + p
	var codes []int
	for i := range 3 {
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		req.RemoteAddr = "[" + addr + "]:40000"
		req.Header.Set("x-api-key", secret+strconv.Itoa(i)) // a new "key" each time: it must not matter
		req.Header.Set("X-Forwarded-For", "198.51.100."+strconv.Itoa(i))
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		codes = append(codes, w.Code)
	}
	if want := []int{200, 200, 429}; !slices.Equal(codes, want) {
		t.Errorf("statuses = %v, want %v (one limit for the address)", codes, want)
	}
	ctx := context.Background()
	if n := rdb.ZCard(ctx, "rl:p:ip:"+addr).Val(); n != 2 {
		t.Errorf("ZCARD rl:p:ip:%s = %d, want 2", addr, n)
	}
	var keys []string
	it := rdb.Scan(ctx, 0, "*"+secret+"*", 10_000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil || len(keys) != 0 {
		t.Errorf("Redis keys holding the x-api-key value: %v (%v), want none", keys, err)
	}
}

// TestAdmitCapsConcurrency: a handler that charges through Admit gets the
// policy's in-flight cap as Middleware does: over it, 429 naming the
// concurrency policy without spending the rate budget; after release, room.
func TestAdmitCapsConcurrency(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"c": {Name: "c", Windows: []Window{{5, time.Minute}}, Algorithm: Log, Failure: FailClosed, Concurrency: 1, Lease: 5 * time.Second}}
	l, err := New(rdb, ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := "key:" + testenv.Prefix(t)
	hold, inside := make(chan struct{}), make(chan struct{})
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil)
	r.GET("/x", func(c *gin.Context) {
		release, ok := l.Admit(c, Request{Policy: "c", Identity: id, Cost: 1})
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
	var p Problem
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
