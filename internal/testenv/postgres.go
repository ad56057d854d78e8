package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/migrations"
)

// DB returns a pool on a brand-new database holding the current schema,
// dropped when the test ends. It is cloned from a migrated template, so it
// costs a few tens of milliseconds rather than a migration run.
func DB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, _ := DBWithURL(tb)
	return pool
}

// DBWithURL is DB that also returns the new database's URL, for tests that
// start the whole service against it.
func DBWithURL(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	return CloneDB(tb, SchemaTemplate(tb))
}

// CloneDB creates a new database from template and returns a pool on it
// and its URL; the database is dropped when the test ends.
func CloneDB(tb testing.TB, template string) (*pgxpool.Pool, string) {
	tb.Helper()
	admin := Getenv(tb, "TEST_DATABASE_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "geogate_" + Prefix(tb)
	exec(tb, ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template))
	dbURL := withDatabase(tb, admin, name)
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 8, AppName: "geogate-test", Schema: pg.DefaultSchema})
	if err != nil {
		tb.Fatalf("open test database: %v", err)
	}
	tb.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		exec(tb, ctx, admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return pool, dbURL
}

// SchemaTemplate returns the name of a template database migrated to the
// current schema, creating it once per schema version. Its name carries a
// hash of the migration files, so a changed migration gets a new template.
func SchemaTemplate(tb testing.TB) string {
	tb.Helper()
	name := "geogate_tpl_" + migrationsHash(tb)
	EnsureTemplate(tb, name, "", func(ctx context.Context, pool *pgxpool.Pool) error {
		return pg.Migrate(ctx, pool, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	return name
}

// EnsureTemplate creates the template database name, as a copy of the
// template base ("" for an empty database), and fills it with fill, unless
// it already exists. An advisory lock on the server makes this safe for
// test binaries running in parallel.
func EnsureTemplate(tb testing.TB, name, base string, fill func(context.Context, *pgxpool.Pool) error) {
	tb.Helper()
	admin := Getenv(tb, "TEST_DATABASE_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("test database server at TEST_DATABASE_URL is unreachable: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", name); err != nil {
		tb.Fatalf("lock template: %v", err)
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock(hashtext($1))", name) //nolint:errcheck
	var ready bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&ready)
	if err != nil {
		tb.Fatalf("look up template: %v", err)
	}
	if ready {
		return
	}
	build := name + "_build"
	mustExec(tb, ctx, conn, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", build))
	create := fmt.Sprintf("CREATE DATABASE %s", build)
	if base != "" {
		create += " TEMPLATE " + base
	}
	mustExec(tb, ctx, conn, create)
	pool, err := pg.Open(ctx, withDatabase(tb, admin, build), pg.Options{MaxConns: 4, AppName: "geogate-test-template"})
	if err != nil {
		tb.Fatalf("open template: %v", err)
	}
	if err := fill(ctx, pool); err != nil {
		pool.Close()
		tb.Fatalf("fill template %s: %v", name, err)
	}
	pool.Close()
	// Built under another name and renamed at the end, so a template that
	// exists is always complete.
	mustExec(tb, ctx, conn, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", build, name))
	mustExec(tb, ctx, conn, fmt.Sprintf("ALTER DATABASE %s IS_TEMPLATE true", name))
}

func exec(tb testing.TB, ctx context.Context, url, sql string) {
	tb.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("test database server at TEST_DATABASE_URL is unreachable: %v", err)
	}
	defer conn.Close(ctx)
	mustExec(tb, ctx, conn, sql)
}

func mustExec(tb testing.TB, ctx context.Context, conn *pgx.Conn, sql string) {
	tb.Helper()
	if _, err := conn.Exec(ctx, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

func withDatabase(tb testing.TB, raw, db string) string {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + db
	return u.String()
}

func migrationsHash(tb testing.TB) string {
	tb.Helper()
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		tb.Fatalf("hash migrations: %v", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
