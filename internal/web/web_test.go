package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestRoutes(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/", Map)
	r.GET("/static/*filepath", Static)
	r.GET("/favicon.ico", Favicon)
	tests := []struct {
		name, path  string
		wantStatus  int
		wantType    string
		wantContent string
	}{
		{"Page", "/", 200, "text/html; charset=utf-8", `<script src="/static/maplibre-gl.js">`},
		{"MapLibre", "/static/maplibre-gl.js", 200, "text/javascript; charset=utf-8", "maplibre"},
		{"Script", "/static/map.js", 200, "text/javascript; charset=utf-8", "/within?"},
		{"ScriptUsesTheStyle", "/static/map.js", 200, "text/javascript; charset=utf-8", "getJSON('/styles/default')"},
		{"ScriptReadsTheQuota", "/static/map.js", 200, "text/javascript; charset=utf-8", "getJSON('/rate_limit')"},
		{"ScriptReadsTileHeaders", "/static/map.js", 200, "text/javascript; charset=utf-8", "res.headers.get('RateLimit')"},
		{"PageHasTheQuotaPanel", "/", 200, "text/html; charset=utf-8", `<div id="quota">`},
		{"PageHasTheDevicesLayer", "/", 200, "text/html; charset=utf-8", `<script src="/static/devices.js">`},
		{"DevicesScriptFollowsTheStream", "/static/devices.js", 200, "text/javascript; charset=utf-8", "'/events/stream?subscription='"},
		{"Licence", "/static/MAPLIBRE-LICENSE.txt", 200, "text/plain; charset=utf-8", "MapLibre contributors"},
		{"Favicon", "/favicon.ico", 200, "image/x-icon", "\x00\x00\x01\x00"},
		{"NoListing", "/static/", 404, "", ""},
		{"Missing", "/static/nope.js", 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if w.Code != tt.wantStatus {
				t.Fatalf("GET %s = %d, want %d", tt.path, w.Code, tt.wantStatus)
			}
			if tt.wantType != "" && w.Header().Get("Content-Type") != tt.wantType {
				t.Errorf("GET %s Content-Type = %q, want %q", tt.path, w.Header().Get("Content-Type"), tt.wantType)
			}
			if !strings.Contains(w.Body.String(), tt.wantContent) {
				t.Errorf("GET %s body lacks %q", tt.path, tt.wantContent)
			}
		})
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if csp := w.Header().Get("Content-Security-Policy"); csp != PageContentSecurityPolicy {
		t.Errorf("page Content-Security-Policy = %q, want the page policy", csp)
	}
}
