package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
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

// TestFencePagesChargeBytes: GET /geofences costs one request of the
// geofence policy whatever its size, and the database budget is charged,
// once written, what its statements took and a millisecond per 64 KiB
// written: a page of three fences with a MiB of properties each costs at
// least 48 ms more than a page of three small fences.
func TestFencePagesChargeBytes(t *testing.T) {
	db, dbURL := testenv.DBWithURL(t)
	// Two groups of three fences, far from any other, told apart by a
	// bbox: small ones near (100, -40), large ones near (110, -40).
	if _, err := db.Exec(context.Background(), `
INSERT INTO geofences (name, properties, geom)
SELECT 'small-' || i, '{"note":"small"}', ST_Multi(ST_MakeEnvelope(100 + i * 0.1, -40, 100.05 + i * 0.1, -39.95, 4326))
FROM generate_series(0, 2) i;
INSERT INTO geofences (name, properties, geom)
SELECT 'large-' || i, jsonb_build_object('blob', repeat('x', 1 << 20)), ST_Multi(ST_MakeEnvelope(110 + i * 0.1, -40, 110.05 + i * 0.1, -39.95, 4326))
FROM generate_series(0, 2) i;`); err != nil {
		t.Fatal(err)
	}
	// One window of a week: the counter that counts database time holds,
	// within its first week-long bucket, exactly what was charged, so the
	// difference of two readings is what one page cost.
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_GEOFENCE": "1000/1m", "RATELIMIT_DATABASE": "1000000ms/7d"})
	used := func(policy string) int {
		t.Helper()
		return rateLimitStatus(t, base, "").policy(t, policy).Windows[0].Used
	}
	page := func(bbox string) (requests, ms int) {
		t.Helper()
		before, beforeMS := used("geofence"), used("database")
		code, _, body := call(t, "GET", base+"/geofences?limit=10&bbox="+bbox, "", "")
		var fc struct{ Features []json.RawMessage }
		if err := json.Unmarshal(body, &fc); code != 200 || err != nil || len(fc.Features) != 3 {
			t.Fatalf("GET /geofences?bbox=%s = %d with %d fences (%v), want 200 with 3", bbox, code, len(fc.Features), err)
		}
		return used("geofence") - before, used("database") - beforeMS
	}
	small, smallMS := page("99.9,-40.1,100.4,-39.8")
	large, largeMS := page("109.9,-40.1,110.4,-39.8")
	if small != 1 || large != 1 {
		t.Errorf("a page of 3 small fences cost %d requests, of 3 fences of 1 MiB each %d; want 1 each", small, large)
	}
	if smallMS < 1 || largeMS < 48 {
		t.Errorf("a page of 3 small fences cost %d ms of the database budget, of 3 fences of 1 MiB each %d; want at least 1 and 48 (3 MiB at 64 KiB a millisecond)", smallMS, largeMS)
	}
}
