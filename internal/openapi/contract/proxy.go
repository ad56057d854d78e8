package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Recorder collects the violations found in a series of exchanges.
type Recorder struct {
	checker *Checker
	mu      sync.Mutex
	found   []string
	seen    int
}

// NewRecorder returns a Recorder checking against c.
func NewRecorder(c *Checker) *Recorder { return &Recorder{checker: c} }

// Record checks x and keeps what it finds.
func (r *Recorder) Record(ctx context.Context, x Exchange) {
	v := r.checker.Check(ctx, x)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	for _, s := range v {
		r.found = append(r.found, fmt.Sprintf("%s %s -> %d: %s", x.Request.Method, x.Request.URL.RequestURI(), x.Status, s))
	}
}

// Violations returns what was found so far.
func (r *Recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.found...)
}

// Seen returns how many exchanges were checked.
func (r *Recorder) Seen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// Proxy starts an HTTP server that forwards every request to target
// unchanged (no X-Forwarded-* headers are added, compression is passed
// through) from a loopback address of its own (see clientAddr), and checks each exchange against the document the target
// serves on /openapi.json, which carries its configured limits. It returns
// the proxy's base URL; when the test ends the proxy stops and every
// violation fails the test.
func Proxy(t testing.TB, target string) string {
	t.Helper()
	resp, err := http.Get(target + "/openapi.json")
	if err != nil {
		t.Fatalf("contract: fetching the document: %v", err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("contract: GET %s/openapi.json = %d, %v", target, resp.StatusCode, err)
	}
	c, err := NewFor(context.Background(), data)
	if err != nil {
		t.Fatalf("contract: %v", err)
	}
	rec := NewRecorder(c)
	srv := httptest.NewServer(Handler(target, rec))
	t.Cleanup(func() {
		srv.Close()
		for _, v := range rec.Violations() {
			t.Errorf("contract violation: %s", v)
		}
	})
	return srv.URL
}

// Handler returns the forwarding, checking handler that Proxy serves.
func Handler(target string, rec *Recorder) http.Handler {
	tu, err := url.Parse(target)
	if err != nil {
		panic(fmt.Sprintf("contract: bad target %q: %v", target, err))
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: clientAddr()}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: dialFrom(d), DisableCompression: true, MaxIdleConnsPerHost: 16}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "contract proxy: reading the request: "+err.Error(), http.StatusBadGateway)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = tu.Scheme, tu.Host
		out.Host = r.Host
		out.Body = io.NopCloser(bytes.NewReader(reqBody))
		out.ContentLength = int64(len(reqBody))
		if len(reqBody) == 0 && r.ContentLength <= 0 {
			out.Body = nil
		}
		for _, h := range hopHeaders {
			out.Header.Del(h)
		}
		resp, err := tr.RoundTrip(out)
		if err != nil {
			if r.Context().Err() == nil {
				http.Error(w, "contract proxy: "+err.Error(), http.StatusBadGateway)
			}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return // the client or the service went away mid-answer
		}
		for _, h := range hopHeaders {
			resp.Header.Del(h)
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)

		// The check sees the request as the client made it, on the
		// service's URL space.
		seen := r.Clone(context.WithoutCancel(r.Context()))
		seen.URL.Scheme, seen.URL.Host = "http", r.Host
		rec.Record(context.Background(), Exchange{Request: seen, RequestBody: reqBody, Status: resp.StatusCode, Header: resp.Header, Body: body})
	})
}

// clientAddr draws a loopback address other than 127.0.0.1 (Linux answers
// on all of 127.0.0.0/8). Connecting from it gives each proxied service
// one anonymous client of its own, so that tests running side by side
// against one Redis do not spend each other's anonymous rate limits.
func clientAddr() net.IP {
	n := 2 + rand.Uint32N(1<<24-3) // not .0, .1 or the broadcast address
	return net.IPv4(127, byte(n>>16), byte(n>>8), byte(n))
}

// dialFrom dials with d, from its LocalAddr; where the system has no such
// address (only Linux answers on all of 127.0.0.0/8) it dials that
// connection from an address the system picks instead.
func dialFrom(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	plain := &net.Dialer{Timeout: d.Timeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return plain.DialContext(ctx, network, addr)
		}
		return c, err
	}
}

func jsonUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	return d.Decode(v)
}
