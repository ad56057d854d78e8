package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// receiver is a webhook that notes, for each event, how long after its
// position was sent (the position's time, set when its batch was built)
// the event arrived.
type receiver struct {
	url  string
	srv  *http.Server
	mu   sync.Mutex
	lat  []float64 // milliseconds
	seen map[string]bool
	got  chan struct{}
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/hook", seen: map[string]bool{}, got: make(chan struct{}, 1)}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var ev struct {
		ID   string `json:"id"`
		Data struct {
			Position struct {
				Time time.Time `json:"time"`
			} `json:"position"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &ev) == nil && ev.ID != "" {
		r.mu.Lock()
		if !r.seen[ev.ID] {
			r.seen[ev.ID] = true
			r.lat = append(r.lat, float64(time.Since(ev.Data.Position.Time).Microseconds())/1000)
		}
		r.mu.Unlock()
		select {
		case r.got <- struct{}{}:
		default:
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) reset() {
	r.mu.Lock()
	r.lat = nil
	r.mu.Unlock()
}

// waitLatencies waits until want events have arrived, or none has for
// quiet, or max has passed, and returns the latencies' p50 and p99 and
// their count.
func (r *receiver) waitLatencies(want int, quiet, max time.Duration) (p50, p99 float64, n int) {
	deadline := time.After(max)
	for done := false; !done; {
		r.mu.Lock()
		done = len(r.lat) >= want
		r.mu.Unlock()
		if done {
			break
		}
		select {
		case <-r.got:
		case <-time.After(quiet):
			done = true
		case <-deadline:
			done = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(r.lat))
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)], len(s)
}

func (r *receiver) close() { _ = r.srv.Close() }
