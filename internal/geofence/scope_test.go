package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"testing"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

// fenceGeometry is a fence's geometry as an answer holds it.
type fenceGeometry struct {
	Type        string          `json:"type"`
	Coordinates [][][][]float64 `json:"coordinates"`
}

// area is the planar area of a MultiPolygon in square degrees (shoelace:
// outer rings minus holes), computed here rather than by PostGIS.
func (g fenceGeometry) area() float64 {
	total := 0.0
	for _, poly := range g.Coordinates {
		for i, ring := range poly {
			a := 0.0
			for j := 1; j < len(ring); j++ {
				a += ring[j-1][0]*ring[j][1] - ring[j][0]*ring[j-1][1]
			}
			if i == 0 {
				total += math.Abs(a) / 2
			} else {
				total -= math.Abs(a) / 2
			}
		}
	}
	return total
}

// within reports whether every position of g lies in the box w, s, e, n.
func (g fenceGeometry) within(w, s, e, n float64) bool {
	for _, poly := range g.Coordinates {
		for _, ring := range poly {
			for _, p := range ring {
				if p[0] < w-1e-9 || p[0] > e+1e-9 || p[1] < s-1e-9 || p[1] > n+1e-9 {
					return false
				}
			}
		}
	}
	return true
}

// geometriesByID decodes the geometries of a FeatureCollection or of one
// Feature by fence id.
func geometriesByID(t *testing.T, body []byte) map[int64]fenceGeometry {
	t.Helper()
	type feature struct {
		ID       int64         `json:"id"`
		Geometry fenceGeometry `json:"geometry"`
	}
	var c struct {
		Type     string    `json:"type"`
		Features []feature `json:"features"`
		feature
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%.300s: %v", body, err)
	}
	if c.Type == "Feature" {
		c.Features = []feature{c.feature}
	}
	out := map[int64]fenceGeometry{}
	for _, f := range c.Features {
		out[f.ID] = f.Geometry
	}
	return out
}

// TestFenceReadsAreCutToTheScope: a caller scoped to a box round Berlin
// reads, by id, by the listing and by /within, only the part of each fence
// inside the box, and nothing of a fence outside it or only touching its
// edge; an unscoped caller reads whole fences. The expected areas are
// worked out by hand.
func TestFenceReadsAreCutToTheScope(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	svc, unscopedH := newTestService(t, pool, testTimeouts)
	// The box is 0.8° by 0.4°: 0.32 square degrees.
	const w, s, e, n = 13.0, 52.3, 13.8, 52.7
	scope, err := spatial.NewBBox(w, s, e, n)
	if err != nil {
		t.Fatal(err)
	}
	scopedH := contract.Wrap(t, testRouter(svc, testRules, scope), testRules.Limits)
	fences := []struct {
		name, wkt string
		whole     float64 // area unscoped
		cut       float64 // area in the scope; -1: not returned
	}{
		// Covers the box: its cut is the box.
		{"country", "POLYGON((5.9 47.3,15 47.3,15 55,5.9 55,5.9 47.3))", 9.1 * 7.7, 0.32},
		// The hypotenuse x + y = 66.1 crosses the box from (13.4, 52.7) to
		// (13.8, 52.3): a 0.4 by 0.4 rectangle plus half a 0.4 square.
		{"triangle", "POLYGON((12.8 52.3,13.8 52.3,12.8 53.3,12.8 52.3))", 0.5, 0.16 + 0.08},
		// Two squares, one reaching 0.1° into the box from the east.
		{"two parts", "MULTIPOLYGON(((13.7 52.4,13.9 52.4,13.9 52.6,13.7 52.6,13.7 52.4)),((20 20,21 20,21 21,20 21,20 20)))", 0.04 + 1, 0.02},
		{"inside", "POLYGON((13.3 52.4,13.5 52.4,13.5 52.6,13.3 52.6,13.3 52.4))", 0.04, 0.04},
		{"touching the edge", "POLYGON((13.8 52.4,14 52.4,14 52.6,13.8 52.6,13.8 52.4))", 0.04, -1},
		{"outside", "POLYGON((2.2 48.8,2.5 48.8,2.5 48.9,2.2 48.9,2.2 48.8))", 0.03, -1},
	}
	ids := map[string]int64{}
	for _, f := range fences {
		var id int64
		err := pool.QueryRow(context.Background(),
			"INSERT INTO geofences (name, geom) VALUES ($1, ST_Multi(ST_GeomFromText($2, 4326))) RETURNING id", f.name, f.wkt).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids[f.name] = id
	}
	read := func(h http.Handler, target string) map[int64]fenceGeometry {
		t.Helper()
		code, body := do(t, h, "GET", target, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d %.300s", target, code, body)
		}
		return geometriesByID(t, body)
	}
	scopedList := read(scopedH, "/geofences?limit=1000")
	unscopedList := read(unscopedH, "/geofences?limit=1000")
	// A circle of 1 km inside the box meets the country, the triangle and
	// the inside square.
	scopedWithin := read(scopedH, withinURL(13.4, 52.5, 1000, "layer=geofences"))
	for _, f := range fences {
		t.Run(f.name, func(t *testing.T) {
			id := ids[f.name]
			byID := fmt.Sprintf("/geofences/%d", id)
			if f.cut < 0 {
				if code, body := do(t, scopedH, "GET", byID, ""); code != http.StatusNotFound {
					t.Errorf("scoped GET %s = %d %.200s, want 404", byID, code, body)
				}
				if _, ok := scopedList[id]; ok {
					t.Errorf("scoped listing holds fence %s", f.name)
				}
			} else {
				answers := map[string]fenceGeometry{"GET by id": read(scopedH, byID)[id], "listing": scopedList[id]}
				if g, ok := scopedWithin[id]; ok {
					answers["within"] = g
				}
				for route, g := range answers {
					if g.Type != "MultiPolygon" {
						t.Errorf("scoped %s: geometry type %q, want MultiPolygon", route, g.Type)
					}
					if got := g.area(); math.Abs(got-f.cut) > 1e-9 {
						t.Errorf("scoped %s: area %.10f, want %.10f", route, got, f.cut)
					}
					if !g.within(w, s, e, n) {
						t.Errorf("scoped %s: %v leaves the scope", route, g.Coordinates)
					}
				}
			}
			for route, g := range map[string]fenceGeometry{"GET by id": read(unscopedH, byID)[id], "listing": unscopedList[id]} {
				if got := g.area(); math.Abs(got-f.whole) > 1e-9 {
					t.Errorf("unscoped %s: area %.10f, want the whole %.10f", route, got, f.whole)
				}
			}
		})
	}
	var gotWithin []int64
	for id := range scopedWithin {
		gotWithin = append(gotWithin, id)
	}
	slices.Sort(gotWithin)
	if want := []int64{ids["country"], ids["triangle"], ids["inside"]}; !slices.Equal(gotWithin, want) {
		t.Errorf("scoped /within answered fences %v, want %v", gotWithin, want)
	}
}

