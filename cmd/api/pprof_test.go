package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPprofListener(t *testing.T) {
	base, logs, stop := startServiceWithStop(t, map[string]string{"PPROF_ADDR": "127.0.0.1:0"})
	pprofBase := strings.TrimSuffix(announced(logs.String(), pprofPrefix), "/debug/pprof/")
	if pprofBase == "" {
		t.Fatalf("no pprof URL printed; output:\n%s", logs)
	}

	t.Run("AllocsProfile", func(t *testing.T) {
		code, body := getBody(t, pprofBase+"/debug/pprof/allocs?debug=0")
		if code != 200 || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
			t.Fatalf("GET /debug/pprof/allocs?debug=0 = %d, %d bytes starting %q; want 200 and a gzip stream", code, len(body), body[:min(len(body), 8)])
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil || len(raw) == 0 {
			t.Errorf("allocs profile: %d bytes after gunzip, err %v; want a non-empty profile", len(raw), err)
		}
	})

	t.Run("EveryEndpoint", func(t *testing.T) {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol",
			"/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/block?debug=1",
			"/debug/pprof/mutex?debug=1", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=0.2"} {
			if code, body := getBody(t, pprofBase+path); code != 200 || len(body) == 0 {
				t.Errorf("GET %s on PPROF_ADDR = %d with %d bytes, want 200 and a body", path, code, len(body))
			}
		}
	})

	t.Run("NotOnThePublicPort", func(t *testing.T) {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/allocs", "/debug/pprof/cmdline"} {
			code, body := getBody(t, base+path)
			var m map[string]any
			if code != 404 || json.Unmarshal(body, &m) != nil || m["detail"] == nil {
				t.Errorf("GET %s on the public port = %d %s, want 404 with a detail", path, code, body)
			}
		}
	})

	t.Run("LoopbackNoWarning", func(t *testing.T) {
		if !strings.Contains(logs.String(), `"msg":"pprof listening"`) || strings.Contains(logs.String(), "non-loopback") {
			t.Errorf("logs for a loopback PPROF_ADDR lack the info line or hold the warning:\n%s", logs)
		}
	})

	t.Run("StopsWithTheService", func(t *testing.T) {
		if err := stop(); err != nil {
			t.Fatalf("run() after shutdown = %v", err)
		}
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(pprofBase, "http://"), time.Second); err == nil {
			c.Close()
			t.Errorf("PPROF_ADDR still accepts connections after the service stopped")
		}
	})
}

func TestPprofOffByDefault(t *testing.T) {
	base, logs := startService(t, nil)
	code, body := getBody(t, base+"/debug/pprof/")
	if code != 404 {
		t.Errorf("GET /debug/pprof/ without PPROF_ADDR = %d %s, want 404", code, body)
	}
	if strings.Contains(logs.String(), `"msg":"pprof`) {
		t.Errorf("logs mention pprof without PPROF_ADDR:\n%s", logs)
	}
}

func TestPprofAddrInUseFailsStartup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := map[string]string{
		"DATABASE_URL": "postgres://geogate@127.0.0.1:1/geogate?sslmode=disable",
		"REDIS_URL":    "redis://127.0.0.1:1/0",
		"PPROF_ADDR":   ln.Addr().String(),
	}
	var out bytes.Buffer
	err = run(context.Background(), []string{"serve"}, envMap(env), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "PPROF_ADDR") {
		t.Errorf("run(serve) with PPROF_ADDR in use = %v, want an error naming PPROF_ADDR", err)
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"0.0.0.0", false},
		{"::", false},
		{"10.0.0.5", false},
		{"192.168.1.1", false},
	}
	for _, tt := range tests {
		if got := isLoopback(&net.TCPAddr{IP: net.ParseIP(tt.ip), Port: 6060}); got != tt.want {
			t.Errorf("isLoopback(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

func getBody(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, body
}
