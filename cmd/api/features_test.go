package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ogcPage is the part of an items page the tests read.
type ogcPage struct {
	Type     string
	Features []struct {
		ID       json.RawMessage
		Geometry struct {
			Type        string
			Coordinates json.RawMessage
		}
		Properties map[string]any
	}
	NumberMatched, NumberReturned int
	Links                         []struct{ Href, Rel, Type string }
}

func (p ogcPage) next() string {
	for _, l := range p.Links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	return ""
}

// TestFeaturesTour calls the OGC API – Features routes on the demo data
// through the checking proxy: every answer must be one the document
// describes, with the status wanted.
func TestFeaturesTour(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"}
	base, _ := startService(t, env)
	berlin := "/collections/places/items?bbox=13.0,52.3,13.8,52.7"
	tests := []struct {
		name, path string
		want       int
	}{
		{"Landing", "/?f=json", 200},
		{"LandingDefault", "/", 200},
		{"Conformance", "/conformance", 200},
		{"Collections", "/collections", 200},
		{"Collection", "/collections/places", 200},
		{"Fences", "/collections/geofences", 200},
		{"UnknownCollection", "/collections/nope", 404},
		{"Queryables", "/collections/places/queryables", 200},
		{"Schema", "/collections/geofences/schema", 200},
		{"Items", "/collections/places/items", 200},
		{"ItemsBBox", berlin, 200},
		{"ItemsLimit", berlin + "&limit=2", 200},
		{"ItemsCRS4326", berlin + "&crs=http://www.opengis.net/def/crs/EPSG/0/4326", 200},
		{"ItemsCRS3857", berlin + "&crs=" + url.QueryEscape("[EPSG:3857]"), 200},
		{"ItemsBBoxCRS", "/collections/places/items?bbox=1447153,6856595,1536209,6928991&bbox-crs=http://www.opengis.net/def/crs/EPSG/0/3857", 200},
		{"ItemsSort", berlin + "&sortby=-name&limit=3", 200},
		{"ItemsProps", berlin + "&properties=country", 200},
		{"ItemsAntimeridian", "/collections/places/items?bbox=170,-50,-170,10", 200},
		{"Item", "/collections/places/items/1", 200},
		{"ItemMissing", "/collections/places/items/999999999", 404},
		{"ItemNotAnID", "/collections/places/items/abc", 404},
		{"BadLimit", "/collections/places/items?limit=0", 400},
		{"HugeLimit", "/collections/places/items?limit=100001", 400},
		{"BadBBox", "/collections/places/items?bbox=1,2,3", 400},
		{"BBoxNaN", "/collections/places/items?bbox=NaN,1,2,3", 400},
		{"BBoxUpsideDown", "/collections/places/items?bbox=0,10,1,5", 400},
		{"BadCRS", "/collections/places/items?crs=EPSG:2154", 400},
		{"UnknownParam", "/collections/places/items?colour=red", 400},
		{"RepeatedParam", "/collections/places/items?limit=1&limit=2", 400},
		{"BadSort", "/collections/places/items?sortby=nope", 400},
		{"SortSemicolon", "/collections/places/items?sortby=name;drop", 400},
		{"SortEscapedSemicolon", "/collections/places/items?sortby=name%3Bdrop", 400},
		{"BadEscape", "/collections/places/items?limit=%zz", 400},
		{"ConformanceSemicolon", "/conformance?f=json;x", 400},
		{"NoTime", "/collections/places/items?datetime=2024-01-01", 400},
		{"BadCursor", "/collections/places/items?cursor=abc", 400},
		{"BadFormat", "/collections?f=xml", 400},
		{"Filter", "/collections/places/items?filter=" + url.QueryEscape("country = 'LU' AND name LIKE 'E%'"), 200},
		{"FilterJSON", "/collections/places/items?filter-lang=cql2-json&filter=" + url.QueryEscape(`{"op":"in","args":[{"property":"country"},["LU","LI"]]}`), 200},
		{"FilterSpatial", "/collections/places/items?filter=" + url.QueryEscape("S_INTERSECTS(geometry, POLYGON((13 52.3, 13.8 52.3, 13.8 52.7, 13 52.7, 13 52.3)))"), 200},
		{"FilterCRS", "/collections/places/items?filter-crs=http://www.opengis.net/def/crs/EPSG/0/3857&filter=" + url.QueryEscape("S_INTERSECTS(geometry, BBOX(1447153, 6856595, 1536209, 6928991))"), 200},
		{"FilterSyntax", "/collections/places/items?filter=" + url.QueryEscape("country = "), 400},
		{"FilterUnknownProperty", "/collections/places/items?filter=" + url.QueryEscape("colour = 'red'"), 400},
		{"FilterBadLang", "/collections/places/items?filter-lang=sql&filter=1", 400},
		{"FilterCRSAlone", "/collections/places/items?filter-crs=EPSG:3857", 400},
		{"FilterTooDeep", "/collections/places/items?filter=" + url.QueryEscape(strings.Repeat("(", 200)+"country = 'LU'"+strings.Repeat(")", 200)), 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := callWith(t, "GET", base+tt.path, "", "Accept", "application/json")
			if status != tt.want {
				t.Fatalf("GET %s = %d %.300s, want %d", tt.path, status, body, tt.want)
			}
			if status >= 400 && !strings.Contains(string(body), `"detail"`) {
				t.Errorf("GET %s body %s: want a detail", tt.path, body)
			}
			if strings.Contains(tt.path, "/items") && status == 200 && h.Get("Content-Type") != "application/geo+json" {
				t.Errorf("GET %s Content-Type = %q, want application/geo+json", tt.path, h.Get("Content-Type"))
			}
		})
	}
}

