package tiles

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/geojson"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// userRenderer renders the layers of a team's own database
// (testenv.UserDB) with settings s.
func userRenderer(t *testing.T, s Settings) (*pgxpool.Pool, *catalog.Catalog, *Renderer) {
	t.Helper()
	db := testenv.UserDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cat, err := catalog.Open(ctx, db, catalog.Settings{Schemas: testenv.UserSchemas, Own: "geogate"}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRenderer(pg.Runner{Pool: db}, cat, s, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	return db, cat, r
}

// sample is one feature of a layer as the test reads it from the table,
// apart from the tile SQL: a point of it in longitude and latitude, and its
// row as JSON.
type sample struct {
	lng, lat float64
	row      map[string]any
}

// samples reads up to n features of l with a point on each.
func samples(t *testing.T, db *pgxpool.Pool, l *catalog.Layer, n int) []sample {
	t.Helper()
	g := "l." + catalog.QuoteIdent(l.Column)
	point := "ST_Transform(ST_PointOnSurface(" + g + "), 4326)"
	if l.Geography {
		// A point of the polygon on the sphere: the planar point on its
		// surface can lie outside it (a zone across the antimeridian is,
		// read as planar, the rest of the world). Kept off ±180 so that
		// it falls in a tile.
		c := "ST_Centroid(" + g + ")::geometry"
		point = "ST_SetSRID(ST_MakePoint(greatest(-179.999, least(179.999, ST_X(" + c + "))), ST_Y(" + c + ")), 4326)"
	}
	rows, err := db.Query(context.Background(), fmt.Sprintf(`
		SELECT ST_X(p), ST_Y(p), to_jsonb(l) FROM %s l,
		       LATERAL %s AS p
		WHERE %s IS NOT NULL AND abs(ST_Y(p)) < 80
		ORDER BY md5(l::text) LIMIT %d`, l.Qualified(), point, g, n))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []sample
	for rows.Next() {
		var s sample
		if err := rows.Scan(&s.lng, &s.lat, &s.row); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTilesOfEveryUserLayer renders, for every layer of a team's own
// database (lines in Web Mercator, points in UTM with text keys, parcels in
// US feet, views, a materialized view, a table without a key, a geography
// column, names that need quoting), the z12 tile holding each of a sample
// of its features, decodes it with an MVT decoder and finds the feature
// there: where the table says it is, with its id, and with every property
// of its row at its JSON value and type.
func TestTilesOfEveryUserLayer(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	off := 0
	s.Layers = map[string]LayerSettings{}
	db, cat, r := userRenderer(t, s)
	for _, cl := range cat.Layers() {
		s.Layers[cl.ID] = LayerSettings{ThinCells: &off} // every feature, to find them all
	}
	r, err := NewRenderer(pg.Runner{Pool: db}, cat, s, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, cl := range cat.Layers() {
		seen[cl.Schema+"."+cl.Table] = true
		t.Run(cl.ID, func(t *testing.T) {
			t.Parallel()
			l := layer(t, r, cl.ID)
			ss := samples(t, db, cl, 12)
			if len(ss) == 0 {
				t.Fatalf("no features in %s", cl)
			}
			for _, smp := range ss {
				tl := tileOf(smp.lng, smp.lat, 12)
				out, err := r.Render(context.Background(), l, tl, nil)
				if err != nil {
					t.Fatalf("render %s: %v", tl, err)
				}
				ls := decode(t, out.MVT, tl)
				if len(ls) != 1 || ls[0].Name != cl.ID {
					t.Fatalf("tile %s has layers %v, want one named %s", tl, layerNames(ls), cl.ID)
				}
				if f := findFeature(cl, ls[0], smp, tl); f == nil {
					t.Errorf("tile %s: no feature of %v at %.5f,%.5f (%d features)", tl, key(cl, smp.row), smp.lng, smp.lat, len(ls[0].Features))
				} else {
					checkProperties(t, cl, l, f, smp.row)
				}
			}
		})
	}
	for _, want := range []string{"public.roads", "transit.Bus Stops", "public.parcels", "public.french_cities", "public.city_buffers",
		"public.country_centres", "public.sightings", "public.airports", "Mixed Case.select", "public.million"} {
		if !seen[want] {
			t.Errorf("the catalog has no layer of %s", want)
		}
	}
}

func layerNames(ls mvt.Layers) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

// key is the sample's feature id, or nil for a layer without a key.
func key(l *catalog.Layer, row map[string]any) any {
	if l.Key.FromRow() {
		return nil
	}
	return row[l.Key.Column]
}

// findFeature finds the sample's feature in the decoded layer: by its MVT
// id for an integer key, by its key property otherwise, and for a layer
// without a key by its properties; its geometry must reach the sample's
// point (within two grid units).
func findFeature(cl *catalog.Layer, ml *mvt.Layer, smp sample, tl Tile) *geojson.Feature {
	tol := 2 * 360 / math.Exp2(float64(tl.Z)) / 4096
	for _, f := range ml.Features {
		switch k := key(cl, smp.row); {
		case cl.Key.Type == "integer":
			if fmt.Sprint(f.ID) != fmt.Sprint(k) {
				continue
			}
		case k != nil:
			if f.Properties[cl.Key.Column] != k {
				continue
			}
		default:
			if !sameRow(cl, f.Properties, smp.row) {
				continue
			}
		}
		b := f.Geometry.Bound().Pad(tol)
		if b.Contains(orb.Point{smp.lng, smp.lat}) {
			return f
		}
	}
	return nil
}

func sameRow(cl *catalog.Layer, got map[string]any, row map[string]any) bool {
	for _, p := range cl.Properties {
		if !sameValue(p, got[p.Name], row[p.Name]) {
			return false
		}
	}
	return true
}

// checkProperties checks that f carries every property of the layer at the
// row's value, typed as TileJSON says.
func checkProperties(t *testing.T, cl *catalog.Layer, l *Layer, f *geojson.Feature, row map[string]any) {
	t.Helper()
	for _, fd := range l.Fields {
		want, ok := row[fd.Name]
		p := property(cl, fd.Name)
		if !ok {
			// column.key of a jsonb column: its value as a string
			p = catalog.Property{Name: fd.Name, Type: "string"}
			for _, v := range row {
				if m, isMap := v.(map[string]any); isMap && m[fd.Name] != nil {
					want = fmt.Sprint(m[fd.Name])
				}
			}
		}
		got, ok := f.Properties[fd.Name]
		if want == nil {
			if ok {
				t.Errorf("%s: property %s = %v, want it absent (NULL)", cl.ID, fd.Name, got)
			}
			continue
		}
		if !sameValue(p, got, want) {
			t.Errorf("%s: property %s (%s) = %#v, want %#v", cl.ID, fd.Name, p.PGType, got, want)
		}
		wantType := map[string]string{"integer": "Number", "number": "Number", "boolean": "Boolean"}[p.Type]
		if wantType == "" {
			wantType = "String"
		}
		if fd.Type != wantType {
			t.Errorf("%s: field %s has TileJSON type %s, want %s", cl.ID, fd.Name, fd.Type, wantType)
		}
	}
}

func property(cl *catalog.Layer, name string) catalog.Property {
	for _, p := range cl.Properties {
		if p.Name == name {
			return p
		}
	}
	return catalog.Property{}
}

// sameValue compares a decoded MVT value with the row's JSON value:
// numbers and booleans as themselves, JSON and arrays through their JSON
// text, timestamps as RFC 3339.
func sameValue(p catalog.Property, got, want any) bool {
	if want == nil {
		return got == nil
	}
	switch p.Type {
	case "integer", "number":
		g, ok := toFloat(got)
		w, _ := toFloat(want)
		return ok && math.Abs(g-w) <= 1e-9*math.Max(1, math.Abs(w))
	case "boolean":
		return got == want
	case "json", "array":
		s, ok := got.(string)
		var v any
		return ok && json.Unmarshal([]byte(s), &v) == nil && reflect.DeepEqual(v, want)
	}
	s, ok := got.(string)
	if !ok {
		return false
	}
	if p.Format == "date-time" {
		g, err1 := time.Parse(time.RFC3339Nano, s)
		w, err2 := time.Parse(time.RFC3339Nano, want.(string))
		return err1 == nil && err2 == nil && g.Equal(w)
	}
	return s == fmt.Sprint(want)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case int:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// TestMillionPointTilesStayUnder500KB renders, with the default settings,
// every tile of zooms 0 to 3 of a layer of a million points and, at zooms
// 4 to 16, the tiles where they are densest: each stays under 500 KB, and
// thinning keeps at most one point per cell.
func TestMillionPointTilesStayUnder500KB(t *testing.T) {
	t.Parallel()
	db, _, r := userRenderer(t, DefaultSettings())
	l := layer(t, r, "million")
	var tiles []Tile
	for z := 0; z <= 3; z++ {
		for x := 0; x < 1<<z; x++ {
			for y := 0; y < 1<<z; y++ {
				tiles = append(tiles, Tile{z, x, y})
			}
		}
	}
	for z := 4; z <= 16; z += 2 {
		tiles = append(tiles, densestOf(t, db, "public.million", z, 3)...)
	}
	const limit = 500 << 10
	cells := (l.ThinCells + 2*l.ThinCells*64/4096 + 2) * (l.ThinCells + 2*l.ThinCells*64/4096 + 2)
	renderAll(t, tiles, func(tl Tile) error {
		out, err := r.Render(context.Background(), l, tl, nil)
		if err != nil {
			return err
		}
		if len(out.MVT) >= limit {
			t.Errorf("tile %s of million is %d bytes, want under %d", tl, len(out.MVT), limit)
		}
		if len(out.MVT) > 0 {
			ls, err := mvt.Unmarshal(out.MVT)
			if err != nil {
				return err
			}
			if n := len(ls[0].Features); n > cells {
				t.Errorf("tile %s keeps %d points, more than its %d cells", tl, n, cells)
			}
		}
		return nil
	})
}

// densestOf returns the n tiles at zoom z holding most rows of the points
// table.
func densestOf(t *testing.T, db *pgxpool.Pool, table string, z, n int) []Tile {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT floor((ST_X(geom) + 180) / 360 * 2^$1)::int AS x,
		       floor((1 - ln(tan(radians(ST_Y(geom))) + 1 / cos(radians(ST_Y(geom)))) / pi()) / 2 * 2^$1)::int AS y
		FROM `+table+` WHERE abs(ST_Y(geom)) < 85
		GROUP BY 1, 2 ORDER BY count(*) DESC LIMIT $2`, z, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []Tile
	for rows.Next() {
		tl := Tile{Z: z}
		if err := rows.Scan(&tl.X, &tl.Y); err != nil {
			t.Fatal(err)
		}
		out = append(out, tl)
	}
	return out
}

// TestUserTileQueriesUseTheirOwnIndexes reads the plans of tile queries
// for layers in Web Mercator, a UTM zone, US feet and a geography column:
// each finds its rows through the GiST index the table already has.
func TestUserTileQueriesUseTheirOwnIndexes(t *testing.T) {
	t.Parallel()
	db, _, r := userRenderer(t, DefaultSettings())
	tests := []struct {
		layer, index string
		tile         Tile
	}{
		{"roads", "roads_geom_idx", tileOf(13.41, 52.52, 12)},
		{"transit__Bus_Stops-" + idHashOf(t, r, "transit", "Bus Stops"), "bus_stops_geom_idx", tileOf(13.41, 52.52, 12)},
		{"parcels", "parcels_geom_idx", tileOf(-73.9857, 40.7484, 14)},
		{"airports", "airports_geog_idx", tileOf(13.41, 52.52, 8)},
		{"million", "million_geom_idx", tileOf(13.41, 52.52, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.layer, func(t *testing.T) {
			sql, args := r.SQL(layer(t, r, tt.layer), tt.tile)
			for mode, plan := range explain(t, db, sql, args) {
				if !strings.Contains(plan, "Index Scan using "+tt.index+" ") && !strings.Contains(plan, "Bitmap Index Scan on "+tt.index) {
					t.Errorf("the %s plan of %s for %s does not scan %s:\n%s", mode, tt.layer, tt.tile, tt.index, plan)
				}
			}
		})
	}
}

// idHashOf finds the id the catalog gave schema.table's first geometry
// column and returns its hash suffix.
func idHashOf(t *testing.T, r *Renderer, schema, table string) string {
	t.Helper()
	for _, l := range r.Layers() {
		if l.src.Schema == schema && l.src.Table == table {
			return l.ID[strings.LastIndexByte(l.ID, '-')+1:]
		}
	}
	t.Fatalf("no layer of %s.%s", schema, table)
	return ""
}
