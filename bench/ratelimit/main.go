// Command ratelimit measures geogate's limiter against real Redis: decisions
// per second and p50/p99 latency through ratelimit.Limiter, next to the same
// Lua script driven straight through go-redis at the same concurrency;
// Redis round trips per decision; and Redis memory per key (MEMORY USAGE)
// for the exact log and the counter approximation at limits of 10, 1,000
// and 100,000; and a policy of two sliding windows and a daily calendar
// quota through the limiter next to log.lua with the same keys and
// arguments; and that policy with per-identity daily tallies next to
// without them. Run it from the repository root:
//
//	go run ./bench/ratelimit -redis redis://127.0.0.1:56379/0
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/bench/internal/load"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/rdb"
)

func main() {
	url := flag.String("redis", envOr("REDIS_URL", "redis://127.0.0.1:56379/0"), "Redis URL (as REDIS_URL)")
	conc := flag.Int("c", 50, "concurrent callers")
	dur := flag.Duration("d", 5*time.Second, "duration of each throughput run")
	runs := flag.Int("runs", 3, "alternating runs of each side; the median is reported")
	keys := flag.Int("keys", 1000, "distinct identities")
	pipeline := flag.Int("pipeline", 16, "also measure Options.Pipeline at this depth (0: skip)")
	workers := flag.Int("pipeline-workers", 0, "Options.PipelineWorkers (0: the limiter's default)")
	flag.Parse()
	if err := run(*url, *conc, *dur, *runs, *keys, *pipeline, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "bench/ratelimit:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// measure runs op from conc workers for d.
func measure(conc int, d time.Duration, op func(ctx context.Context, worker, i int) error) load.Result {
	ctx := context.Background()
	return load.Run(conc, d, func(w, i int) error { return op(ctx, w, i) })
}

// alternate measures a and b runs times each, alternating which goes
// first so that neither always meets a colder or busier machine, and
// returns each side's median.
func alternate(runs, conc int, dur time.Duration, a, b func(ctx context.Context, worker, i int) error) (load.Result, load.Result) {
	var as, bs []load.Result
	for i := range runs {
		if i%2 == 0 {
			as = append(as, measure(conc, dur, a))
			bs = append(bs, measure(conc, dur, b))
		} else {
			bs = append(bs, measure(conc, dur, b))
			as = append(as, measure(conc, dur, a))
		}
	}
	return median(as), median(bs)
}

func median(xs []load.Result) load.Result {
	slices.SortFunc(xs, func(a, b load.Result) int { return cmp.Compare(a.Rate, b.Rate) })
	return xs[len(xs)/2]
}

func run(url string, conc int, dur time.Duration, runs, nkeys, pipeline, workers int) error {
	ctx := context.Background()
	c, err := rdb.Open(ctx, url, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	src, err := os.ReadFile("internal/ratelimit/log.lua")
	if err != nil {
		return fmt.Errorf("run from the repository root: %v", err)
	}
	run := fmt.Sprintf("b%d", time.Now().UnixNano())
	policies := map[string]ratelimit.Policy{
		"bench": {Windows: []ratelimit.Window{{Limit: 100, Period: time.Second}}, Algorithm: ratelimit.Log, Failure: ratelimit.FailClosed},
		"quota": {Windows: quotaWindows, Algorithm: ratelimit.Log, Failure: ratelimit.FailClosed},
	}
	for _, n := range []int{10, 1000, 100000} {
		for _, alg := range []ratelimit.Algorithm{ratelimit.Log, ratelimit.Counter} {
			policies[fmt.Sprintf("mem-%s-%d", alg, n)] = ratelimit.Policy{
				Windows: []ratelimit.Window{{Limit: n, Period: time.Hour}}, Algorithm: alg, Failure: ratelimit.FailClosed,
			}
		}
	}
	l, err := ratelimit.New(c, policies, ratelimit.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	ids := make([]string, nkeys)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", run, i)
	}

	// The same script, arguments and key layout, straight through go-redis.
	script := redis.NewScript(string(src))
	var seq atomic.Uint64
	raw := func(ctx context.Context, w, i int) error {
		id := ids[(w*7919+i)%nkeys]
		return script.Run(ctx, c, []string{"rl:bench:" + id}, "", 1, run+strconv.FormatUint(seq.Add(1), 36), 100, int64(time.Second/time.Microsecond)).Err()
	}
	lim := func(ctx context.Context, w, i int) error {
		_, err := l.Allow(ctx, "bench", ids[(w*7919+i)%nkeys], 1)
		return err
	}
	lp, err := ratelimit.New(c, policies, ratelimit.Options{Timeout: time.Second, Pipeline: pipeline, PipelineWorkers: workers})
	if err != nil {
		return err
	}
	defer lp.Close()
	limPiped := func(ctx context.Context, w, i int) error {
		_, err := lp.Allow(ctx, "bench", ids[(w*7919+i)%nkeys], 1)
		return err
	}
	// Warm the connection pool, then alternate which side goes first so
	// that neither always meets a colder or busier machine.
	measure(conc, dur/4, raw)
	var rawS, limS, pipeS []load.Result
	for i := range runs {
		if i%2 == 0 {
			rawS = append(rawS, measure(conc, dur, raw))
			limS = append(limS, measure(conc, dur, lim))
		} else {
			limS = append(limS, measure(conc, dur, lim))
			rawS = append(rawS, measure(conc, dur, raw))
		}
		if pipeline > 1 {
			pipeS = append(pipeS, measure(conc, dur, limPiped))
		}
	}
	r, m := median(rawS), median(limS)
	fmt.Printf("## Rate limiter vs the bare script (concurrency %d, %d identities, limit 100/1s, median of %d runs of %s)\n\n", conc, nkeys, runs, dur)
	fmt.Println("| path | decisions/s | p50 ms | p99 ms | errors |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, s load.Result) {
		fmt.Printf("| %s | %.0f | %.3f | %.3f | %d |\n", name, s.Rate, s.P50, s.P99, s.Errors)
	}
	row("log.lua via go-redis Script.Run", r)
	row("ratelimit.Limiter.Allow", m)
	if pipeline > 1 {
		row(fmt.Sprintf("ratelimit.Limiter.Allow, Options.Pipeline=%d", pipeline), median(pipeS))
	}
	fmt.Printf("\nLimiter throughput: %.1f%% of the bare script (goal: at least 90%%).", 100*m.Rate/r.Rate)
	if pipeline > 1 {
		fmt.Printf(" Pipelined: %.1f%%.", 100*median(pipeS).Rate/r.Rate)
	}
	fmt.Printf("\nCPU per decision, microseconds: bare script: %s; limiter: %s", r.CPUNote("bench", "redis-server"), m.CPUNote("bench", "redis-server"))
	if pipeline > 1 {
		fmt.Printf("; pipelined: %s", median(pipeS).CPUNote("bench", "redis-server"))
	}
	fmt.Print("\n\n")

	if err := quotaCase(c, l, ids, conc, dur, runs, run, script); err != nil {
		return err
	}
	if err := tallyCase(c, policies, l, ids, conc, dur, runs); err != nil {
		return err
	}
	if err := roundTrips(ctx, url, run); err != nil {
		return err
	}
	return memory(ctx, c, l, run)
}

// quotaWindows are two sliding windows and a daily calendar quota.
var quotaWindows = []ratelimit.Window{
	{Limit: 100, Period: time.Second}, {Limit: 6000, Period: time.Minute}, ratelimit.CalendarWindow(1_000_000, ratelimit.Day),
}

// quotaCase measures decisions of the policy "quota" through the limiter,
// next to log.lua driven straight through go-redis with the same keys (the
// log and the day's counter in its slot) and arguments.
func quotaCase(c redis.UniversalClient, l *ratelimit.Limiter, ids []string, conc int, dur time.Duration, runs int, run string, script *redis.Script) error {
	nkeys := len(ids)
	var seq atomic.Uint64
	raw := func(ctx context.Context, w, i int) error {
		id := ids[(w*7919+i)%nkeys]
		now := time.Now().UTC()
		day := now.Truncate(24 * time.Hour)
		key := "rl:quota:" + id
		return script.Run(ctx, c, []string{key, "{" + key + "}:day:" + day.Format("2006-01-02")}, "", 1, run+strconv.FormatUint(seq.Add(1), 36),
			100, int64(time.Second/time.Microsecond), 6000, int64(time.Minute/time.Microsecond), 1_000_000, day.Add(24*time.Hour).UnixMicro()).Err()
	}
	lim := func(ctx context.Context, w, i int) error {
		_, err := l.Allow(ctx, "quota", ids[(w*7919+i)%nkeys], 1)
		return err
	}
	r, m := alternate(runs, conc, dur, raw, lim)
	fmt.Printf("## Two sliding windows and a daily calendar quota (100/1s, 6000/1m, 1000000/1d@calendar; concurrency %d, %d identities, median of %d runs of %s)\n\n", conc, nkeys, runs, dur)
	fmt.Println("| path | decisions/s | p50 ms | p99 ms | errors |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, s load.Result) {
		fmt.Printf("| %s | %.0f | %.3f | %.3f | %d |\n", name, s.Rate, s.P50, s.P99, s.Errors)
	}
	row("bare log.lua with the day's counter, Script.Run", r)
	row("Limiter.Allow, 2 windows and 1d@calendar", m)
	fmt.Printf("\nLimiter with a calendar quota: %.1f%% of its bare script.", 100*m.Rate/r.Rate)
	fmt.Printf("\nCPU per decision, microseconds: bare script: %s; limiter: %s\n\n", r.CPUNote("bench", "redis-server"), m.CPUNote("bench", "redis-server"))
	return nil
}

// tallyCase measures the policy "quota" through a limiter that tallies
// every decision per identity and day (Options.TallyDays, as the service
// does for API keys) next to l, which tallies none, in alternating runs.
func tallyCase(c redis.UniversalClient, policies map[string]ratelimit.Policy, l *ratelimit.Limiter, ids []string, conc int, dur time.Duration, runs int) error {
	lt, err := ratelimit.New(c, policies, ratelimit.Options{Timeout: time.Second, TallyDays: 35})
	if err != nil {
		return err
	}
	nkeys := len(ids)
	with := func(ctx context.Context, w, i int) error {
		_, err := lt.Allow(ctx, "quota", ids[(w*7919+i)%nkeys], 1)
		return err
	}
	without := func(ctx context.Context, w, i int) error {
		_, err := l.Allow(ctx, "quota", ids[(w*7919+i)%nkeys], 1)
		return err
	}
	a, b := alternate(runs, conc, dur, without, with)
	fmt.Printf("## The cost of per-key usage tallies (the policy above; concurrency %d, %d identities, median of %d runs of %s)\n\n", conc, nkeys, runs, dur)
	fmt.Println("| path | decisions/s | p50 ms | p99 ms | errors |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range []struct {
		name string
		s    load.Result
	}{{"Limiter.Allow, no tallies", a}, {"Limiter.Allow, tallied per identity and day (TallyDays 35)", b}} {
		fmt.Printf("| %s | %.0f | %.3f | %.3f | %d |\n", r.name, r.s.Rate, r.s.P50, r.s.P99, r.s.Errors)
	}
	fmt.Printf("\nWith tallies: %.1f%% of the decisions per second without (goal: at least 90%%).", 100*b.Rate/a.Rate)
	fmt.Printf("\nCPU per decision, microseconds: without: %s; with: %s\n\n", a.CPUNote("bench", "redis-server"), b.CPUNote("bench", "redis-server"))
	return nil
}

// counter is a go-redis hook counting what reaches the network.
type counter struct{ cmds, pipes atomic.Int64 }

func (h *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.cmds.Add(1); return next(ctx, cmd) }
}
func (h *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.pipes.Add(1); return next(ctx, cmds) }
}

// roundTrips counts commands sent per decision with a client hook, and
// EVALSHA/EVAL calls per decision from INFO commandstats.
func roundTrips(ctx context.Context, url, run string) error {
	c, err := rdb.Open(ctx, url, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	h := &counter{}
	c.AddHook(h)
	l, err := ratelimit.New(c, map[string]ratelimit.Policy{
		"rt":  {Windows: []ratelimit.Window{{Limit: 10, Period: time.Second}, {Limit: 600, Period: time.Minute}}, Algorithm: ratelimit.Log, Failure: ratelimit.FailClosed},
		"rtq": {Windows: []ratelimit.Window{{Limit: 10, Period: time.Second}, {Limit: 600, Period: time.Minute}, ratelimit.CalendarWindow(100000, ratelimit.Day)}, Algorithm: ratelimit.Log, Failure: ratelimit.FailClosed},
	}, ratelimit.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	// One call to make sure the script is cached, as in steady state.
	_, _ = l.Allow(ctx, "rt", run+"-warm", 1)
	before, err := scriptCalls(ctx, c)
	if err != nil {
		return err
	}
	h.cmds.Store(0)
	const n = 2000
	admitted := 0
	for i := range n {
		d, err := l.Allow(ctx, "rt", fmt.Sprintf("%s-rt-%d", run, i%50), 1)
		if err != nil {
			return err
		}
		if d.Allowed {
			admitted++
		}
	}
	sent := h.cmds.Load() + h.pipes.Load()
	after, err := scriptCalls(ctx, c)
	if err != nil {
		return err
	}
	fmt.Printf("## Redis round trips per decision (two windows, 10/1s and 600/1m; %d decisions, %d admitted)\n\n", n, admitted)
	fmt.Println("| measure | per decision |")
	fmt.Println("|---|---|")
	fmt.Printf("| commands sent by the client (go-redis hook) | %.3f |\n", float64(sent)/n)
	fmt.Printf("| EVALSHA + EVAL executed by Redis (INFO commandstats) | %.3f |\n", float64(after-before)/n)
	// The same with a daily calendar quota beside the two windows.
	_, _ = l.Allow(ctx, "rtq", run+"-warmq", 1)
	h.cmds.Store(0)
	h.pipes.Store(0)
	for i := range n {
		if _, err := l.Allow(ctx, "rtq", fmt.Sprintf("%s-rtq-%d", run, i%50), 1); err != nil {
			return err
		}
	}
	fmt.Printf("| the same policy with a 1d@calendar quota too: client round trips | %.3f |\n\n", float64(h.cmds.Load()+h.pipes.Load())/n)
	return nil
}

func scriptCalls(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		for _, name := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), name); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				n, _ := strconv.ParseInt(calls, 10, 64)
				total += n
			}
		}
	}
	return total, nil
}