// TestWithinCutToTheScopeOnEveryLayer: on every layer of a team's own
// database (lines, points, multipolygons in other SRIDs, a geography
// column, views), /within for a caller scoped to a box a little larger
// than the circle answers the same features as for an unscoped caller,
// each geometry inside the box.
func TestWithinCutToTheScopeOnEveryLayer(t *testing.T) {
	pool, cat, unscopedH := userService(t)
	ctx := context.Background()
	svc := New(pg.Runner{Pool: pool, Timeouts: testTimeouts}, cat, Settings{}, nil)
	rules := testRules
	rules.MaxRadius = 3_000_000
	for _, l := range cat.Layers() {
		if l.Table == "million" {
			continue
		}
		t.Run(l.ID, func(t *testing.T) {
			var lng, lat float64
			col := "l." + catalog.QuoteIdent(l.Column)
			err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT ST_X(c), ST_Y(c) FROM (
				SELECT ST_PointOnSurface(ST_Transform(%s::geometry, 4326)) AS c FROM %s l
				WHERE %s IS NOT NULL ORDER BY md5(l::text) LIMIT 1) s`, col, l.Qualified(), col)).Scan(&lng, &lat)
			if err != nil {
				t.Fatal(err)
			}
			// 2 km round the point fits in a box 0.05° of latitude and
			// 0.05° / cos(lat) of longitude either side.
			dLng := 0.05 / math.Cos(lat*math.Pi/180)
			box := [4]float64{lng - dLng, lat - 0.05, lng + dLng, lat + 0.05}
			scope, err := spatial.NewBBox(box[0], box[1], box[2], box[3])
			if err != nil {
				t.Skipf("no box round %v, %v: %v", lng, lat, err)
			}
			scopedH := contract.Wrap(t, testRouter(svc, rules, scope), rules.Limits)
			target := withinURL(lng, lat, 2000, "limit=1000&properties=none&layer="+l.ID)
			code, body := do(t, scopedH, "GET", target, "")
			if code != http.StatusOK {
				t.Fatalf("scoped GET %s = %d %.300s", target, code, body)
			}
			_, unscoped := do(t, unscopedH, "GET", target, "")
			if got, want := featureIDs(t, body), featureIDs(t, unscoped); got != want {
				t.Errorf("scoped ids %s, unscoped %s: want the same", got, want)
			}
			var c struct {
				Features []struct {
					Geometry json.RawMessage `json:"geometry"`
				} `json:"features"`
			}
			if err := json.Unmarshal(body, &c); err != nil {
				t.Fatal(err)
			}
			for _, f := range c.Features {
				if !positionsWithin(t, f.Geometry, box) {
					t.Errorf("geometry %.300s leaves the scope %v", f.Geometry, box)
				}
			}
		})
	}
}

// featureIDs is the ids of a FeatureCollection, as JSON, in order.
func featureIDs(t *testing.T, body []byte) string {
	t.Helper()
	var c struct {
		Features []struct {
			ID json.RawMessage `json:"id"`
		} `json:"features"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%.300s: %v", body, err)
	}
	var ids []string
	for _, f := range c.Features {
		ids = append(ids, string(f.ID))
	}
	return fmt.Sprint(ids)
}

// positionsWithin reports whether every position of a GeoJSON geometry
// lies in box (w, s, e, n), whatever its nesting.
func positionsWithin(t *testing.T, geometry json.RawMessage, box [4]float64) bool {
	t.Helper()
	var g struct {
		Coordinates any `json:"coordinates"`
	}
	if err := json.Unmarshal(geometry, &g); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		a, ok := v.([]any)
		if !ok {
			return true
		}
		if len(a) >= 2 {
			x, okx := a[0].(float64)
			y, oky := a[1].(float64)
			if okx && oky {
				return x >= box[0]-1e-9 && x <= box[2]+1e-9 && y >= box[1]-1e-9 && y <= box[3]+1e-9
			}
		}
		for _, e := range a {
			if !walk(e) {
				return false
			}
		}
		return true
	}
	return walk(g.Coordinates)
}
