package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/maptile"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// TestTilesEndToEnd drives the tile routes of the whole service: the layer
// list and TileJSON, and a tile rendered once (charged to the "tiles"
// policy) then served from the cache (charged to "tiles-cached").
func TestTilesEndToEnd(t *testing.T) {
	base, _ := startService(t, nil)

	resp, err := http.Get(base + "/tiles")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Layers []struct{ Name, TileJSON string }
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	// Layers come in name order, as GET /layers lists them.
	if err != nil || resp.StatusCode != 200 || len(list.Layers) != 2 || list.Layers[0].Name != "geofences" || list.Layers[1].Name != "places" {
		t.Fatalf("GET /tiles = %d %+v (%v), want geofences and places", resp.StatusCode, list, err)
	}
	if !strings.HasSuffix(list.Layers[1].TileJSON, "/tiles/places.json") {
		t.Errorf("tilejson URL = %q", list.Layers[1].TileJSON)
	}

	tests := []struct {
		name, wantCache, wantPolicy string
	}{
		{"FirstRenders", "MISS", `"tiles"`},
		{"SecondFromCache", "HIT", `"tiles-cached"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(base + "/tiles/places/3/1/2.mvt")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Cache") != tt.wantCache {
				t.Errorf("empty tile = %d X-Cache %q, want 204 %s", resp.StatusCode, resp.Header.Get("X-Cache"), tt.wantCache)
			}
			if p := resp.Header.Get("RateLimit-Policy"); !strings.Contains(p, tt.wantPolicy) {
				t.Errorf("RateLimit-Policy = %q, want it to name %s", p, tt.wantPolicy)
			}
		})
	}
}

// TestGeofenceWriteThenTileTwoServices runs two instances of the service on
// one database and one Redis: a fence moved through one of them shows at
// its new place in the next tile from either, round after round (each
// round warms both caches first). Each round moves the fence by step, far
// more than the tolerance, so a tile one version old fails.
func TestGeofenceWriteThenTileTwoServices(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	const secret = "sync-test-secret"
	if _, err := auth.NewStore(pool).Create(context.Background(), auth.CreateOptions{
		Key:    auth.Key{ID: "sync", Scopes: []string{"geofences:write", "geofences:read", "tiles:read"}},
		Secret: secret,
	}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_TILES": "100000/1s", "RATELIMIT_GEOFENCE": "100000/1s"}
	a, _ := startService(t, env)
	b, _ := startService(t, env)
	do := func(method, url string, body any) (*http.Response, []byte) {
		var rd io.Reader
		if body != nil {
			bb, _ := json.Marshal(body)
			rd = bytes.NewReader(bb)
		}
		req, _ := http.NewRequest(method, url, rd)
		req.Header.Set("x-api-key", secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, out
	}
	fence := func(west float64) map[string]any {
		return map[string]any{"type": "Feature", "properties": map[string]any{"name": "moving"},
			"geometry": map[string]any{"type": "Polygon", "coordinates": [][][]float64{{{west, 52.3}, {west + 0.5, 52.3}, {west + 0.5, 52.7}, {west, 52.7}, {west, 52.3}}}}}
	}
	// At z8 a grid unit is 0.00034 degrees of longitude and the
	// simplification tolerance 4 units: an edge is placed well within tol.
	const start, step, tol = 12.7, 0.05, 0.003
	resp, body := do("POST", a+"/geofences", fence(start))
	if resp.StatusCode != 201 && resp.StatusCode != 200 {
		t.Fatalf("create = %d %s", resp.StatusCode, body)
	}
	var created struct{ ID int64 }
	_ = json.Unmarshal(body, &created)
	mt := maptile.At([2]float64{13.4, 52.5}, 8)
	path := fmt.Sprintf("/tiles/geofences/8/%d/%d.mvt", mt.X, mt.Y)
	for round := range 10 {
		west := start + float64(round+1)*step
		for _, base := range []string{a, b} {
			do("GET", base+path, nil) // cache the current tile
		}
		resp, body := do("PUT", fmt.Sprintf("%s/geofences/%d", a, created.ID), fence(west))
		if resp.StatusCode != 200 {
			t.Fatalf("update = %d %s", resp.StatusCode, body)
		}
		for i, base := range []string{b, a} {
			resp, body := do("GET", base+path, nil)
			ls, err := mvt.Unmarshal(body)
			if err != nil {
				t.Fatalf("decode: %v (%d)", err, resp.StatusCode)
			}
			ls.ProjectToWGS84(mt)
			found := false
			for _, l := range ls {
				for _, f := range l.Features {
					if f.Properties["name"] == "moving" {
						found = true
						if got := f.Geometry.Bound().Min[0]; got < west-tol || got > west+tol {
							t.Fatalf("round %d replica %d (%s): west = %v, want %v ± %v", round, i, resp.Header.Get("X-Cache"), got, west, tol)
						}
					}
				}
			}
			if !found {
				t.Fatalf("round %d: fence not in tile", round)
			}
		}
	}
}
