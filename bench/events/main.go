// Command events measures geofence events end to end: positions reported
// through POST /positions of a real `api serve` process (authentication,
// the positions rate limit, the handler), in batches of 100, against
// 50,000 small polygon fences plus the demo's countries, every transition
// committed to the outbox; next to the same batches handed straight to
// events.Service.Report in this process over pgx (the same transaction,
// without HTTP, authentication or the limiter). It then reports, under a
// steady single client, the time from a position sent to its event
// received by a webhook in this process, when the service delivers to
// webhooks.
//
// Run it from the repository root after `go build -o bin/api ./cmd/api`:
//
//	go run ./bench/events -db postgres://geogate@127.0.0.1:55432/geogate -redis redis://127.0.0.1:56379/0
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/geogate/geogate/bench/internal/apiproc"
	"github.com/geogate/geogate/bench/internal/demo"
	"github.com/geogate/geogate/bench/internal/load"
)

func main() {
	dbURL := flag.String("db", envOr("DATABASE_URL", "postgres://geogate@127.0.0.1:55432/geogate?sslmode=disable"), "PostgreSQL server URL; the bench uses its own database on it")
	dbName := flag.String("dbname", "geogate_events_bench", "database holding the demo data and the bench fences")
	redisURL := flag.String("redis", envOr("REDIS_URL", "redis://127.0.0.1:56379/0"), "Redis URL for the API's rate limiter")
	apiBin := flag.String("api", "bin/api", "the API binary to start")
	conc := flag.Int("c", 4, "concurrent clients")
	dur := flag.Duration("d", 5*time.Second, "duration of each run")
	runs := flag.Int("runs", 1, "runs of each side, alternating; medians are printed")
	fences := flag.Int("fences", 50_000, "bench fences")
	latency := flag.Duration("latency", 5*time.Second, "duration of the webhook latency run; 0 skips it")
	flag.Parse()
	b := &bench{conc: *conc, dur: *dur, runs: max(*runs, 1), fences: *fences, latency: *latency}
	if err := b.run(*dbURL, *dbName, *redisURL, *apiBin); err != nil {
		fmt.Fprintln(os.Stderr, "bench/events:", err)
		os.Exit(1)
	}
}

type bench struct {
	conc, runs, fences int
	dur, latency       time.Duration
}

