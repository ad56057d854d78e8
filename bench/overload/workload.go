package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/bench/internal/load"
)

// workload is the heavy and the light load of a trial.
type workload struct {
	heavy     heavy
	heavyKeys []load.Header
	heavyConc int
	light     []string
	lightKeys []load.Header
	lightRate float64
	spin      int
}

// trial is one side's figures in one trial.
type trial struct {
	unloaded lightResult // the light load alone
	light    lightResult // the light load while the heavy one runs
	heavy    heavyCounts // answers to the heavy callers in the measured window
	seconds  float64     // the measured window
	commits  int64       // transactions the database committed in it
	pgCPU    time.Duration
	queue    queueFigures // the fair queue's limit and slowdown
}

func (t trial) heavyRate() float64 { return float64(t.heavy.ok) / t.seconds }
func (t trial) dbRate() float64    { return float64(t.commits) / t.seconds }
func (t trial) pgCores() float64   { return t.pgCPU.Seconds() / t.seconds }

func (t trial) String() string {
	return fmt.Sprintf("light alone p50 %.2f p99 %.2f ms %.1f%% 2xx | under load p50 %.2f p99 %.2f ms %.1f%% 2xx%s | heavy %.0f req/s, %d shed (503), %d other%s | db %.0f commits/s, pg CPU %.2f cores%s",
		t.unloaded.p50, t.unloaded.p99, t.unloaded.okShare(), t.light.p50, t.light.p99, t.light.okShare(), t.light.failNote(),
		t.heavyRate(), t.heavy.shed, t.heavy.other, t.heavy.otherNote(), t.dbRate(), t.pgCores(), t.queue)
}

// trial measures the light load alone, then next to the heavy one.
func (w *workload) trial(pool *pgxpool.Pool, base string, d time.Duration) trial {
	unloaded := w.runLight(base, d)
	t := w.overload(pool, base, d)
	t.unloaded = unloaded
	return t
}

// overload runs the heavy load, and once it has saturated the database,
// the light load for d; the database's work and the heavy callers'
// answers are counted over those d.
func (w *workload) overload(pool *pgxpool.Pool, base string, d time.Duration) trial {
	ctx := context.Background()
	h := w.startHeavy(base)
	defer h.stop()
	if w.spin > 0 {
		defer startSpin(w.spin)()
	}
	time.Sleep(load.Warm)
	heavy0, commits0, cpu0 := h.counts(), commits(ctx, pool), load.CPU()
	start := time.Now()
	light := make(chan lightResult, 1)
	go func() { light <- w.runLight(base, d) }()
	watch := watchQueue(base)
	time.Sleep(d)
	heavy1, commits1, cpu1 := h.counts(), commits(ctx, pool), load.CPU()
	t := trial{seconds: time.Since(start).Seconds(), commits: commits1 - commits0, pgCPU: cpu1["pg:api"] - cpu0["pg:api"]}
	t.heavy = heavy1.minus(heavy0)
	t.queue = watch.figures()
	// The heavy load goes on until the last light answers, so that
	// those meet the same database as the others.
	t.light = <-light
	return t
}

// heavyCounts are the heavy callers' answers: 2xx, 503 (shed: by the fair
// queue, or a pool wait past DB_ACQUIRE_TIMEOUT without it) and the rest.
type heavyCounts struct {
	ok, shed, other int64
	firstOther      string
}

func (c heavyCounts) minus(o heavyCounts) heavyCounts {
	return heavyCounts{c.ok - o.ok, c.shed - o.shed, c.other - o.other, c.firstOther}
}

func (c heavyCounts) otherNote() string {
	if c.other == 0 {
		return ""
	}
	return " (" + c.firstOther + ")"
}

// heavyRun is the closed-loop heavy load while it runs.
type heavyRun struct {
	ok, shed, other atomic.Int64
	firstOther      atomic.Value
	stopping        atomic.Bool
	wg              sync.WaitGroup
	client          *load.Client
}

// startHeavy starts the heavy clients, each sending its key's requests one
// after the other; consecutive clients use different keys.
func (w *workload) startHeavy(base string) *heavyRun {
	client, err := load.NewClient(base, w.heavyConc)
	if err != nil {
		panic(err) // base comes from apiproc.Start
	}
	h := &heavyRun{client: client}
	var seq atomic.Int64
	for c := range w.heavyConc {
		key := w.heavyKeys[c%len(w.heavyKeys)]
		h.wg.Go(func() {
			for !h.stopping.Load() {
				status, err := client.Get(c, w.heavy.next(int(seq.Add(1))), key)
				h.count(status, err)
			}
		})
	}
	return h
}

