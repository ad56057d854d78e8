package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/encoding/mvt"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/testenv"
)

// peerColumn is one geometry or geography column of the peer fixtures, as
// testdata/peer/README.md lists it: the truth the service is held to.
type peerColumn struct {
	schema, table, column string
	geomType              string
	srid                  int
	key                   string // "" for none
}

const quotesSchema = `"Quotes' \ \' \" and Space.Dot.`

var peerColumns = []peerColumn{
	{quotesSchema, `. Points" \ \' \" 'quote`, `. ' \ \' \" "Geom"`, "Point", 4326, "' id '"},
	{"MixedCase", "MixPoints", "Geom", "Point", 4326, "Gid"},
	{"autodetect", "auto_table", "geom", "Point", 4326, "gid"},
	{"autodetect", "bigint_table", "geom", "Point", 4326, "id"},
	{"pgfs_test", "test_arr", "geom", "Point", 4326, "id"},
	{"pgfs_test", "test_crs", "geom", "Polygon", 3005, "id"},
	{"pgfs_test", "test_geom", "geom", "Geometry", 4326, "id"},
	{"pgfs_test", "test_json", "geom", "Point", 4326, "id"},
	{"pgfs_test", "test_names", "geom", "Point", 4326, "id"},
	{"pgfs_test", "test_srid0", "geom", "Polygon", 0, "id"},
	{"public", "antimeridian", "geom", "Geometry", 4326, "gid"},
	{"public", "empty_bounds", "geom", "Geometry", 4326, "gid"},
	{"public", "geometry_no_data", "geom", "Geometry", 4326, "id"},
	{"public", "geometry_no_srid", "geom", "Point", 0, "id"},
	{"public", "geometry_no_type", "geom", "Geometry", 4326, "id"},
	{"public", "geometry_only", "geom", "Point", 4326, ""},
	{"public", "linestring_bounds", "geom", "Geometry", 4326, "gid"},
	{"public", "linestring_bounds_vertical", "geom", "Geometry", 4326, "gid"},
	{"public", "mat_view", "geom", "Geometry", 4326, ""},
	{"public", "minnesota", "geom", "MultiPolygon", 26915, "ogc_fid"},
	{"public", "my_data", "geom", "Geometry", 4326, "ogc_fid"},
	{"public", "my_data", "othergeom", "Geometry", 4326, "ogc_fid"},
	{"public", "my_data_alt", "geom", "Geometry", 4326, ""},
	{"public", "my_data_alt", "othergeom", "Geometry", 4326, ""},
	{"public", "my_data_date", "geom", "Geometry", 4326, ""},
	{"public", "my_data_date", "othergeom", "Geometry", 4326, ""},
	{"public", "my_data_geo", "geom", "Polygon", 4326, ""},
	{"public", "my_data_geo", "othergeom", "Geometry", 4326, ""},
	{"public", "point_bounds", "geom", "Geometry", 4326, "gid"},
	{"public", "points1", "geom", "Point", 4326, "gid"},
	{"public", "points1_vw", "geom", "Point", 4326, ""},
	{"public", "points2", "geom", "Point", 4326, "gid"},
	{"public", "points3857", "geom", "Point", 3857, "gid"},
	{"public", "points_empty", "geom", "Geometry", 0, "gid"},
	{"public", "points_empty_srid", "geom", "Geometry", 900913, "gid"},
	{"public", "table_source", "geom", "Geometry", 4326, "gid"},
	{"public", "table_source_geog", "geog", "Geometry", 4326, "gid"},
	{"public", "table_source_multiple_geom", "geom1", "Point", 4326, "gid"},
	{"public", "table_source_multiple_geom", "geom2", "Point", 4326, "gid"},
	{"schema_a", "table_and_view_two_schemas", "a_geom", "Geometry", 4326, "a_id"},
	{"schema_a", "table_name_existing_two_schemas", "a_geom", "Point", 4326, "a_id"},
	{"schema_a", "view_name_existing_two_schemas", "a_geom", "Point", 4326, ""},
	{"schema_b", "table_and_view_two_schemas", "b_geom", "Geometry", 4326, ""},
	{"schema_b", "table_name_existing_two_schemas", "b_geom", "Polygon", 4326, "b_id"},
	{"schema_b", "view_name_existing_two_schemas", "b_geom", "Polygon", 4326, ""},
}

// peerLayer is a layer as GET /layers lists it.
type peerLayer struct {
	ID             string
	Schema, Table  string
	GeometryColumn string `json:"geometry_column"`
	GeometryType   string `json:"geometry_type"`
	SRID           int
	Geography      bool
	IDColumn       *struct{ Name, Type string } `json:"id_column"`
	Properties     []struct{ Name, Type string }
}