func (b *bench) run(serverURL, dbName, redisURL, apiBin string) error {
	ctx := context.Background()
	dbURL, err := demo.EnsureDB(ctx, serverURL, dbName)
	if err != nil {
		return err
	}
	if err := apiCmd(apiBin, dbURL, "migrate"); err != nil {
		return err
	}
	for _, name := range []string{"events-bench", "events-bench-hook"} {
		if err := apiCmd(apiBin, dbURL, "keys", "create", "--name", name, "--secret", name+"-secret", "--replace",
			"--scopes", "positions:write,events:read,events:write"); err != nil {
			return err
		}
	}
	f, err := openFleet(ctx, dbURL, b.fences)
	if err != nil {
		return err
	}
	defer f.close()
	// CPU groups: "pg:api" serves `api serve`, "pg:bench" this process's
	// direct side.
	load.Groups = demo.ServerProcesses(f.pool, map[string]string{"geogate": "pg:api", "geogate-bench-events": "pg:bench"})
	hook, err := startReceiver()
	if err != nil {
		return err
	}
	defer hook.close()
	base, stop, err := apiproc.Start(apiBin, []string{
		"DATABASE_URL=" + dbURL, "REDIS_URL=" + redisURL,
		"RATELIMIT_POSITIONS=100000000/1s", "RATELIMIT_EVENTS=100000/1s", "RATELIMIT_DELIVERIES=100000/1s", "RATELIMIT_DATABASE=1000000000ms/1s",
		"LOG_LEVEL=warn", "DB_MAX_CONNS=" + fmt.Sprint(2*b.conc+4), "EVENTS_DELIVERY_PER_SUBSCRIPTION=16", "EVENTS_ALLOW_PRIVATE_WEBHOOKS=true",
	})
	if err != nil {
		return err
	}
	defer stop()
	// Throughput: pull-only subscriptions on both sides, so that neither
	// pays for deliveries; latency: another key, whose subscription has
	// the webhook.
	api, err := newAPISide(base, b.conc, "events-bench-secret", "")
	if err != nil {
		return err
	}
	defer api.close()
	hooked, err := newAPISide(base, busyClients, "events-bench-hook-secret", hook.url)
	if err != nil {
		return err
	}
	defer hooked.close()
	if err := f.subscribeDirect(ctx); err != nil {
		return err
	}
	fmt.Printf("positions in batches of %d against %d fences (+ %d countries), %d clients, %v per run, %d runs\n",
		batchSize, f.fenceCount, f.countries, b.conc, b.dur, b.runs)
	fmt.Printf("API: POST /positions through api serve; direct: events.Service.Report in this process over pgx\n")
	// Warm both sides: connections, PostGIS, plans.
	load.Run(b.conc, time.Second, api.op(f, "api", batchSize))
	load.Run(b.conc, time.Second, f.directOp())
	load.Run(b.conc, time.Second, f.pipOp())
	res := load.Medians(b.runs, b.conc, b.dur, api.op(f, "api", batchSize), f.directOp(), f.pipOp())
	a, d, pip := res[0], res[1], res[2]
	fmt.Printf("%-8s | %12s %9s %8s | %12s %9s %8s | %6s\n", "case", "API pos/s", "p50 ms", "p99 ms", "direct pos/s", "p50 ms", "p99 ms", "ratio")
	fmt.Printf("%-8s | %12.0f %9.1f %8.1f | %12.0f %9.1f %8.1f | %5.0f%%%s%s\n", "batch100", a.Rate*batchSize, a.P50, a.P99,
		d.Rate*batchSize, d.P50, d.P99, 100*a.Rate/d.Rate, errNote(a), errNote(d))
	fmt.Printf("range: API %.0f-%.0f, direct %.0f-%.0f positions/s\n", a.Lo*batchSize, a.Hi*batchSize, d.Lo*batchSize, d.Hi*batchSize)
	fmt.Printf("point-in-polygon alone (the fences layer's statement over batches of %d, no transaction): %.0f positions/s (%.0f-%.0f), p99 %.1f ms%s\n",
		batchSize, pip.Rate*batchSize, pip.Lo*batchSize, pip.Hi*batchSize, pip.P99, errNote(pip))
	apiCPU, directCPU := perPosition(a, "pg:api", "api", "redis-server", "bench"), perPosition(d, "pg:bench", "bench")
	fmt.Printf("CPU per position, microseconds by process (median trials): API: %s; direct: %s\n", apiCPU, directCPU)
	evs, err := f.eventsPerPosition(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("events committed per position: %.2f\n", evs)
	var steady, busy hookRun
	if b.latency > 0 {
		steady = b.hookLatency(ctx, f, hook, hooked, hookPeriod, 1)
		busy = b.hookLatency(ctx, f, hook, hooked, busyHookPeriod, busyClients)
	}
	fmt.Printf("RESULT events api_pps=%.0f direct_pps=%.0f pip_pps=%.0f api_p99=%.1f direct_p99=%.1f hook_p50=%.1f hook_p99=%.1f hook_n=%d hook_pps=%.0f"+
		" busy_p50=%.1f busy_p99=%.1f busy_n=%d busy_made=%d busy_pps=%.0f fences=%d conc=%d api_cpu=%s direct_cpu=%s\n",
		a.Rate*batchSize, d.Rate*batchSize, pip.Rate*batchSize, a.P99, d.P99, steady.p50, steady.p99, steady.n, steady.pps,
		busy.p50, busy.p99, busy.n, busy.made, busy.pps, f.fenceCount, b.conc, strings.ReplaceAll(apiCPU, " ", ","), strings.ReplaceAll(directCPU, " ", ","))
	return nil
}

// The latency runs' steady loads: a batch of hookBatch positions every
// hookPeriod from one client, then every busyHookPeriod from
// busyClients, five times as many: about 1,600 events a second to one
// subscription.
const (
	hookBatch      = 10
	hookPeriod     = 50 * time.Millisecond
	busyHookPeriod = 10 * time.Millisecond
	busyClients    = 4
)

// hookRun is what one latency run measured: the latencies of the events
// received, how many were, and how many the run's positions made.
type hookRun struct {
	p50, p99, pps float64
	n, made       int
}

// hookLatency reports positions through the hooked key at one batch per
// period for the latency duration and waits until its webhook has had
// every event they made, or 3 s without one, for at most 20 s.
func (b *bench) hookLatency(ctx context.Context, f *fleet, hook *receiver, hooked *apiSide, period time.Duration, clients int) hookRun {
	hook.reset()
	start := time.Now()
	res := load.Run(clients, b.latency, pace(period, hooked.op(f, "hook", hookBatch)))
	// Every report has committed: the events it made are all there. The
	// rate is the one reached, which falls short of the paced one when
	// the reports take longer than the period.
	r := hookRun{pps: res.Rate * hookBatch, made: f.hookEventsSince(ctx, start)}
	r.p50, r.p99, r.n = hook.waitLatencies(r.made, 3*time.Second, 20*time.Second)
	if r.n == 0 {
		fmt.Printf("webhook latency at %.0f positions/s: not measured: no event reached the webhook\n", r.pps)
		return r
	}
	fmt.Printf("webhook latency: a batch of %d positions every %v from %d clients (%.0f positions/s reached), %d of the %d events made received, p50 %.1f ms, p99 %.1f ms from the position sent to its event received\n",
		hookBatch, period, clients, r.pps, r.n, r.made, r.p50, r.p99)
	return r
}

// pace runs op at most once per period, shared by every client, so
// that a closed loop becomes a steady rate.
func pace(period time.Duration, op load.Op) load.Op {
	var mu sync.Mutex
	next := time.Now()
	return func(w, i int) error {
		mu.Lock()
		at := next
		next = next.Add(period)
		mu.Unlock()
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		return op(w, i)
	}
}

func apiCmd(bin, dbURL string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("api %v: %v: %s", args, err, msg)
	}
	return nil
}

// perPosition is r's CPU for the named groups in microseconds per
// position (an operation is a batch): "pg:api 93 api 30". On 2 shared
// cores it tells where a side's work lands, which its rate, moving with
// the machine's speed, cannot.
func perPosition(r load.Result, groups ...string) string {
	var b []string
	for _, g := range groups {
		b = append(b, fmt.Sprintf("%s %.0f", g, float64(r.CPU[g].Microseconds())/batchSize))
	}
	return strings.Join(b, " ")
}

func errNote(r load.Result) string {
	if r.Errors == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d errors, first: %s)", r.Errors, r.FirstErr)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
