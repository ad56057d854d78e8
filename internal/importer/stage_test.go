package importer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/importer"
	"github.com/geogate/geogate/internal/testenv"
)

// layerShape is what defines a layer besides its rows: what a swap must
// carry over.
const layerShapeSQL = `
SELECT 'index ' || indexdef FROM pg_indexes WHERE tablename = $1
UNION ALL SELECT 'trigger ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal
UNION ALL SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass
UNION ALL SELECT 'sequence ' || pg_get_serial_sequence($1, 'id')
UNION ALL SELECT 'column ' || attname || ' ' || format_type(atttypid, atttypmod) || ' ' || attnotnull || ' ' || attidentity::text
  || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped
UNION ALL SELECT 'table ' || relname FROM pg_class WHERE relname LIKE $1 || '%staging%'
UNION ALL SELECT 'comment ' || obj_description($1::regclass, 'pg_class')
ORDER BY 1`

func layerShape(t *testing.T, pool *pgxpool.Pool, layer importer.Layer) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), layerShapeSQL, string(layer))
	if err != nil {
		t.Fatal(err)
	}
	shape, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return shape
}

func tileVersion(t *testing.T, pool *pgxpool.Pool, layer importer.Layer) int64 {
	t.Helper()
	var v int64
	if err := pool.QueryRow(context.Background(), "SELECT version FROM tile_versions WHERE tbl = 'public.' || $1", string(layer)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func tableOID(t *testing.T, pool *pgxpool.Pool, table string) uint32 {
	t.Helper()
	var oid uint32
	if err := pool.QueryRow(context.Background(), "SELECT $1::regclass::oid", table).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	return oid
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestImportKeepsLayerDefinition replaces and fills layers, also after
// failures, and checks that the layer keeps its indexes, constraints,
// triggers, columns, comment and id sequence, that no staging table is left, that
// the tile version moves on exactly when rows changed, and that the
// triggers still fire for writes after the import.
func TestImportKeepsLayerDefinition(t *testing.T) {
	tests := []struct {
		name       string
		first      string
		then       string
		o          importer.Options
		wantErr    bool
		wantBumped bool
		wantSwap   bool // a new table took the layer's place
	}{
		{"replace", oneCity, twoCities, importer.Options{Replace: true}, false, true, true},
		{"replace with a bad feature", oneCity, badCities, importer.Options{Replace: true}, true, false, false},
		{"fill an empty layer", "", twoCities, importer.Options{}, false, true, true},
		{"fill an empty layer with a bad feature", "", badCities, importer.Options{}, true, false, false},
		{"if-empty on a full layer", oneCity, twoCities, importer.Options{IfEmpty: true}, false, false, false},
		{"append", oneCity, twoCities, importer.Options{}, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := testenv.DB(t)
			// More than the migrations give: a comment, a deferrable
			// unique constraint, an expression index.
			mustExec(t, pool, "COMMENT ON TABLE places IS 'named points'")
			mustExec(t, pool, "ALTER TABLE places ADD CONSTRAINT places_name_key UNIQUE (name) DEFERRABLE")
			mustExec(t, pool, "CREATE INDEX places_lower_name_idx ON places (lower(name))")
			want := layerShape(t, pool, importer.Places)
			if tt.first != "" {
				if _, err := importString(t, pool, tt.first, importer.Options{Layer: importer.Places}); err != nil {
					t.Fatal(err)
				}
			}
			before, oid := tileVersion(t, pool, importer.Places), tableOID(t, pool, "places")
			tt.o.Layer = importer.Places
			if _, err := importString(t, pool, tt.then, tt.o); (err != nil) != tt.wantErr {
				t.Fatalf("Import() error = %v, want error %v", err, tt.wantErr)
			}
			after := tileVersion(t, pool, importer.Places)
			if bumped := after > before; bumped != tt.wantBumped {
				t.Errorf("tile version %d -> %d, want bumped %v", before, after, tt.wantBumped)
			}
			if swapped := tableOID(t, pool, "places") != oid; swapped != tt.wantSwap {
				t.Errorf("layer swapped = %v, want %v", swapped, tt.wantSwap)
			}
			if diff := cmp.Diff(want, layerShape(t, pool, importer.Places)); diff != "" {
				t.Errorf("layer definition changed (-before +after):\n%s", diff)
			}
			mustExec(t, pool, `INSERT INTO places (name, geom) VALUES ('later', ST_SetSRID(ST_MakePoint(0, 0), 4326))`)
			if v := tileVersion(t, pool, importer.Places); v <= after {
				t.Errorf("tile version after an insert = %d, want more than %d", v, after)
			}
		})
	}
}

// TestImportDropsLeftStagingTable leaves a staging table behind, as a
// crash would, and checks that the next import drops it.
func TestImportDropsLeftStagingTable(t *testing.T) {
	pool := testenv.DB(t)
	mustExec(t, pool, "CREATE TABLE public.places_import_staging (LIKE public.places INCLUDING ALL)")
	mustExec(t, pool, "INSERT INTO public.places_import_staging (name, geom) VALUES ('stale', ST_SetSRID(ST_MakePoint(0, 0), 4326))")
	if _, err := importString(t, pool, `[{"name":"new","lat":"1","lng":"1"}]`, importer.Options{Layer: importer.Places, Replace: true}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range readLayer(t, pool, importer.Places) {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"new"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	var left int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_class WHERE relname LIKE 'places_import_staging%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d staging relations left, %v; want 0", left, err)
	}
}

// TestImportReplaceInPlace checks the layers a swap cannot carry over:
// one a view depends on, and geofences, whose row triggers keep
// geofence_parts. They are replaced in place, with the same guarantees.
func TestImportReplaceInPlace(t *testing.T) {
	t.Run("a view on places", func(t *testing.T) {
		t.Parallel()
		pool := testenv.DB(t)
		mustExec(t, pool, "CREATE VIEW place_names AS SELECT name FROM places")
		oid := tableOID(t, pool, "places")
		for _, input := range []string{`[{"name":"a","lat":"1","lng":"1"}]`, `[{"name":"b","lat":"1","lng":"1"},{"name":"c","lat":"2","lng":"2"}]`} {
			if _, err := importString(t, pool, input, importer.Options{Layer: importer.Places, Replace: true}); err != nil {
				t.Fatal(err)
			}
		}
		var names string
		if err := pool.QueryRow(context.Background(), "SELECT string_agg(name, ',' ORDER BY name) FROM place_names").Scan(&names); err != nil || names != "b,c" {
			t.Errorf("view reads %q, %v; want b,c", names, err)
		}
		if tableOID(t, pool, "places") != oid {
			t.Error("places was swapped under its view, want it loaded in place")
		}
	})
	t.Run("geofence_parts", func(t *testing.T) {
		t.Parallel()
		pool := testenv.DB(t)
		square := func(name string, x int) string {
			return fmt.Sprintf(`{"type":"Feature","properties":{"name":%q},"geometry":{"type":"Polygon","coordinates":[[[%d,0],[%d,0],[%d,1],[%d,1],[%d,0]]]}}`,
				name, x, x+1, x+1, x, x)
		}
		before := tileVersion(t, pool, importer.Geofences)
		for _, input := range []string{square("a", 0) + "\n" + square("b", 2), square("c", 4) + "\n" + square("d", 6) + "\n" + square("e", 8)} {
			if _, err := importString(t, pool, input, importer.Options{Layer: importer.Geofences, Replace: true}); err != nil {
				t.Fatal(err)
			}
		}
		if after := tileVersion(t, pool, importer.Geofences); after <= before {
			t.Errorf("geofences tile version %d -> %d, want bumped", before, after)
		}
		// Every fence has parts, and every part a fence, covering it.
		var fences, partFences, orphans, uncovered int
		err := pool.QueryRow(context.Background(), `
SELECT (SELECT count(*) FROM geofences),
       (SELECT count(DISTINCT fence_id) FROM geofence_parts),
       (SELECT count(*) FROM geofence_parts p WHERE NOT EXISTS (SELECT 1 FROM geofences g WHERE g.id = p.fence_id)),
       (SELECT count(*) FROM geofences g WHERE NOT ST_Equals(g.geom,
          (SELECT ST_Union(p.geom) FROM geofence_parts p WHERE p.fence_id = g.id)))`).Scan(&fences, &partFences, &orphans, &uncovered)
		if err != nil || fences != 3 || partFences != 3 || orphans != 0 || uncovered != 0 {
			t.Errorf("fences %d, fences with parts %d, orphan parts %d, fences not covered by their parts %d, %v; want 3, 3, 0, 0",
				fences, partFences, orphans, uncovered, err)
		}
	})
}

// TestImportReplaceReadersDuringSwap runs proximity queries, plain and
// prepared, through the geography index while --replace swaps the layer
// several times: every answer counts the old rows or the new ones, never
// an error.
func TestImportReplaceReadersDuringSwap(t *testing.T) {
	pool := testenv.DB(t)
	ctx := context.Background()
	gen := func(n int, name string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"type":"Feature","properties":{"name":%q},"geometry":{"type":"Point","coordinates":[%g,%g]}}`+"\n",
				name, float64(i%100)/1000, float64(i/100)/1000)
		}
		return b.String()
	}
	sizes := map[string]int{"a": 2000, "b": 3000}
	if _, err := importString(t, pool, gen(sizes["a"], "a"), importer.Options{Layer: importer.Places}); err != nil {
		t.Fatal(err)
	}
	oid := tableOID(t, pool, "places")
	const near = `SELECT min(name), count(*) FROM places
WHERE ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint(0, 0), 4326)::geography, $1)`
	stop := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var name string
				var n int
				err := pool.QueryRow(ctx, near, mode, 1e6).Scan(&name, &n)
				key := fmt.Sprintf("%s=%d", name, n)
				if err != nil {
					key = "error: " + err.Error()
				}
				mu.Lock()
				seen[key]++
				mu.Unlock()
			}
		}()
	}
	for i := range 4 {
		name := []string{"b", "a"}[i%2]
		if _, err := importString(t, pool, gen(sizes[name], name), importer.Options{Layer: importer.Places, Replace: true}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if tableOID(t, pool, "places") == oid {
		t.Error("places was not swapped, want the staged path under test")
	}
	t.Logf("reads: %v", seen)
	reads := 0
	for k, n := range seen {
		reads += n
		if k != "a=2000" && k != "b=3000" {
			t.Errorf("readers saw %q %d times, want only a=2000 or b=3000", k, n)
		}
	}
	if reads < 10 {
		t.Errorf("%d reads during the imports, want at least 10", reads)
	}
}

// TestImportConcurrentReplaces runs replaces of one layer at the same
// time: they take turns, each succeeds, and the layer ends holding exactly
// one input, with no staging table left.
func TestImportConcurrentReplaces(t *testing.T) {
	pool := testenv.DB(t)
	inputs := []string{
		`[{"name":"a","lat":"1","lng":"1"}]`,
		`[{"name":"b","lat":"1","lng":"1"},{"name":"b","lat":"2","lng":"2"}]`,
		`[{"name":"c","lat":"1","lng":"1"},{"name":"c","lat":"2","lng":"2"},{"name":"c","lat":"3","lng":"3"}]`,
	}
	var wg sync.WaitGroup
	errs := make([]error, len(inputs))
	for i, input := range inputs {
		wg.Go(func() {
			in, err := importer.Open("-", strings.NewReader(input)) // as "api import -" reads stdin
			if err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = importer.Import(context.Background(), pool, in, importer.Options{Layer: importer.Places, Replace: true})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Import(input %d) error = %v", i, err)
		}
	}
	var got string
	err := pool.QueryRow(context.Background(), "SELECT string_agg(name, ',' ORDER BY id) FROM places").Scan(&got)
	if want := map[string]bool{"a": true, "b,b": true, "c,c,c": true}; err != nil || !want[got] {
		t.Errorf("places holds %q, %v; want exactly one input", got, err)
	}
	var left int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_class WHERE relname LIKE 'places_import_staging%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d staging relations left, %v; want 0", left, err)
	}
}

// TestImportFailedBuildLeavesLayer gives places a unique name and replaces
// it with rows that share one: the unique index fails to build on the
// staging table, the import fails, the staging table is dropped and the
// layer is as before.
func TestImportFailedBuildLeavesLayer(t *testing.T) {
	pool := testenv.DB(t)
	mustExec(t, pool, "ALTER TABLE places ADD CONSTRAINT places_name_key UNIQUE (name)")
	if _, err := importString(t, pool, `[{"name":"old","lat":"1","lng":"1"}]`, importer.Options{Layer: importer.Places}); err != nil {
		t.Fatal(err)
	}
	oid, version := tableOID(t, pool, "places"), tileVersion(t, pool, importer.Places)
	_, err := importString(t, pool, `[{"name":"twin","lat":"1","lng":"1"},{"name":"twin","lat":"2","lng":"2"}]`,
		importer.Options{Layer: importer.Places, Replace: true})
	if err == nil || !strings.HasPrefix(err.Error(), "build index:") { // staged; in place it is "rebuild index:"
		t.Errorf("Import() error = %v, want a failed index build", err)
	}
	var names []string
	for _, s := range readLayer(t, pool, importer.Places) {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"old"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if tableOID(t, pool, "places") != oid || tileVersion(t, pool, importer.Places) != version {
		t.Error("places was swapped or its tile version bumped by a failed import")
	}
	var left int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_class WHERE relname LIKE 'places_import_staging%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d staging relations left, %v; want 0", left, err)
	}
}
