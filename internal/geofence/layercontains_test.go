package geofence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// containsService serves a team's own database (testenv.UserDB) with its
// catalog, which a test refreshes after installing copies.
func containsService(t *testing.T) (*pgxpool.Pool, *catalog.Catalog, *Service, http.Handler) {
	t.Helper()
	pool := testenv.UserDB(t)
	cat, err := catalog.Open(context.Background(), pool, catalog.Settings{Schemas: testenv.UserSchemas, Own: "geogate"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := New(pg.Runner{Pool: pool, Timeouts: testTimeouts}, cat, Settings{}, nil)
	return pool, cat, svc, contract.Wrap(t, testRouter(svc, testRules, nil), testRules.Limits)
}

// subdivide installs the copy of every polygon layer that can have one and
// reads the catalog again.
func subdivide(t *testing.T, pool *pgxpool.Pool, cat *catalog.Catalog) {
	t.Helper()
	for _, l := range cat.Layers() {
		if !l.Polygonal() || l.Parts != nil {
			continue
		}
		if _, err := InstallParts(context.Background(), pool, "geogate", l); err != nil && !errors.Is(err, ErrNoCopy) {
			t.Fatalf("InstallParts(%s) = %v", l.ID, err)
		}
	}
	if _, err := cat.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// idText is a feature id of an answer as PostgreSQL writes the key: a
// JSON string unquoted, a number as it is.
func idText(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// batchContains POSTs pts to /geofences/contains for layer ("" the
// fences) and returns each point's ids as text.
func batchContains(t testing.TB, h http.Handler, layer string, pts [][2]float64) [][]string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"points": pts})
	target := "/geofences/contains"
	if layer != "" {
		target += "?layer=" + url.QueryEscape(layer)
	}
	code, out := do(t, h, "POST", target, string(body))
	if code != http.StatusOK {
		t.Fatalf("POST %s = %d %s", target, code, out)
	}
	var r struct {
		Results []struct {
			Fences []json.RawMessage `json:"fences"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	got := make([][]string, len(r.Results))
	for i, res := range r.Results {
		got[i] = []string{}
		for _, id := range res.Fences {
			got[i] = append(got[i], idText(t, id))
		}
	}
	return got
}

// containsFeature is one feature of GET /geofences/contains.
type containsFeature struct {
	ID         json.RawMessage `json:"id"`
	Properties map[string]any  `json:"properties"`
}

func getContains(t testing.TB, h http.Handler, layer string, p [2]float64) []containsFeature {
	t.Helper()
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	target := "/geofences/contains?lng=" + f(p[0]) + "&lat=" + f(p[1])
	if layer != "" {
		target += "&layer=" + url.QueryEscape(layer)
	}
	code, out := do(t, h, "GET", target, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", target, code, out)
	}
	var r struct {
		Fences []containsFeature `json:"fences"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r.Fences
}

// independentContains computes, from the layer's table alone, with its
// indexes switched off, which features hold each point: ST_Intersects of
// the row's polygons with the point in the layer's SRID (on the sphere for
// geography), by key as text in key order.
func independentContains(t testing.TB, pool *pgxpool.Pool, l *catalog.Layer, pts [][2]float64) [][]string {
	t.Helper()
	key, _ := keyExpr(l, "l")
	if k, ok := l.GeogateShape(); ok {
		key = "l." + catalog.QuoteIdent(k.Column)
	}
	col := "l." + catalog.QuoteIdent(l.Column)
	poly, pt := col, fmt.Sprintf("ST_Transform(ST_SetSRID(ST_MakePoint(u.x, u.y), 4326), %d)", l.SRID)
	switch {
	case l.Geography:
		pt = "ST_SetSRID(ST_MakePoint(u.x, u.y), 4326)::geography"
	case l.GeometryType != "Polygon" && l.GeometryType != "MultiPolygon":
		poly = "ST_CollectionExtract(" + col + ", 3)"
	}
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
	lngs, lats := make([]float64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		lngs[i], lats[i] = p[0], p[1]
	}
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT i, k::text FROM (
		SELECT DISTINCT u.i, %s AS k FROM unnest($1::float8[], $2::float8[]) WITH ORDINALITY AS u(x, y, i)
		JOIN %s l ON ST_Intersects(%s, %s)) m ORDER BY m.i, m.k`, key, l.Qualified(), poly, pt), lngs, lats)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := make([][]string, len(pts))
	for i := range want {
		want[i] = []string{}
	}
	for rows.Next() {
		var i int
		var k string
		if err := rows.Scan(&i, &k); err != nil {
			t.Fatal(err)
		}
		want[i-1] = append(want[i-1], k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}

// pointsFor are test points for l: vertices of its polygons (on their
// boundaries), points spread over its extent, and points far from it;
// fewer for a layer every point of which reads every row.
func pointsFor(t testing.TB, pool *pgxpool.Pool, l *catalog.Layer) [][2]float64 {
	t.Helper()
	vertices, spread := 80, 200
	if l.ContainsPath() == "scan" {
		vertices, spread = 20, 40
	}
	col := "l." + catalog.QuoteIdent(l.Column) + "::geometry"
	if !l.Geography && l.SRID != 4326 {
		col = "ST_Transform(" + col + ", 4326)"
	}
	ctx := context.Background()
	var out [][2]float64
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT ST_X(p), ST_Y(p) FROM (
		SELECT (ST_DumpPoints(ST_CollectionExtract(%s, 3))).geom AS p, row_number() OVER () AS n
		FROM (SELECT * FROM %s l ORDER BY md5(l::text) LIMIT 40) l) v WHERE n %% 7 = 0 LIMIT %d`, col, l.Qualified(), vertices))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p [2]float64
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	rows.Close()
	// Points spread over the boxes of some of its features.
	rows, err = pool.Query(ctx, fmt.Sprintf(`SELECT ST_XMin(b), ST_YMin(b), ST_XMax(b), ST_YMax(b) FROM (
		SELECT Box2D(%s)::geometry AS b FROM %s l WHERE %s IS NOT NULL ORDER BY md5(l::text) LIMIT 40) x`,
		col, l.Qualified(), "l."+catalog.QuoteIdent(l.Column)))
	if err != nil {
		t.Fatal(err)
	}
	var boxes [][4]float64
	for rows.Next() {
		var b [4]float64
		if err := rows.Scan(&b[0], &b[1], &b[2], &b[3]); err != nil {
			t.Fatal(err)
		}
		boxes = append(boxes, b)
	}
	rows.Close()
	rng := rand.New(rand.NewPCG(uint64(len(l.ID)), 11))
	for i := range spread {
		b := boxes[i%len(boxes)]
		out = append(out, [2]float64{b[0] + rng.Float64()*(b[2]-b[0]), b[1] + rng.Float64()*(b[3]-b[1])})
	}
	return append(out, [2]float64{0, 0}, [2]float64{-150, -60}, [2]float64{179.9, 1}, [2]float64{100, 70}, [2]float64{-70, -50})
}

// checkAgainstIndependent compares the batch and single-point answers on
// l with independentContains, and checks that the points test something.
func checkAgainstIndependent(t *testing.T, pool *pgxpool.Pool, h http.Handler, l *catalog.Layer) {
	t.Helper()
	pts := pointsFor(t, pool, l)
	want := independentContains(t, pool, l, pts)
	got := batchContains(t, h, l.ID, pts)
	matched := 0
	for i := range pts {
		if diff := cmp.Diff(want[i], got[i]); diff != "" {
			t.Errorf("POST contains %v (-want +got):\n%s", pts[i], diff)
		}
		if len(want[i]) > 0 {
			matched++
		}
	}
	if matched < 20 {
		t.Errorf("only %d of %d points are in a feature: the case tests little", matched, len(pts))
	}
	for i := 0; i < len(pts); i += 13 {
		var ids []string
		for _, f := range getContains(t, h, l.ID, pts[i]) {
			ids = append(ids, idText(t, f.ID))
			if _, ok := f.Properties[l.Column]; ok {
				t.Errorf("GET contains %v: feature %s carries its geometry", pts[i], f.ID)
			}
		}
		if fmt.Sprint(ids) != fmt.Sprint(want[i]) && !(len(ids) == 0 && len(want[i]) == 0) {
			t.Errorf("GET contains %v = %v, want %v", pts[i], ids, want[i])
		}
	}
}

// TestContainsOnEveryPolygonLayer: on every polygon layer of a team's
// database (multipolygons in a state plane in feet and in Web Mercator, a
// polygon column of a table with two geometry columns, a generic column
// of every kind of geometry, geography on the sphere, a view without a key
// or index, the fences), for vertices, points spread over the layer and
// points far away, both contains routes answer what ST_Intersects on the
// untouched table does, before and after the layers get their copies.
func TestContainsOnEveryPolygonLayer(t *testing.T) {
	pool, cat, _, h := containsService(t)
	wantPath := map[string][2]string{ // before, after the copies
		"countries": {"index", "subdivided"},
		"parcels":   {"index", "subdivided"},
		"landmarks": {"index", "subdivided"},
		"Mixed_Case__select-" + idHashOf("Mixed Case", "select", "outline"): {"index", "subdivided"},
		"zones":        {"index", "index"},
		"city_buffers": {"scan", "scan"},
		"geofences":    {"subdivided", "subdivided"},
	}
	for i, stage := range []string{"Direct", "Subdivided"} {
		if i == 1 {
			subdivide(t, pool, cat)
		}
		t.Run(stage, func(t *testing.T) {
			seen := 0
			for _, l := range cat.Layers() {
				if !l.Polygonal() {
					continue
				}
				seen++
				t.Run(l.ID, func(t *testing.T) {
					if got, want := l.ContainsPath(), wantPath[l.ID][i]; got != want {
						t.Errorf("ContainsPath() = %q, want %q", got, want)
					}
					if i == 1 && wantPath[l.ID][0] == wantPath[l.ID][1] {
						return // answered as before
					}
					checkAgainstIndependent(t, pool, h, l)
				})
			}
			if seen != len(wantPath) {
				t.Errorf("%d polygon layers, want %d", seen, len(wantPath))
			}
		})
	}
}
