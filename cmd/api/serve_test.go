package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/testenv"
)

// syncBuffer lets the test read logs while the server writes them.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// announced returns the URL the service printed after prefix (see
// listeningPrefix) in its output, or "" while it has printed none.
func announced(out, prefix string) string {
	for _, line := range strings.Split(out, "\n") {
		if u, ok := strings.CutPrefix(line, prefix); ok {
			return strings.Replace(strings.TrimSpace(u), "localhost", "127.0.0.1", 1)
		}
	}
	return ""
}

// envMap turns a map into a getenv func.
func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// startService runs the whole program against a fresh database and the
// test Redis, waits for /healthz and returns its base URL. The URL is a
// proxy that checks every exchange against the OpenAPI document: a
// response the document does not describe fails the test. The service is
// stopped, and its clean exit checked, when the test ends.
func startService(t *testing.T, extra map[string]string) (string, *syncBuffer) {
	t.Helper()
	base, logs, _ := startServiceWithStop(t, extra)
	return contract.Proxy(t, base), logs
}

// startServiceWithStop is startService that also returns a func that
// begins shutdown (as SIGTERM would) and waits for run to return.
func startServiceWithStop(t *testing.T, extra map[string]string) (string, *syncBuffer, func() error) {
	t.Helper()
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL": dbURL,
		"REDIS_URL":    testenv.Getenv(t, "TEST_REDIS_URL"),
		"PORT":         "0", // the service picks a free port and prints it
	}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, envMap(env), logs, logs) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = fmt.Errorf("run() did not return within 20s of shutdown")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("run() after shutdown = %v, want nil", err)
		}
	})
	var base string
	testenv.WaitFor(t, 15*time.Second, "the service printing its URL", func() bool {
		select {
		case err := <-done:
			once.Do(func() {}) // it has returned: the cleanup has nothing to wait for
			t.Fatalf("run() ended early: %v\nlogs:\n%s", err, logs)
		default:
		}
		base = announced(logs.String(), listeningPrefix)
		return base != ""
	})
	// It listens before it prints: the first request is answered.
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/healthz = %v, %v; want 200\nlogs:\n%s", base, resp, err, logs)
	}
	resp.Body.Close()
	return base, logs, stop
}

func getJSON(t *testing.T, req *http.Request) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s %s: body %q is not JSON: %v", req.Method, req.URL, body, err)
	}
	return resp, m
}

func TestServeEndToEnd(t *testing.T) {
	base, logs := startService(t, nil)

	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantDetail string
	}{
		{"ReadyOK", "GET", "/readyz", 200, ""},
		{"UnknownRoute", "GET", "/no/such/route", 404, "Not Found"},
		{"WrongMethod", "DELETE", "/healthz", 405, "Method Not Allowed"},
		// Paths on which Gin's search for another method's route panics
		// under a smaller route set (see httpx.Guard, which serve uses).
		{"TrailingSlashGET", "GET", "/geofences/contains/", 404, "Not Found"},
		{"TrailingSlashPUT", "PUT", "/geofences/contains/", 404, "Not Found"},
		{"TrailingSlashDELETE", "DELETE", "/geofences/contains/", 404, "Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, nil)
			resp, body := getJSON(t, req)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("%s %s status = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.wantStatus)
			}
			if tt.wantDetail != "" && body["detail"] != tt.wantDetail {
				t.Errorf("%s %s detail = %v, want %q", tt.method, tt.path, body["detail"], tt.wantDetail)
			}
		})
	}

	t.Run("RequestIDEchoedAndLogged", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		req.Header.Set("X-Request-ID", "abc-123")
		resp, _ := getJSON(t, req)
		if got := resp.Header.Get("X-Request-ID"); got != "abc-123" {
			t.Errorf("X-Request-ID = %q, want abc-123", got)
		}
		// The access log line is written once the answer has gone out.
		defer func() {
			if t.Failed() {
				t.Logf("logs:\n%s", logs)
			}
		}()
		testenv.WaitFor(t, 5*time.Second, "the access log line with request_id abc-123", func() bool {
			return strings.Contains(logs.String(), `"request_id":"abc-123"`)
		})
	})

	t.Run("Metrics", func(t *testing.T) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, want := range []string{"geogate_http_requests_total", "geogate_pgx_pool_conns", "geogate_redis_pool_conns", `route="/readyz"`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

func TestStartupFailures(t *testing.T) {
	redisURL := testenv.Getenv(t, "TEST_REDIS_URL")
	_, dbURL := testenv.DBWithURL(t)
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"DatabaseUnreachable", map[string]string{"DATABASE_URL": "postgres://geogate@127.0.0.1:1/geogate?sslmode=disable", "REDIS_URL": redisURL}, "database at 127.0.0.1:1 is unreachable"},
		{"RedisUnreachable", map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": "redis://127.0.0.1:1/0"}, "redis at 127.0.0.1:1 is unreachable"},
		{"DatabaseURLMalformed", map[string]string{"DATABASE_URL": "postgres://%zz", "REDIS_URL": redisURL}, "DATABASE_URL"},
		{"RedisURLMalformed", map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": "memcache://x"}, "REDIS_URL"},
		{"DatabaseURLMissing", map[string]string{"REDIS_URL": redisURL}, "DATABASE_URL"},
		{"BadPort", map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "PORT": "http"}, "PORT"},
		{"BadTimeout", map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "DB_QUERY_TIMEOUT": "soon"}, "DB_QUERY_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			var out bytes.Buffer
			err := run(context.Background(), nil, envMap(tt.env), &out, &out)
			if err == nil {
				t.Fatalf("run() = nil, want an error naming %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run() = %q, want it to mention %q", err, tt.wantErr)
			}
			if d := time.Since(start); d > 12*time.Second {
				t.Errorf("run() took %v to fail, want about 10s at most", d)
			}
		})
	}
}

// TestGracefulShutdown checks that shutdown closes idle keep-alive
// connections, stops accepting new ones and lets run return cleanly.
func TestGracefulShutdown(t *testing.T) {
	base, _, stop := startServiceWithStop(t, nil)
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the connection stays open, idle

	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run() = %v, want nil after a clean shutdown", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown with only idle connections took %v", d)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted after shutdown")
	}
}

// TestShutdownDrain checks that with SHUTDOWN_DRAIN set, shutdown first
// fails /readyz while requests are still answered, then stops.
func TestShutdownDrain(t *testing.T) {
	base, _, stop := startServiceWithStop(t, map[string]string{"SHUTDOWN_DRAIN": "1500ms"})
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	deadline := time.Now().Add(1200 * time.Millisecond)
	sawDraining := false
	for time.Now().Before(deadline) && !sawDraining {
		req, _ := http.NewRequest("GET", base+"/readyz", nil)
		resp, body := getJSON(t, req)
		sawDraining = resp.StatusCode == http.StatusServiceUnavailable && body["detail"] == "Not ready: shutting down."
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if !sawDraining {
		t.Fatalf("/readyz never said 503 shutting down during the drain")
	}
	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	if resp, _ := getJSON(t, req); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz during the drain = %d, want 200", resp.StatusCode)
	}
	if err := <-stopped; err != nil {
		t.Errorf("run() = %v, want nil", err)
	}
}
