package importer_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/importer"
	"github.com/geogate/geogate/internal/testenv"
)

// stored is a row as read back from a layer.
type stored struct {
	Name  string
	Props string
	Geom  string // WKT with SRID
}

func readLayer(t *testing.T, pool *pgxpool.Pool, layer importer.Layer) []stored {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		fmt.Sprintf("SELECT name, properties::text, ST_AsEWKT(geom) FROM %s ORDER BY id", layer))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var s stored
		if err := rows.Scan(&s.Name, &s.Props, &s.Geom); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func importString(t *testing.T, pool *pgxpool.Pool, input string, o importer.Options) (importer.Result, error) {
	t.Helper()
	in, err := importer.Open("-", strings.NewReader(input)) // as "api import -" reads stdin
	if err != nil {
		t.Fatal(err)
	}
	return importer.Import(context.Background(), pool, in, o)
}

func gz(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

const (
	collection = `{"type": "FeatureCollection", "name": "test", "features": [
  {"type": "Feature", "properties": {"name": "Berlin", "pop": 3600000}, "geometry": {"type": "Point", "coordinates": [13.41, 52.52]}},
  {"type": "Feature", "geometry": {"type": "Point", "coordinates": [2.35, 48.86, 35]}, "properties": {"NAME": "Paris"}}
], "crs": null}`
	ndjson = `{"type":"Feature","properties":{"name":"Berlin","pop":3600000},"geometry":{"type":"Point","coordinates":[13.41,52.52]}}

{"type":"Feature","properties":{"NAME":"Paris"},"geometry":{"type":"Point","coordinates":[2.35,48.86]}}
`
	cities = `[{"name":"Berlin","lat":"52.52","lng":"13.41","country":"DE","admin1":"16","admin2":"00"},
 {"name":"Paris","lat":"48.86","lng":"2.35","country":"FR","admin1":"11","admin2":"75"}]`
	// Small inputs for the import modes: one row, two rows, and two rows
	// of which the second is bad (latitude 95).
	oneCity   = `[{"name":"one","lat":"1","lng":"1"}]`
	twoCities = `[{"name":"two","lat":"2","lng":"2"},{"name":"three","lat":"3","lng":"3"}]`
	badCities = `[{"name":"four","lat":"4","lng":"4"},{"name":"five","lat":"95","lng":"5"}]`
)

var (
	berlinFeature = stored{"Berlin", `{"pop": 3600000}`, "SRID=4326;POINT(13.41 52.52)"}
	parisFeature  = stored{"Paris", `{}`, "SRID=4326;POINT(2.35 48.86)"}
	berlinCity    = stored{"Berlin", `{"admin1": "16", "admin2": "00", "country": "DE"}`, "SRID=4326;POINT(13.41 52.52)"}
	parisCity     = stored{"Paris", `{"admin1": "11", "admin2": "75", "country": "FR"}`, "SRID=4326;POINT(2.35 48.86)"}
)

func TestImportFormats(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		format importer.Format
		want   []stored
	}{
		{"FeatureCollection", collection, importer.FormatFeatureCollection, []stored{berlinFeature, parisFeature}},
		{"FeatureCollection gzip", gz(collection), importer.FormatFeatureCollection, []stored{berlinFeature, parisFeature}},
		{"NDJSON", ndjson, importer.FormatNDJSON, []stored{berlinFeature, parisFeature}},
		{"NDJSON gzip", gz(ndjson), importer.FormatNDJSON, []stored{berlinFeature, parisFeature}},
		{"cities array", cities, importer.FormatArray, []stored{berlinCity, parisCity}},
		{"cities array gzip with BOM", gz("\xEF\xBB\xBF\n" + cities), importer.FormatArray, []stored{berlinCity, parisCity}},
		{"array of features", "[" + strings.ReplaceAll(strings.TrimSpace(ndjson), "\n\n", ",") + "]", importer.FormatArray, []stored{berlinFeature, parisFeature}},
		{"records with escapes, numbers and extra members", `[{"name":"Qu\"ote \\ \u00e9","lat":1.5,"lng":-2,"pop":12,"tags":["a"]},
 {"lat":"-0.5e1","lng":" 3 ","x":null,"y":"{\"]"}]`, importer.FormatArray, []stored{
			{`Qu"ote \ é`, `{"pop": 12, "tags": ["a"]}`, "SRID=4326;POINT(-2 1.5)"},
			{"", `{"x": null, "y": "{\"]"}`, "SRID=4326;POINT(3 -5)"},
		}},
		{"empty array", " [ ] ", importer.FormatArray, nil},
		{"empty FeatureCollection", `{"type":"FeatureCollection","features":[]}`, importer.FormatFeatureCollection, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := testenv.DB(t)
			res, err := importString(t, pool, tt.input, importer.Options{Layer: importer.Places})
			if err != nil {
				t.Fatalf("Import() error = %v", err)
			}
			if res.Format != tt.format || res.Rows != int64(len(tt.want)) {
				t.Errorf("Import() = format %q, %d rows; want %q, %d rows", res.Format, res.Rows, tt.format, len(tt.want))
			}
			if diff := cmp.Diff(tt.want, readLayer(t, pool, importer.Places)); diff != "" {
				t.Errorf("places (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImportFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"a.json": collection, "b.ndjson.gz": gz(ndjson), "c.dat": gz(cities)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pool := testenv.DB(t)
	for _, name := range []string{"a.json", "b.ndjson.gz", "c.dat"} {
		in, err := importer.Open(filepath.Join(dir, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := importer.Import(context.Background(), pool, in, importer.Options{Layer: importer.Places})
		in.Close()
		if err != nil || res.Rows != 2 {
			t.Errorf("Import(%s) = %d rows, %v; want 2 rows", name, res.Rows, err)
		}
		if in.Size <= 0 || in.BytesRead() != in.Size {
			t.Errorf("Import(%s) read %d of %d bytes, want all", name, in.BytesRead(), in.Size)
		}
	}
	if got := len(readLayer(t, pool, importer.Places)); got != 6 {
		t.Errorf("places has %d rows, want 6", got)
	}
}

func TestImportGeofences(t *testing.T) {
	const fences = `{"type":"FeatureCollection","features":[
{"type":"Feature","id":7,"properties":{"A3":"AAA","area":1},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}},
{"type":"Feature","properties":{"code":"BBB"},"geometry":{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]],[[[2,2],[3,2],[3,3],[2,2]]]]}},
{"type":"Feature","id":"ccc","properties":{"area":3},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}}
]}`
	tests := []struct {
		name     string
		nameProp string
		want     []stored
	}{
		{"first string property", "", []stored{
			{"AAA", `{"area": 1}`, "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"},
			{"BBB", `{}`, "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((2 2,3 2,3 3,2 2)))"},
			{"ccc", `{"area": 3}`, "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"},
		}},
		{"name property", "area", []stored{
			{"1", `{"A3": "AAA"}`, "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"},
			{"3", `{}`, "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"},
		}},
		{"three dimensions", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testenv.DB(t)
			input := fences
			if tt.want == nil {
				input = `{"type":"Feature","properties":{"name":"z"},"geometry":{"type":"Polygon","coordinates":[[[0,0,9],[1,0,9],[1,1,9],[0,0,9]]]}}`
				tt.want = []stored{{"z", "{}", "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"}}
			}
			_, err := importString(t, pool, input, importer.Options{Layer: importer.Geofences, NameProperty: tt.nameProp, SkipBad: true})
			if err != nil {
				t.Fatalf("Import() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, readLayer(t, pool, importer.Geofences)); diff != "" {
				t.Errorf("geofences (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImportBadFeature checks that a bad feature is named by its position
// and reason, and that the layer is left exactly as it was.
func TestImportBadFeature(t *testing.T) {
	point := func(coords string) string {
		return `{"type":"Feature","properties":{"name":"x"},"geometry":{"type":"Point","coordinates":` + coords + `}}`
	}
	good := point("[1,2]")
	tests := []struct {
		name  string
		layer importer.Layer
		input string
		want  string // in the error
	}{
		{"latitude out of range", importer.Places, `{"type":"FeatureCollection","features":[` + good + "," + good + "," + point("[10,95]") + `]}`,
			"feature 2: latitude 95 is outside [-90, 90]"},
		{"longitude out of range NDJSON", importer.Places, good + "\n" + good + "\n\n" + point("[-181,0]") + "\n" + good + "\n",
			"line 4 (feature 2): longitude -181 is outside [-180, 180]"},
		{"broken NDJSON line", importer.Places, good + "\n" + `{"type":"Feature",` + "\n" + good + "\n",
			"line 2 (feature 1): not a JSON object"},
		{"polygon into places", importer.Places, good + "\n" + `{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}}` + "\n",
			"line 2 (feature 1): geometry is a Polygon; layer places wants Point"},
		{"point into geofences", importer.Geofences, `{"type":"FeatureCollection","features":[` + good + `]}`,
			"feature 0: geometry is a Point; layer geofences wants Polygon or MultiPolygon"},
		{"unclosed ring", importer.Geofences, `{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}}]}`,
			"feature 0: polygon 0 ring 0 is not closed"},
		{"missing geometry", importer.Places, `[` + good + `,{"type":"Feature","properties":{"name":"y"},"geometry":null}]`,
			"feature 1: feature has no geometry"},
		{"city without coordinates", importer.Places, `[{"name":"a","lat":"1","lng":"2"},{"name":"b","lat":"1"}]`,
			`feature 1: record needs "lat" and "lng"`},
		{"city with bad latitude", importer.Places, `[{"name":"a","lat":"1","lng":"2"},{"name":"b","lat":"north","lng":"2"}]`,
			`feature 1: lat "north" is not a number`},
		{"NUL in name", importer.Places, `[{"name":"a\u0000b","lat":"1","lng":"2"}]`,
			"feature 0: name contains a NUL character"},
		{"properties not an object", importer.Places, `[{"type":"Feature","properties":[1],"geometry":{"type":"Point","coordinates":[1,2]}}]`,
			"feature 0: properties is not a JSON object"},
		{"truncated collection", importer.Places, `{"type":"FeatureCollection","features":[` + good + "," + good,
			"after feature 1: unexpected end of input"},
		{"line string", importer.Places, `[{"type":"Feature","properties":{},"geometry":{"type":"LineString","coordinates":[[0,0],[1,1]]}}]`,
			"feature 0: geometry type LineString is not allowed; layer places wants Point"},
		{"not GeoJSON", importer.Places, `"hello"`, "input is not GeoJSON or a JSON array"},
		{"a lone geometry", importer.Places, `{"type":"Point","coordinates":[1,2]}`, `a GeoJSON object of type "Point"`},
		{"empty input", importer.Places, " \n", "input is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := testenv.DB(t)
			before := seed(t, pool, tt.layer)
			res, err := importString(t, pool, tt.input, importer.Options{Layer: tt.layer})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Import() error = %v, want one containing %q", err, tt.want)
			}
			if res.Rows != 0 {
				t.Errorf("Import() reported %d rows after an error, want 0", res.Rows)
			}
			if diff := cmp.Diff(before, readLayer(t, pool, tt.layer)); diff != "" {
				t.Errorf("%s changed after a failed import (-before +after):\n%s", tt.layer, diff)
			}
		})
	}
}

// seed loads one known row into the layer and returns the layer's content.
func seed(t *testing.T, pool *pgxpool.Pool, layer importer.Layer) []stored {
	t.Helper()
	input := `{"type":"Feature","properties":{"name":"seed"},"geometry":{"type":"Point","coordinates":[5,5]}}`
	if layer == importer.Geofences {
		input = `{"type":"Feature","properties":{"name":"seed"},"geometry":{"type":"Polygon","coordinates":[[[5,5],[6,5],[6,6],[5,5]]]}}`
	}
	if _, err := importString(t, pool, input, importer.Options{Layer: layer}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return readLayer(t, pool, layer)
}

func TestImportFeatureErrorType(t *testing.T) {
	pool := testenv.DB(t)
	_, err := importString(t, pool, `[{"name":"a","lat":"1","lng":"2"},{"name":"b","lat":"91","lng":"2"}]`, importer.Options{Layer: importer.Places})
	var fe *importer.FeatureError
	if !errors.As(err, &fe) || fe.Index != 1 || fe.Line != 0 {
		t.Fatalf("Import() error = %#v, want a *FeatureError at index 1", err)
	}
}

func TestImportSkipBad(t *testing.T) {
	input := strings.Join([]string{
		`{"type":"Feature","properties":{"name":"a"},"geometry":{"type":"Point","coordinates":[1,2]}}`,
		`{"type":"Feature","properties":{"name":"b"},"geometry":{"type":"Point","coordinates":[1,200]}}`,
		`not json`,
		`{"type":"Feature","properties":{"name":"c"},"geometry":{"type":"Point","coordinates":[3,4]}}`,
	}, "\n")
	pool := testenv.DB(t)
	res, err := importString(t, pool, input, importer.Options{Layer: importer.Places, SkipBad: true})
	if err != nil {
		t.Fatalf("Import() error = %v", err)
	}
	if res.Rows != 2 || res.Skipped != 2 {
		t.Errorf("Import() = %d rows, %d skipped; want 2 rows, 2 skipped", res.Rows, res.Skipped)
	}
	var got []importer.Position
	for _, fe := range res.Bad {
		got = append(got, fe.Position)
	}
	want := []importer.Position{{Index: 1, Line: 2}, {Index: 2, Line: 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("skipped positions (-want +got):\n%s", diff)
	}
	var names []string
	for _, s := range readLayer(t, pool, importer.Places) {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"a", "c"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

func TestImportModes(t *testing.T) {
	tests := []struct {
		name         string
		first        string
		then         string
		o            importer.Options
		wantErr      bool
		wantNotEmpty bool
		wantNames    []string
	}{
		{"append", oneCity, twoCities, importer.Options{}, false, false, []string{"one", "two", "three"}},
		{"replace", oneCity, twoCities, importer.Options{Replace: true}, false, false, []string{"two", "three"}},
		{"replace with a bad feature", oneCity, badCities, importer.Options{Replace: true}, true, false, []string{"one"}},
		{"replace skipping bad features", oneCity, badCities, importer.Options{Replace: true, SkipBad: true}, false, false, []string{"four"}},
		{"if-empty on a full layer", oneCity, twoCities, importer.Options{IfEmpty: true}, false, true, []string{"one"}},
		{"if-empty on an empty layer", "", twoCities, importer.Options{IfEmpty: true}, false, false, []string{"two", "three"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := testenv.DB(t)
			if tt.first != "" {
				if _, err := importString(t, pool, tt.first, importer.Options{Layer: importer.Places}); err != nil {
					t.Fatal(err)
				}
			}
			tt.o.Layer = importer.Places
			res, err := importString(t, pool, tt.then, tt.o)
			if (err != nil) != tt.wantErr || res.NotEmpty != tt.wantNotEmpty {
				t.Errorf("Import() = NotEmpty %v, error %v; want NotEmpty %v, error %v", res.NotEmpty, err, tt.wantNotEmpty, tt.wantErr)
			}
			var names []string
			for _, s := range readLayer(t, pool, importer.Places) {
				names = append(names, s.Name)
			}
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			// New rows after an import must not collide with imported ids.
			if _, err := pool.Exec(context.Background(), `INSERT INTO places (name, geom) VALUES ('later', ST_SetSRID(ST_MakePoint(0, 0), 4326))`); err != nil {
				t.Errorf("insert after import: %v", err)
			}
		})
	}
}

// TestImportReplaceIsAtomic reads the layer while --replace runs: every
// read sees the whole old content or the whole new one.
func TestImportReplaceIsAtomic(t *testing.T) {
	pool := testenv.DB(t)
	ctx := context.Background()
	gen := func(n int, name string) io.Reader {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"type":"Feature","properties":{"name":%q},"geometry":{"type":"Point","coordinates":[%d,%d]}}`+"\n", name, i%180, i%90)
		}
		return strings.NewReader(b.String())
	}
	if _, err := importer.Import(ctx, pool, gen(3000, "old"), importer.Options{Layer: importer.Places}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		counts := map[string]bool{}
		for {
			select {
			case <-stop:
				var keys []string
				for k := range counts {
					keys = append(keys, k)
				}
				seen <- strings.Join(keys, " ")
				return
			default:
			}
			var name string
			var n int
			err := pool.QueryRow(ctx, "SELECT min(name), count(*) FROM places").Scan(&name, &n)
			if err != nil {
				counts["error: "+err.Error()] = true
				continue
			}
			counts[fmt.Sprintf("%s=%d", name, n)] = true
		}
	}()
	if _, err := importer.Import(ctx, pool, gen(5000, "new"), importer.Options{Layer: importer.Places, Replace: true}); err != nil {
		t.Fatal(err)
	}
	// One more read after the commit.
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM places WHERE name = 'new'").Scan(&n); err != nil || n != 5000 {
		t.Errorf("after replace: %d new rows, %v; want 5000", n, err)
	}
	close(stop)
	for _, s := range strings.Fields(<-seen) {
		if s != "old=3000" && s != "new=5000" {
			t.Errorf("a reader saw %q during replace, want only old=3000 or new=5000", s)
		}
	}
}

// TestImportRepairsInvalidPolygons checks that an import stores the
// invalid fences it loads in their valid form, counts them, leaves valid
// ones as they were, and leaves invalid rows from before it alone.
func TestImportRepairsInvalidPolygons(t *testing.T) {
	pool := testenv.DB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO geofences (name, geom)
		VALUES ('old bow tie', ST_Multi(ST_GeomFromText('POLYGON((0 0,2 2,2 0,0 2,0 0))', 4326)))`); err != nil {
		t.Fatal(err)
	}
	const input = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"name":"bow tie"},"geometry":{"type":"Polygon","coordinates":[[[10,0],[12,2],[12,0],[10,2],[10,0]]]}},
{"type":"Feature","properties":{"name":"square"},"geometry":{"type":"Polygon","coordinates":[[[20,0],[21,0],[21,1],[20,1],[20,0]]]}}
]}`
	res, err := importString(t, pool, input, importer.Options{Layer: importer.Geofences})
	if err != nil {
		t.Fatalf("Import() error = %v", err)
	}
	if res.Repaired != 1 {
		t.Errorf("Repaired = %d, want 1", res.Repaired)
	}
	rows, err := pool.Query(ctx, `SELECT name, ST_IsValid(geom), ST_NumGeometries(geom), ST_Area(geom),
		(SELECT bool_and(ST_IsValid(p.geom)) FROM geofence_parts p WHERE p.fence_id = g.id)
		FROM geofences g ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type fence struct {
		Name       string
		Valid      bool
		Parts      int
		Area       float64
		PartsValid bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fence])
	if err != nil {
		t.Fatal(err)
	}
	want := []fence{
		{"old bow tie", false, 1, 0, false}, // not this import's: left as it was
		{"bow tie", true, 2, 2, true},       // two triangles of area 1
		{"square", true, 1, 1, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fences (-want +got):\n%s", diff)
	}
}