// TestFeaturesFiltersMatchSQL: CQL2 filters, in text and in JSON, select
// through HTTP what the equivalent SQL selects on the demo data.
func TestFeaturesFiltersMatchSQL(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"})
	tests := []struct{ text, json, where string }{
		{"country = 'LU'", `{"op":"=","args":[{"property":"country"},"LU"]}`, "properties->>'country' = 'LU'"},
		{"country IN ('LI','MC') OR name LIKE 'Ber%'", `{"op":"or","args":[{"op":"in","args":[{"property":"country"},["LI","MC"]]},{"op":"like","args":[{"property":"name"},"Ber%"]}]}`,
			"properties->>'country' IN ('LI','MC') OR name LIKE 'Ber%'"},
		{"S_INTERSECTS(geometry, BBOX(5.7, 49.4, 6.6, 50.2)) AND NOT country = 'LU'",
			`{"op":"and","args":[{"op":"s_intersects","args":[{"property":"geometry"},{"bbox":[5.7,49.4,6.6,50.2]}]},{"op":"not","args":[{"op":"=","args":[{"property":"country"},"LU"]}]}]}`,
			"ST_Intersects(geom, ST_MakeEnvelope(5.7, 49.4, 6.6, 50.2, 4326)) AND NOT properties->>'country' = 'LU'"},
		{"id BETWEEN 100 AND 140", `{"op":"between","args":[{"property":"id"},100,140]}`, "id BETWEEN 100 AND 140"},
	}
	for _, tt := range tests {
		var want int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM places WHERE "+tt.where).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if want == 0 {
			t.Fatalf("%s selects nothing: the case shows nothing", tt.where)
		}
		for lang, f := range map[string]string{"cql2-text": tt.text, "cql2-json": tt.json} {
			path := "/collections/places/items?limit=10000&filter-lang=" + lang + "&filter=" + url.QueryEscape(f)
			status, _, body := call(t, "GET", base+path, "", "")
			var p ogcPage
			if status != 200 || json.Unmarshal(body, &p) != nil {
				t.Errorf("%s %s = %d %.300s", lang, f, status, body)
				continue
			}
			if p.NumberMatched != want || len(p.Features) != want {
				t.Errorf("%s %s: %d features, numberMatched %d; SQL selects %d", lang, f, len(p.Features), p.NumberMatched, want)
			}
		}
	}
}

