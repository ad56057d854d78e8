package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/geogate/geogate/migrations"
)

// Schemas name where migrations put what they create.
type Schemas struct {
	// Own holds geogate's own tables (DefaultSchema when empty).
	Own string
	// Data holds the tables of the demo layers and the fences of the
	// geofence API, published like any other (DefaultDataSchema when
	// empty), and PostGIS when it is not installed yet.
	Data string
}

// DefaultDataSchema is where geogate's data tables go unless the first of
// PUBLISH_SCHEMAS says otherwise.
const DefaultDataSchema = "public"

func (s Schemas) orDefault() Schemas {
	if s.Own == "" {
		s.Own = DefaultSchema
	}
	if s.Data == "" {
		s.Data = DefaultDataSchema
	}
	return s
}

// Migrate applies every pending migration. A session advisory lock makes
// it safe for several replicas starting at once. What a database migrated
// before geogate had a schema of its own keeps in the schema of its
// migration history moves into s.Own first (see relocate).
func Migrate(ctx context.Context, pool *pgxpool.Pool, s Schemas, log *slog.Logger) error {
	s = s.orDefault()
	if err := prepareSchema(ctx, pool, s.Own); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	p, db, err := provider(pool, s)
	if err != nil {
		return err
	}
	defer db.Close()
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "dur_ms", r.Duration.Milliseconds())
	}
	return nil
}

// provider returns the migrations with schemas s, their history in
// s.Own.goose_db_version, and the database handle it runs them on, to
// close after use.
func provider(pool *pgxpool.Pool, s Schemas) (*goose.Provider, io.Closer, error) {
	s = s.orDefault()
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, withSchemas(migrations.FS, s),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(s.Own+".goose_db_version")) // unquoted: goose splits it at the dot; config allows plain names only
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, db, nil
}

// prepareSchema creates schema, and moves what geogate keeps into it from
// a database migrated before geogate had a schema of its own (see
// relocate).
func prepareSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// The lock serialises replicas starting at once until goose takes its
	// own.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext('geogate-schema'))"); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext('geogate-schema'))") //nolint:errcheck
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		return relocate(ctx, tx, schema)
	})
}

// relocated is what migrations 1 to 5 created for geogate itself, in the
// schema they ran in, before geogate had a schema of its own.
var relocated = []string{
	"TABLE goose_db_version", "TABLE api_keys", "TABLE geofence_parts", "TABLE tile_versions",
	"FUNCTION geofence_parts_build(bigint, geometry)", "FUNCTION geofence_parts_refresh()",
	"FUNCTION geofence_parts_truncate()", "FUNCTION geogate_tiles_bump()",
}

// relocate moves into schema, rows, indexes and triggers intact (a trigger
// names its function by oid), what a database migrated before geogate had
// a schema of its own keeps in the schema of its migration history; the
// old history table says where that is. A database without one, or with
// it in schema already, is left as it is. Migration 00006 then defines
// the functions again, naming the schema in their bodies.
func relocate(ctx context.Context, tx pgx.Tx, schema string) error {
	var old string
	err := tx.QueryRow(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = 'goose_db_version' AND c.relkind = 'r' AND n.nspname <> $1
		ORDER BY n.nspname = 'public' DESC LIMIT 1`, schema).Scan(&old)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var ready bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass(quote_ident($1) || '.goose_db_version') IS NOT NULL", schema).Scan(&ready); err != nil || ready {
		return err // a history in schema already: the other one is not geogate's
	}
	from, to := pgx.Identifier{old}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	for _, obj := range relocated {
		kind, name, _ := strings.Cut(obj, " ")
		var exists bool
		q := "SELECT to_regclass($1) IS NOT NULL"
		if kind == "FUNCTION" {
			q = "SELECT to_regprocedure($1) IS NOT NULL"
		}
		if err := tx.QueryRow(ctx, q, from+"."+name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			if _, err := tx.Exec(ctx, "ALTER "+kind+" "+from+"."+name+" SET SCHEMA "+to); err != nil {
				return fmt.Errorf("move %s %s into %s: %w", kind, name, schema, err)
			}
		}
	}
	return nil
}

// withSchemas is the migration files of fsys with each {{schema}} and
// {{data}} replaced by the quoted names of s.Own and s.Data: the files
// name the schemas that way, since their names are settings, and never
// leave a name to the search_path (a role's "$user" could make a schema
// named like it the first).
func withSchemas(fsys fs.FS, s Schemas) fs.FS {
	return schemaFS{FS: fsys, replace: strings.NewReplacer(
		"{{schema}}", pgx.Identifier{s.Own}.Sanitize(), "{{data}}", pgx.Identifier{s.Data}.Sanitize())}
}

type schemaFS struct {
	fs.FS
	replace *strings.Replacer
}

func (s schemaFS) Open(name string) (fs.File, error) {
	f, err := s.FS.Open(name)
	if err != nil || !strings.HasSuffix(name, ".sql") {
		return f, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	b = []byte(s.replace.Replace(string(b)))
	return &memFile{Reader: bytes.NewReader(b), info: sizedInfo{FileInfo: info, size: int64(len(b))}}, nil
}

// memFile is a migration file after the replacement.
type memFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64        { return i.size }
func (i sizedInfo) ModTime() time.Time { return i.FileInfo.ModTime() }
