package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/testenv"
)

// rateLimitStatus is GET /rate_limit as a client reads it.
func rateLimitStatus(t *testing.T, base, key string) quotaAnswer {
	t.Helper()
	status, _, body := call(t, "GET", base+"/rate_limit", key, "")
	if status != 200 {
		t.Fatalf("GET /rate_limit = %d %.300s, want 200", status, body)
	}
	var a quotaAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("GET /rate_limit body %.300s: %v", body, err)
	}
	return a
}

func (a quotaAnswer) policy(t *testing.T, name string) policyQuota {
	t.Helper()
	for _, p := range a.Policies {
		if p.Policy == name {
			return p
		}
	}
	t.Fatalf("GET /rate_limit lists no policy %s: %+v", name, a.Policies)
	return policyQuota{}
}

func remainingOf(p policyQuota) []int {
	var out []int
	for _, w := range p.Windows {
		out = append(out, w.Remaining)
	}
	return out
}

// TestRateLimitRoute serves two replicas on one database and one Redis:
// GET /rate_limit through either lists every policy with its routes and
// windows, spends none of them, and is exact: after it reports r left, a
// concurrent burst through both replicas admits exactly r. A daily quota's
// 429 has Retry-After at midnight UTC, and the headers report the quota.
func TestRateLimitRoute(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL":       dbURL,
		"RATELIMIT_GEOFENCE": "10/1m,8/1d@calendar",
		"REDIS_TIMEOUT":      "3s", // exactness under test: no local fallback on a slow machine
	}
	name := "quota-" + testenv.Prefix(t)
	key := runCLI(t, env, "keys", "create", "--name", name, "--scopes", "proximity:read,geofences:read")
	a, _ := startService(t, env)
	b, _ := startService(t, env)

	got := rateLimitStatus(t, a, key)
	if got.Identity != "key:"+name || got.Tier != nil {
		t.Errorf("identity %q tier %v, want key:%s and no tier", got.Identity, got.Tier, name)
	}
	var names []string
	for _, p := range got.Policies {
		names = append(names, p.Policy)
	}
	if want := []string{"database", "events", "features", "geofence", "positions", "rate-limit", "tiles", "tiles-cached"}; !slices.Equal(names, want) {
		t.Errorf("policies %v, want %v", names, want)
	}
	geo := got.policy(t, "geofence")
	for _, r := range []string{"GET /within", "GET /geofences", "POST /geofences/contains", "DELETE /geofences/{id}"} {
		if !slices.Contains(geo.Routes, r) {
			t.Errorf("geofence routes %v lack %s", geo.Routes, r)
		}
	}
	if rl := got.policy(t, "rate-limit"); !slices.Equal(rl.Routes, []string{"GET /rate_limit"}) || rl.Windows[0].Used != 1 {
		t.Errorf("rate-limit = %+v, want GET /rate_limit alone, this read counted", rl)
	}
	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	wantWindows := []windowQuota{
		{Name: "geofence", Limit: 10, Window: 60, Remaining: 10},
		{Name: "geofence-1d@calendar", Limit: 8, Window: 86400, Calendar: "day", Timezone: "UTC", Remaining: 8, ResetsAt: &midnight},
	}
	ignoreReset := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Reset" }, cmp.Ignore())
	if diff := cmp.Diff(wantWindows, geo.Windows, ignoreReset); diff != "" {
		t.Errorf("geofence windows (-want +got):\n%s", diff)
	}
	if r := geo.Windows[1].Reset; math.Abs(float64(r)-time.Until(midnight).Seconds()) > 5 {
		t.Errorf("the daily quota resets in %d s, want about %.0f (midnight UTC)", r, time.Until(midnight).Seconds())
	}

	within := func(base string) (int, map[string]string) {
		status, h, _ := call(t, "GET", base+"/within?lng=13.4&lat=52.5&radius=500", key, "")
		return status, map[string]string{"RateLimit": h.Get("RateLimit"), "Retry-After": h.Get("Retry-After"), "RateLimit-Remaining": h.Get("RateLimit-Remaining")}
	}
	for i := range 3 {
		if s, _ := within([]string{a, b}[i%2]); s != 200 {
			t.Fatalf("request %d = %d", i, s)
		}
	}
	for _, base := range []string{a, b, a} { // reading spends nothing
		if rem := remainingOf(rateLimitStatus(t, base, key).policy(t, "geofence")); !slices.Equal(rem, []int{7, 5}) {
			t.Fatalf("after 3 requests remaining %v, want [7 5]", rem)
		}
	}
	codes := map[int]int{}
	var last map[string]string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			s, h := within([]string{a, b}[i%2])
			mu.Lock()
			defer mu.Unlock()
			codes[s]++
			if s == 429 {
				last = h
			}
		})
	}
	wg.Wait()
	if codes[200] != 5 || codes[429] != 11 {
		t.Errorf("a burst of 16 through two replicas got %v, want exactly the 5 /rate_limit reported left, then 429s", codes)
	}
	if last != nil {
		ra, _ := strconv.Atoi(last["Retry-After"])
		if math.Abs(float64(ra)-time.Until(midnight).Seconds()) > 5 || last["RateLimit-Remaining"] != "0" {
			t.Errorf("the quota's 429: %v; want Retry-After about %.0f s (midnight UTC), RateLimit-Remaining 0", last, time.Until(midnight).Seconds())
		}
	}
	if rem := remainingOf(rateLimitStatus(t, b, key).policy(t, "geofence")); !slices.Equal(rem, []int{2, 0}) {
		t.Errorf("after the burst remaining %v, want [2 0]", rem)
	}
	if s, _, body := call(t, "GET", a+"/rate_limit", "no-such-key", ""); s != 401 {
		t.Errorf("GET /rate_limit with a bad key = %d %s, want 401", s, body)
	}
	if anon := rateLimitStatus(t, a, ""); len(anon.Identity) < 4 || anon.Identity[:3] != "ip:" {
		t.Errorf("anonymous identity %q, want ip:<address>", anon.Identity)
	}
}