// TestFeaturesTamperedCursor: a next link whose cursor was edited, or
// moved to another query, is a 400.
func TestFeaturesTamperedCursor(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"})
	status, _, body := call(t, "GET", base+"/collections/places/items?limit=2&bbox=13,52.3,13.8,52.7", "", "")
	var p ogcPage
	if status != 200 || json.Unmarshal(body, &p) != nil || p.next() == "" {
		t.Fatalf("first page = %d %.300s", status, body)
	}
	u, _ := url.Parse(p.next())
	cursor := u.Query().Get("cursor")
	flipped := []byte(cursor)
	flipped[len(flipped)/2] ^= 1
	for name, q := range map[string]string{
		"edited":        "limit=2&bbox=13,52.3,13.8,52.7&cursor=" + url.QueryEscape(string(flipped)),
		"other bbox":    "limit=2&bbox=13,52.3,13.9,52.7&cursor=" + url.QueryEscape(cursor),
		"other sort":    "limit=2&bbox=13,52.3,13.8,52.7&sortby=name&cursor=" + url.QueryEscape(cursor),
		"other dataset": "limit=2&cursor=" + url.QueryEscape(cursor),
	} {
		status, _, body := call(t, "GET", base+"/collections/places/items?"+q, "", "")
		if status != 400 || !strings.Contains(string(body), "cursor") {
			t.Errorf("%s cursor: %d %.200s, want a 400 about the cursor", name, status, body)
		}
	}
	status, _, _ = call(t, "GET", p.next(), "", "")
	if status != 200 {
		t.Errorf("the untouched next link = %d, want 200", status)
	}
}

// TestFeaturesPagingMatchesSQL walks every page of a bbox query, sorted
// and not, and compares the ids with the same selection in SQL: each
// feature exactly once, numberMatched the count.
func TestFeaturesPagingMatchesSQL(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"})
	want := sqlStrings(t, pool, `SELECT id::text FROM places
		WHERE ST_Intersects(geom, ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326)) ORDER BY name DESC, id`)
	if len(want) < 20 {
		t.Fatalf("SQL gave %d ids; want a few dozen", len(want))
	}
	for _, sortby := range []string{"", "-name"} {
		t.Run("sortby="+sortby, func(t *testing.T) {
			next := base + "/collections/places/items?limit=7&bbox=13,52.3,13.8,52.7"
			if sortby != "" {
				next += "&sortby=" + sortby
			}
			var got []string
			for pages := 0; next != "" && pages < 1000; pages++ {
				status, _, body := callWith(t, "GET", next, "", "Accept", "application/geo+json")
				var p ogcPage
				if status != 200 || json.Unmarshal(body, &p) != nil {
					t.Fatalf("GET %s = %d %.300s", next, status, body)
				}
				if p.NumberMatched != len(want) || p.NumberReturned != len(p.Features) {
					t.Fatalf("page %d: numberMatched %d numberReturned %d with %d features; want %d matched",
						pages, p.NumberMatched, p.NumberReturned, len(p.Features), len(want))
				}
				for _, f := range p.Features {
					got = append(got, string(f.ID))
				}
				next = strings.Replace(p.next(), "http://localhost", base, 1)
			}
			w := slices.Clone(want)
			if sortby == "" {
				slices.SortFunc(w, func(a, b string) int { return len(a)*1e9 - len(b)*1e9 + strings.Compare(a, b) })
			}
			if !slices.Equal(got, w) {
				t.Errorf("paged ids (%d) differ from SQL's (%d): got %v\nwant %v", len(got), len(w), got, w)
			}
		})
	}
}

