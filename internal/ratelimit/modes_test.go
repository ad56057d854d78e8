package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/testenv"
)

// TestSeedCheckOverHTTP is the seed's check through the middleware: 12
// requests with one API key at a 10/1s policy give ten 200s then two 429s,
// and the policy's key holds 10 members with a PTTL of at most 1000 ms.
func TestSeedCheckOverHTTP(t *testing.T) {
	rdb := testenv.Redis(t)
	l, err := New(rdb, seedPolicies(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRouter(l, "geofence", nil, nil)
	key := "demo-" + testenv.Prefix(t)
	var codes []int
	for range 12 {
		codes = append(codes, get(r, key, "?lng=13.4&lat=52.5&radius=500").Code)
	}
	for i, c := range codes {
		if want := map[bool]int{true: 200, false: 429}[i < 10]; c != want {
			t.Fatalf("statuses = %v, want ten 200 then two 429", codes)
		}
	}
	ctx := context.Background()
	if n := rdb.ZCard(ctx, "rl:geofence:key:"+key).Val(); n != 10 {
		t.Errorf("ZCARD = %d, want 10", n)
	}
	if ttl := rdb.PTTL(ctx, "rl:geofence:key:"+key).Val(); ttl <= 0 || ttl > time.Second {
		t.Errorf("PTTL = %v, want in (0, 1000ms]", ttl)
	}
}

func TestShadowModeAdmitsButCounts(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"s": {Windows: []Window{{Limit: 2, Period: time.Minute}}, Algorithm: Log, Failure: FailClosed, Shadow: true}}
	l, err := New(rdb, ps, Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	r := newRouter(l, "s", nil, nil)
	key := testenv.Prefix(t)
	for i := range 5 {
		w := get(r, key, "")
		if w.Code != 200 {
			t.Fatalf("request %d in shadow mode: %d, want 200", i, w.Code)
		}
		if rem, want := w.Header().Get("RateLimit-Remaining"), strconv.Itoa(max(0, 1-i)); rem != want {
			t.Errorf("request %d: RateLimit-Remaining = %s, want %s", i, rem, want)
		}
		if ra := w.Header().Get("Retry-After"); ra != "" {
			t.Errorf("request %d: Retry-After %q on an admitted request", i, ra)
		}
	}
	if n := metricSum(l.m.shadow); n != 3 {
		t.Errorf("shadow rejections = %v, want 3", n)
	}
	// Shadow rejections are not recorded either.
	if n := rdb.ZCard(context.Background(), "rl:s:key:"+key).Val(); n != 2 {
		t.Errorf("ZCARD = %d, want 2", n)
	}
}

func TestTierAndIdentityOverrides(t *testing.T) {
	rdb := testenv.Redis(t)
	ps := map[string]Policy{"o": {
		Windows: []Window{{Limit: 1, Period: time.Minute}}, Algorithm: Log, Failure: FailClosed,
		Tiers:      map[string][]Window{"pro": {{Limit: 3, Period: time.Minute}}},
		Identities: map[string][]Window{"key:vip": {{Limit: 5, Period: time.Minute}}},
	}}
	l, err := New(rdb, ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	prefix := testenv.Prefix(t)
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/x", l.middleware("o", nil, func(r *http.Request) (string, string) {
		if r.Header.Get("x-api-key") == "vip" {
			return "key:vip", r.Header.Get("x-tier")
		}
		return prefix + r.Header.Get("x-api-key"), r.Header.Get("x-tier")
	}), func(c *gin.Context) { c.Status(200) })
	_ = rdb.Del(context.Background(), "rl:o:key:vip").Err()
	for _, tc := range []struct {
		key, tier string
		want      int
	}{{"free", "", 1}, {"pro", "pro", 3}, {"vip", "", 5}, {"vip", "pro", 5}} {
		admitted := 0
		for range 8 {
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			req.Header.Set("x-api-key", tc.key)
			req.Header.Set("x-tier", tc.tier)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code == 200 {
				admitted++
			}
		}
		if admitted != tc.want {
			t.Errorf("key %s tier %q: admitted %d of 8, want %d", tc.key, tc.tier, admitted, tc.want)
		}
		_ = rdb.Del(context.Background(), "rl:o:key:vip").Err()
	}
}

func TestInProcessOnly(t *testing.T) {
	l, err := New(nil, map[string]Policy{"p": {Windows: []Window{{Limit: 10, Period: time.Minute}}, Algorithm: Log, Failure: FailClosed}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := concurrentAdmissions(t, l, "x", 50); n != 10 {
		t.Fatalf("in-process: admitted %d of 50, want 10", n)
	}
	d, err := l.Allow(context.Background(), "p", "x", 1)
	if err != nil || d.Allowed || d.Backend != BackendLocal || d.RetryAfterSeconds() != 60 {
		t.Fatalf("11th = %+v, %v; want rejected locally, retry in 60s", d, err)
	}
}

func TestMetricsAreRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := New(testenv.Redis(t), seedPolicies(), Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	id := testenv.Prefix(t)
	for range 11 {
		if _, err := l.Allow(context.Background(), "geofence", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
		if mf.GetName() == "geogate_ratelimit_decisions_total" {
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				if labels["policy"] == "geofence" && labels["backend"] == "redis" {
					want := map[string]float64{"allowed": 10, "rejected": 1}[labels["outcome"]]
					if m.GetCounter().GetValue() != want {
						t.Errorf("decisions %v = %v, want %v", labels, m.GetCounter().GetValue(), want)
					}
				}
			}
		}
	}
	for _, name := range []string{
		"geogate_ratelimit_decisions_total", "geogate_ratelimit_redis_duration_seconds",
		"geogate_ratelimit_script_reloads_total", "geogate_ratelimit_fallback_activations_total",
		"geogate_ratelimit_breaker_open",
	} {
		if !got[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
}