func (h *heavyRun) count(status int, err error) {
	switch {
	case err == nil && status/100 == 2:
		h.ok.Add(1)
	case err == nil && status == 503:
		h.shed.Add(1)
	default:
		h.other.Add(1)
		if err != nil {
			h.firstOther.CompareAndSwap(nil, err.Error())
		} else {
			h.firstOther.CompareAndSwap(nil, fmt.Sprintf("status %d", status))
		}
	}
}

func (h *heavyRun) counts() heavyCounts {
	c := heavyCounts{ok: h.ok.Load(), shed: h.shed.Load(), other: h.other.Load()}
	if s, ok := h.firstOther.Load().(string); ok {
		c.firstOther = s
	}
	return c
}

// stop lets every heavy client finish its request and closes their
// connections.
func (h *heavyRun) stop() {
	h.stopping.Store(true)
	h.wg.Wait()
	h.client.Close()
}

// lightResult is what the light callers saw.
type lightResult struct {
	sent, ok  int
	p50, p99  float64 // milliseconds, of the 2xx answers
	firstFail string
}

func (r lightResult) okShare() float64 {
	if r.sent == 0 {
		return 0
	}
	return 100 * float64(r.ok) / float64(r.sent)
}

func (r lightResult) failNote() string {
	if r.ok == r.sent {
		return ""
	}
	return fmt.Sprintf(" (%d failed: %s)", r.sent-r.ok, r.firstFail)
}

// lightConns is the most requests one light caller has in flight; a
// request due while all are busy waits for one, and that wait counts in
// its latency.
const lightConns = 32

// runLight sends each light key's requests at lightRate for d, open loop:
// a request goes out when it is due whether or not the earlier ones have
// been answered, so a slow service meets more requests, not fewer, and
// each latency counts from when the request was due. The keys' schedules
// are staggered so that their requests do not arrive together.
func (w *workload) runLight(base string, d time.Duration) lightResult {
	n := len(w.lightKeys)
	client, err := load.NewClient(base, n*lightConns)
	if err != nil {
		panic(err) // base comes from apiproc.Start
	}
	defer client.Close()
	every := time.Duration(float64(time.Second) / w.lightRate)
	start := time.Now()
	samples := make([][]sample, n)
	var wg sync.WaitGroup
	for k, key := range w.lightKeys {
		wg.Go(func() {
			first := start.Add(time.Duration(k) * every / time.Duration(n))
			samples[k] = w.lightCaller(client, k, key, first, start.Add(d), every)
		})
	}
	wg.Wait()
	return summarize(slices.Concat(samples...))
}

type sample struct {
	latency time.Duration
	ok      bool
	fail    string
}

// lightCaller is light key k sending every `every` from first until end,
// on its own connections of client.
func (w *workload) lightCaller(client *load.Client, k int, key load.Header, first, end time.Time, every time.Duration) []sample {
	free := make(chan int, lightConns)
	for i := range lightConns {
		free <- k*lightConns + i
	}
	var mu sync.Mutex
	var out []sample
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		due := first.Add(time.Duration(i) * every)
		if !due.Before(end) {
			break
		}
		time.Sleep(time.Until(due))
		conn := <-free
		target := w.light[(i*len(w.lightKeys)+k)%len(w.light)]
		wg.Go(func() {
			status, err := client.Get(conn, target, key)
			s := sample{latency: time.Since(due), ok: err == nil && status/100 == 2}
			if err != nil {
				s.fail = err.Error()
			} else if !s.ok {
				s.fail = fmt.Sprintf("status %d", status)
			}
			free <- conn
			mu.Lock()
			out = append(out, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func summarize(samples []sample) lightResult {
	r := lightResult{sent: len(samples)}
	var lat []time.Duration
	for _, s := range samples {
		if s.ok {
			lat = append(lat, s.latency)
		} else if r.firstFail == "" {
			r.firstFail = s.fail
		}
	}
	slices.Sort(lat)
	r.ok = len(lat)
	r.p50, r.p99 = load.Percentile(lat, 0.50), load.Percentile(lat, 0.99)
	return r
}
