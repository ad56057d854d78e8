package main

import (
	"strings"
	"testing"
)

// TestGeofenceEndToEnd drives the proximity and geofence routes of the
// whole service as an anonymous caller: reads pass with the anonymous
// scopes, writes need credentials, and every route spends the "geofence"
// budget, /within by radius (an invalid radius costs 1 and gets a 422).
func TestGeofenceEndToEnd(t *testing.T) {
	base, _ := startService(t, map[string]string{"RATELIMIT_GEOFENCE": "12/1m"})
	tests := []struct {
		name, method, path, body string
		wantCode                 int
		wantRemaining            string
	}{
		{"within 20 km costs 6", "GET", "/within?lng=2.35&lat=48.85&radius=20000", "", 200, "6"},
		// Validation comes before the gate: a malformed request costs nothing.
		{"an invalid radius costs nothing", "GET", "/within?lng=2.35&lat=48.85&radius=-1", "", 422, ""},
		{"containment costs 1", "GET", "/geofences/contains?lng=2.35&lat=48.85", "", 200, "5"},
		{"listing costs 1", "GET", "/geofences?limit=5", "", 200, "4"},
		{"writes need credentials", "POST", "/geofences", `{"type":"Feature"}`, 401, ""},
		{"within 1 km costs 1", "GET", "/within?lng=2.35&lat=48.85&radius=1000", "", 200, "3"},
		{"over budget", "GET", "/within?lng=2.35&lat=48.85&radius=20000", "", 429, ""},
	}
	for _, tt := range tests {
		code, header, body := call(t, tt.method, base+tt.path, "", tt.body)
		if code != tt.wantCode {
			t.Errorf("%s: %s %s = %d %.200s, want %d", tt.name, tt.method, tt.path, code, body, tt.wantCode)
		}
		if tt.wantRemaining != "" {
			if p := header.Get("RateLimit-Policy"); !strings.Contains(p, "geofence") {
				t.Errorf("%s: RateLimit-Policy = %q, want the geofence policy", tt.name, p)
			}
			if got := header.Get("RateLimit-Remaining"); got != tt.wantRemaining {
				t.Errorf("%s: RateLimit-Remaining = %q, want %s", tt.name, got, tt.wantRemaining)
			}
		}
	}
}
