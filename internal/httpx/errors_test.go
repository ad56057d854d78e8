package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/apperr"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantDetail any
	}{
		{"NotFound", apperr.New(apperr.NotFound, "Geofence not found."), 404, "Geofence not found."},
		{"WrappedForbidden", fmt.Errorf("check: %w", apperr.New(apperr.Forbidden, "Outside your scope.")), 403, "Outside your scope."},
		{"CauseHidden", apperr.Wrap(apperr.Unavailable, "Database unavailable.", errors.New("dial tcp 10.0.0.1:5432: refused")), 503, "Database unavailable."},
		{"Deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), 504, "The request took too long and was cancelled."},
		{"Gone", apperr.New(apperr.Gone, "Go on from after=12."), 410, "Go on from after=12."},
		{"UnknownIsGeneric", errors.New(`ERROR: syntax error at or near "SELECT" (SQLSTATE 42601)`), 500, "Internal server error."},
		{"InvalidKindIsAList", fmt.Errorf("create key: %w", apperr.New(apperr.Invalid, "A key id is 1 to 64 letters.")), 422,
			[]apperr.FieldError{{Loc: []any{}, Msg: "A key id is 1 to 64 letters.", Type: "value_error"}}},
		{"Validation", apperr.InvalidField("must be positive", "value_error", "query", "radius"), 422,
			[]apperr.FieldError{{Loc: []any{"query", "radius"}, Msg: "must be positive", Type: "value_error"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, detail := Status(tt.err)
			if status != tt.wantStatus {
				t.Errorf("Status(%v) status = %d, want %d", tt.err, status, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantDetail, detail); diff != "" {
				t.Errorf("Status(%v) detail mismatch (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func serveOnce(t *testing.T, r *gin.Engine, method, path string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s body %q is not JSON: %v", method, path, w.Body, err)
	}
	return w, body
}

func TestRouterErrorBodies(t *testing.T) {
	var logs strings.Builder
	r := NewRouter(newTestLogger(&logs), nil, TrustedProxies{})
	r.GET("/boom", func(c *gin.Context) { panic("secret internal state") })
	r.GET("/sql", func(c *gin.Context) { Abort(c, errors.New("pq: relation \"places\" does not exist")) })
	r.GET("/ok", func(c *gin.Context) { c.JSON(200, gin.H{"ok": true}) })

	tests := []struct {
		name, method, path string
		wantStatus         int
		wantDetail         string
	}{
		{"NotFound", "GET", "/nope", 404, "Not Found"},
		{"MethodNotAllowed", "POST", "/ok", 405, "Method Not Allowed"},
		{"Panic", "GET", "/boom", 500, "Internal server error."},
		{"DriverErrorHidden", "GET", "/sql", 500, "Internal server error."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, body := serveOnce(t, r, tt.method, tt.path)
			if w.Code != tt.wantStatus {
				t.Errorf("%s %s status = %d, want %d", tt.method, tt.path, w.Code, tt.wantStatus)
			}
			if body["detail"] != tt.wantDetail {
				t.Errorf("%s %s detail = %v, want %q", tt.method, tt.path, body["detail"], tt.wantDetail)
			}
			if strings.Contains(w.Body.String(), "secret") || strings.Contains(w.Body.String(), "relation") {
				t.Errorf("%s %s leaked internals: %s", tt.method, tt.path, w.Body)
			}
		})
	}
	if !strings.Contains(logs.String(), "secret internal state") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("panic and its stack were not logged:\n%s", logs.String())
	}
}

func TestRequestID(t *testing.T) {
	r := NewRouter(newTestLogger(&strings.Builder{}), nil, TrustedProxies{})
	r.GET("/ok", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	tests := []struct {
		name, in string
		keep     bool
	}{
		{"Kept", "req-42", true},
		{"ControlCharsReplaced", "bad\x01id", false},
		{"TooLongReplaced", strings.Repeat("a", 200), false},
		{"MissingGenerated", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/ok", nil)
			if tt.in != "" {
				req.Header.Set(RequestIDHeader, tt.in)
			}
			r.ServeHTTP(w, req)
			got := w.Header().Get(RequestIDHeader)
			if tt.keep && got != tt.in {
				t.Errorf("X-Request-ID = %q, want %q", got, tt.in)
			}
			if !tt.keep && (got == tt.in || len(got) != 24) {
				t.Errorf("X-Request-ID = %q, want a fresh 24-char id", got)
			}
		})
	}
}

// TestClientThatLeftIs499: whatever the work cut short returned when its
// client left (PostgreSQL's "canceling statement due to user request", a
// render's ended context), the request is a 499 logged at INFO, never a
// 500 logged as an error.
func TestClientThatLeftIs499(t *testing.T) {
	var logs strings.Builder
	r := NewRouter(newTestLogger(&logs), nil, TrustedProxies{})
	cancelled := errors.New("ERROR: canceling statement due to user request (SQLSTATE 57014)")
	r.GET("/render", func(c *gin.Context) { Abort(c, cancelled) })
	for _, tc := range []struct {
		name       string
		leave      bool
		wantStatus int
		wantLevel  string
	}{
		{"ClientLeft", true, ClientClosed, `"level":"INFO"`},
		{"ClientStayed", false, 500, `"level":"ERROR"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			ctx, cancel := context.WithCancel(context.Background())
			if tc.leave {
				cancel()
			}
			defer cancel()
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest("GET", "/render", nil).WithContext(ctx))
			if w.Code != tc.wantStatus {
				t.Errorf("status = %d, want %d", w.Code, tc.wantStatus)
			}
			var failed string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "57014") {
					failed = line
				}
			}
			if !strings.Contains(failed, tc.wantLevel) {
				t.Errorf("the failure was logged as %q, want a line at %s", failed, tc.wantLevel)
			}
		})
	}
}
