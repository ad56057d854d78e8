// Command load drives HTTP load at a fixed concurrency for a fixed time and
// prints throughput, latency percentiles and status counts. It only talks
// to the URLs it is given (all on one host); the bench scripts point it at
// loopback. Requests go out through bench/internal/load's lean HTTP/1.1
// client, one keep-alive connection per worker.
//
//	go run ./bench/load -c 32 -d 10s -keys 1000 'http://127.0.0.1:8000/within?lng=13.4&lat=52.5&radius=1000'
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/geogate/geogate/bench/internal/load"
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
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: load [flags] URL [URL...]  (URLs are used round-robin)")
		os.Exit(2)
	}
	res, err := run(*conc, *dur, *keys, headers, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	fmt.Printf("%d requests in %.1fs: %.0f req/s, p50 %.2f ms, p99 %.2f ms, errors %d, statuses %v\n",
		res.Requests, res.Seconds, res.RPS, res.P50ms, res.P99ms, res.Errors, res.Statuses)
}

func run(conc int, dur time.Duration, keys int, headers, urls []string) (Result, error) {
	base, targets, err := split(urls)
	if err != nil {
		return Result{}, err
	}
	client, err := load.NewClient(base, conc)
	if err != nil {
		return Result{}, err
	}
	defer client.Close()
	// Every request's header lines are built before the clock starts.
	var keyHeaders []load.Header
	for k := range max(keys, 1) {
		h := load.Header(headers)
		if keys > 0 {
			h = append(h[:len(h):len(h)], "x-api-key: bench-"+strconv.Itoa(k))
		}
		keyHeaders = append(keyHeaders, h)
	}
	statuses := make([]map[int]int, conc)
	for w := range statuses {
		statuses[w] = map[int]int{}
	}
	r := load.Run(conc, dur, func(w, i int) error {
		status, err := client.Get(w, targets[i%len(targets)], keyHeaders[i%len(keyHeaders)])
		if err == nil {
			statuses[w][status]++
		}
		return err
	})
	res := Result{Requests: r.Ops, Seconds: r.Seconds, RPS: r.Rate, P50ms: r.P50, P99ms: r.P99, Errors: int(r.Errors), Statuses: map[string]int{}}
	for _, m := range statuses {
		for s, n := range m {
			res.Statuses[strconv.Itoa(s)] += n
		}
	}
	return res, nil
}

// split returns the one scheme://host the URLs share and their request
// targets (path and query).
func split(urls []string) (base string, targets []string, err error) {
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			return "", nil, fmt.Errorf("%q is not an http:// URL", s)
		}
		b := u.Scheme + "://" + u.Host
		if base != "" && b != base {
			return "", nil, fmt.Errorf("all URLs must share one host: %s and %s", base, b)
		}
		base = b
		targets = append(targets, u.RequestURI())
	}
	return base, targets, nil
}