// TestFeaturesScopes: a key with a spatial scope sees only the features
// meeting it, an item outside it is a 404 and the extent is cut to it; a
// key limited to some layers gets 403 on the others and does not see them
// listed.
func TestFeaturesScopes(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"}
	scoped, fences := "scoped-"+testenv.Prefix(t), "fences-"+testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", scoped, "--secret", scoped, "--scopes", "all", "--bbox", "13.2,52.4,13.6,52.6")
	runCLI(t, env, "keys", "create", "--name", fences, "--secret", fences, "--scopes", "all", "--layers", "geofences")
	base, _ := startService(t, env)
	ctx := context.Background()

	var inside, outside int64
	var n int
	err := pool.QueryRow(ctx, `SELECT
		(SELECT id FROM places WHERE ST_Intersects(geom, ST_MakeEnvelope(13.2, 52.4, 13.6, 52.6, 4326)) ORDER BY id LIMIT 1),
		(SELECT id FROM places WHERE name = 'Paris' ORDER BY id LIMIT 1),
		(SELECT count(*) FROM places WHERE ST_Intersects(geom, ST_MakeEnvelope(13.2, 52.4, 13.6, 52.6, 4326)))`).Scan(&inside, &outside, &n)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, key, path string
		want            int
	}{
		{"ItemInside", scoped, fmt.Sprintf("/collections/places/items/%d", inside), 200},
		{"ItemOutside", scoped, fmt.Sprintf("/collections/places/items/%d", outside), 404},
		{"OtherLayer", fences, "/collections/places", 403},
		{"OtherLayerItems", fences, "/collections/places/items", 403},
		{"OwnLayer", fences, "/collections/geofences/items?limit=1", 200},
	}
	for _, tt := range tests {
		status, _, body := call(t, "GET", base+tt.path, tt.key, "")
		if status != tt.want {
			t.Errorf("%s: GET %s = %d %.200s, want %d", tt.name, tt.path, status, body, tt.want)
		}
	}
	status, _, body := call(t, "GET", base+"/collections/places/items?limit=10000", scoped, "")
	var p ogcPage
	if status != 200 || json.Unmarshal(body, &p) != nil || p.NumberMatched != n || len(p.Features) != n {
		t.Errorf("scoped items = %d, matched %d, %d features; want the %d in the scope", status, p.NumberMatched, len(p.Features), n)
	}
	status, _, body = call(t, "GET", base+"/collections/places", scoped, "")
	var c struct {
		Extent struct{ Spatial struct{ BBox [][4]float64 } }
	}
	if status != 200 || json.Unmarshal(body, &c) != nil || len(c.Extent.Spatial.BBox) != 1 ||
		c.Extent.Spatial.BBox[0] != [4]float64{13.2, 52.4, 13.6, 52.6} {
		t.Errorf("scoped collection extent = %d %+v, want the scope's box", status, c.Extent)
	}
	status, _, body = call(t, "GET", base+"/collections", fences, "")
	var cols struct{ Collections []struct{ ID string } }
	if status != 200 || json.Unmarshal(body, &cols) != nil || len(cols.Collections) != 1 || cols.Collections[0].ID != "geofences" {
		t.Errorf("collections for a key limited to geofences = %d %.300s", status, body)
	}
}

