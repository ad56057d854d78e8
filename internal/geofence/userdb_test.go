package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// userService serves /within over a team's own database (testenv.UserDB).
func userService(t *testing.T) (*pgxpool.Pool, *catalog.Catalog, http.Handler) {
	t.Helper()
	pool := testenv.UserDB(t)
	cat, err := catalog.Open(context.Background(), pool, catalog.Settings{Schemas: testenv.UserSchemas, Own: "geogate"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := testRules
	rules.MaxRadius = 3_000_000
	svc := New(pg.Runner{Pool: pool, Timeouts: testTimeouts}, cat, Settings{}, nil)
	return pool, cat, contract.Wrap(t, testRouter(svc, rules, nil), rules.Limits)
}

// hit is one /within feature as a test reads it.
type hit struct {
	key  string // the id, as PostgreSQL writes it
	dist float64
}

// withinAll follows every page of /within and returns its features.
func withinAll(t *testing.T, h http.Handler, layer string, lng, lat, r float64) []hit {
	t.Helper()
	target := withinURL(lng, lat, r, "limit=97&layer="+url.QueryEscape(layer))
	var out []hit
	for pages := 0; target != ""; pages++ {
		if pages > 500 {
			t.Fatalf("more than 500 pages from %s", target)
		}
		code, body := do(t, h, "GET", target, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", target, code, body)
		}
		var c struct {
			Features []struct {
				ID         json.RawMessage `json:"id"`
				Properties map[string]any  `json:"properties"`
			} `json:"features"`
			Links []struct{ Rel, Href string } `json:"links"`
		}
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		for _, f := range c.Features {
			var key any
			_ = json.Unmarshal(f.ID, &key)
			d, _ := f.Properties["distance_m"].(float64)
			out = append(out, hit{key: fmt.Sprint(key), dist: d})
		}
		target = ""
		for _, l := range c.Links {
			if l.Rel == "next" {
				target = l.Href
			}
		}
	}
	return out
}

// fullScan is the answer of /within for l computed by reading every row,
// with no index and no box: what the search must find.
func fullScan(t *testing.T, pool *pgxpool.Pool, l *catalog.Layer, lng, lat, r float64) []hit {
	t.Helper()
	key, _ := keyExpr(l, "l")
	geog := geogExpr(l, "l")
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET enable_indexscan = off; SET enable_bitmapscan = off"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "RESET enable_indexscan; RESET enable_bitmapscan") //nolint:errcheck
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT %s::text, ST_Distance(%s, p, true) AS d
		FROM %s l, (SELECT ST_SetSRID(ST_Point($1, $2), 4326)::geography AS p) q
		WHERE ST_Distance(%s, p, true) <= $3 ORDER BY d, %s`, key, geog, l.Qualified(), geog, key), lng, lat, r)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []hit
	for rows.Next() {
		var h hit
		if err := rows.Scan(&h.key, &h.dist); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

// sameHits compares two answers: the same features in the same order with
// the same distances, but for features within a millimetre of the radius
// (a box or an index may round there; the exact test decides).
func sameHits(t *testing.T, what string, got, want []hit, r float64) {
	t.Helper()
	trim := func(hs []hit) []hit {
		var out []hit
		for _, h := range hs {
			if math.Abs(h.dist-r) > 0.001 {
				out = append(out, h)
			}
		}
		return out
	}
	got, want = trim(got), trim(want)
	if len(got) != len(want) {
		t.Errorf("%s: %d features, want %d", what, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i].key != want[i].key || math.Abs(got[i].dist-want[i].dist) > 1e-6 {
			t.Errorf("%s: feature %d = %s at %.6f m, want %s at %.6f m", what, i, got[i].key, got[i].dist, want[i].key, want[i].dist)
			return
		}
	}
}

// TestWithinEveryLayerOfAUserDatabase: on every layer of a team's own
// database (lines in Web Mercator, points in UTM with text keys,
// multipolygons in a state plane in feet, a geography column, a view, a
// view with an SRID-less expression, a table without a key, names that
// need quoting, a second geometry column), /within, page after page, finds
// exactly what a scan of every row finds, in order, with the same spheroid
// distances.
func TestWithinEveryLayerOfAUserDatabase(t *testing.T) {
	pool, cat, h := userService(t)
	ctx := context.Background()
	for _, l := range cat.Layers() {
		if l.Table == "million" {
			continue // TestWithinMillionPoints
		}
		t.Run(l.ID, func(t *testing.T) {
			// Around three features of the layer, at radii that take a few
			// to a few hundred of them.
			var pts [][2]float64
			rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT ST_X(c), ST_Y(c) FROM (
				SELECT ST_PointOnSurface(ST_Transform(%s::geometry, 4326)) AS c FROM %s l
				WHERE %s IS NOT NULL ORDER BY md5(l::text) LIMIT 3) s`,
				"l."+catalog.QuoteIdent(l.Column), l.Qualified(), "l."+catalog.QuoteIdent(l.Column)))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var p [2]float64
				if err := rows.Scan(&p[0], &p[1]); err != nil {
					t.Fatal(err)
				}
				pts = append(pts, p)
			}
			rows.Close()
			if len(pts) == 0 {
				t.Fatal("no features")
			}
			for _, p := range pts {
				for _, r := range []float64{800, 25_000} {
					what := fmt.Sprintf("%v r=%v", p, r)
					sameHits(t, what, withinAll(t, h, l.ID, p[0], p[1], r), fullScan(t, pool, l, p[0], p[1], r), r)
				}
			}
		})
	}
}

