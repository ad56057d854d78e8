package tiles

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// appConn connects to the database of url as a new role that may only
// read and write public.roads, as an application sharing the database
// would: geogate's triggers must work for it without any right on
// geogate's schema.
func appConn(t *testing.T, db *pgxpool.Pool, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	var dbname string
	if err := db.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	role := "app_" + dbname
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA public TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON public.roads TO " + role,
		"GRANT USAGE ON SEQUENCE public.roads_gid_seq TO " + role,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = db.Exec(context.Background(), "DROP ROLE "+role)
	})
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = role
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestPlainSQLRetiresTilesOfPublishedTables installs exact invalidation
// on a team's table of lines in Web Mercator, warms the tile cache of two
// replicas, then changes the table as an application role with plain SQL:
// INSERT, UPDATE, COPY, DELETE and TRUNCATE. After each commit, the very
// next tile from each replica shows the change.
func TestPlainSQLRetiresTilesOfPublishedTables(t *testing.T) {
	t.Parallel()
	db, url := testenv.UserDBWithURL(t)
	ctx := context.Background()
	did, err := InstallInvalidation(ctx, db, "geogate", "public", "roads")
	if err != nil || !strings.Contains(did, "installed") {
		t.Fatalf("InstallInvalidation = %q, %v; want the triggers installed", did, err)
	}
	if did, err := InstallInvalidation(ctx, db, "geogate", "public", "roads"); err != nil || !strings.Contains(did, "already") {
		t.Fatalf("InstallInvalidation again = %q, %v; want already", did, err)
	}
	if _, err := InstallInvalidation(ctx, db, "geogate", "public", "french_cities"); err == nil || !strings.Contains(err.Error(), "not a table") {
		t.Errorf("InstallInvalidation on a view = %v, want not a table", err)
	}
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t) + ":"
	replicas := []replica{newReplica(t, db, rdb, prefix, replicaOptions{}), newReplica(t, db, rdb, prefix, replicaOptions{})}
	if l := layer(t, replicas[0].svc.r, "roads"); !l.fresh || l.versionKey != "public.roads" {
		t.Fatalf("roads: fresh %v, version key %q; want its versions read from PostgreSQL", l.fresh, l.versionKey)
	}
	app := appConn(t, db, url)
	tl := tileOf(13.41, 52.52, 11)
	path := tilePath("roads", tl)
	refs := func(rp replica) (map[string]bool, string) {
		w := rp.get(t, path)
		got := map[string]bool{}
		switch w.Code {
		case http.StatusNoContent:
		case http.StatusOK:
			for _, l := range decode(t, w.Body.Bytes(), tl) {
				for _, f := range l.Features {
					got[fmt.Sprint(f.Properties["ref"])] = true
				}
			}
		default:
			t.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
		}
		return got, w.Header().Get("X-Cache")
	}
	before, _ := refs(replicas[0])
	if len(before) == 0 {
		t.Fatal("no roads in the tile around Berlin")
	}
	for _, rp := range replicas {
		if _, status := refs(rp); status != "HIT" {
			t.Fatalf("warm GET = %s, want HIT", status)
		}
	}
	line := `ST_Transform(ST_SetSRID(ST_MakeLine(ST_Point(13.40, 52.51), ST_Point(13.42, 52.53)), 4326), 3857)`
	steps := []struct {
		name string
		run  func() error
		want func(map[string]bool) bool
	}{
		{"INSERT", exec(app, "INSERT INTO public.roads (ref, geom) VALUES ('NEW-1', "+line+")"),
			func(m map[string]bool) bool { return m["NEW-1"] }},
		{"UPDATE", exec(app, "UPDATE public.roads SET ref = 'NEW-2' WHERE ref = 'NEW-1'"),
			func(m map[string]bool) bool { return m["NEW-2"] && !m["NEW-1"] }},
		{"COPY", func() error {
			_, err := app.PgConn().CopyFrom(ctx, strings.NewReader("NEW-3\tSRID=3857;LINESTRING(1492000 6890000,1494000 6892000)\n"),
				"COPY public.roads (ref, geom) FROM STDIN")
			return err
		}, func(m map[string]bool) bool { return m["NEW-3"] }},
		{"DELETE", exec(app, "DELETE FROM public.roads WHERE ref LIKE 'NEW-%'"),
			func(m map[string]bool) bool { return !m["NEW-2"] && !m["NEW-3"] && len(m) == len(before) }},
		{"TRUNCATE", exec(app, "TRUNCATE public.roads"),
			func(m map[string]bool) bool { return len(m) == 0 }},
	}
	for _, st := range steps {
		if err := st.run(); err != nil {
			t.Fatalf("%s as the application: %v", st.name, err)
		}
		for i, rp := range replicas {
			got, status := refs(rp)
			if !st.want(got) || status != "MISS" && i == 0 {
				t.Errorf("after %s: replica %d serves %s %v", st.name, i, status, keysOf(got))
			}
		}
	}
	did, err = RemoveInvalidation(ctx, db, "geogate", "public", "roads")
	if err != nil || !strings.Contains(did, "removed") {
		t.Fatalf("RemoveInvalidation = %q, %v", did, err)
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.roads'::regclass").Scan(&n); err != nil || n != 0 {
		t.Errorf("triggers left on roads after removal: %d, %v", n, err)
	}
}

func exec(c *pgx.Conn, sql string) func() error {
	return func() error {
		_, err := c.Exec(context.Background(), sql)
		return err
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, "NEW") {
			out = append(out, k)
		}
	}
	return append(out, fmt.Sprintf("(%d in all)", len(m)))
}
