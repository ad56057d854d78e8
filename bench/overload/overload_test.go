package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/geogate/geogate/bench/internal/load"
)

func TestHeavyTakesTurns(t *testing.T) {
	h := heavy{within: []string{"w0", "w1"}, boxes: []string{"b0"}, cursors: []string{"c0", "c1", "c2"}, tiles: []string{"t0", "t1"}}
	var got []string
	for i := range 12 {
		got = append(got, h.next(i))
	}
	want := []string{"w0", "b0", "c0", "t0", "w1", "b0", "c1", "t1", "w0", "b0", "c2", "t0"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("requests %v, want %v", got, want)
		}
	}
}

func TestSummarizeCountsFailuresApart(t *testing.T) {
	var samples []sample
	for i := range 99 {
		samples = append(samples, sample{latency: time.Duration(i+1) * time.Millisecond, ok: true})
	}
	// A failure is counted as one, whatever its latency, and kept out of
	// the percentiles of the answers.
	samples = append(samples, sample{latency: time.Hour, fail: "status 503"})
	r := summarize(samples)
	if r.sent != 100 || r.ok != 99 || r.okShare() != 99 || r.firstFail != "status 503" {
		t.Fatalf("got %+v", r)
	}
	if r.p50 != 50 || r.p99 != 98 {
		t.Fatalf("p50 %v p99 %v, want 50 and 98", r.p50, r.p99)
	}
}

func TestLightLoadIsOpenLoop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
	}))
	defer srv.Close()
	// 4 keys at 50 req/s for 200 ms: 10 requests each are due every 20 ms,
	// and all go out although each answer takes 50 ms.
	w := &workload{light: []string{"/x"}, lightKeys: make([]load.Header, 4), lightRate: 50}
	start := time.Now()
	r := w.runLight(srv.URL, 200*time.Millisecond)
	if r.sent != 40 || r.ok != 40 {
		t.Fatalf("sent %d, %d answered 2xx; want 40 and 40", r.sent, r.ok)
	}
	if r.p50 < 50 {
		t.Fatalf("p50 %.2f ms, below the server's 50 ms", r.p50)
	}
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Fatalf("took %v: requests waited for earlier answers", took)
	}
}
