package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/importer"
	"github.com/geogate/geogate/internal/pg"
)

// demoVersion changes when the way demo data is loaded changes, so that a
// stale template is not reused.
const demoVersion = "4"

// The demo files and their layers, relative to the repository root.
var demoFiles = []struct {
	path  string
	layer importer.Layer
}{
	{"data/cities.json.gz", importer.Places},
	{"data/countries-land-10km.geo.json.gz", importer.Geofences},
}

// DemoDB returns a pool on a brand-new database holding the current schema
// and the demo data: 171,075 cities in places and 220 countries in
// geofences. It is cloned from a template built once per schema and data
// version, and dropped when the test ends.
func DemoDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, _ := DemoDBWithURL(tb)
	return pool
}

// DemoDBWithURL is DemoDB that also returns the new database's URL.
func DemoDBWithURL(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	return CloneDB(tb, DemoTemplate(tb))
}

// DemoTemplate returns the name of the template database holding the
// schema and the demo data, building it when missing.
func DemoTemplate(tb testing.TB) string {
	tb.Helper()
	root := repoRoot(tb)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", migrationsHash(tb), demoVersion)
	for _, f := range demoFiles {
		hashFile(tb, h, filepath.Join(root, f.path))
	}
	name := "geogate_demo_" + hex.EncodeToString(h.Sum(nil))[:12]
	EnsureTemplate(tb, name, "", func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := pg.Migrate(ctx, pool, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			return err
		}
		for _, f := range demoFiles {
			if err := importFile(ctx, pool, filepath.Join(root, f.path), f.layer); err != nil {
				return err
			}
		}
		return nil
	})
	return name
}

func importFile(ctx context.Context, pool *pgxpool.Pool, path string, layer importer.Layer) error {
	in, err := importer.Open(path, nil)
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := importer.Import(ctx, pool, in, importer.Options{Layer: layer}); err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	// Clones start with the template's statistics, so tests get the
	// plans the service gets once autovacuum has run.
	return importer.Analyze(ctx, pool, importer.Options{Layer: layer})
}

func hashFile(tb testing.TB, h io.Writer, path string) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("demo data: %v", err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatalf("demo data: %v", err)
	}
}

// repoRoot is the repository root, found from this source file's path.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("cannot locate the repository root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