// TestFeaturesPagingWhileWriting pages through a layer while rows are
// added and removed between pages: every row that stays is returned
// exactly once.
func TestFeaturesPagingWhileWriting(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"})
	ctx := context.Background()
	box := "ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326)"
	before := map[string]bool{}
	rows, err := pool.Query(ctx, "SELECT id::text FROM places WHERE ST_Intersects(geom, "+box+")")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		before[id] = true
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	seen := map[string]int{}
	deleted := map[string]bool{}
	next := base + "/collections/places/items?limit=9&bbox=13,52.3,13.8,52.7"
	for page := 0; next != ""; page++ {
		status, _, body := call(t, "GET", next, "", "")
		var p ogcPage
		if status != 200 || json.Unmarshal(body, &p) != nil {
			t.Fatalf("GET %s = %d %.300s", next, status, body)
		}
		for _, f := range p.Features {
			seen[string(f.ID)]++
		}
		next = p.next()
		// Between pages: a row added, and one not yet seen removed.
		if _, err := pool.Exec(ctx, `INSERT INTO places (name, geom) VALUES ($1, ST_SetSRID(ST_Point(13.4, 52.5), 4326))`,
			fmt.Sprintf("new %d", page)); err != nil {
			t.Fatal(err)
		}
		for id := range before {
			if seen[id] == 0 && !deleted[id] && page%2 == 0 {
				if _, err := pool.Exec(ctx, "DELETE FROM places WHERE id = $1::bigint", id); err != nil {
					t.Fatal(err)
				}
				deleted[id] = true
				break
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("feature %s returned %d times", id, n)
		}
	}
	for id := range before {
		if !deleted[id] && seen[id] != 1 {
			t.Errorf("feature %s, never changed, returned %d times", id, seen[id])
		}
	}
	if len(deleted) < 3 {
		t.Errorf("only %d rows deleted while paging: the test shows little", len(deleted))
	}
}

// featuresService is the features service env configures over pool, as
// the routes have it, and a context for its calls.
func featuresService(t *testing.T, pool *pgxpool.Pool, env map[string]string) (context.Context, *features.Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // the catalog stops refreshing before the pool closes
	cfg, err := config.Load(func(k string) string { return env[k] }, config.NeedPostgres)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, pool, cfg.Catalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, features.New(pg.Runner{Pool: pool, Timeouts: cfg.Features.Timeouts}, cat, cfg.Features, features.Rights{})
}

// TestItemsSQLIsTheRoutes: the statements features.Service.ItemsSQL gives
// for a page select the features the items route answers that page with,
// and on a first page count its numberMatched, so that a baseline built
// on them measures what the route runs.
func TestItemsSQLIsTheRoutes(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	key := "items-sql-test-cursor-key"
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s", "FEATURES_CURSOR_KEY": key}
	base, _ := startService(t, env)
	ctx, svc := featuresService(t, pool, env)
	filter := url.Values{"limit": {"9"}, "filter": {"S_INTERSECTS(geometry,POLYGON((13 52.3,13.8 52.3,13.8 52.7,13 52.7,13 52.3))) AND name LIKE 'B%'"}}
	for _, q := range []string{"limit=7&bbox=13,52.3,13.8,52.7", "limit=5&bbox=13,52.3,13.8,52.7&sortby=-name&properties=country", filter.Encode()} {
		next := base + "/collections/places/items?" + q
		for pages := 0; next != "" && pages < 100; pages++ {
			status, _, body := callWith(t, "GET", next, "", "Accept", "application/geo+json")
			var p ogcPage
			if status != 200 || json.Unmarshal(body, &p) != nil {
				t.Fatalf("GET %s = %d %.300s", next, status, body)
			}
			u, err := url.Parse(next)
			if err != nil {
				t.Fatal(err)
			}
			stmts, err := svc.ItemsSQL(ctx, "places", u.Query())
			if err != nil {
				t.Fatalf("ItemsSQL(%s): %v", u.RawQuery, err)
			}
			if want := map[bool]int{true: 2, false: 1}[pages == 0]; len(stmts) != want {
				t.Fatalf("page %d: %d statements, want %d", pages, len(stmts), want)
			}
			var ids, got []string
			for _, f := range p.Features {
				ids = append(ids, string(f.ID))
			}
			rows, err := pool.Query(ctx, stmts[0].SQL, stmts[0].Args...)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				v, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, v[0].(string))
			}
			if rows.Err() != nil {
				t.Fatal(rows.Err())
			}
			if len(got) > len(ids) { // the extra row says a next page exists
				got = got[:len(ids)]
			}
			if !slices.Equal(got, ids) {
				t.Errorf("%s page %d: SQL ids %v, route's %v", q, pages, got, ids)
			}
			if len(stmts) == 2 {
				var n int
				if err := pool.QueryRow(ctx, stmts[1].SQL, stmts[1].Args...).Scan(&n); err != nil || n != p.NumberMatched {
					t.Errorf("%s: count %d (%v), numberMatched %d", q, n, err, p.NumberMatched)
				}
			}
			next = strings.Replace(p.next(), "http://localhost", base, 1)
		}
	}
}

// sqlStrings is the one text column of the rows sql selects from pool.
func sqlStrings(t *testing.T, pool *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
