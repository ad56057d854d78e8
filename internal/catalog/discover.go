package catalog

import (
	"context"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Settings say what is published; internal/config fills them.
type Settings struct {
	// Schemas are searched for layers, the first one giving the shortest
	// ids (see LayerID).
	Schemas []string
	// Include, when not empty, keeps only the layers that match one of
	// its patterns; Exclude then drops those that match one of its. A
	// pattern is a shell glob (path.Match) matched against the layer id
	// and against schema.table.
	Include, Exclude []string
	// Own is geogate's own schema: never published, and where it finds
	// the triggers that retire tiles.
	Own string
	// Refresh is how often a Catalog looks for changes; 0 never.
	Refresh time.Duration
	// Layers change single layers, by id.
	Layers map[string]LayerSettings
}

// LayerSettings change what is published of one layer.
type LayerSettings struct {
	// Exclude unpublishes the layer.
	Exclude bool
	// Properties, when not nil, are the only columns shown as properties,
	// in this order; names that are not columns are ignored.
	Properties []string
	// AsCaller says the layer's statements run as the caller (see
	// Layer.AsCaller).
	AsCaller bool
	// Write opens the layer for writing (see Layer.Writable).
	Write bool
}

// Matches reports whether a glob pattern names l.
func (l *Layer) Matches(pattern string) bool {
	for _, name := range []string{l.ID, l.Schema + "." + l.Table} {
		if ok, _ := path.Match(pattern, name); ok {
			return true
		}
	}
	return false
}

// Discover reads the published layers from the catalog of db, in schema,
// relation and column order.
func Discover(ctx context.Context, db *pgxpool.Pool, s Settings) ([]*Layer, error) {
	schemas := slices.DeleteFunc(slices.Clone(s.Schemas), func(n string) bool { return n == s.Own })
	if len(schemas) == 0 {
		return nil, nil
	}
	ls, err := geometryColumns(ctx, db, schemas)
	if err != nil {
		return nil, fmt.Errorf("catalog: geometry columns: %w", err)
	}
	ls = slices.DeleteFunc(ls, func(l *Layer) bool { return !s.publishes(l) })
	if len(ls) == 0 {
		return nil, nil
	}
	byRel := map[uint32][]*Layer{}
	for _, l := range ls {
		byRel[l.oid] = append(byRel[l.oid], l)
	}
	for _, step := range []func(context.Context, *pgxpool.Pool, map[uint32][]*Layer, Settings) error{
		columns, keys, spatialIndexes, invalidation, parts,
	} {
		if err := step(ctx, db, byRel, s); err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
	}
	for _, l := range ls {
		if l.SRID == 0 {
			l.SRID = sampledSRID(ctx, db, l)
		}
		l.Bounds = estimatedBounds(ctx, db, l)
	}
	uniqueIDs(ls)
	ls = slices.DeleteFunc(ls, func(l *Layer) bool { return s.Layers[l.ID].Exclude })
	for _, l := range ls {
		if names := s.Layers[l.ID].Properties; names != nil {
			l.Properties, l.Hidden = shown(l.Properties, names)
		}
		// Only a table's rows, named by a key column, can be written to
		// by id; a view or a keyless table stays read-only.
		l.Writable = s.Layers[l.ID].Write && !l.Key.FromRow() && (l.Kind == "table" || l.Kind == "partitioned table")
		if s.Layers[l.ID].AsCaller {
			// The table's statistics are everyone's rows: a caller who
			// may see some of them must not learn how many there are, or
			// where.
			l.AsCaller, l.Bounds, l.Rows = true, nil, -1
			// Its subdivided copy, in geogate's schema, holds every
			// tenant's polygons and is no caller's to read: containment
			// reads the table through its own index, under its policies.
			l.Parts = nil
		}
	}
	return ls, nil
}

// shown splits props into those named, in the order named, and the names
// of the others.
func shown(props []Property, names []string) (kept []Property, hidden []string) {
	for _, n := range names {
		if i := slices.IndexFunc(props, func(p Property) bool { return p.Name == n }); i >= 0 && !slices.ContainsFunc(kept, func(p Property) bool { return p.Name == n }) {
			kept = append(kept, props[i])
		}
	}
	for _, p := range props {
		if !slices.Contains(names, p.Name) {
			hidden = append(hidden, p.Name)
		}
	}
	return kept, hidden
}

func (s Settings) publishes(l *Layer) bool {
	if len(s.Include) > 0 && !slices.ContainsFunc(s.Include, l.Matches) {
		return false
	}
	return !slices.ContainsFunc(s.Exclude, l.Matches)
}

// geometryColumnsSQL lists the geometry and geography columns of the
// relations in $1 the role may read, through PostGIS's own views (which
// know the type and SRID of a column from its type modifier or, for old
// tables, from its constraints).
const geometryColumnsSQL = `
WITH cols AS (
	SELECT f_table_schema AS sch, f_table_name AS rel, f_geometry_column AS col, srid, type, false AS geog
	FROM geometry_columns
	UNION ALL
	SELECT f_table_schema, f_table_name, f_geography_column, srid, type, true
	FROM geography_columns
)
SELECT c.oid, cols.sch, cols.rel, c.relkind::text, cols.col, cols.geog, cols.srid, cols.type, c.reltuples::bigint, c.relhassubclass,
	a.attnum = min(a.attnum) OVER (PARTITION BY c.oid)
FROM cols
JOIN pg_namespace n ON n.nspname = cols.sch
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = cols.rel
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = cols.col
WHERE cols.sch = ANY($1) AND has_column_privilege(c.oid, a.attnum, 'SELECT')
ORDER BY array_position($1, cols.sch::text), cols.rel, a.attnum`

var relKinds = map[string]string{
	"r": "table", "v": "view", "m": "materialized view", "p": "partitioned table", "f": "foreign table",
}

func geometryColumns(ctx context.Context, db *pgxpool.Pool, schemas []string) ([]*Layer, error) {
	rows, err := db.Query(ctx, geometryColumnsSQL, schemas)
	if err != nil {
		return nil, err
	}
	var out []*Layer
	var l Layer
	var kind string
	var first bool
	_, err = pgx.ForEachRow(rows, []any{&l.oid, &l.Schema, &l.Table, &kind, &l.Column, &l.Geography, &l.SRID, &l.GeometryType, &l.Rows, &l.children, &first}, func() error {
		c := l
		c.Kind = relKinds[kind]
		if c.Geography && c.SRID == 0 {
			c.SRID = 4326
		}
		c.GeometryType = normalType(c.GeometryType)
		c.ID = LayerID(schemas[0], c.Schema, c.Table, c.Column, first)
		out = append(out, &c)
		return nil
	})
	return out, err
}

// normalType spells PostGIS's type names as the OGC does: POINT is Point,
// and a measured POLYGONM PolygonM.
func normalType(t string) string {
	for _, n := range []string{"Point", "LineString", "Polygon", "MultiPoint", "MultiLineString", "MultiPolygon", "GeometryCollection", "Geometry"} {
		switch {
		case equalFold(t, n):
			return n
		case equalFold(t, n+"M"):
			return n + "M"
		}
	}
	return t
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

const columnsSQL = `
SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod), t.typname, t.typcategory::text
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped
	AND has_column_privilege(a.attrelid, a.attnum, 'SELECT')
ORDER BY a.attrelid, a.attnum`

// columns fills every layer's properties: the relation's columns but its
// geometry and geography ones.
func columns(ctx context.Context, db *pgxpool.Pool, byRel map[uint32][]*Layer, _ Settings) error {
	rows, err := db.Query(ctx, columnsSQL, relOIDs(byRel))
	if err != nil {
		return err
	}
	var rel uint32
	var name, pgType, typname, category string
	_, err = pgx.ForEachRow(rows, []any{&rel, &name, &pgType, &typname, &category}, func() error {
		if typname == "geometry" || typname == "geography" {
			for _, l := range byRel[rel] {
				if l.Column != name {
					l.OtherGeometries = append(l.OtherGeometries, name)
				}
			}
			return nil
		}
		typ, format := jsonType(typname, category[0])
		for _, l := range byRel[rel] {
			l.Properties = append(l.Properties, Property{Name: name, PGType: pgType, Type: typ, Format: format})
		}
		return nil
	})
	return err
}

// keysSQL lists the single-column primary keys and the unique, not-null,
// plain single-column indexes of the relations in $1, primary keys first.
const keysSQL = `
SELECT i.indrelid, a.attname, format_type(a.atttypid, a.atttypmod), t.typname, t.typcategory::text
FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
JOIN pg_type t ON t.oid = a.atttypid
WHERE i.indrelid = ANY($1) AND i.indnkeyatts = 1 AND i.indkey[0] > 0 AND i.indpred IS NULL
	AND (i.indisprimary OR (i.indisunique AND a.attnotnull))
ORDER BY i.indrelid, i.indisprimary DESC, a.attnum`

// keys names each layer's features by its relation's key, where it has one.
func keys(ctx context.Context, db *pgxpool.Pool, byRel map[uint32][]*Layer, _ Settings) error {
	rows, err := db.Query(ctx, keysSQL, relOIDs(byRel))
	if err != nil {
		return err
	}
	var rel uint32
	var name, pgType, typname, category string
	_, err = pgx.ForEachRow(rows, []any{&rel, &name, &pgType, &typname, &category}, func() error {
		for _, l := range byRel[rel] {
			if !l.Key.FromRow() {
				continue // a primary key came first
			}
			typ, _ := jsonType(typname, category[0])
			if typ != "integer" {
				typ = "string"
			}
			l.Key = Key{Column: name, Type: typ, PGType: pgType}
		}
		return nil
	})
	return err
}

// spatialIndexesSQL lists the columns a GiST, SP-GiST or BRIN index of a
// relation in $1 covers directly.
const spatialIndexesSQL = `
SELECT i.indrelid, a.attname
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
WHERE i.indrelid = ANY($1) AND am.amname IN ('gist', 'spgist', 'brin') AND i.indpred IS NULL`

func spatialIndexes(ctx context.Context, db *pgxpool.Pool, byRel map[uint32][]*Layer, _ Settings) error {
	rows, err := db.Query(ctx, spatialIndexesSQL, relOIDs(byRel))
	if err != nil {
		return err
	}
	var rel uint32
	var col string
	_, err = pgx.ForEachRow(rows, []any{&rel, &col}, func() error {
		for _, l := range byRel[rel] {
			if l.Column == col {
				l.Indexed = true
			}
		}
		return nil
	})
	return err
}

// invalidationSQL lists the relations in $1 on which geogate's tile
// trigger function in schema $2 fires.
const invalidationSQL = `
SELECT DISTINCT tgrelid FROM pg_trigger
WHERE tgrelid = ANY($1) AND tgfoid = to_regprocedure(quote_ident($2) || '.geogate_tiles_bump()')`

func invalidation(ctx context.Context, db *pgxpool.Pool, byRel map[uint32][]*Layer, s Settings) error {
	rows, err := db.Query(ctx, invalidationSQL, relOIDs(byRel), s.Own)
	if err != nil {
		return err
	}
	var rel uint32
	_, err = pgx.ForEachRow(rows, []any{&rel}, func() error {
		for _, l := range byRel[rel] {
			l.Invalidated = true
		}
		return nil
	})
	return err
}

// estimatedBoundsSQL is the extent the planner's statistics give a column,
// in longitude and latitude; NULL without statistics.
const estimatedBoundsSQL = `
SELECT ST_XMin(b), ST_YMin(b), ST_XMax(b), ST_YMax(b) FROM (
	SELECT ST_Transform(ST_Segmentize(ST_SetSRID(e::geometry, $4),
		GREATEST(ST_XMax(e) - ST_XMin(e), ST_YMax(e) - ST_YMin(e), 1e-9) / 16), 4326) AS b
	FROM (SELECT ST_EstimatedExtent($1, $2, $3) AS e) x
	WHERE e IS NOT NULL
) y`

// estimatedBounds asks for a layer's estimated extent; errors (a view,
// statistics PostGIS cannot read) leave it unknown.
func estimatedBounds(ctx context.Context, db *pgxpool.Pool, l *Layer) *Bounds {
	if l.Geography || l.SRID <= 0 {
		return nil
	}
	var b Bounds
	err := db.QueryRow(ctx, estimatedBoundsSQL, l.Schema, l.Table, l.Column, l.SRID).Scan(&b.West, &b.South, &b.East, &b.North)
	if err != nil {
		return nil
	}
	return &b
}

// sampledSRID is the SRID of a column whose type does not say (a view's
// expression), read from one of its rows; 0 when it has none.
func sampledSRID(ctx context.Context, db *pgxpool.Pool, l *Layer) int {
	col := quoteIdent(l.Column)
	var srid int
	err := db.QueryRow(ctx, "SELECT ST_SRID("+col+") FROM "+l.Qualified()+" WHERE "+col+" IS NOT NULL LIMIT 1").Scan(&srid)
	if err != nil {
		return 0
	}
	return srid
}

func relOIDs(byRel map[uint32][]*Layer) []uint32 {
	out := make([]uint32, 0, len(byRel))
	for oid := range byRel {
		out = append(out, oid)
	}
	return out
}
