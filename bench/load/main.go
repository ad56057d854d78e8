// Command load drives HTTP load at a fixed concurrency for a fixed time and
// prints throughput, latency percentiles and status counts. It only talks
// to the URLs it is given; the bench scripts point it at loopback.
//
//	go run ./bench/load -c 32 -d 10s -keys 1000 'http://127.0.0.1:8000/within?lng=13.4&lat=52.5&radius=1000'
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

// Result is one run's outcome, printed as a line of JSON with -json.
type Result struct {
	Requests int            `json:"requests"`
	Seconds  float64        `json:"seconds"`
	RPS      float64        `json:"rps"`
	P50ms    float64        `json:"p50_ms"`
	P99ms    float64        `json:"p99_ms"`
	Errors   int            `json:"errors"`
	Statuses map[string]int `json:"statuses"`
}

func main() {
	conc := flag.Int("c", 32, "concurrent workers, each with its own keep-alive connection")
	dur := flag.Duration("d", 10*time.Second, "how long to run")
	keys := flag.Int("keys", 0, "spread requests over this many API keys (x-api-key: bench-N); 0 sends none")
	asJSON := flag.Bool("json", false, "print one JSON line")
	var headers headerList
	flag.Var(&headers, "H", "extra header 'Name: value' (repeatable)")
	flag.Parse()
	urls := flag.Args()
	if len(urls) == 0 {
		fmt.Fprintln(os.Stderr, "usage: load [flags] URL [URL...]  (URLs are used round-robin)")
		os.Exit(2)
	}
	res := run(*conc, *dur, *keys, headers, urls)
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	fmt.Printf("%d requests in %.1fs: %.0f req/s, p50 %.2f ms, p99 %.2f ms, errors %d, statuses %v\n",
		res.Requests, res.Seconds, res.RPS, res.P50ms, res.P99ms, res.Errors, res.Statuses)
}

func run(conc int, dur time.Duration, keys int, headers []string, urls []string) Result {
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()

	var mu sync.Mutex
	var lat []time.Duration
	statuses := map[string]int{}
	errors := 0
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine []time.Duration
			mineStatus := map[string]int{}
			mineErr := 0
			for i := w; ctx.Err() == nil; i += conc {
				req, _ := http.NewRequest("GET", urls[i%len(urls)], nil)
				for _, h := range headers {
					if k, v, ok := strings.Cut(h, ":"); ok {
						req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
					}
				}
				if keys > 0 {
					req.Header.Set("x-api-key", fmt.Sprintf("bench-%d", i%keys))
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					mineErr++
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				mineStatus[fmt.Sprint(resp.StatusCode)]++
			}
			mu.Lock()
			lat = append(lat, mine...)
			for k, v := range mineStatus {
				statuses[k] += v
			}
			errors += mineErr
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return Result{
		Requests: len(lat), Seconds: secs, RPS: float64(len(lat)) / secs,
		P50ms: pct(lat, 0.50), P99ms: pct(lat, 0.99), Errors: errors, Statuses: statuses,
	}
}

func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i].Microseconds()) / 1000
}