// TestRateLimitRouteLayerPolicies: a layer's own policy (from the layer
// file) is listed, with the layer and the routes that read layers, for a
// caller who may read the layer, and not for one whose key is limited to
// other layers; the caller's tier shows, with its windows.
func TestRateLimitRouteLayerPolicies(t *testing.T) {
	dir := t.TempDir()
	layers, policies := filepath.Join(dir, "layers.yaml"), filepath.Join(dir, "ratelimit.yaml")
	for file, text := range map[string]string{
		layers:   "layers:\n  places:\n    limit: {policy: heavy, cost: 2}\n",
		policies: "policies:\n  heavy:\n    windows: 5/1m\n    concurrency: 2\n    tiers:\n      gold: 50/1m, 1000/1mo@calendar\n    timezone: Europe/Berlin\n",
	} {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "LAYERS_CONFIG": layers, "RATELIMIT_CONFIG": policies}
	id := "lq-" + testenv.Prefix(t)
	reader := runCLI(t, env, "keys", "create", "--name", id+"-r", "--scopes", "proximity:read,geofences:read,tiles:read", "--tier", "gold")
	fences := runCLI(t, env, "keys", "create", "--name", id+"-f", "--scopes", "proximity:read,geofences:read", "--layers", "geofences")
	base, _ := startService(t, env)

	got := rateLimitStatus(t, base, reader)
	if got.Tier == nil || *got.Tier != "gold" {
		t.Errorf("tier %v, want gold", got.Tier)
	}
	heavy := got.policy(t, "heavy")
	if !slices.Equal(heavy.Layers, []string{"places"}) || heavy.Concurrency == nil || *heavy.Concurrency != (concurrencyQuota{Limit: 2, Remaining: 2}) {
		t.Errorf("heavy = %+v, want layer places and a cap of 2", heavy)
	}
	for _, r := range []string{"GET /within", "GET /geofences/contains", "GET /collections/{collectionId}/items", "GET /tiles/{layer}/{z}/{x}/{y}"} {
		if !slices.Contains(heavy.Routes, r) {
			t.Errorf("heavy routes %v lack %s", heavy.Routes, r)
		}
	}
	if len(heavy.Windows) != 2 || heavy.Windows[0].Limit != 50 || heavy.Windows[1].Calendar != "month" || heavy.Windows[1].Timezone != "Europe/Berlin" {
		t.Errorf("heavy windows %+v, want the gold tier's 50/1m and 1000/1mo@calendar in Berlin", heavy.Windows)
	}
	// /within on places costs 2 of heavy.
	if s, _, body := call(t, "GET", base+"/within?lng=13.4&lat=52.5&radius=500", reader, ""); s != 200 {
		t.Fatalf("/within = %d %s", s, body)
	}
	if w := rateLimitStatus(t, base, reader).policy(t, "heavy").Windows; w[0].Used != 2 || w[1].Used != 2 {
		t.Errorf("after one /within of places, heavy used %v, want 2 in each window", w)
	}
	for _, p := range rateLimitStatus(t, base, fences).Policies {
		if p.Policy == "heavy" {
			t.Errorf("a key limited to geofences sees %+v", p)
		}
	}
}
