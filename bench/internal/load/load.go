// Package load is the closed-loop load generator every bench driver
// shares: a fixed number of workers call an operation back to back for a
// fixed time, and the run reports operations per second and latency
// percentiles. Sides of a comparison run alternately and report medians,
// because a shared 2-core machine drifts between runs.
package load

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one operation; w is the worker (0..c-1, for per-worker state such
// as a connection) and i a sequence number across workers.
type Op func(w, i int) error

// Result is one run, or the median run of several.
type Result struct {
	Ops      int
	Seconds  float64
	Rate     float64 // successful operations per second
	P50, P99 float64 // milliseconds
	Errors   int64
	FirstErr string
	// Lo and Hi are the lowest and highest rates of the runs behind a
	// median; both equal Rate for a single run.
	Lo, Hi float64
	// CPU is the CPU time per successful operation, by process group
	// (see CPU), over the run.
	CPU map[string]time.Duration
}

// Run calls op from c workers for d and measures it. Failed operations
// count as errors, not in the rate or the latencies.
func Run(c int, d time.Duration, op Op) Result {
	var seq, errs atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, c)
	cpu0 := CPU()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 4096)
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := op(w, int(seq.Add(1))); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			lat[w] = mine
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cpu1 := CPU()
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := Result{Ops: len(all), Seconds: secs, Errors: errs.Load(), CPU: PerOp(cpu0, cpu1, len(all))}
	if s, ok := firstErr.Load().(string); ok {
		r.FirstErr = s
	}
	if len(all) > 0 {
		r.Rate = float64(len(all)) / secs
		r.P50, r.P99 = Percentile(all, 0.50), Percentile(all, 0.99)
	}
	r.Lo, r.Hi = r.Rate, r.Rate
	return r
}

// Percentile of sorted latencies, in milliseconds.
func Percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(p*float64(len(sorted)-1))].Microseconds()) / 1000
}

// Warm is the unmeasured run before each measured one, so that every side
// starts with its connections open and its statements prepared.
const Warm = time.Second

// Medians runs each op runs times for d at concurrency c, alternating
// between them, each run after an unmeasured Warm one, and returns for
// each op the run with the median rate, with Lo and Hi set.
func Medians(runs, c int, d time.Duration, ops ...Op) []Result {
	all := make([][]Result, len(ops))
	for range max(runs, 1) {
		for i, op := range ops {
			Run(c, Warm, op)
			all[i] = append(all[i], Run(c, d, op))
		}
	}
	out := make([]Result, len(ops))
	for i, rs := range all {
		slices.SortFunc(rs, func(x, y Result) int { return cmp.Compare(x.Rate, y.Rate) })
		out[i] = rs[len(rs)/2]
		out[i].Lo, out[i].Hi = rs[0].Rate, rs[len(rs)-1].Rate
	}
	return out
}

// CPUNote formats r.CPU for the named groups, in microseconds per
// operation: "postgres 340 api 250".
func (r Result) CPUNote(groups ...string) string {
	var b []byte
	for _, g := range groups {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "%s %d", g, r.CPU[g].Microseconds())
	}
	return string(b)
}