// memory fills one key per algorithm and limit to its limit, one request
// at a time from 50 goroutines, and reports MEMORY USAGE.
func memory(ctx context.Context, c redis.UniversalClient, l *ratelimit.Limiter, run string) error {
	fmt.Println("## Redis memory per key, filled to its limit (window 1h)")
	fmt.Println()
	fmt.Println("| limit | exact log (bytes) | log bytes per request | counter approximation (bytes) |")
	fmt.Println("|---|---|---|---|")
	for _, n := range []int{10, 1000, 100000} {
		var sizes [2]int64
		for j, alg := range []ratelimit.Algorithm{ratelimit.Log, ratelimit.Counter} {
			policy := fmt.Sprintf("mem-%s-%d", alg, n)
			id := run + "-mem"
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					for next.Add(1) <= int64(n) {
						_, _ = l.Allow(ctx, policy, id, 1)
					}
				})
			}
			wg.Wait()
			key := "rl:" + policy + ":" + id
			if alg == ratelimit.Counter {
				key = "rlc:" + policy + ":" + id
			}
			v, err := c.MemoryUsage(ctx, key, 0).Result()
			if err != nil {
				return fmt.Errorf("MEMORY USAGE %s: %v", key, err)
			}
			sizes[j] = v
			_ = c.Del(ctx, key).Err()
		}
		fmt.Printf("| %d | %d | %.1f | %d |\n", n, sizes[0], float64(sizes[0])/float64(n), sizes[1])
	}
	fmt.Println()
	return nil
}
