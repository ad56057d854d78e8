package httpx

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestCORS(t *testing.T) {
	tests := []struct {
		name       string
		origins    []string
		origin     string
		preflight  bool
		wantAllow  string
		wantStatus int
	}{
		{"ClosedByDefault", nil, "https://evil.example", false, "", 200},
		{"ClosedPreflightFallsThrough", nil, "https://evil.example", true, "", 405},
		{"ListedOrigin", []string{"https://maps.example"}, "https://maps.example", false, "https://maps.example", 200},
		{"UnlistedOrigin", []string{"https://maps.example"}, "https://evil.example", false, "", 200},
		{"Preflight", []string{"https://maps.example"}, "https://maps.example", true, "https://maps.example", 204},
		{"Wildcard", []string{"*"}, "https://any.example", false, "*", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRouter(newTestLogger(&strings.Builder{}), nil, TrustedProxies{})
			r.Use(CORS(tt.origins, []string{"RateLimit"}))
			r.GET("/x", func(c *gin.Context) { c.Status(200) })
			req := httptest.NewRequest("GET", "/x", nil)
			if tt.preflight {
				req = httptest.NewRequest("OPTIONS", "/x", nil)
				req.Header.Set("Access-Control-Request-Method", "GET")
			}
			req.Header.Set("Origin", tt.origin)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if got := w.Header().Get("Access-Control-Allow-Origin"); got != tt.wantAllow {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, tt.wantAllow)
			}
			if w.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", w.Code, tt.wantStatus)
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	r := NewRouter(newTestLogger(&strings.Builder{}), nil, TrustedProxies{})
	r.GET("/x", func(c *gin.Context) { c.Status(http.StatusOK) })
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	for h, want := range map[string]string{
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Content-Security-Policy": APIContentSecurityPolicy,
	} {
		if got := w.Header().Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
}
