package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// Bounds of TestSoak on what a leak would grow: at the end of the soak,
// the service's live heap (after a forced collection), the memory its Go
// runtime holds from the system, its goroutines and its open files may
// exceed their levels after the first third by these margins.
//
// The resident set is logged but not bounded: make test builds the service
// with -race, whose detector maps shadow memory outside the Go runtime's
// accounting (about 270 of 340 MB in a measured run) that follows the
// heap's address range, so the RSS moved by ±70 MB between samples while
// every figure below stayed flat.
const (
	soakHeapSlack = 10 << 20
	soakSysSlack  = 64 << 20
	// Both samples are taken under load, so the counts move with what is
	// in flight: a connection's goroutine, its handler and what the
	// handler waits on, and a socket per load connection and per pooled
	// connection (DB_MAX_CONNS 20, TILES_DB_MAX_CONNS 10, Redis 64). A leak
	// of one per request would add thousands.
	soakGoroutineSlack = 4 * (soakWorkers + soakGreedyWorkers)
	soakFDSlack        = soakWorkers + soakGreedyWorkers + 20 + 10 + 64
)

// The load's concurrency: clients of the mix and of the greedy key.
const (
	soakWorkers       = 64
	soakGreedyWorkers = 32
)

// soakDuration is how long TestSoak loads the service: 60s, or
// GEOGATE_SOAK (a Go duration, e.g. 10m for make soak). -short skips it.
func soakDuration(t *testing.T) time.Duration {
	testenv.NeedServices(t, "a minute of load on PostgreSQL and Redis (TestSoak)")
	v := os.Getenv("GEOGATE_SOAK")
	if v == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("GEOGATE_SOAK=%q: want a positive Go duration such as 60s", v)
	}
	return d
}

// memSample is what the service process holds at one moment.
type memSample struct {
	heap       int64 // Go heap in live objects right after a forced collection
	sys        int64 // memory the Go runtime has obtained from the system
	goroutines int64
	fds        int64 // open file descriptors
	rss        int64 // resident set, from /proc/<pid>/status
}

func (m memSample) String() string {
	return fmt.Sprintf("live heap %.1f MB, Go runtime %d MB, %d goroutines, %d open files, RSS %d MB",
		float64(m.heap)/(1<<20), m.sys>>20, m.goroutines, m.fds, m.rss>>20)
}

// sampleMetrics names the /metrics series serviceMemory reads.
var sampleMetrics = map[string]func(*memSample) *int64{
	"go_memstats_heap_alloc_bytes": func(m *memSample) *int64 { return &m.heap },
	"go_memstats_sys_bytes":        func(m *memSample) *int64 { return &m.sys },
	"go_goroutines":                func(m *memSample) *int64 { return &m.goroutines },
	"process_open_fds":             func(m *memSample) *int64 { return &m.fds },
}

// serviceMemory forces a collection in the service (a heap profile with
// gc=1 through PPROF_ADDR), then reads its runtime figures from /metrics
// and its resident set from /proc.
func serviceMemory(t *testing.T, p *apiProcess, pprofAddr string) memSample {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatalf("force a collection: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp, err = client.Get(p.base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	var m memSample
	seen := map[string]bool{}
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		name, v, ok := strings.Cut(s.Text(), " ")
		field, want := sampleMetrics[name]
		if !ok || !want {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%s %q: %v", name, v, err)
		}
		*field(&m) = int64(f)
		seen[name] = true
	}
	for name := range sampleMetrics {
		if !seen[name] {
			t.Fatalf("/metrics has no %s", name)
		}
	}
	m.rss = procRSS(t, p.cmd.Process.Pid)
	return m
}

// grewBeyond lists what grew from third to end by more than its margin.
func grewBeyond(third, end memSample) []string {
	var out []string
	check := func(what string, a, b, slack int64, unit int64, suffix string) {
		if b > a+slack {
			out = append(out, fmt.Sprintf("%s grew from %d%s after a third of the soak to %d%s at its end, want at most +%d%s",
				what, a/unit, suffix, b/unit, suffix, slack/unit, suffix))
		}
	}
	check("live heap", third.heap, end.heap, soakHeapSlack, 1<<20, " MB")
	check("Go runtime memory", third.sys, end.sys, soakSysSlack, 1<<20, " MB")
	check("goroutines", third.goroutines, end.goroutines, soakGoroutineSlack, 1, "")
	check("open files", third.fds, end.fds, soakFDSlack, 1, "")
	return out
}

