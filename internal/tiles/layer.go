package tiles

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kind is the geometry family of a layer, which decides its tile SQL.
type Kind string

// The geometry families.
const (
	Points   Kind = "point"
	Lines    Kind = "line"
	Polygons Kind = "polygon"
)

// Field is one feature property of a layer: its name in the tile and the
// SQL expression that reads it.
type Field struct {
	Name string
	// Type is the TileJSON field description: "String" or "Number".
	Type string
	expr string
}

// Layer is a tile layer checked against the database catalog: every
// identifier in its SQL comes from configuration and was found there.
type Layer struct {
	LayerSettings
	Kind   Kind
	Fields []Field
	sql    sqlSet
}

// checkLayer looks l up in the catalog: the table and columns exist, the
// geometry column is in EPSG:4326, and the field names do not collide.
func checkLayer(ctx context.Context, db *pgxpool.Pool, l LayerSettings, extent, buffer int) (*Layer, error) {
	cols, err := tableColumns(ctx, db, l.Table)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("tile layer %s: table %q not found", l.Name, l.Table)
	}
	out := &Layer{LayerSettings: l}
	for _, c := range []string{l.Geom, l.ID, l.Rank} {
		if _, ok := cols[c]; !ok && c != "" {
			return nil, fmt.Errorf("tile layer %s: column %s.%s not found", l.Name, l.Table, c)
		}
	}
	switch cols[l.ID] {
	case "smallint", "integer", "bigint":
	default:
		return nil, fmt.Errorf("tile layer %s: id column %s.%s is %s, want an integer type (it becomes the MVT feature id)", l.Name, l.Table, l.ID, cols[l.ID])
	}
	if out.Kind, err = geometryKind(ctx, db, l); err != nil {
		return nil, err
	}
	// The feature query names its id and geometry columns id and geom.
	seen := map[string]bool{"geom": true, "id": true}
	for _, f := range l.Fields {
		fd, err := field(l, cols, f)
		if err != nil {
			return nil, err
		}
		if seen[fd.Name] {
			return nil, fmt.Errorf("tile layer %s: field name %q used twice (or reserved)", l.Name, fd.Name)
		}
		seen[fd.Name] = true
		out.Fields = append(out.Fields, fd)
	}
	out.sql = buildSQL(out, extent, buffer)
	return out, nil
}

func tableColumns(ctx context.Context, db *pgxpool.Pool, table string) (map[string]string, error) {
	rows, err := db.Query(ctx, `
		SELECT column_name, data_type FROM information_schema.columns c
		JOIN pg_class r ON r.relname = c.table_name AND r.relnamespace::regnamespace::text = quote_ident(c.table_schema)
		WHERE r.oid = to_regclass(quote_ident($1))`, table)
	if err != nil {
		return nil, fmt.Errorf("tile layers: read catalog: %w", err)
	}
	cols := map[string]string{}
	var name, typ string
	_, err = pgx.ForEachRow(rows, []any{&name, &typ}, func() error {
		cols[name] = typ
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tile layers: read catalog: %w", err)
	}
	return cols, nil
}

func geometryKind(ctx context.Context, db *pgxpool.Pool, l LayerSettings) (Kind, error) {
	var typ string
	var srid int
	err := db.QueryRow(ctx, `
		SELECT type, srid FROM geometry_columns g
		JOIN pg_class r ON r.relname = g.f_table_name AND r.relnamespace::regnamespace::text = quote_ident(g.f_table_schema)
		WHERE r.oid = to_regclass(quote_ident($1)) AND g.f_geometry_column = $2`,
		l.Table, l.Geom).Scan(&typ, &srid)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("tile layer %s: %s.%s is not a geometry column", l.Name, l.Table, l.Geom)
	}
	if err != nil {
		return "", fmt.Errorf("tile layer %s: read geometry type: %w", l.Name, err)
	}
	if srid != 4326 {
		return "", fmt.Errorf("tile layer %s: %s.%s has SRID %d, want 4326", l.Name, l.Table, l.Geom, srid)
	}
	switch strings.TrimPrefix(strings.ToUpper(typ), "MULTI") {
	case "POINT":
		return Points, nil
	case "LINESTRING":
		return Lines, nil
	case "POLYGON":
		return Polygons, nil
	}
	return "", fmt.Errorf("tile layer %s: geometry type %s is not supported (use Point, LineString or Polygon, or their Multi forms)", l.Name, typ)
}

// field turns a configured field into its SQL: a column, or a key of the
// jsonb column "properties" read as text.
func field(l LayerSettings, cols map[string]string, f string) (Field, error) {
	if key, ok := strings.CutPrefix(f, "properties."); ok {
		if cols["properties"] != "jsonb" {
			return Field{}, fmt.Errorf("tile layer %s: field %s needs a jsonb column properties", l.Name, f)
		}
		return Field{Name: key, Type: "String", expr: fmt.Sprintf("properties->>'%s'", key)}, nil
	}
	typ, ok := cols[f]
	if !ok {
		return Field{}, fmt.Errorf("tile layer %s: column %s.%s not found", l.Name, l.Table, f)
	}
	t := "String"
	switch typ {
	case "smallint", "integer", "bigint", "real", "double precision", "numeric":
		t = "Number"
	case "boolean":
		t = "Boolean"
	}
	return Field{Name: f, Type: t, expr: quote(f)}, nil
}

// worldBounds is the Web Mercator world in longitude and latitude.
var worldBounds = [4]float64{-180, -85.0511, 180, 85.0511}

// bounds returns the estimated extent of the layer (from planner
// statistics, so cheap); an empty or unanalysed table gets the world.
func bounds(ctx context.Context, db *pgxpool.Pool, l *Layer) [4]float64 {
	var b [4]*float64
	err := db.QueryRow(ctx, `
		SELECT ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e)
		FROM (SELECT ST_EstimatedExtent(n.nspname::text, r.relname::text, $2) AS e
		      FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = to_regclass(quote_ident($1))) s`,
		l.Table, l.Geom).Scan(&b[0], &b[1], &b[2], &b[3])
	if err != nil || b[0] == nil || b[1] == nil || b[2] == nil || b[3] == nil {
		return worldBounds
	}
	return [4]float64{max(-180, *b[0]), max(-85.0511, *b[1]), min(180, *b[2]), min(85.0511, *b[3])}
}

// quote double-quotes an identifier that configuration already limited to
// [a-z0-9_].
func quote(ident string) string { return `"` + ident + `"` }