// TestPeerFixtures serves the test databases of martin, tipg,
// pg_featureserv and pg_tileserv and holds every geometry and geography
// column they have to what PostgreSQL says of it: listed in /layers,
// paged exactly through its items, drawn in the tile that holds each
// feature, found by /within as ST_DWithin on the spheroid finds it, and
// never answered with a 5xx.
func TestPeerFixtures(t *testing.T) {
	pool, dbURL := testenv.PeerDBWithURL(t)
	base, _ := startService(t, map[string]string{
		"DATABASE_URL":           dbURL,
		"PUBLISH_SCHEMAS":        strings.Join(testenv.PeerSchemas, ","),
		"RATELIMIT_FEATURES":     "100000/1s",
		"RATELIMIT_GEOFENCE":     "100000/1s",
		"RATELIMIT_TILES":        "100000/1s",
		"RATELIMIT_TILES_CACHED": "100000/1s",
	})
	var list struct{ Layers []peerLayer }
	peerGet(t, base+"/layers", 200, &list)
	if got := peerGeometryColumns(t, pool); got != len(peerColumns) {
		t.Fatalf("the fixtures hold %d geometry and geography columns, the test lists %d", got, len(peerColumns))
	}
	list.Layers = slices.DeleteFunc(list.Layers, func(l peerLayer) bool {
		return l.Schema == "public" && slices.Contains(geogateTables, l.Table)
	})
	if len(list.Layers) != len(peerColumns) {
		t.Errorf("GET /layers lists %d layers, want %d", len(list.Layers), len(peerColumns))
	}
	for _, c := range peerColumns {
		t.Run(c.schema+"."+c.table+"."+c.column, func(t *testing.T) {
			i := slices.IndexFunc(list.Layers, func(l peerLayer) bool {
				return l.Schema == c.schema && l.Table == c.table && l.GeometryColumn == c.column
			})
			if i < 0 {
				t.Fatalf("GET /layers does not list it")
			}
			l := list.Layers[i]
			checkPeerListing(t, pool, c, l)
			feats := checkPeerItems(t, pool, base, c, l)
			if c.srid == 0 {
				checkPeerRefused(t, base, l)
				return
			}
			for i, f := range feats {
				checkPeerTile(t, base, l, f, max(f.minZoom, []int{0, 3, 6, 10, 14}[i%5]))
				checkPeerWithin(t, pool, base, c, l, f)
			}
		})
	}
}

// geogateTables are geogate's own layers, in public next to the
// fixtures' tables.
var geogateTables = []string{"places", "geofences"}

