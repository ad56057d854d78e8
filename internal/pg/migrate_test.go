package pg_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
	"github.com/geogate/geogate/migrations"
)

// TestMigrationRepairsInvalidGeofences: a database holding an invalid fence
// from before the importer repaired them (a bow tie, stored with plain SQL)
// gets it back valid, with both lobes, from the next migration, and its
// subdivided parts follow.
func TestMigrationRepairsInvalidGeofences(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	p, closer, err := pg.Provider(db, pg.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("migrate down to 4: %v", err)
	}
	var id int64
	err = db.QueryRow(ctx, `INSERT INTO geofences (name, geom)
		VALUES ('bow tie', ST_Multi(ST_GeomFromText('POLYGON((0 0, 2 2, 2 0, 0 2, 0 0))', 4326))) RETURNING id`).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Migrate(ctx, db, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	var valid bool
	var area float64
	var inLeftLobe int
	err = db.QueryRow(ctx, `SELECT ST_IsValid(f.geom), ST_Area(f.geom),
		(SELECT count(*) FROM geofence_parts p WHERE p.fence_id = f.id AND ST_Intersects(p.geom, ST_SetSRID(ST_Point(0.3, 1), 4326)))
		FROM geofences f WHERE f.id = $1`, id).Scan(&valid, &area, &inLeftLobe)
	if err != nil {
		t.Fatal(err)
	}
	if !valid || math.Abs(area-2) > 1e-9 || inLeftLobe != 1 {
		t.Errorf("after the migration: valid %v, area %v, parts holding (0.3, 1): %d; want true, 2 (both lobes), 1", valid, area, inLeftLobe)
	}
}

// TestMigrateFromBeforeGeogatesSchema migrates a database laid out as
// before geogate had a schema of its own (migrations 1-5 in the schema they
// ran in, their history in public.goose_db_version), holding a key, a
// place and a fence: geogate's tables move into the geogate schema with
// their rows, the user's tables stay, and the triggers keep working for a
// writer whose search_path does not name geogate's schema.
func TestMigrateFromBeforeGeogatesSchema(t *testing.T) {
	t.Parallel()
	_, url := testenv.CloneDB(t, "template0") // an empty database
	ctx := context.Background()
	plain, err := pg.Open(ctx, url, pg.Options{MaxConns: 2}) // the server's search_path, as migrations always ran
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	sqlDB := stdlib.OpenDBFromPool(plain)
	defer sqlDB.Close()
	before, err := goose.NewProvider(goose.DialectPostgres, sqlDB, pg.WithSchemas(migrations.FS, pg.Schemas{Own: "public", Data: "public"}), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := before.UpTo(ctx, 5); err != nil {
		t.Fatalf("the migrations of before, up to 5: %v", err)
	}
	mustExec(t, plain, `INSERT INTO api_keys (id, secret_hash, scopes) VALUES ('old-key', sha256('s'), '{proximity:read}')`)
	mustExec(t, plain, `INSERT INTO places (name, geom) VALUES ('p', ST_SetSRID(ST_Point(1, 1), 4326))`)
	mustExec(t, plain, `INSERT INTO geofences (name, geom) VALUES ('f', ST_Multi(ST_MakeEnvelope(0, 0, 2, 2, 4326)))`)

	if err := pg.Migrate(ctx, plain, pg.Schemas{Own: "geogate", Data: "public"}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	for _, tc := range []struct{ what, sql, want string }{
		{"where the tables are", `SELECT string_agg(n.nspname || '.' || c.relname, ',' ORDER BY n.nspname, c.relname)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind = 'r' AND c.relname IN ('api_keys', 'tile_versions', 'geofence_parts', 'goose_db_version', 'places', 'geofences')`,
			"geogate.api_keys,geogate.geofence_parts,geogate.goose_db_version,geogate.tile_versions,public.geofences,public.places"},
		{"geogate's functions of before", `SELECT string_agg(p.oid::regprocedure::text, ',' ORDER BY p.oid::regprocedure::text) FROM pg_proc p
			WHERE p.pronamespace = 'geogate'::regnamespace AND p.proname IN
			('geofence_parts_build', 'geofence_parts_refresh', 'geofence_parts_truncate', 'geogate_tiles_bump')`,
			"geofence_parts_build(bigint,geometry),geofence_parts_refresh(),geofence_parts_truncate(),geogate_tiles_bump()"},
		{"nothing of geogate's functions left in public", `SELECT count(*)::text FROM pg_proc p
			WHERE p.pronamespace = 'public'::regnamespace AND p.proname IN
			('geofence_parts_build', 'geofence_parts_refresh', 'geofence_parts_truncate', 'geogate_tiles_bump')`, "0"},
		{"the history", `SELECT max(version_id)::text FROM geogate.goose_db_version`, lastMigration(t)},
		{"the key", `SELECT id || ' ' || array_to_string(scopes, ',') FROM geogate.api_keys`, "old-key proximity:read"},
		{"the fence's parts", `SELECT count(*)::text FROM geogate.geofence_parts`, "1"},
	} {
		var got string
		if err := plain.QueryRow(ctx, tc.sql).Scan(&got); err != nil || got != tc.want {
			t.Errorf("%s: %q (%v), want %q", tc.what, got, err, tc.want)
		}
	}
	// Plain SQL from a session that knows nothing of geogate's schema.
	var before5 int64
	if err := plain.QueryRow(ctx, `SELECT version FROM geogate.tile_versions WHERE tbl = 'public.places'`).Scan(&before5); err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, plain, func(tx pgx.Tx) error {
		// An application's session: only public on its search_path (the
		// test role's "$user" would otherwise name geogate's schema).
		_, err := tx.Exec(ctx, `SET LOCAL search_path = public;
			INSERT INTO places (name, geom) VALUES ('q', ST_SetSRID(ST_Point(2, 2), 4326));
			INSERT INTO geofences (name, geom) VALUES ('g', ST_Multi(ST_MakeEnvelope(5, 5, 6, 6, 4326)))`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var after5, parts int64
	err = plain.QueryRow(ctx, `SELECT (SELECT version FROM geogate.tile_versions WHERE tbl = 'public.places'),
		(SELECT count(*) FROM geogate.geofence_parts)`).Scan(&after5, &parts)
	if err != nil || after5 != before5+1 || parts != 2 {
		t.Errorf("after plain inserts: places version %d (%v), parts %d; want %d and 2", after5, err, parts, before5+1)
	}
	// Migrating again changes nothing.
	if err := pg.Migrate(ctx, plain, pg.Schemas{Own: "geogate", Data: "public"}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Migrate() again = %v", err)
	}
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// lastMigration is the version of the newest migration file.
func lastMigration(t *testing.T) string {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	v, _, _ := strings.Cut(files[len(files)-1], "_")
	return strings.TrimLeft(v, "0")
}

// TestMigrationAddsKeyLayers: keys created before migration 10 keep
// working after it, with NULL layers (every layer); the new column takes
// lists of layers and refuses an empty one; and it goes away again down.
func TestMigrationAddsKeyLayers(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	p, closer, err := pg.Provider(db, pg.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	hasLayers := func() bool {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = 'api_keys' AND column_name = 'layers'`, pg.DefaultSchema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if _, err := p.DownTo(ctx, 9); err != nil || hasLayers() {
		t.Fatalf("migrate down to 9: %v, layers column left: %v", err, hasLayers())
	}
	mustExec(t, db, `INSERT INTO api_keys (id, secret_hash, scopes, tier) VALUES ('old-key', sha256('old-secret'), '{tiles:read}', 'gold')`)
	if err := pg.Migrate(ctx, db, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}

	s := auth.NewStore(db)
	k, err := s.ByHash(ctx, auth.HashSecret("old-secret"))
	if err != nil {
		t.Fatalf("ByHash(old key) after the migration = %v", err)
	}
	if k.ID != "old-key" || k.Tier != "gold" || k.Layers != nil || k.Usable(time.Now()) != nil {
		t.Errorf("old key after the migration = %+v, want old-key, gold, usable, Layers nil", k)
	}
	if _, err := s.Create(ctx, auth.CreateOptions{Key: auth.Key{ID: "new-key", Layers: []string{"roads"}}, Secret: "new-secret"}); err != nil {
		t.Fatalf("Create(a key with layers) after the migration = %v", err)
	}
	for _, bad := range []string{`'{}'`, `'{roads,NULL}'`} {
		_, err := db.Exec(ctx, `UPDATE api_keys SET layers = `+bad+` WHERE id = 'old-key'`)
		if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "23514" {
			t.Errorf("layers = %s: %v, want a check violation", bad, err)
		}
	}

	if _, err := p.DownTo(ctx, 9); err != nil || hasLayers() {
		t.Errorf("migrate down to 9 again: %v, layers column left: %v", err, hasLayers())
	}
}

// TestMigrationAddsKeyAdmin: keys created before migration 12 keep working
// after it, without overrides or a previous secret; a write to api_keys
// notifies geogate_keys with the key's id when it commits (a TRUNCATE
// with an empty payload); admin_audit takes entries; and down removes it
// all again.
func TestMigrationAddsKeyAdmin(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	p, closer, err := pg.Provider(db, pg.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	present := func() (columns, tables int) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'api_keys'
			   AND column_name IN ('overrides', 'previous_secret_hash', 'previous_secret_until')),
			(SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'admin_audit')`,
			pg.DefaultSchema).Scan(&columns, &tables); err != nil {
			t.Fatal(err)
		}
		return columns, tables
	}
	if _, err := p.DownTo(ctx, 11); err != nil {
		t.Fatalf("migrate down to 11: %v", err)
	}
	if c, n := present(); c != 0 || n != 0 {
		t.Fatalf("after down to 11: %d new columns and %d audit tables left", c, n)
	}
	mustExec(t, db, `INSERT INTO api_keys (id, secret_hash, scopes) VALUES ('old-key', sha256('old-secret'), '{tiles:read}')`)
	if err := pg.Migrate(ctx, db, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	if c, n := present(); c != 3 || n != 1 {
		t.Fatalf("after the migration: %d of 3 new columns and %d of 1 audit tables", c, n)
	}

	s := auth.NewStore(db)
	k, err := s.ByHash(ctx, auth.HashSecret("old-secret"))
	if err != nil || k.ID != "old-key" || k.Overrides != nil || k.PreviousSecretUntil != nil || k.Usable(time.Now()) != nil {
		t.Fatalf("old key after the migration = %+v, %v; want usable, without overrides or a previous secret", k, err)
	}

	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN geogate_keys"); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("waiting for a notification: %v", err)
		}
		return n.Payload
	}
	for _, tc := range []struct {
		name, sql, want string
	}{
		{"Insert", `INSERT INTO api_keys (id, secret_hash) VALUES ('new-key', sha256('new-secret'))`, "new-key"},
		{"Update", `UPDATE api_keys SET revoked_at = now() WHERE id = 'old-key'`, "old-key"},
		{"Delete", `DELETE FROM api_keys WHERE id = 'new-key'`, "new-key"},
		{"Truncate", `TRUNCATE api_keys`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustExec(t, db, tc.sql)
			if got := next(); got != tc.want {
				t.Errorf("%s: notified %q, want %q", tc.sql, got, tc.want)
			}
		})
	}
	t.Run("RolledBack", func(t *testing.T) {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO api_keys (id, secret_hash) VALUES ('never', sha256('never'))`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, `INSERT INTO api_keys (id, secret_hash) VALUES ('after', sha256('after'))`)
		if got := next(); got != "after" {
			t.Errorf("after a rolled-back insert and a committed one: notified %q, want only %q", got, "after")
		}
	})
	mustExec(t, db, `INSERT INTO admin_audit (actor_kind, actor_id, action, key_id, changes) VALUES ('cli', 'root', 'revoke', 'old-key', '{}')`)
	if _, err := db.Exec(ctx, `INSERT INTO admin_audit (actor_kind, actor_id, action, key_id) VALUES ('cli', 'root', 'drop', 'old-key')`); err == nil {
		t.Errorf("an audit entry with an unknown action was taken")
	}

	if _, err := p.DownTo(ctx, 11); err != nil {
		t.Fatalf("migrate down to 11 again: %v", err)
	}
	if c, n := present(); c != 0 || n != 0 {
		t.Errorf("after down to 11 again: %d new columns and %d audit tables left", c, n)
	}
}

// TestMigrationIndexesCopiesWithSPGiST: migration 20 gives the fences'
// subdivided copy and a layer's copy made before it (found through its
// layer_parts_sync trigger) an SP-GiST index in place of their GiST one,
// the copy still answers through it, and down gives the fences' copy its
// GiST index back.
func TestMigrationIndexesCopiesWithSPGiST(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	p, closer, err := pg.Provider(db, pg.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if _, err := p.DownTo(ctx, 19); err != nil {
		t.Fatalf("migrate down to 19: %v", err)
	}
	methods := func(table string) string {
		t.Helper()
		var got string
		if err := db.QueryRow(ctx, `
SELECT coalesce(string_agg(a.amname::text, ',' ORDER BY a.amname), '')
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = $1::regclass AND a.amname IN ('gist', 'spgist')`, table).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	mustExec(t, db, `
CREATE TABLE public.old_lakes (id integer PRIMARY KEY, geom geometry(Polygon, 4326));
CREATE TABLE geogate.old_lakes_parts (key integer NOT NULL, geom geometry(Geometry, 4326) NOT NULL);
CREATE INDEX ON geogate.old_lakes_parts USING gist (geom);
CREATE TRIGGER old_lakes_parts_insert AFTER INSERT ON public.old_lakes REFERENCING NEW TABLE AS geogate_new
  FOR EACH STATEMENT EXECUTE FUNCTION geogate.layer_parts_sync('old_lakes_parts', 'id', 'geom')`)
	if got := methods("geogate.old_lakes_parts"); got != "gist" {
		t.Fatalf("the copy before the migration is indexed by %q, want gist", got)
	}
	if err := pg.Migrate(ctx, db, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	for _, table := range []string{"geogate.geofence_parts", "geogate.old_lakes_parts"} {
		if got := methods(table); got != "spgist" {
			t.Errorf("%s after the migration is indexed by %q, want spgist alone", table, got)
		}
	}
	mustExec(t, db, `INSERT INTO public.old_lakes VALUES (1, ST_MakeEnvelope(10, 10, 11, 11, 4326))`)
	var key int
	if err := db.QueryRow(ctx, `SELECT key FROM geogate.old_lakes_parts WHERE ST_Intersects(geom, ST_SetSRID(ST_MakePoint(10.5, 10.5), 4326))`).Scan(&key); err != nil || key != 1 {
		t.Errorf("the copy's part under a point = %d, %v; want 1", key, err)
	}
	if _, err := p.DownTo(ctx, 19); err != nil {
		t.Fatalf("migrate down to 19 again: %v", err)
	}
	if got := methods("geogate.geofence_parts"); got != "gist" {
		t.Errorf("the fences' copy after down to 19 is indexed by %q, want gist", got)
	}
}
