package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestMadeUpLayersTeachTheGateNothing: 20,000 requests for layers that
// do not exist, anonymous and with a key, on the routes that name a
// layer, are each a 404 answered before the gate, so the estimates of
// database time learned from real layers stay as they were: the gate
// keeps exactly the kinds it kept before.
func TestMadeUpLayersTeachTheGateNothing(t *testing.T) {
	base, _ := startService(t, nil)
	real := []string{
		"/collections/places/items?limit=5",
		"/collections/places/items?limit=5&bbox=13,52,14,53",
		"/within?lng=13.4&lat=52.5&radius=500",
	}
	for _, path := range real {
		for range 3 {
			if status, _, body := call(t, "GET", base+path, "", ""); status != 200 {
				t.Fatalf("GET %s = %d %s", path, status, body)
			}
		}
	}
	before := metricLine(t, base, "geogate_gate_estimates ")
	if before == "" || before == "geogate_gate_estimates 0" {
		t.Fatalf("after requests for real layers, %q: want the estimates learned", before)
	}
	const n = 20000
	paths := []string{"/collections/made-up-%d/items", "/within?lng=13.4&lat=52.5&radius=500&layer=made-up-%d", "/collections/made-up-%d"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := map[int]int{}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				path := strings.Replace(paths[i%len(paths)], "%d", strconv.Itoa(i), 1)
				req, _ := http.NewRequestWithContext(context.Background(), "GET", base+path, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("GET %s: %v", path, err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 404 {
					mu.Lock()
					bad[resp.StatusCode]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("requests for made-up layers answered other than 404: %v", bad)
	}
	if after := metricLine(t, base, "geogate_gate_estimates "); after != before {
		t.Errorf("estimates kept: %q before %d requests for made-up layers, %q after", before, n, after)
	}
}

// TestEventLookupsAfterAdmission: a caller whose events budget is spent
// is refused before its subscription is looked up: an unknown one gets
// the same 429 as its own, where it used to get a free 404.
func TestEventLookupsAfterAdmission(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_EVENTS": "1/1m"}
	key := "lookup-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _ := startService(t, env)
	if status, _, body := call(t, "GET", base+"/devices", key, ""); status != 200 {
		t.Fatalf("GET /devices = %d %s", status, body)
	}
	for _, rq := range []struct{ method, path, body string }{
		{"GET", "/subscriptions/12345", ""},
		{"PATCH", "/subscriptions/12345", `{"kinds":["enter"]}`},
		{"POST", "/subscriptions/12345/secret", ""},
		{"GET", "/events?subscription=12345", ""},
		{"GET", "/events/stream?subscription=12345", ""},
	} {
		status, h, body := call(t, rq.method, base+rq.path, key, rq.body)
		if status != 429 || h.Get("Retry-After") == "" {
			t.Errorf("%s %s with the events budget spent = %d (Retry-After %q) %s; want 429 before the look-up", rq.method, rq.path, status, h.Get("Retry-After"), body)
		}
	}
}

// TestStreamsCappedAndCharged: one identity holds at most
// EVENTS_MAX_STREAMS live streams on a replica, the next is a 429 with
// Retry-After until one closes; and every read a stream makes of the
// outbox is charged, as a request of its own.
func TestStreamsCappedAndCharged(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL": dbURL, "EVENTS_MAX_STREAMS": "2", "EVENTS_STREAM_POLL": "100ms",
		"RATELIMIT_EVENTS": "100000/1h", "RATELIMIT_RATE_LIMIT": "100000/1h",
	}
	key := "streams-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	// Straight to the service: the contract proxy would hold a stream's
	// answer until it ends.
	base, _, _ := startServiceWithStop(t, env)
	status, _, body := call(t, "POST", base+"/subscriptions", key, `{"layer":"geofences","kinds":["enter","exit"]}`)
	var created struct{ ID string }
	if err := json.Unmarshal(body, &created); status != 201 || err != nil {
		t.Fatalf("POST /subscriptions = %d %s", status, body)
	}
	sub := created.ID
	used := func() int {
		t.Helper()
		_, u := windowLimit(t, base, key, "events")
		return u
	}
	first, _ := openStream(t, base, key, sub, "")
	_, hangUp := openStream(t, base, key, sub, "")
	status, h, body := call(t, "GET", base+"/events/stream?subscription="+sub, key, "")
	if status != 429 || h.Get("Retry-After") != "5" || !strings.Contains(string(body), "events-streams") {
		t.Fatalf("a third stream = %d (Retry-After %q) %s; want 429 naming events-streams, Retry-After 5", status, h.Get("Retry-After"), body)
	}
	// Each stream reads the outbox every 100 ms, each read a request.
	start := used()
	for deadline := time.Now().Add(20 * time.Second); used() < start+10; time.Sleep(50 * time.Millisecond) { // polling the streams' reads
		if time.Now().After(deadline) {
			t.Fatalf("events used %d 20 s after %d with two streams polling: their reads are not charged", used(), start)
		}
	}
	hangUp()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) { // until the server notices the hang-up
		ms, cancel := tryStream(t, base, key, sub)
		if ms {
			cancel()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no stream could open 20 s after one of two hung up")
		}
	}
	select {
	case _, ok := <-first:
		if !ok {
			t.Error("the first stream ended")
		}
	default:
	}
}

// tryStream opens a stream of sub and says whether the server took it.
func tryStream(t *testing.T, base, key, sub string) (bool, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/events/stream?subscription="+sub, nil)
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /events/stream: %v", err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		cancel()
		return false, nil
	}
	return true, func() { cancel(); resp.Body.Close() }
}
