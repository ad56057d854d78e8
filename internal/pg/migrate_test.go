package pg_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

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
	sqlDB := stdlib.OpenDBFromPool(db)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("migrate down to 4: %v", err)
	}
	var id int64
	err = db.QueryRow(ctx, `INSERT INTO geofences (name, geom)
		VALUES ('bow tie', ST_Multi(ST_GeomFromText('POLYGON((0 0, 2 2, 2 0, 0 2, 0 0))', 4326))) RETURNING id`).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Migrate(ctx, db, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
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
