package pg_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// TestPrepareCallerRoles: a role callers may run as is granted geogate's
// schema and its data versions, nothing else there; a role that does not
// exist is logged, not granted; and PostGIS's && not being LEAKPROOF,
// which leaves spatial indexes unused under row-level security, is
// logged with the statement that changes it.
func TestPrepareCallerRoles(t *testing.T) {
	pool := testenv.DB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `DO $$ BEGIN CREATE ROLE gg_pgtest_caller NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := pg.PrepareCallerRoles(ctx, pool, pg.DefaultSchema, []string{"gg_pgtest_caller", "gg_pgtest_nobody"}, log); err != nil {
		t.Fatal(err)
	}
	var usage, versions, keys bool
	err := pool.QueryRow(ctx, `SELECT has_schema_privilege('gg_pgtest_caller', $1, 'USAGE'),
		has_table_privilege('gg_pgtest_caller', $1 || '.tile_versions', 'SELECT'),
		has_table_privilege('gg_pgtest_caller', $1 || '.api_keys', 'SELECT')`, pg.DefaultSchema).Scan(&usage, &versions, &keys)
	if err != nil {
		t.Fatal(err)
	}
	if !usage || !versions || keys {
		t.Errorf("the caller role: schema usage %v, tile_versions %v, api_keys %v; want true, true, false", usage, versions, keys)
	}
	for _, want := range []string{"role=gg_pgtest_nobody", "ALTER FUNCTION geometry_overlaps(geometry, geometry) LEAKPROOF"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}
