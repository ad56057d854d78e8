package load

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClientReadsEveryBodyShape(t *testing.T) {
	var gotBodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			fmt.Fprint(w, "ok")
		case "/chunked": // larger than net/http's buffer: no Content-Length
			w.Write([]byte(strings.Repeat("x", 100_000)))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			fmt.Fprint(w, "bye")
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			gotBodies = append(gotBodies, r.Header.Get("X-Test")+":"+string(b))
			w.WriteHeader(http.StatusTeapot)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tests := []struct {
		method, target string
		body           []byte
		want           int
	}{
		{"GET", "/small", nil, 200},
		{"GET", "/chunked", nil, 200},
		{"GET", "/empty", nil, 204},
		{"HEAD", "/small", nil, 200},
		{"GET", "/close", nil, 200},
		{"POST", "/echo", []byte(`{"a":1}`), 418},
		{"GET", "/missing", nil, 404},
		{"GET", "/small", nil, 200},
	}
	for _, tt := range tests {
		got, err := c.Do(0, tt.method, tt.target, Header{"X-Test: yes"}, tt.body)
		if err != nil || got != tt.want {
			t.Errorf("%s %s = %d, %v; want %d", tt.method, tt.target, got, err, tt.want)
		}
	}
	if len(gotBodies) != 1 || gotBodies[0] != `yes:{"a":1}` {
		t.Errorf("server got %q, want the header and the body once", gotBodies)
	}
}

func TestRunCountsOpsAndErrors(t *testing.T) {
	r := Run(4, 200*time.Millisecond, func(w, i int) error {
		time.Sleep(time.Millisecond)
		if i%10 == 0 {
			return fmt.Errorf("op %d failed", i)
		}
		return nil
	})
	if r.Ops == 0 || r.Errors == 0 || r.FirstErr == "" {
		t.Fatalf("Run() = %+v, want successes and errors", r)
	}
	if ratio := float64(r.Errors) / float64(r.Ops+int(r.Errors)); ratio < 0.05 || ratio > 0.15 {
		t.Errorf("error share = %.2f, want about 0.10", ratio)
	}
	if r.P50 < 1 || r.P99 < r.P50 {
		t.Errorf("P50 = %.2f ms, P99 = %.2f ms; want P50 >= 1 ms and P99 >= P50", r.P50, r.P99)
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		line      string
		wantName  string
		wantTicks int64
		wantOK    bool
	}{
		{"42 (postgres) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 100 0 0", "postgres", 10, true},
		{"7 (a (weird) name) R 1 7 7 0 -1 0 0 0 0 0 120 30 0 0 20 0 1 0 1 0 0", "a (weird) name", 150, true},
		{"7 (short) R 1", "", 0, false},
		{"garbage", "", 0, false},
	}
	for _, tt := range tests {
		name, ticks, ok := parseStat([]byte(tt.line))
		if name != tt.wantName || ticks != tt.wantTicks || ok != tt.wantOK {
			t.Errorf("parseStat(%q) = %q, %d, %v; want %q, %d, %v", tt.line, name, ticks, ok, tt.wantName, tt.wantTicks, tt.wantOK)
		}
	}
	if cpu := CPU(); cpu["bench"] <= 0 && len(cpu) == 0 {
		t.Errorf("CPU() = %v, want at least this process", cpu)
	}
}