// procRSS is the resident set of process pid.
func procRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read RSS: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/<pid>/status")
	return 0
}

// soakLoad is the client side of TestSoak: the request mix, the
// identities, and what came back.
type soakLoad struct {
	base    string
	secrets []string // secrets[0] is greedy; "" is the anonymous client
	client  *http.Client

	mu       sync.Mutex
	statuses map[string]map[int]int
	failures []string
	total    int
	etags    map[string]string
}

// next picks a request of the mix: 40% /within, 20% containment, 40%
// tiles, spread over every identity but the greedy one.
func (l *soakLoad) next(rng *rand.Rand) (kind, path, secret string) {
	secret = l.secrets[1+rng.IntN(len(l.secrets)-1)]
	switch n := rng.IntN(10); {
	case n < 4:
		return "within", fmt.Sprintf("/within?lng=%.4f&lat=%.4f&radius=%d", -10+rng.Float64()*40, 36+rng.Float64()*20, 100+rng.IntN(5000)), secret
	case n < 6:
		return "contains", fmt.Sprintf("/geofences/contains?lng=%.4f&lat=%.4f", -10+rng.Float64()*40, 36+rng.Float64()*20), secret
	}
	z := 2 + rng.IntN(4)
	layer := []string{"places", "geofences"}[rng.IntN(2)]
	// Europe, so that most tiles have features and repeat.
	x := (1<<z)/2 + rng.IntN(1+(1<<z)/8)
	y := (1<<z)/4 + rng.IntN(1+(1<<z)/8)
	return "tiles", fmt.Sprintf("/tiles/%s/%d/%d/%d.mvt", layer, z, x, y), secret
}

// nextGreedy picks a request of the greedy identity: /within (small radii,
// cost 1) or point containment, both spending its "geofence" budget. They
// are counted under kind "greedy".
func (l *soakLoad) nextGreedy(rng *rand.Rand) (kind, path, secret string) {
	lng, lat := -10+rng.Float64()*40, 36+rng.Float64()*20
	if rng.IntN(2) == 0 {
		return "greedy", fmt.Sprintf("/within?lng=%.4f&lat=%.4f&radius=%d", lng, lat, 100+rng.IntN(900)), l.secrets[0]
	}
	return "greedy", fmt.Sprintf("/geofences/contains?lng=%.4f&lat=%.4f", lng, lat), l.secrets[0]
}

// do sends one request (conditional half the time when an ETag is known)
// and records its answer under kind. Transport errors after ctx ended are
// not counted.
func (l *soakLoad) do(ctx context.Context, rng *rand.Rand, kind, path, secret string) {
	req, _ := http.NewRequest("GET", l.base+path, nil)
	if secret != "" {
		req.Header.Set("x-api-key", secret)
	}
	l.mu.Lock()
	et := l.etags[path]
	l.mu.Unlock()
	if et != "" && rng.IntN(2) == 0 {
		req.Header.Set("If-None-Match", et)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l.fail("GET %s: %v", path, err)
		}
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if et := resp.Header.Get("ETag"); et != "" {
		l.etags[path] = et
	}
	l.total++
	if l.statuses[kind] == nil {
		l.statuses[kind] = map[int]int{}
	}
	l.statuses[kind][resp.StatusCode]++
	switch {
	case err != nil:
		l.failures = append(l.failures, fmt.Sprintf("GET %s = %d, body cut: %v", path, resp.StatusCode, err))
	case resp.StatusCode == 200, resp.StatusCode == 204, resp.StatusCode == 304, resp.StatusCode == 429:
	default:
		l.failures = append(l.failures, fmt.Sprintf("GET %s = %d %.200s", path, resp.StatusCode, body))
	}
}

func (l *soakLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
}

