// Package importer loads GeoJSON FeatureCollections, newline-delimited
// GeoJSON and JSON arrays of cities records into the places and geofences
// layers. Input is streamed: memory stays flat whatever the file size.
// Rows go to PostgreSQL through binary COPY; an import either loads
// completely or leaves the layer as it was.
package importer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Layer is a table features are imported into.
type Layer string

// The layers. Places holds Points, Geofences MultiPolygons (Polygons are
// promoted).
const (
	Places    Layer = "places"
	Geofences Layer = "geofences"
)

// DefaultSchema holds the layers' tables unless Options.Schema says
// otherwise.
const DefaultSchema = "public"

// schema is the layer's schema.
func (o Options) schema() string {
	if o.Schema == "" {
		return DefaultSchema
	}
	return o.Schema
}

// qualified is the quoted name of the table name in the layer's schema.
func (o Options) qualified(name string) string { return pgx.Identifier{o.schema(), name}.Sanitize() }

// ParseLayer returns the layer named s.
func ParseLayer(s string) (Layer, error) {
	switch l := Layer(s); l {
	case Places, Geofences:
		return l, nil
	}
	return "", fmt.Errorf("unknown layer %q: want places or geofences", s)
}

// Options say how to import.
type Options struct {
	Layer Layer
	// Schema holds the layer's table (DefaultSchema when empty).
	Schema string
	// Replace swaps the layer's whole content for the input's in one
	// transaction. Readers of the layer see the old content or the new,
	// never an empty or half loaded layer; they wait only for the swap
	// when the layer is staged (see Import), else for the whole import.
	Replace bool
	// IfEmpty imports nothing when the layer already has rows.
	IfEmpty bool
	// SkipBad skips features that cannot be loaded instead of rolling the
	// whole import back. Input that is not valid JSON as a whole (a broken
	// FeatureCollection) still stops the import.
	SkipBad bool
	// NameProperty is the property that gives each feature its name. When
	// empty: "name", "NAME" or "Name", else the first string property,
	// else the feature id, else "".
	NameProperty string
}

// Result reports an import.
type Result struct {
	Format Format
	// Rows is the number of rows loaded.
	Rows int64
	// Skipped counts the features skipped with SkipBad; Bad holds the
	// first maxReported of them.
	Skipped int
	Bad     []*FeatureError
	// NotEmpty is set when IfEmpty found rows and nothing was imported.
	NotEmpty bool
	// Repaired counts the polygons loaded invalid (self-intersecting
	// rings, say) and stored in their ST_MakeValid form.
	Repaired int64
}

// maxReported bounds Result.Bad.
const maxReported = 100

// ErrEmptyInput means the input held no bytes at all.
var ErrEmptyInput = errors.New("input is empty")

// Import reads features from r and loads them into the layer. A bad
// feature is returned as a *FeatureError naming its position, and nothing
// is loaded unless SkipBad is set.
//
// Imports of one layer run one at a time. Replacing a layer, or filling an
// empty one, loads a staging table and swaps it in (see stage) when the
// layer's definition allows; otherwise, and when appending, the rows go
// into the layer itself in one transaction.
func Import(ctx context.Context, pool *pgxpool.Pool, r io.Reader, o Options) (Result, error) {
	if _, err := ParseLayer(string(o.Layer)); err != nil {
		return Result{}, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("database: %w", err)
	}
	defer conn.Release()
	unlock, err := lockLayer(ctx, conn.Conn(), o.Layer)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	staged, err := canStage(ctx, conn.Conn(), o)
	if err != nil {
		return Result{}, err
	}
	if staged {
		return importStaged(ctx, conn.Conn(), pool.Config().ConnConfig, r, o)
	}
	return importInPlace(ctx, conn.Conn(), r, o)
}

// importInPlace loads the rows into the layer itself, in one transaction.
func importInPlace(ctx context.Context, conn *pgx.Conn, r io.Reader, o Options) (Result, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("database: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	table := o.qualified(string(o.Layer))
	l := &loader{tx: tx, layer: o.Layer, layerTable: table, table: table}
	bulk, proceed, err := l.prepare(ctx, o)
	if err != nil || !proceed {
		return Result{NotEmpty: !proceed && err == nil}, err
	}
	res, err := l.load(ctx, r, o, bulk)
	if err != nil {
		return res, err
	}
	if err := l.finish(ctx); err != nil {
		res.Rows = 0
		return res, err
	}
	if err := tx.Commit(ctx); err != nil {
		res.Rows = 0
		return res, fmt.Errorf("commit: %w", err)
	}
	return res, nil
}

// load parses the input and copies its rows into l.table, with ids from
// the layer's sequence. res.Rows is set only when everything was copied.
func (l *loader) load(ctx context.Context, r io.Reader, o Options, bulk bool) (Result, error) {
	src, err := newSource(r)
	if err != nil {
		return Result{}, err
	}
	res := Result{Format: src.format()}
	first, err := l.firstID(ctx)
	if err != nil {
		return res, err
	}
	p := newPipeline(ctx, src, &converter{layer: o.Layer, nameProp: o.NameProperty}, o.SkipBad, first)
	n, copyErr := l.copy(ctx, p, bulk, first)
	perr := p.wait()
	res.Skipped, res.Bad = p.skipped, p.bad
	if perr != nil { // the input's error explains a failed COPY
		return res, perr
	}
	if copyErr != nil {
		return res, copyErr
	}
	if o.Layer == Geofences {
		if res.Repaired, err = l.repairPolygons(ctx, first); err != nil {
			return res, err
		}
	}
	res.Rows = n
	return res, nil
}

// repairPolygons stores the invalid fences among those just loaded (ids
// from first on) in their ST_MakeValid form, polygons only. Borders
// simplified for the web often cross themselves, and GEOS throws on some
// predicates over an invalid polygon, which would turn a later query into
// an error. The API refuses invalid fences outright; a bulk load repairs
// them and says how many.
func (l *loader) repairPolygons(ctx context.Context, first int64) (int64, error) {
	tag, err := l.tx.Exec(ctx, "UPDATE "+l.table+
		" SET geom = ST_Multi(ST_CollectionExtract(ST_MakeValid(geom), 3)) WHERE id >= $1 AND NOT ST_IsValid(geom)", first)
	if err != nil {
		return 0, fmt.Errorf("repair invalid polygons: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Analyze refreshes the planner's statistics for the layer of o. Import
// leaves that to autovacuum; call it when queries follow at once (test
// templates).
func Analyze(ctx context.Context, pool *pgxpool.Pool, o Options) error {
	if _, err := ParseLayer(string(o.Layer)); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+o.qualified(string(o.Layer))); err != nil {
		return fmt.Errorf("analyze %s: %w", o.Layer, err)
	}
	return nil
}