// peerGeometryColumns counts the fixtures' columns as PostGIS lists them.
func peerGeometryColumns(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM geometry_columns WHERE f_table_schema = ANY($1) AND NOT f_table_name = ANY($2)) +
		(SELECT count(*) FROM geography_columns WHERE f_table_schema = ANY($1) AND NOT f_table_name = ANY($2))`,
		testenv.PeerSchemas, geogateTables).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// peerGet GETs url, fails on a status other than want, and decodes the
// JSON answer into out (when not nil).
func peerGet(t *testing.T, u string, want int, out any) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d %s, want %d", u, resp.StatusCode, body, want)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v in %s", u, err, body)
		}
	}
	return body
}

// checkPeerListing holds l to c and to the relation's columns.
func checkPeerListing(t *testing.T, pool *pgxpool.Pool, c peerColumn, l peerLayer) {
	t.Helper()
	if l.SRID != c.srid || l.GeometryType != c.geomType {
		t.Errorf("listed as %s SRID %d, want %s SRID %d", l.GeometryType, l.SRID, c.geomType, c.srid)
	}
	key := ""
	if l.IDColumn != nil {
		key = l.IDColumn.Name
	}
	if key != c.key {
		t.Errorf("listed with key %q, want %q", key, c.key)
	}
	rows, err := pool.Query(context.Background(), `
		SELECT a.attname FROM pg_attribute a
		WHERE a.attrelid = (quote_ident($1) || '.' || quote_ident($2))::regclass AND a.attnum > 0 AND NOT a.attisdropped
			AND a.atttypid NOT IN ('geometry'::regtype, 'geography'::regtype)
		ORDER BY a.attnum`, c.schema, c.table)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		want = append(want, n)
	}
	var got []string
	for _, p := range l.Properties {
		got = append(got, p.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed properties %q, want %q", got, want)
	}
}

// peerFeature is one feature as the items pages gave it, and a point of
// it in longitude and latitude.
type peerFeature struct {
	id       string
	lng, lat float64
	// minZoom is the lowest zoom at which the feature spans two pixels
	// of a 4096 tile: below it, a line or polygon has no shape to draw.
	minZoom int
}

// checkPeerItems pages through l's items twice, with a page size that
// puts every kind of row last and first on a page, and returns its
// features with a point of each, read from PostgreSQL.
func checkPeerItems(t *testing.T, pool *pgxpool.Pool, base string, c peerColumn, l peerLayer) []peerFeature {
	t.Helper()
	var schema struct {
		Properties map[string]map[string]any
	}
	peerGet(t, base+"/collections/"+l.ID+"/schema", 200, &schema)
	var want int
	rel := catalog.QuoteIdent(c.schema) + "." + catalog.QuoteIdent(c.table)
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+rel).Scan(&want); err != nil {
		t.Fatal(err)
	}
	var passes [2][]string
	for pass := range passes {
		next := base + "/collections/" + l.ID + "/items?limit=3"
		for next != "" {
			var p ogcPage
			peerGet(t, next, 200, &p)
			if p.NumberMatched != want {
				t.Fatalf("numberMatched = %d, want %d", p.NumberMatched, want)
			}
			for _, f := range p.Features {
				passes[pass] = append(passes[pass], string(f.ID))
				checkPeerProperties(t, f.Properties, schema.Properties)
			}
			next = p.next()
		}
	}
	if len(passes[0]) != want || !slices.Equal(passes[0], passes[1]) {
		t.Fatalf("paged ids %v then %v, want %d the same twice", passes[0], passes[1], want)
	}
	seen := map[string]bool{}
	for _, id := range passes[0] {
		if seen[id] {
			t.Fatalf("id %s is on two pages", id)
		}
		seen[id] = true
	}
	return peerPoints(t, pool, c, passes[0])
}

// checkPeerProperties holds a feature's property values to the JSON types
// the collection's schema gives them.
func checkPeerProperties(t *testing.T, props map[string]any, schema map[string]map[string]any) {
	t.Helper()
	for name, v := range props {
		s, ok := schema[name]
		if !ok {
			t.Errorf("property %q is not in the schema", name)
			continue
		}
		if v == nil {
			continue
		}
		if !jsonTypeAllows(s["type"], v) {
			t.Errorf("property %q = %v (%T), the schema says %v", name, v, v, s["type"])
		}
	}
}

// jsonTypeAllows says whether a JSON Schema type (absent, a name or a list
// of names) allows v.
func jsonTypeAllows(typ any, v any) bool {
	switch typ := typ.(type) {
	case nil:
		return true
	case []any:
		return slices.ContainsFunc(typ, func(t any) bool { return jsonTypeAllows(t, v) })
	case string:
		switch v := v.(type) {
		case float64:
			return typ == "number" || (typ == "integer" && v == math.Trunc(v))
		case string:
			return typ == "string"
		case bool:
			return typ == "boolean"
		case []any:
			return typ == "array"
		case map[string]any:
			return typ == "object"
		}
	}
	return false
}

// peerPoints finds a point of each feature in longitude and latitude:
// the feature id is the key (or the hash of the row, for a relation
// without one), and the point one on the feature's surface.
func peerPoints(t *testing.T, pool *pgxpool.Pool, c peerColumn, ids []string) []peerFeature {
	t.Helper()
	if c.srid == 0 {
		return nil
	}
	rel := catalog.QuoteIdent(c.schema) + "." + catalog.QuoteIdent(c.table)
	col := "l." + catalog.QuoteIdent(c.column)
	key := "to_json(md5(l::text))::text"
	if c.key != "" {
		key = "to_json(l." + catalog.QuoteIdent(c.key) + ")::text"
	}
	sql := fmt.Sprintf(`SELECT %s, ST_X(p), ST_Y(p), CASE WHEN ST_Dimension(g) = 0 THEN 0 ELSE
			greatest(ST_XMax(m) - ST_XMin(m), ST_YMax(m) - ST_YMin(m)) END
		FROM (SELECT l, g, ST_Transform(ST_PointOnSurface(g), 4326) AS p,
			ST_Transform(ST_ClipByBox2D(ST_Transform(g, 4326), ST_MakeEnvelope(-180, -85, 180, 85, 4326)), 3857) AS m
			FROM (SELECT l, ST_CurveToLine(%s::geometry) AS g FROM %s l WHERE %s IS NOT NULL) y) x,
		LATERAL (SELECT (x.l).*) l`,
		key, col, rel, col)
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []peerFeature
	for rows.Next() {
		var f peerFeature
		var size float64
		if err := rows.Scan(&f.id, &f.lng, &f.lat, &size); err != nil {
			t.Fatal(err)
		}
		if size > 0 {
			f.minZoom = int(math.Ceil(math.Log2(2 * 2 * 20037508.342789244 / 4096 / size)))
		}
		if !slices.Contains(ids, f.id) {
			t.Fatalf("feature %s is on no page (pages: %v)", f.id, ids)
		}
		f.lng = math.Mod(f.lng+540, 360) - 180
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPeerTile fetches the tile at zoom z that holds f and wants l's
// layer in it, not empty.
func checkPeerTile(t *testing.T, base string, l peerLayer, f peerFeature, z int) {
	t.Helper()
	n := math.Exp2(float64(z))
	lat := max(-85, min(85, f.lat)) * math.Pi / 180
	x := min(n-1, math.Floor((f.lng+180)/360*n))
	y := min(n-1, math.Floor((1-math.Log(math.Tan(lat)+1/math.Cos(lat))/math.Pi)/2*n))
	body := peerGet(t, fmt.Sprintf("%s/tiles/%s/%d/%d/%d.mvt", base, l.ID, z, int(x), int(y)), 200, nil)
	layers, err := mvt.Unmarshal(body)
	if err != nil {
		t.Fatalf("tile %d/%v/%v: %v", z, x, y, err)
	}
	for _, ml := range layers {
		if ml.Name == l.ID && len(ml.Features) > 0 {
			return
		}
	}
	t.Errorf("tile %d/%v/%v holds no feature of %s, though feature %s is at %v, %v", z, x, y, l.ID, f.id, f.lng, f.lat)
}

// checkPeerWithin asks /within for the features within 50 km of f and
// wants those ST_DWithin on the spheroid finds.
func checkPeerWithin(t *testing.T, pool *pgxpool.Pool, base string, c peerColumn, l peerLayer, f peerFeature) {
	t.Helper()
	const radius = 50000
	var got []string
	next := fmt.Sprintf("%s/within?layer=%s&lng=%s&lat=%s&radius=%d&limit=100", base, l.ID,
		strconv.FormatFloat(f.lng, 'g', -1, 64), strconv.FormatFloat(f.lat, 'g', -1, 64), radius)
	for next != "" {
		var page struct {
			Features []struct{ ID json.RawMessage }
			Links    []struct{ Href, Rel string }
		}
		peerGet(t, next, 200, &page)
		for _, g := range page.Features {
			got = append(got, string(g.ID))
		}
		next = ""
		for _, link := range page.Links {
			if link.Rel == "next" {
				next = link.Href
				if u, err := url.Parse(next); err == nil && !u.IsAbs() {
					next = base + next
				}
			}
		}
	}
	rel := catalog.QuoteIdent(c.schema) + "." + catalog.QuoteIdent(c.table)
	geog := fmt.Sprintf("ST_Transform(ST_CurveToLine(l.%s::geometry), 4326)::geography", catalog.QuoteIdent(c.column))
	key := "to_json(md5(l::text))::text"
	if c.key != "" {
		key = "to_json(l." + catalog.QuoteIdent(c.key) + ")::text"
	}
	rows, err := pool.Query(context.Background(), fmt.Sprintf(
		`SELECT %s FROM %s l WHERE ST_DWithin(%s, ST_SetSRID(ST_Point($1, $2), 4326)::geography, $3)`, key, rel, geog),
		f.lng, f.lat, radius)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		want = append(want, id)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("/within %v m of %s (%v, %v) = %v, want %v", radius, f.id, f.lng, f.lat, got, want)
	}
}

// checkPeerRefused wants the tiles, /within and spatial filters of a
// layer without a CRS refused, saying why.
func checkPeerRefused(t *testing.T, base string, l peerLayer) {
	t.Helper()
	for _, u := range []string{
		base + "/tiles/" + l.ID + "/0/0/0.mvt",
		base + "/within?layer=" + l.ID + "&lng=2&lat=5&radius=1000",
	} {
		var e struct{ Detail any }
		peerGet(t, u, 422, &e)
		if !strings.Contains(fmt.Sprint(e.Detail), "SRID") {
			t.Errorf("GET %s says %v, want it to name the SRID", u, e.Detail)
		}
	}
	// A spatial filter, like a bbox, cannot place a geometry: the
	// client's request is refused (400), not failed (500).
	for _, f := range []string{"S_INTERSECTS(geometry, POINT(2 5))", "S_INTERSECTS(" + l.GeometryColumn + ", BBOX(0, 0, 10, 10))"} {
		u := base + "/collections/" + l.ID + "/items?filter=" + url.QueryEscape(f)
		var e struct{ Detail any }
		peerGet(t, u, 400, &e)
		if !strings.Contains(fmt.Sprint(e.Detail), "SRID 0") {
			t.Errorf("GET %s says %v, want it to name the SRID", u, e.Detail)
		}
	}
}
