package httpx

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The request's logger is made only when a line is written; it still
// carries the request id and, after it, what the request added.
func TestAccessLogLine(t *testing.T) {
	tests := []struct {
		name  string
		level slog.Level
		add   []any
		want  map[string]any // nil: no line
	}{
		{"plain", slog.LevelInfo, nil, map[string]any{"request_id": "req-1", "route": "/x", "status": 204.0}},
		{"attributes added", slog.LevelInfo, []any{"identity", "key:7"}, map[string]any{"request_id": "req-1", "identity": "key:7"}},
		{"level above info", slog.LevelWarn, []any{"identity", "key:7"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
			r := NewRouter(log, nil, TrustedProxies{})
			r.GET("/x", func(c *gin.Context) {
				if tc.add != nil {
					AddLogAttrs(c, tc.add...)
				}
				c.Status(http.StatusNoContent)
			})
			req := httptest.NewRequest("GET", "/x", nil)
			req.Header.Set(RequestIDHeader, "req-1")
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if got := w.Header().Get(RequestIDHeader); got != "req-1" {
				t.Errorf("X-Request-ID = %q, want req-1", got)
			}
			if tc.want == nil {
				if buf.Len() != 0 {
					t.Errorf("logged %q, want nothing", buf.String())
				}
				return
			}
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("log %q: %v", buf.String(), err)
			}
			for k, want := range tc.want {
				if line[k] != want {
					t.Errorf("log field %s = %v, want %v (line %s)", k, line[k], want, strings.TrimSpace(buf.String()))
				}
			}
		})
	}
}

// Each label set's series is counted however often it is met.
func TestMetricsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	r := NewRouter(slog.New(slog.DiscardHandler), m, TrustedProxies{})
	r.GET("/ok", func(c *gin.Context) { c.Status(http.StatusOK) })
	for _, path := range []string{"/ok", "/ok", "/ok", "/nowhere"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	for _, tc := range []struct {
		route, status string
		want          float64
	}{{"/ok", "200", 3}, {"unmatched", "404", 1}} {
		var got dto.Metric
		if err := m.requests.WithLabelValues(tc.route, "GET", tc.status).Write(&got); err != nil {
			t.Fatal(err)
		}
		if got := got.GetCounter().GetValue(); got != tc.want {
			t.Errorf("requests{route=%s,status=%s} = %v, want %v", tc.route, tc.status, got, tc.want)
		}
	}
}

func TestRedactedQuery(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"Empty", "", ""},
		{"Plain", "limit=10&bbox=13,52,14,53", "limit=10&bbox=13,52,14,53"},
		{"Key", "key=gg_acme_secret&limit=5", "key=REDACTED&limit=5"},
		{"ApiKeyAnyCase", "limit=5&API_KEY=s3cret", "limit=5&API_KEY=REDACTED"},
		{"Token", "access_token=eyJ.a.b&token=x", "access_token=REDACTED&token=REDACTED"},
		{"EncodedName", "api%5Fkey=s3cret", "api%5Fkey=REDACTED"},
		{"Repeated", "key=a&key=b", "key=REDACTED&key=REDACTED"},
		{"NoValue", "key&f=json", "key&f=json"},
		{"KeyInValueKept", "filter=key%3D1", "filter=key%3D1"},
		{"Long", strings.Repeat("a", 2000), strings.Repeat("a", 1024) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RedactedQuery(tc.in); got != tc.want {
				t.Errorf("RedactedQuery(%.40q) = %.60q, want %.60q", tc.in, got, tc.want)
			}
		})
	}
}

// TestAccessLogQuery: the line carries the query string without a secret.
func TestAccessLogQuery(t *testing.T) {
	var buf bytes.Buffer
	r := NewRouter(slog.New(slog.NewJSONHandler(&buf, nil)), nil, TrustedProxies{})
	r.GET("/x", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x?limit=5&api_key=s3cret", nil))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if got, want := line["query"], "limit=5&api_key=REDACTED"; got != want || strings.Contains(buf.String(), "s3cret") {
		t.Errorf("log query = %v, want %q and no secret (line %s)", got, want, buf.String())
	}
}
