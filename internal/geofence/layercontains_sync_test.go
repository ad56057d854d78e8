package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// appConn connects to the database of url as a new role that may only
// read and write public.countries, with an empty search_path: an
// application's session, for which the copy's triggers must work without
// any right on geogate's schema.
func appConn(t *testing.T, pool *pgxpool.Pool, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	var dbname string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	role := "app_" + dbname
	mustExec(t, pool, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = pool.Exec(context.Background(), "DROP ROLE "+role)
	})
	mustExec(t, pool, "GRANT USAGE ON SCHEMA public TO "+role)
	mustExec(t, pool, "GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON public.countries TO "+role)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = role
	cfg.RuntimeParams["search_path"] = ""
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// partsOf returns the ctids of the copy's parts of key, which change
// whenever they are cut again.
func partsOf(t *testing.T, pool *pgxpool.Pool, l *catalog.Layer, key string) string {
	t.Helper()
	var ctids string
	err := pool.QueryRow(context.Background(), fmt.Sprintf("SELECT coalesce(string_agg(ctid::text, ',' ORDER BY ctid), '') FROM %s WHERE key = $1",
		partsTable(l, "geogate")), key).Scan(&ctids)
	if err != nil {
		t.Fatal(err)
	}
	return ctids
}

// TestContainsCopyFollowsPlainSQL: countries get their copy, then an
// application changes them with plain SQL (INSERT, UPDATE of a geometry,
// of a key and of a property, upsert, COPY, DELETE, a rolled-back
// DELETE, TRUNCATE and a reload). After each commit the copy holds the
// parts of exactly the rows there are, and containment answers what
// ST_Intersects on the table does.
func TestContainsCopyFollowsPlainSQL(t *testing.T) {
	pool, url := testenv.UserDBWithURL(t)
	ctx := context.Background()
	cat, err := catalog.Open(ctx, pool, catalog.Settings{Schemas: testenv.UserSchemas, Own: "geogate"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	did, err := InstallParts(ctx, pool, "geogate", cat.Layer("countries"))
	if err != nil || !strings.Contains(did, "subdivided: copy geogate.parts_countries_") {
		t.Fatalf("InstallParts = %q, %v", did, err)
	}
	if did, err := InstallParts(ctx, pool, "geogate", cat.Layer("countries")); err != nil || !strings.HasPrefix(did, "already subdivided") {
		t.Fatalf("InstallParts again = %q, %v; want already", did, err)
	}
	if _, err := cat.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	l := cat.Layer("countries")
	if l.Parts == nil {
		t.Fatal("countries has no copy after InstallParts")
	}
	svc := New(pg.Runner{Pool: pool, Timeouts: testTimeouts}, cat, Settings{}, nil)
	h := testRouter(svc, testRules, nil)
	mustExec(t, pool, "CREATE TABLE public.countries_saved AS SELECT * FROM public.countries")
	app := appConn(t, pool, url)
	square := func(lng, lat float64) string {
		return fmt.Sprintf("public.ST_Multi(public.ST_Transform(public.ST_MakeEnvelope(%v, %v, %v, %v, 4326), 3857))", lng-0.5, lat-0.5, lng+0.5, lat+0.5)
	}
	pts := [][2]float64{{5, 5}, {6, 6}, {7, 7}, {8, 8}, {13.4, 52.5}}
	for i, p := range pointsFor(t, pool, l) {
		if i%3 == 0 {
			pts = append(pts, p)
		}
	}
	sql := func(q string) func() error {
		return func() error { _, err := app.Exec(ctx, q); return err }
	}
	deu := partsOf(t, pool, l, "DEU")
	steps := []struct {
		name string
		run  func() error
	}{
		{"Insert", sql("INSERT INTO public.countries VALUES ('NEW', 'New', 1, " + square(5, 5) + ")")},
		{"UpdateGeometry", sql("UPDATE public.countries SET geom = " + square(6, 6) + " WHERE iso3 = 'NEW'")},
		{"UpdateKey", sql("UPDATE public.countries SET iso3 = 'NEX' WHERE iso3 = 'NEW'")},
		{"UpdateProperty", sql("UPDATE public.countries SET population = population + 1 WHERE iso3 IN ('DEU', 'NEX')")},
		{"Upsert", sql("INSERT INTO public.countries VALUES ('NEX', 'Next', 2, " + square(7, 7) + "), ('NEY', 'Yet', 3, " + square(8, 8) + `)
			ON CONFLICT (iso3) DO UPDATE SET geom = EXCLUDED.geom`)},
		{"Copy", func() error {
			_, err := app.PgConn().CopyFrom(ctx, strings.NewReader("NEZ\tZ\t4\tSRID=3857;MULTIPOLYGON(((0 0,100000 0,100000 100000,0 100000,0 0)))\n"),
				"COPY public.countries FROM STDIN")
			return err
		}},
		{"Delete", sql("DELETE FROM public.countries WHERE iso3 IN ('FRA', 'NEY')")},
		{"RolledBack", func() error {
			tx, err := app.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM public.countries WHERE iso3 = 'DEU'"); err != nil {
				return err
			}
			return tx.Rollback(ctx)
		}},
		{"Truncate", sql("TRUNCATE public.countries")},
		{"Reload", func() error {
			_, err := pool.Exec(ctx, "INSERT INTO public.countries SELECT * FROM public.countries_saved")
			return err
		}},
	}
	for _, st := range steps {
		if err := st.run(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if orphans, missing := copyDrift(t, pool, l); orphans+missing > 0 {
			t.Errorf("after %s: the copy has parts of %d keys the table lacks, none of %d rows it has", st.name, orphans, missing)
		}
		want := independentContains(t, pool, l, pts)
		got := batchContains(t, h, "countries", pts)
		for i := range pts {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Errorf("after %s: contains %v = %v, want %v", st.name, pts[i], got[i], want[i])
			}
		}
		if st.name == "UpdateProperty" {
			if now := partsOf(t, pool, l, "DEU"); now != deu {
				t.Errorf("an update of a property cut DEU again: parts %s, were %s", now, deu)
			}
		}
	}
	if got := batchContains(t, h, "countries", [][2]float64{{13.4, 52.5}}); fmt.Sprint(got) != "[[DEU]]" {
		t.Errorf("after the reload: Berlin is in %v, want DEU", got)
	}
}

// copyDrift counts the keys the copy has parts of that the table has no
// row of, and the rows with polygons the copy has no part of.
func copyDrift(t *testing.T, pool *pgxpool.Pool, l *catalog.Layer) (orphans, missing int) {
	t.Helper()
	err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT
		(SELECT count(DISTINCT key) FROM %[1]s p WHERE NOT EXISTS (SELECT FROM %[2]s l WHERE l.iso3 = p.key)),
		(SELECT count(*) FROM %[2]s l WHERE NOT ST_IsEmpty(l.geom) AND NOT EXISTS (SELECT FROM %[1]s p WHERE p.key = l.iso3))`,
		partsTable(l, "geogate"), l.Qualified())).Scan(&orphans, &missing)
	if err != nil {
		t.Fatal(err)
	}
	return orphans, missing
}

// TestContainsUsesTheLayersIndex reads the plans of the point-in-polygon
// and crossing statements, custom and generic: without a copy, the layer
// is searched through its own spatial index in its SRID (state plane
// feet, Web Mercator, geography); with one, the copy through its spatial
// index, and the layer is looked up by key for each part found. Neither
// is read whole for the spatial test, and nothing is hashed: a hash of
// the layer costs every batch a read of all its keys.
func TestContainsUsesTheLayersIndex(t *testing.T) {
	pool, cat, svc, _ := containsService(t)
	check := func(t *testing.T, layer, index, notScanned string) {
		l, err := svc.polygonLayer(layer)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			for _, stmt := range []struct {
				sql  string
				args []any
			}{
				{l.containsBatch, []any{[]float64{13.4, -73.98, 2.35}, []float64{52.5, 40.75, 48.85}}},
				{l.containsOne, []any{13.4, 52.5}},
				{l.crossesBatch, []any{[]float64{13.4, 2.35}, []float64{52.5, 48.85}, []float64{13.5, 2.4}, []float64{52.6, 48.9}}},
			} {
				indexes := planIndexes(t, pool, mode, stmt.sql, stmt.args)
				t.Logf("%s: %s", mode, indexes)
				if !strings.Contains(indexes, index) {
					t.Errorf("%s: the plan reads %s, want %s", mode, indexes, index)
				}
				if strings.Contains(indexes, "Seq Scan on "+notScanned) {
					t.Errorf("%s: the plan reads %s whole: %s", mode, notScanned, indexes)
				}
				if strings.Contains(indexes, "Hash") {
					t.Errorf("%s: the plan hashes a relation for every batch: %s", mode, indexes)
				}
			}
		}
	}
	for _, c := range []struct{ layer, index string }{
		{"parcels", "parcels_geom_idx"},
		{"countries", "countries_geom_idx"},
		{"zones", "zones_geog_idx"},
	} {
		t.Run("Direct/"+c.layer, func(t *testing.T) { check(t, c.layer, c.index, c.layer) })
	}
	subdivide(t, pool, cat)
	for _, layer := range []string{"parcels", "countries"} {
		parts := cat.Layer(layer).Parts.Table
		t.Run("Subdivided/"+layer, func(t *testing.T) { check(t, layer, parts+"_geom_idx", parts) })
	}
}

// planIndexes is a summary of the plan of sql under plan_cache_mode mode:
// the index each scan reads, or "Seq Scan on" the relation it reads whole
// (function scans aside), and "Hash" for each relation it hashes.
func planIndexes(t *testing.T, pool *pgxpool.Pool, mode, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "RESET plan_cache_mode") //nolint:errcheck
	var out []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil {
		t.Fatal(err)
	}
	var seen []string
	plans[0].Plan.walk(func(n planNode) {
		switch {
		case n.IndexName != "":
			seen = append(seen, n.IndexName)
		case n.NodeType == "Seq Scan":
			seen = append(seen, "Seq Scan on "+n.Relation)
		case n.NodeType == "Hash":
			seen = append(seen, "Hash")
		}
	})
	return strings.Join(seen, ", ")
}