// TestWithinMillionPoints: a million points, around the antimeridian, near
// the poles and in a dense spot, against an independent spheroid
// computation (Vincenty) of every point's distance.
func TestWithinMillionPoints(t *testing.T) {
	pool, cat, h := userService(t)
	l := cat.Layer("million")
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		lng, lat float64
		r        float64
	}{
		{"Antimeridian", 179.99, -16.5, 120_000},
		{"AntimeridianWest", -179.95, -16.5, 120_000},
		{"NearTheNorthPole", 15.6, 78.2, 60_000},
		{"SouthernTip", -68.3, -54.8, 80_000},
		{"Dense", 13.4, 52.5, 6_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := withinAll(t, h, l.ID, c.lng, c.lat, c.r)
			rows, err := pool.Query(ctx, `SELECT id::text, ST_X(geom), ST_Y(geom) FROM million
				WHERE geom && ST_Expand(ST_SetSRID(ST_Point($1, $2), 4326), 5) OR abs(ST_X(geom)) > 170`, c.lng, c.lat)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{}
			border := map[string]bool{}
			for rows.Next() {
				var id string
				var x, y float64
				if err := rows.Scan(&id, &x, &y); err != nil {
					t.Fatal(err)
				}
				d, ok := vincenty(c.lng, c.lat, x, y)
				switch {
				case !ok:
				case math.Abs(d-c.r) < 0.01:
					border[id] = true
				case d < c.r:
					want[id] = d
				}
			}
			rows.Close()
			if len(want) < 3 {
				t.Fatalf("only %d points within %v m of %s: the case tests nothing", len(want), c.r, c.name)
			}
			seen := map[string]bool{}
			for i, g := range got {
				if i > 0 && g.dist < got[i-1].dist {
					t.Errorf("not nearest first at %d", i)
				}
				seen[g.key] = true
				d, ok := want[g.key]
				if !ok && !border[g.key] {
					t.Errorf("point %s at %.3f m returned, outside the radius", g.key, g.dist)
				} else if ok && math.Abs(d-g.dist) > 0.001 {
					t.Errorf("point %s: %.4f m, want %.4f (Vincenty)", g.key, g.dist, d)
				}
			}
			for id, d := range want {
				if !seen[id] {
					t.Errorf("point %s at %.3f m missing", id, d)
				}
			}
		})
	}
}

// TestWithinUsesEachLayersOwnIndex reads the plans of /within on a layer
// in Web Mercator, one in a UTM zone and one with a geography column: each
// is searched through the index the table has, with no other.
func TestWithinUsesEachLayersOwnIndex(t *testing.T) {
	pool, cat, _ := userService(t)
	svc := New(pg.Runner{Pool: pool, Timeouts: testTimeouts}, cat, Settings{}, nil)
	for _, c := range []struct {
		layer, index string
		lng, lat     float64
	}{
		{"roads", "roads_geom_idx", 13.4, 52.5},
		{"transit__Bus_Stops-" + idHashOf("transit", "Bus Stops", "geom"), "bus_stops_geom_idx", 16.37, 48.21},
		{"airports", "airports_geog_idx", 2.35, 48.85},
	} {
		t.Run(c.layer, func(t *testing.T) {
			sql, args, ok := svc.WithinSQL(WithinQuery{Layer: c.layer, Lng: c.lng, Lat: c.lat, Radius: 20_000, Limit: 10})
			if !ok {
				t.Fatalf("no layer %s", c.layer)
			}
			var plan []byte
			if err := pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
				t.Fatal(err)
			}
			text := string(plan)
			if n := strings.Count(text, `"Index Name": "`+c.index+`"`); n != 2 {
				t.Errorf("the plan scans %s %d times, want 2 (the bound and the answer):\n%s", c.index, n, text)
			}
			if strings.Contains(text, `"Seq Scan"`) {
				t.Errorf("the plan scans a whole relation:\n%s", text)
			}
		})
	}
}

func idHashOf(schema, table, column string) string {
	id := catalog.LayerID("public", schema, table, column, true)
	return id[strings.LastIndexByte(id, '-')+1:]
}
