package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/testenv"
)

// leaks are texts no response may contain: SQL, driver and Go runtime
// text, internal addresses and URLs.
var leaks = []string{"SELECT ", "INSERT ", "ST_", "SQLSTATE", "pgx", "pgconn", "goroutine ", ".go:", "panic", "127.0.0.1:", "postgres://", "redis://"}

// TestClientLimits sends what a client controls past every limit: body
// size, header size, batch length, vertices, page size, radius, malformed
// values and a slow header. Each is refused with a clear 4xx (a JSON
// detail where the service answers), nothing hangs, a slow client is cut
// off after HTTP_READ_TIMEOUT, and no answer shows SQL, stack traces,
// internal addresses or secrets.
func TestClientLimits(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	const jwtSecret = "limits-secret-0123456789abcdef012345"
	env := map[string]string{
		"DATABASE_URL":              dbURL,
		"REDIS_URL":                 testenv.Getenv(t, "TEST_REDIS_URL"),
		"JWT_HS256_SECRET":          jwtSecret,
		"RATELIMIT_GEOFENCE":        "1000/1s",
		"HTTP_READ_TIMEOUT":         "1s",
		"HTTP_MAX_HEADER_BYTES":     "1024",
		"GEOFENCE_MAX_BODY_BYTES":   "1024",
		"GEOFENCE_MAX_BATCH_POINTS": "5",
		"GEOFENCE_MAX_VERTICES":     "10",
		"GEOFENCE_MAX_LIMIT":        "100",
		"GEOFENCE_MAX_RADIUS_M":     "1000",
	}
	secret := runCLI(t, env, "keys", "create", "--name", "lim-"+testenv.Prefix(t),
		"--scopes", "proximity:read,geofences:read,geofences:write,tiles:read")
	base, _, _ := startServiceWithStop(t, env)
	secrets := []string{secret, jwtSecret, dbURL}

	points := func(n int) string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = fmt.Sprintf("[%d.123456789, %d.5]", i%180, i%90)
		}
		return `{"points": [` + strings.Join(ps, ",") + `]}`
	}
	polygon := func(n int) string {
		// n-1 distinct vertices on a circle, closed: n positions.
		cs := make([]string, 0, n)
		for i := range n - 1 {
			a := float64(i) / float64(n-1) * 6.283185307179586
			cs = append(cs, fmt.Sprintf("[%.6f, %.6f]", 10+math.Cos(a), 50+math.Sin(a)))
		}
		cs = append(cs, cs[0])
		return `{"type": "Feature", "properties": {"name": "big"}, "geometry": {"type": "Polygon", "coordinates": [[` + strings.Join(cs, ",") + `]]}}`
	}
	client := &http.Client{Timeout: 10 * time.Second}
	// Every case goes through the contract proxy, so that each answer is
	// also checked against the document (413, 422, 404, ...), except
	// those the proxy cannot carry as sent: a header block past the
	// service's HTTP_MAX_HEADER_BYTES is refused by Go's server before
	// any handler (and by no documented route), so it goes direct.
	proxied := contract.Proxy(t, base)

	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		want                     int // 0: any 4xx
		jsonDetail               bool
		loc                      []any // for a 422: the first entry's loc
		direct                   bool  // bypasses the contract proxy
	}{
		{"BodyTooLarge", "POST", "/geofences/contains", points(200), nil, 413, true, nil, false},
		{"BatchTooLong", "POST", "/geofences/contains", points(6), nil, 422, true, []any{"body", "points"}, false},
		{"BatchAtLimit", "POST", "/geofences/contains", points(5), nil, 200, false, nil, false},
		// GEOFENCE_MAX_VERTICES=10: a valid Feature of 12 positions is
		// refused for its vertex count alone, one of 10 is stored.
		{"TooManyVertices", "POST", "/geofences", polygon(12), nil, 422, true, []any{"body", "geometry", "coordinates"}, false},
		{"VerticesAtLimit", "POST", "/geofences", polygon(10), nil, 201, false, nil, false},
		{"PageTooLarge", "GET", "/geofences?limit=101", "", nil, 422, true, []any{"query", "limit"}, false},
		{"WithinLimitTooLarge", "GET", "/within?lng=10&lat=50&radius=100&limit=101", "", nil, 422, true, []any{"query", "limit"}, false},
		{"RadiusTooLarge", "GET", "/within?lng=10&lat=50&radius=1001", "", nil, 422, true, []any{"query", "radius"}, false},
		{"RadiusNaN", "GET", "/within?lng=10&lat=50&radius=NaN", "", nil, 422, true, []any{"query", "radius"}, false},
		{"LngOutOfRange", "GET", "/geofences/contains?lng=181&lat=0", "", nil, 422, true, []any{"query", "lng"}, false},
		{"BadCursor", "GET", "/geofences?cursor=%27%3B%20DROP%20TABLE%20geofences%3B--", "", nil, 0, true, nil, false},
		{"HugeID", "GET", "/geofences/99999999999999999999999999", "", nil, 0, true, nil, false},
		{"InjectionLayer", "GET", "/within?lng=10&lat=50&radius=100&layer=places%27%3B--", "", nil, 0, true, nil, false},
		{"BrokenJSON", "POST", "/geofences", `{"name": "x", "geometry": {`, nil, 0, true, nil, false},
		{"TileZoomTooDeep", "GET", "/tiles/places/40/1/1.mvt", "", nil, 0, true, nil, false},
		{"HeadersTooLarge", "GET", "/within?lng=10&lat=50&radius=100", "", map[string]string{"X-Pad": strings.Repeat("a", 16<<10)}, 431, false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			target := proxied
			if tc.direct {
				target = base
			}
			req, _ := http.NewRequest(tc.method, target+tc.path, body)
			req.Header.Set("x-api-key", secret)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v after %s", tc.method, tc.path, err, time.Since(start).Round(time.Millisecond))
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.want != 0 && resp.StatusCode != tc.want || tc.want == 0 && (resp.StatusCode < 400 || resp.StatusCode > 499) {
				t.Fatalf("%s %s = %d %.300s, want %d (0: any 4xx)", tc.method, tc.path, resp.StatusCode, b, tc.want)
			}
			if tc.jsonDetail {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil || m["detail"] == nil {
					t.Errorf("body %.300q, want JSON with a detail", b)
				}
				if tc.want == 422 {
					checkLoc(t, m["detail"], tc.loc)
				}
			}
			checkNoLeaks(t, string(b), secrets)
		})
	}

	t.Run("SlowHeaders", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		request := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("s", 40) + "\r\n\r\n"
		start := time.Now()
		sent := make(chan int, 1)
		go func() {
			n := 0
			for ; n < len(request); n++ {
				if _, err := conn.Write([]byte{request[n]}); err != nil {
					break
				}
				time.Sleep(100 * time.Millisecond) // pacing: a slow client, one byte at a time
			}
			sent <- n
		}()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(conn)
		elapsed := time.Since(start)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() { // a reset is a close too
			t.Fatalf("connection still open %s after the first byte (HTTP_READ_TIMEOUT 1s): %v", elapsed, err)
		}
		if elapsed > 5*time.Second {
			t.Errorf("slow client cut off after %s, want within 5s of HTTP_READ_TIMEOUT 1s", elapsed)
		}
		_ = conn.Close()
		if n := <-sent; n >= len(request) {
			t.Errorf("the whole slow request (%d bytes over %s) was read; want it cut off after ~1s", n, elapsed)
		}
		if strings.Contains(string(b), "200 OK") {
			t.Errorf("slow request answered %q, want the connection closed", b)
		}
		checkNoLeaks(t, string(b), secrets)
		t.Logf("slow client cut off after %s (answer %.60q)", elapsed.Round(time.Millisecond), b)
	})
}

// checkLoc checks that a 422 detail is a list of field errors whose first
// loc is want.
func checkLoc(t *testing.T, detail any, want []any) {
	t.Helper()
	list, ok := detail.([]any)
	if !ok || len(list) == 0 {
		t.Fatalf("422 detail %v, want a list of field errors", detail)
	}
	first, _ := list[0].(map[string]any)
	if got := fmt.Sprint(first["loc"]); want != nil && got != fmt.Sprint(want) {
		t.Errorf("422 loc = %s (%v), want %v", got, first["msg"], want)
	}
}

func checkNoLeaks(t *testing.T, body string, secrets []string) {
	t.Helper()
	for _, s := range append(append([]string{}, leaks...), secrets...) {
		if s != "" && strings.Contains(body, s) {
			t.Errorf("response contains %q: %.300s", s, body)
		}
	}
}
