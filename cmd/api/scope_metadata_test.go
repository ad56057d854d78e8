package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestScopedCallerSeesScopedMetadata: a caller whose key reaches only
// around Berlin learns nothing of where a layer extends beyond that: the
// bounds in /layers, TileJSON, the OGC tileset and the style are cut to
// its scope, and /layers gives no row estimate of the whole layer, while a
// caller without a scope sees the whole layer.
func TestScopedCallerSeesScopedMetadata(t *testing.T) {
	db, dbURL := testenv.DBWithURL(t)
	if _, err := db.Exec(context.Background(), `INSERT INTO places (name, geom) VALUES
		('Berlin', ST_SetSRID(ST_Point(13.4, 52.5), 4326)), ('Lisbon', ST_SetSRID(ST_Point(-9.14, 38.72), 4326)),
		('Tokyo', ST_SetSRID(ST_Point(139.69, 35.69), 4326)); ANALYZE places`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none", "PUBLISH_REFRESH": "100ms"}
	scoped := runCLI(t, env, "keys", "create", "--name", "berlin", "--scopes", "all", "--bbox", "13,52,14,53")
	whole := runCLI(t, env, "keys", "create", "--name", "whole", "--scopes", "all")
	base, _ := startService(t, env)

	within := func(b []float64) bool {
		return len(b) == 4 && b[0] >= 13 && b[1] >= 52 && b[2] <= 14 && b[3] <= 53
	}
	get := func(key, path string, v any) {
		t.Helper()
		code, _, body := call(t, "GET", base+path, key, "")
		if err := json.Unmarshal(body, v); code != 200 || err != nil {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
	}
	layers := func(key string) (bounds []float64, rows *int64) {
		t.Helper()
		var doc struct {
			Layers []struct {
				ID            string
				Bounds        []float64
				EstimatedRows *int64 `json:"estimated_rows"`
			}
		}
		// The catalog reads the planner's estimates as it refreshes; wait
		// until the whole layer's show.
		testenv.WaitFor(t, 20*time.Second, "the places bounds in /layers", func() bool {
			get(whole, "/layers", &doc)
			for _, l := range doc.Layers {
				if l.ID == "places" && len(l.Bounds) == 4 && l.Bounds[0] < -9 {
					return true
				}
			}
			return false
		})
		get(key, "/layers", &doc)
		for _, l := range doc.Layers {
			if l.ID == "places" {
				return l.Bounds, l.EstimatedRows
			}
		}
		t.Fatalf("no places in /layers")
		return nil, nil
	}
	if b, rows := layers(scoped); !within(b) || rows != nil {
		t.Errorf("/layers for the scoped key: bounds %v, rows %v; want bounds within 13,52,14,53 and no estimate", b, rows)
	}
	if b, rows := layers(whole); within(b) || rows == nil {
		t.Errorf("/layers for the whole-world key: bounds %v, rows %v; want the whole layer", b, rows)
	}
	var tj struct{ Bounds []float64 }
	get(scoped, "/tiles/places.json", &tj)
	if !within(tj.Bounds) {
		t.Errorf("TileJSON bounds for the scoped key = %v, want within the scope", tj.Bounds)
	}
	var ts struct {
		BoundingBox struct{ LowerLeft, UpperRight []float64 }
	}
	get(scoped, "/collections/places/tiles/WebMercatorQuad", &ts)
	if box := append(ts.BoundingBox.LowerLeft, ts.BoundingBox.UpperRight...); !within(box) {
		t.Errorf("tileset boundingBox for the scoped key = %v, want within the scope", box)
	}
	var style struct {
		Sources map[string]struct{ Bounds []float64 }
	}
	get(scoped, "/styles/default", &style)
	if b := style.Sources["places"].Bounds; !within(b) {
		t.Errorf("style bounds of places for the scoped key = %v, want within the scope", b)
	}
}
