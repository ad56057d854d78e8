package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// gdal runs one GDAL command line tool and returns its standard output;
// the tools are part of what make test installs, so a missing one fails.
func gdal(t *testing.T, tool string, args ...string) string {
	t.Helper()
	out, err := exec.Command(tool, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s%s", tool, strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// gdalAuth are the options that hand GDAL the API key as a header, and
// let it retry a 503 from a database busy with the other tests, as a
// client of a loaded server would.
func gdalAuth(key string) []string {
	return []string{"--config", "GDAL_HTTP_HEADERS", "x-api-key: " + key,
		"--config", "GDAL_HTTP_MAX_RETRY", "5", "--config", "GDAL_HTTP_RETRY_DELAY", "1"}
}

// gdalFeature is a feature as ogr2ogr writes GeoJSON.
type gdalFeature struct {
	Properties map[string]any
	Geometry   struct {
		Type        string
		Coordinates []float64
	}
}

// copyPlaces copies places through OAPIF into a GeoPackage with ogr2ogr
// (extra selecting what), then reads the GeoPackage back as GeoJSON.
func copyPlaces(t *testing.T, base, key string, extra ...string) map[int64]gdalFeature {
	t.Helper()
	gpkg := filepath.Join(t.TempDir(), "copy.gpkg")
	args := append(append([]string{"-f", "GPKG", gpkg}, gdalAuth(key)...), "-oo", "PAGE_SIZE=25", "OAPIF:"+base, "places")
	gdal(t, "ogr2ogr", append(args, extra...)...)
	out := gdal(t, "ogr2ogr", "-f", "GeoJSON", "/vsistdout/", gpkg, "places")
	var fc struct{ Features []gdalFeature }
	if err := json.Unmarshal([]byte(out), &fc); err != nil {
		t.Fatalf("read back the GeoPackage: %v\n%.500s", err, out)
	}
	got := map[int64]gdalFeature{}
	for _, f := range fc.Features {
		n, _ := f.Properties["id"].(float64)
		id := int64(n)
		if _, dup := got[id]; dup {
			t.Errorf("feature %d copied twice", id)
		}
		got[id] = f
	}
	return got
}

// placesWhere is what SQL selects of places under where: id, name, country
// and the point.
func placesWhere(t *testing.T, pool *pgxpool.Pool, where string) map[int64]gdalFeature {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, name, properties->>'country', ST_X(geom), ST_Y(geom) FROM places WHERE `+where)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[int64]gdalFeature{}
	for rows.Next() {
		var id int64
		var name, country string
		var x, y float64
		if err := rows.Scan(&id, &name, &country, &x, &y); err != nil {
			t.Fatal(err)
		}
		f := gdalFeature{Properties: map[string]any{"name": name, "country": country}}
		f.Geometry.Type, f.Geometry.Coordinates = "Point", []float64{x, y}
		want[id] = f
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return want
}

// sameFeatures compares copied features with SQL's, ids, attributes and
// coordinates (to the 1e-9 degrees GeoJSON carries).
func sameFeatures(t *testing.T, got, want map[int64]gdalFeature) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("copied %d features, SQL selects %d", len(got), len(want))
	}
	bad := 0
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			t.Errorf("feature %d (%v) not copied", id, w.Properties["name"])
		case g.Properties["name"] != w.Properties["name"] || g.Properties["country"] != w.Properties["country"]:
			t.Errorf("feature %d: copied %v, SQL %v", id, g.Properties, w.Properties)
		case g.Geometry.Type != "Point" || len(g.Geometry.Coordinates) != 2 ||
			math.Abs(g.Geometry.Coordinates[0]-w.Geometry.Coordinates[0]) > 1e-9 ||
			math.Abs(g.Geometry.Coordinates[1]-w.Geometry.Coordinates[1]) > 1e-9:
			t.Errorf("feature %d: copied %v, SQL %v", id, g.Geometry, w.Geometry)
		default:
			continue
		}
		if bad++; bad > 10 {
			t.Fatal("and more")
		}
	}
}

// TestGDALReadsEveryCollection: ogrinfo lists every collection of a
// realistic user database with its fields, typed as the columns are.
func TestGDALReadsEveryCollection(t *testing.T) {
	_, dbURL := testenv.UserDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"}
	key := "gdal-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _ := startService(t, env)
	status, _, body := call(t, "GET", base+"/collections", key, "")
	var cols struct{ Collections []struct{ ID string } }
	if status != 200 || json.Unmarshal(body, &cols) != nil || len(cols.Collections) < 5 {
		t.Fatalf("GET /collections = %d %.300s", status, body)
	}
	list := gdal(t, "ogrinfo", append(append([]string{"-ro", "-q"}, gdalAuth(key)...), "OAPIF:"+base)...)
	for _, c := range cols.Collections {
		if !strings.Contains(list, ": "+c.ID+" (") {
			t.Errorf("ogrinfo does not list collection %s:\n%s", c.ID, list)
		}
	}
	// Every field of every layer, as GDAL types it.
	for _, c := range cols.Collections {
		info := gdal(t, "ogrinfo", append(append([]string{"-ro", "-so"}, gdalAuth(key)...), "OAPIF:"+base, c.ID)...)
		status, _, body := call(t, "GET", base+"/collections/"+c.ID+"/schema", key, "")
		var schema struct {
			Properties map[string]struct{ Type, Format string } `json:"properties"`
		}
		if status != 200 || json.Unmarshal(body, &schema) != nil {
			t.Fatalf("GET schema of %s = %d %.300s", c.ID, status, body)
		}
		for name, p := range schema.Properties {
			if name == "geometry" {
				continue
			}
			want := map[string]string{"integer": "Integer", "number": "Real", "string": "String", "boolean": "Integer(Boolean)"}[p.Type]
			switch p.Format {
			case "date-time":
				want = "DateTime"
			case "date":
				want = "Date"
			}
			if want == "" {
				continue // arrays and objects: GDAL's choice
			}
			if !strings.Contains(info, fmt.Sprintf("\n%s: %s", name, want)) && !strings.Contains(info, fmt.Sprintf("\n%s: Integer64", name)) {
				t.Errorf("collection %s: ogrinfo shows no field %s of type %s:\n%s", c.ID, name, want, info)
			}
		}
	}
}

// TestGDALCopiesWhatSQLSelects: ogr2ogr copies a bbox of places into a
// GeoPackage, paging with next links; ids, attributes and points equal
// what SQL selects.
func TestGDALCopiesWhatSQLSelects(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"}
	key := "gdal-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _ := startService(t, env)
	got := copyPlaces(t, base, key, "-spat", "13", "52.3", "13.8", "52.7")
	sameFeatures(t, got, placesWhere(t, pool, "ST_Intersects(geom, ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326))"))
}

// TestGDALUnderTightQuota: with a quota far below what the copy needs,
// GDAL's retries on 429 (Retry-After) still end with every feature
// exactly once.
func TestGDALUnderTightQuota(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "3/1s"}
	key := "gdal-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, logs := startService(t, env)
	got := copyPlaces(t, base, key, "-spat", "13", "52.3", "13.8", "52.7", "--config", "GDAL_HTTP_MAX_RETRY", "30")
	sameFeatures(t, got, placesWhere(t, pool, "ST_Intersects(geom, ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326))"))
	if n := strings.Count(logs.String(), `"status":429`); n == 0 {
		t.Errorf("no request was refused: the quota did not bite, so the test shows nothing")
	}
}

// TestGDALCopiesAFilteredSubset: an attribute filter becomes CQL2 that
// geogate runs (GDAL sends it because /conformance declares it), and the
// copy equals what SQL selects.
func TestGDALCopiesAFilteredSubset(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"}
	key := "gdal-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, logs := startService(t, env)
	got := copyPlaces(t, base, key, "-where", "country = 'LU'", "--debug", "on")
	sameFeatures(t, got, placesWhere(t, pool, "properties->>'country' = 'LU'"))
	// Filtering on GDAL's side would page through all 171,075 places.
	if n := strings.Count(logs.String(), `"path":"/collections/places/items"`); n > 20 {
		t.Errorf("GDAL read %d pages: it filtered on its side, not through CQL2", n)
	}
}

// TestGDALCopiesWithItsDefaults: a plain ogr2ogr copy, with GDAL's own
// defaults (pages of 10, no retries) and the service's default policies,
// finishes on a quiet server with every feature: small pages cost what
// they are, not what a full page would.
func TestGDALCopiesWithItsDefaults(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	key := "gdal-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _ := startService(t, env)
	where := "ST_Intersects(geom, ST_MakeEnvelope(5.9, 47.3, 15, 55, 4326))"
	want := placesWhere(t, pool, where)
	if len(want) < 2000 {
		t.Fatalf("only %d places in Germany's box: the copy should take hundreds of pages", len(want))
	}
	gpkg := filepath.Join(t.TempDir(), "copy.gpkg")
	gdal(t, "ogr2ogr", "-f", "GPKG", gpkg, "--config", "GDAL_HTTP_HEADERS", "x-api-key: "+key,
		"OAPIF:"+base, "places", "-spat", "5.9", "47.3", "15", "55")
	out := gdal(t, "ogr2ogr", "-f", "GeoJSON", "/vsistdout/", gpkg, "places")
	var fc struct{ Features []gdalFeature }
	if err := json.Unmarshal([]byte(out), &fc); err != nil {
		t.Fatalf("read back the GeoPackage: %v\n%.500s", err, out)
	}
	if len(fc.Features) != len(want) {
		t.Errorf("copied %d features with GDAL's defaults, SQL selects %d", len(fc.Features), len(want))
	}
}
