package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// soakDuration is how long TestSoak loads the service: 15s, or
// GEOGATE_SOAK (a Go duration, e.g. 60s for make soak).
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("GEOGATE_SOAK")
	if v == "" {
		return 15 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("GEOGATE_SOAK=%q: want a positive Go duration such as 60s", v)
	}
	return d
}

// rssBytes is this process's resident set (the service runs in process)
// after a collection that returns free memory to the system, so that it
// follows what is retained rather than when the collector last ran.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatalf("read RSS: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestSoak loads the whole service with demo data for a bounded time: a
// mix of /within, point containment and tiles (with conditional requests)
// from 20 API keys and the anonymous identity, after three of them sent
// a burst of 100 each; those three then run without pause. Every answer is 200, 204, 304 or 429, no request fails in
// transport, memory stays bounded, and once the load stops and the
// windows have passed, Redis holds no rate-limit key.
func TestSoak(t *testing.T) {
	dur := soakDuration(t)
	_, dbURL := testenv.DemoDBWithURL(t)
	redisProc := testenv.StartRedis(t)
	env := map[string]string{
		"DATABASE_URL":           dbURL,
		"REDIS_URL":              "redis://" + redisProc.Addr() + "/0",
		"RATELIMIT_GEOFENCE":     "50/1s",
		"RATELIMIT_TILES":        "50/1s",
		"RATELIMIT_TILES_CACHED": "400/1s",
		// Under test are statuses and memory, not latency on a shared
		// machine: generous deadlines keep a slow moment from being a 503.
		"REDIS_TIMEOUT":      "3s",
		"DB_ACQUIRE_TIMEOUT": "10s",
		"DB_QUERY_TIMEOUT":   "10s",
		"LOG_LEVEL":          "warn",
	}
	const keys = 20
	secrets := make([]string, 0, keys+1)
	prefix := testenv.Prefix(t)
	for i := range keys {
		secrets = append(secrets, runCLI(t, env, "keys", "create", "--name", fmt.Sprintf("soak%02d-%s", i, prefix),
			"--scopes", "proximity:read,geofences:read,tiles:read"))
	}
	secrets = append(secrets, "") // anonymous: one identity, the client address
	base, logs, _ := startServiceWithStop(t, env)
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64},
	}
	t.Cleanup(client.CloseIdleConnections)

	burst := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	t.Cleanup(burst.CloseIdleConnections)

	var (
		mu       sync.Mutex
		statuses = map[string]map[int]int{"burst": {}}
		failures []string
		total    int
	)
	// Three identities open with a burst of 100 at once each: the limiter
	// decides them within about one window, so many are over 50/1s.
	for _, secret := range secrets[:3] {
		var bwg sync.WaitGroup
		for range 100 {
			bwg.Go(func() {
				req, _ := http.NewRequest("GET", base+"/geofences/contains?lng=10&lat=50", nil)
				req.Header.Set("x-api-key", secret)
				resp, err := burst.Do(req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("burst: %v", err))
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				total++
				statuses["burst"][resp.StatusCode]++
				if c := resp.StatusCode; c != 200 && c != 429 {
					failures = append(failures, fmt.Sprintf("burst GET /geofences/contains = %d", c))
				}
			})
		}
		bwg.Wait()
	}
	burst.CloseIdleConnections()

	rssStart := rssBytes(t)
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	for w, secret := range secrets {
		greedy := w < 3 // no pause: far over 50/s
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 8))
			etags := map[string]string{}
			for ctx.Err() == nil {
				var kind, path string
				switch n := rng.IntN(10); {
				case n < 4:
					kind = "within"
					path = fmt.Sprintf("/within?lng=%.4f&lat=%.4f&radius=%d", -10+rng.Float64()*40, 36+rng.Float64()*20, 100+rng.IntN(5000))
				case n < 6:
					kind = "contains"
					path = fmt.Sprintf("/geofences/contains?lng=%.4f&lat=%.4f", -10+rng.Float64()*40, 36+rng.Float64()*20)
				default:
					kind = "tiles"
					z := 2 + rng.IntN(4)
					layer := []string{"places", "geofences"}[rng.IntN(2)]
					// Europe, so that most tiles have features and repeat.
					x := (1<<z)/2 + rng.IntN(1+(1<<z)/8)
					y := (1<<z)/4 + rng.IntN(1+(1<<z)/8)
					path = fmt.Sprintf("/tiles/%s/%d/%d/%d.mvt", layer, z, x, y)
				}
				req, _ := http.NewRequest("GET", base+path, nil)
				if secret != "" {
					req.Header.Set("x-api-key", secret)
				}
				if et := etags[path]; et != "" && rng.IntN(2) == 0 {
					req.Header.Set("If-None-Match", et)
				}
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("GET %s: %v", path, err))
						mu.Unlock()
					}
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if et := resp.Header.Get("ETag"); et != "" {
					etags[path] = et
				}
				mu.Lock()
				total++
				if statuses[kind] == nil {
					statuses[kind] = map[int]int{}
				}
				statuses[kind][resp.StatusCode]++
				switch resp.StatusCode {
				case 200, 204, 304, 429:
				default:
					failures = append(failures, fmt.Sprintf("GET %s = %d %.200s", path, resp.StatusCode, body))
				}
				mu.Unlock()
				if !greedy {
					time.Sleep(time.Duration(30+rng.IntN(40)) * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	rssEnd := rssBytes(t)
	kinds := make([]string, 0, len(statuses))
	for k := range statuses {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("%s: %v", k, statuses[k])
	}
	t.Logf("%d requests in %s (%.0f/s) from %d identities; RSS %d MB at start, %d MB at end",
		total, dur, float64(total)/dur.Seconds(), len(secrets), rssStart>>20, rssEnd>>20)
	if len(failures) > 0 {
		if len(failures) > 20 {
			failures = append(failures[:20], fmt.Sprintf("... and %d more", len(failures)-20))
		}
		t.Errorf("%d requests failed:\n%s\nservice logs (tail):\n%s", len(failures), strings.Join(failures, "\n"), tail(logs.String(), 4000))
	}
	for _, k := range []string{"within", "contains", "tiles"} {
		if statuses[k][200] == 0 {
			t.Errorf("no %s request answered 200: %v", k, statuses[k])
		}
	}
	if got := statuses["burst"][429]; got < 3 {
		t.Errorf("bursts of 100 from three identities under 50/1s got %d 429s (%v), want many", got, statuses["burst"])
	}
	if rssEnd > rssStart+200<<20 {
		t.Errorf("RSS grew from %d MB to %d MB during the soak, want under +200 MB", rssStart>>20, rssEnd>>20)
	}

	// Every window is 1s, and so is the TTL of every log and counter key.
	rc := redis.NewClient(&redis.Options{Addr: redisProc.Addr()})
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
		time.Sleep(250 * time.Millisecond)
	}
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
