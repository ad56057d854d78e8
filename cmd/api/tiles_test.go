package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
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
	if err != nil || resp.StatusCode != 200 || len(list.Layers) != 2 || list.Layers[0].Name != "places" {
		t.Fatalf("GET /tiles = %d %+v (%v), want places and geofences", resp.StatusCode, list, err)
	}
	if !strings.HasSuffix(list.Layers[0].TileJSON, "/tiles/places.json") {
		t.Errorf("tilejson URL = %q", list.Layers[0].TileJSON)
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
