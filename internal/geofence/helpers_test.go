package geofence

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

var testRules = Rules{
	Limits:       openapi.Limits{MaxRadius: 100_000, DefaultLimit: 100, MaxLimit: 1000, MaxBatchPoints: 1000},
	MaxVertices:  100_000,
	MaxBodyBytes: 5 << 20,
}

var testTimeouts = Timeouts{QueryTimeout: 5 * time.Second, AcquireTimeout: 2 * time.Second}

// newTestService returns a Service over pool with the built-in layers
// plus extra ones, and a handler with its routes whose every exchange is
// checked against the OpenAPI document (with testRules' limits) when the
// test ends.
func newTestService(t testing.TB, pool *pgxpool.Pool, timeouts Timeouts) (*Service, http.Handler) {
	t.Helper()
	svc, r := newRawService(t, pool, timeouts)
	return svc, contract.Wrap(t, r, testRules.Limits)
}

// newRawService is newTestService without the contract check, for
// benchmarks and fuzz targets, which check what they need per input.
func newRawService(t testing.TB, pool *pgxpool.Pool, timeouts Timeouts) (*Service, http.Handler) {
	t.Helper()
	svc := newService(t, pool, pool, timeouts)
	return svc, testRouter(svc, testRules, nil)
}

// newService is a Service querying pool over the layers the catalog of
// meta (a database with the same tables) holds in schema public.
func newService(t testing.TB, pool, meta *pgxpool.Pool, timeouts Timeouts) *Service {
	t.Helper()
	cat, err := catalog.Open(context.Background(), meta, catalog.Settings{Schemas: []string{"public"}, Own: "geogate"}, nil)
	if err != nil {
		t.Fatalf("catalog.Open() = %v", err)
	}
	return New(pg.Runner{Pool: pool, Timeouts: timeouts}, cat, Settings{}, nil)
}

// testRouter serves the package's routes over svc, as cmd/api does but
// without authentication or rate limits, for callers confined to the
// spatial scope scope (nil: the whole world).
func testRouter(svc *Service, rules Rules, scope *spatial.Scope) http.Handler {
	h := NewHandler(svc, Settings{Rules: rules, CursorKey: "test-key-0123456789"}, Access{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := httpx.NewRouter(log, nil, httpx.TrustedProxies{})
	// The caller is an identity confined to scope, as authentication
	// would make it.
	r.Use(func(c *gin.Context) {
		c.Request = c.Request.WithContext(auth.WithIdentity(c.Request.Context(), auth.Identity{Spatial: scope}))
	})
	r.GET("/within", h.Within)
	r.GET("/geofences", h.List)
	r.POST("/geofences", h.Create)
	r.GET("/geofences/contains", h.Contains)
	r.POST("/geofences/contains", h.ContainsBatch)
	r.PUT("/geofences/contains", httpx.MethodNotAllowed("GET, POST"))
	r.DELETE("/geofences/contains", httpx.MethodNotAllowed("GET, POST"))
	r.GET("/geofences/:id", h.Get)
	r.PUT("/geofences/:id", h.Update)
	r.DELETE("/geofences/:id", h.Delete)
	return httpx.Guard(r, log)
}

// mustExec runs SQL on pool or fails the test.
func mustExec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", firstLine(sql), err)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	return s
}

// do sends a request to h and returns the status and body.
func do(t testing.TB, h http.Handler, method, target, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.Bytes()
}

// collectionJSON is the shape of a /within or listing answer.
type collectionJSON struct {
	Type     string `json:"type"`
	Features []struct {
		Type     string `json:"type"`
		ID       int64  `json:"id"`
		Geometry struct {
			Type        string          `json:"type"`
			Coordinates json.RawMessage `json:"coordinates"`
		} `json:"geometry"`
		Properties map[string]any `json:"properties"`
	} `json:"features"`
	NumberReturned int `json:"numberReturned"`
	Links          []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
	} `json:"links"`
}

func (c collectionJSON) next() string {
	for _, l := range c.Links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	return ""
}

// getCollection GETs target and decodes a 200 FeatureCollection.
func getCollection(t testing.TB, h http.Handler, target string) collectionJSON {
	t.Helper()
	code, body := do(t, h, "GET", target, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s, want 200", target, code, body)
	}
	var c collectionJSON
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("GET %s: body %s: %v", target, body, err)
	}
	if c.Type != "FeatureCollection" {
		t.Fatalf("GET %s: type = %q, want FeatureCollection", target, c.Type)
	}
	return c
}

// detail422 decodes a 422 body into its field errors.
func detail422(t testing.TB, body []byte) []apperr.FieldError {
	t.Helper()
	var d struct {
		Detail []apperr.FieldError `json:"detail"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("422 body %s: %v", body, err)
	}
	return d.Detail
}

func locEqual(loc []any, want ...any) bool {
	if len(loc) != len(want) {
		return false
	}
	for i := range loc {
		// JSON numbers decode as float64.
		if f, ok := loc[i].(float64); ok {
			if n, ok := want[i].(int); !ok || float64(n) != f {
				return false
			}
			continue
		}
		if loc[i] != want[i] {
			return false
		}
	}
	return true
}

func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return testenv.DB(t)
}