// closedLoop runs workers that each send the next request as soon as the
// last one is answered, for d, and returns how many were answered.
func (l *soakLoad) closedLoop(workers int, d time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil {
				kind, path, secret := l.next(rng)
				l.do(ctx, rng, kind, path, secret)
				if ctx.Err() == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// openLoop offers rate requests per second, each chosen by next, until
// ctx ends, through up to workers requests in flight at once. A request
// due while every worker is busy is skipped and counted, not queued, so
// that a slow service is not offered a growing backlog.
func (l *soakLoad) openLoop(ctx context.Context, next func(*rand.Rand) (kind, path, secret string), rate float64, workers int) (sent, skipped int) {
	type job struct{ kind, path, secret string }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for j := range jobs {
				l.do(ctx, rng, j.kind, j.path, j.secret)
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 7))
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval))) // pacing: the open loop's schedule
		kind, path, secret := next(rng)
		select {
		case jobs <- job{kind, path, secret}:
			sent++
		default:
			skipped++
		}
	}
	close(jobs)
	wg.Wait()
	return sent, skipped
}

// TestSoak loads the whole service, running as its own process on the
// demo data, for soakDuration. Three API keys open with a burst of 100
// each under 50/1s. A 2s closed loop of 16 clients (after an unmeasured
// second) then measures what the service answers per second; the soak
// offers four fifths of that rate as a mix of /within, point containment
// and tiles (half of repeats conditional) from 19 API keys and the
// anonymous client, and beside it twice its limit (100/s of /within and
// point containment) from one greedy key, which must get both 200s and
// 429s and nothing else. Every answer is 200, 204, 304 or 429, no
// request fails in transport, the service's live heap, Go runtime memory,
// goroutines and open files at the end are within small margins of their
// levels after the first third, and once the load stops and the windows
// have passed, Redis holds no rate-limit key.
func TestSoak(t *testing.T) {
	dur := soakDuration(t)
	_, dbURL := testenv.DemoDBWithURL(t)
	redisProc := testenv.StartRedis(t)
	env := map[string]string{
		"DATABASE_URL":           dbURL,
		"REDIS_URL":              redisProc.URL(),
		"RATELIMIT_GEOFENCE":     "50/1s",
		"RATELIMIT_TILES":        "50/1s",
		"RATELIMIT_TILES_CACHED": "400/1s",
		"RATELIMIT_DATABASE":     "100000ms/1s",
		// Under test are statuses and memory, not latency on a shared
		// machine: generous deadlines keep a slow moment from being a 503.
		"REDIS_TIMEOUT":      "3s",
		"DB_ACQUIRE_TIMEOUT": "10s",
		"DB_QUERY_TIMEOUT":   "10s",
		"LOG_LEVEL":          "warn",
		"PPROF_ADDR":         "127.0.0.1:0",
	}
	const keys = 20
	secrets := make([]string, 0, keys+1)
	prefix := testenv.Prefix(t)
	for i := range keys {
		secrets = append(secrets, runCLI(t, env, "keys", "create", "--name", fmt.Sprintf("soak%02d-%s", i, prefix),
			"--scopes", "proximity:read,geofences:read,tiles:read"))
	}
	secrets = append(secrets, "") // anonymous: one identity, the client address
	p := startProcess(t, env)
	pprofAddr := strings.TrimSuffix(strings.TrimPrefix(announced(p.logs.String(), pprofPrefix), "http://"), "/debug/pprof/")
	const (
		workers       = soakWorkers
		greedyWorkers = soakGreedyWorkers
		greedyRate    = 100 // twice its RATELIMIT_GEOFENCE
	)
	load := &soakLoad{
		base:    p.base,
		secrets: secrets,
		client: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: workers + greedyWorkers, MaxConnsPerHost: workers + greedyWorkers},
		},
		statuses: map[string]map[int]int{},
		etags:    map[string]string{},
	}
	t.Cleanup(load.client.CloseIdleConnections)

	burst := burstContains(t, p.base, secrets[:3], 100)
	load.mu.Lock()
	load.statuses["burst"] = burst
	load.mu.Unlock()

	mem := map[string]memSample{"start": serviceMemory(t, p, pprofAddr)}
	const probe = 2 * time.Second
	load.closedLoop(16, time.Second) // warm caches and connections, unmeasured
	answered := load.closedLoop(16, probe)
	rate := float64(answered) / probe.Seconds()
	if rate < 20 {
		t.Fatalf("the capacity probe got %d answers in %v: the service is not answering", answered, probe)
	}
	// The memory samples are taken while the load runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type counts struct{ sent, skipped int }
	done, greedyDone := make(chan counts, 1), make(chan counts, 1)
	mixRate := rate * 4 / 5
	start := time.Now()
	go func() {
		sent, skipped := load.openLoop(ctx, load.next, mixRate, workers)
		done <- counts{sent, skipped}
	}()
	go func() {
		sent, skipped := load.openLoop(ctx, load.nextGreedy, greedyRate, greedyWorkers)
		greedyDone <- counts{sent, skipped}
	}()
	time.Sleep(dur / 3) // pacing: the soak runs a third of its time before the first sample
	mem["third"] = serviceMemory(t, p, pprofAddr)
	time.Sleep(time.Until(start.Add(dur))) // pacing: the soak runs to its end
	mem["end"] = serviceMemory(t, p, pprofAddr)
	cancel()
	c, g := <-done, <-greedyDone
	elapsed := time.Since(start)

	load.mu.Lock()
	defer load.mu.Unlock()
	kinds := make([]string, 0, len(load.statuses))
	for k := range load.statuses {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("%s: %v", k, load.statuses[k])
	}
	t.Logf("capacity probe: %.0f answers/s (16 clients, closed loop, %v); soak: offered %.0f/s for %v from %d identities, %d sent (%.0f/s), %d skipped with all %d clients busy",
		rate, probe, mixRate, elapsed.Round(time.Millisecond), len(secrets)-1, c.sent, float64(c.sent)/elapsed.Seconds(), c.skipped, workers)
	t.Logf("greedy key: offered %d/s, %d sent (%.0f/s), %d skipped with all %d clients busy",
		greedyRate, g.sent, float64(g.sent)/elapsed.Seconds(), g.skipped, greedyWorkers)
	t.Logf("service memory: start %v; after a third %v; end %v", mem["start"], mem["third"], mem["end"])
	if len(load.failures) > 0 {
		f := load.failures
		if len(f) > 20 {
			f = append(f[:20:20], fmt.Sprintf("... and %d more", len(load.failures)-20))
		}
		t.Errorf("%d requests failed:\n%s\nservice logs (tail):\n%s", len(load.failures), strings.Join(f, "\n"), tail(p.logs.String(), 4000))
	}
	for _, k := range []string{"within", "contains", "tiles"} {
		if load.statuses[k][200] == 0 {
			t.Errorf("no %s request answered 200: %v", k, load.statuses[k])
		}
	}
	greedy := load.statuses["greedy"]
	others := 0
	for code, n := range greedy {
		if code != 200 && code != 429 {
			others += n
		}
	}
	if greedy[200] == 0 || greedy[429] == 0 || others != 0 {
		t.Errorf("greedy key offered %d/s under 50/1s: statuses %v, want 200s and 429s and nothing else", greedyRate, greedy)
	}
	if got := burst[429]; got < 3 {
		t.Errorf("bursts of 100 from three identities under 50/1s got %d 429s (%v), want many", got, burst)
	}
	for _, grew := range grewBeyond(mem["third"], mem["end"]) {
		t.Errorf("the service's %s", grew)
	}

	// Every window is 1s, and so is the TTL of every log and counter key.
	rc := redis.NewClient(redisProc.Options())
	defer rc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := scanKeys(t, rc, "rl*")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("10s after the load stopped (windows of 1s), Redis still holds %d rate-limit keys, e.g. %v", len(left), left[:min(5, len(left))])
			break
		}
		time.Sleep(250 * time.Millisecond) // polling interval
	}
}

// burstContains sends n point-containment requests at once from each of
// secrets (one identity after the other) and counts the answers by
// status; anything but 200 or 429 fails the test.
func burstContains(t *testing.T, base string, secrets []string, n int) map[int]int {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	got := map[int]int{}
	for _, secret := range secrets {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", base+"/geofences/contains?lng=10&lat=50", nil)
				req.Header.Set("x-api-key", secret)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("burst: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if c := resp.StatusCode; c != 200 && c != 429 {
					t.Errorf("burst GET /geofences/contains = %d", c)
				}
				mu.Lock()
				got[resp.StatusCode]++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	return got
}

// scanKeys lists the keys matching pattern with SCAN.
func scanKeys(t *testing.T, rc *redis.Client, pattern string) []string {
	t.Helper()
	var keys []string
	iter := rc.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN %s: %v", pattern, err)
	}
	return keys
}
