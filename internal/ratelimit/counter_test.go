package ratelimit

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// maxInWindow returns the most admissions within any interval of length
// period (ending at an admission).
func maxInWindow(admitted []int64, period int64) int {
	best, lo := 0, 0
	for hi, t := range admitted {
		for admitted[lo] <= t-period {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// TestCounterErrorBound checks the documented bound of the counter
// approximation with limit L per period: it never admits more than L in
// one fixed bucket, hence never 2L or more within any sliding window; under
// steady traffic above the limit it admits L per period within 2%, and
// a worst-case burst at the end of a bucket can make a sliding window hold
// more than L (the bound is not loose).
func TestCounterErrorBound(t *testing.T) {
	const limit = 100
	l := newLimiter(t, testenv.Redis(t), Counter, "100/1s")
	base := int64(1_780_000_000_000_000)
	run := func(t *testing.T, times []int64) []int64 {
		id := testenv.Prefix(t)
		var admitted []int64
		for _, at := range times {
			d, err := l.Check(context.Background(), Request{Policy: "p", Identity: id, Cost: 1, At: time.UnixMicro(at)})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted = append(admitted, at)
			}
		}
		return admitted
	}
	t.Run("steady", func(t *testing.T) {
		// Poisson arrivals at 3x the limit for 20 s.
		rng := rand.New(rand.NewPCG(5, 5))
		var times []int64
		for at := base; at < base+20_000_000; at += int64(rng.ExpFloat64() * 1e6 / (3 * limit)) {
			times = append(times, at)
		}
		admitted := run(t, times)
		m := maxInWindow(admitted, 1_000_000)
		rate := float64(len(admitted)) / 20
		t.Logf("steady: %d admitted (%.1f/s), max %d in any 1s window", len(admitted), rate, m)
		if m > limit*105/100 {
			t.Errorf("max in a sliding window = %d under steady traffic, want within 5%% of %d", m, limit)
		}
		if rate < limit*0.98 || rate > limit*1.02 {
			t.Errorf("admitted %.1f/s, want %d/s within 2%%", rate, limit)
		}
	})
	t.Run("worst case", func(t *testing.T) {
		// All of one bucket's traffic in its last 10 ms, then steady
		// pressure through the next bucket.
		var times []int64
		for i := range 2 * limit {
			times = append(times, base+990_000+int64(i)*50)
		}
		for at := base + 1_000_000; at < base+2_000_000; at += 1000 {
			times = append(times, at)
		}
		admitted := run(t, times)
		m := maxInWindow(admitted, 1_000_000)
		t.Logf("worst case: max %d in any 1s window", m)
		if m >= 2*limit {
			t.Errorf("max in a sliding window = %d, bound is < %d", m, 2*limit)
		}
		if m <= limit {
			t.Errorf("max in a sliding window = %d: expected the burst to show the approximation's error", m)
		}
	})
}
