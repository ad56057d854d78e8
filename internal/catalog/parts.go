package catalog

import (
	"bytes"
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Parts is a subdivided copy of a layer's polygons in geogate's own schema,
// kept exact by triggers on the layer's table in every writing transaction
// (api publish --contains; the built-in fences have one of their own).
// Point-in-polygon checks read it instead of the whole polygons: a country
// border has thousands of vertices, each part at most 256.
type Parts struct {
	// Table is the copy's name in geogate's schema (Settings.Own).
	Table string
	// Key is its column holding the feature's key, the layer's Key.Column;
	// its geometry column is geom, in the layer's SRID.
	Key string
}

// Polygonal reports whether the layer's column may hold polygons: a
// Polygon or MultiPolygon column, a curved one (CurvePolygon,
// MultiSurface: its arcs are cut into straight segments, see Linear), or a
// GeometryCollection or generic Geometry one, of whose rows only the
// polygons count.
func (l *Layer) Polygonal() bool {
	// PostGIS names measured types with a trailing M (PolygonM); the
	// catalog spells curved types as PostGIS does (CURVEPOLYGON).
	switch strings.ToUpper(strings.TrimSuffix(l.GeometryType, "M")) {
	case "POLYGON", "MULTIPOLYGON", "CURVEPOLYGON", "MULTISURFACE", "GEOMETRYCOLLECTION", "GEOMETRY":
		return true
	}
	return false
}

// ContainsPath says how a point-in-polygon check reads the layer:
// "subdivided" through its Parts, "index" through its own spatial index,
// "scan" by reading every row, and "" for a layer without polygons.
func (l *Layer) ContainsPath() string {
	switch {
	case !l.Polygonal():
		return ""
	case l.Parts != nil:
		return "subdivided"
	case l.Indexed:
		return "index"
	}
	return "scan"
}

// PartsSyncFunction, in geogate's schema, is the statement trigger of api
// publish --contains; its arguments are the copy's name, the key column and
// the geometry column. The fences' copy has row triggers of its own
// (geofence_parts_refresh, migration 00003).
const PartsSyncFunction = "layer_parts_sync"

// partsSQL lists the enabled triggers on the relations in $1 that call one
// of geogate's copy functions in schema $2: the function, the trigger's
// event bits and its arguments.
const partsSQL = `
SELECT t.tgrelid, p.proname::text, t.tgtype::int, t.tgargs
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid = ANY($1) AND t.tgenabled IN ('O', 'A')
	AND p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = $2)
	AND p.proname IN ('layer_parts_sync', 'geofence_parts_refresh')`

// copyKeysSQL lists, of the tables named $2 in schema $1 that the role may
// read, the key column (key, or the fences' fence_id) and its type.
const copyKeysSQL = `
SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname IN ('key', 'fence_id') AND NOT a.attisdropped
WHERE n.nspname = $1 AND c.relname = ANY($2) AND c.relkind = 'r' AND has_table_privilege(c.oid, 'SELECT')`

// Trigger event bits of pg_trigger.tgtype.
const (
	tgInsert   = 1 << 2
	tgDelete   = 1 << 3
	tgUpdate   = 1 << 4
	tgTruncate = 1 << 5
)

// copyTriggers is what the triggers of one copy say: its table, key
// column and geometry column, on one relation.
type copyTriggers struct {
	rel          uint32
	copy, key, g string
}

// parts finds each layer's copy: all four of its triggers in place and
// enabled, for the layer's column and key, and the copy readable. A
// relation with inheritance children has none: their rows are the
// parent's to a query, but their writes fire no trigger of the parent.
func parts(ctx context.Context, db *pgxpool.Pool, byRel map[uint32][]*Layer, s Settings) error {
	if s.Own == "" {
		return nil
	}
	events, err := partsTriggers(ctx, db, byRel, s.Own)
	if err != nil || len(events) == 0 {
		return err
	}
	keyTypes, err := copyKeys(ctx, db, events, s.Own)
	if err != nil {
		return err
	}
	for f, ev := range events {
		// The fences' copy has row triggers, and its truncate trigger a
		// function of its own: its row triggers are enough to know it.
		p := Parts{Table: f.copy, Key: "key"}
		want := tgInsert | tgDelete | tgUpdate | tgTruncate
		if f.copy == "geofence_parts" {
			p.Key, want = "fence_id", tgInsert|tgDelete|tgUpdate
		}
		if ev != want {
			continue
		}
		for _, l := range byRel[f.rel] {
			// A copy whose key is not of the key's type was made for
			// another table, or before the key was retyped.
			if l.Column == f.g && l.Key.Column == f.key && !l.Geography && !l.children && keyTypes[p] == l.Key.PGType {
				l.Parts = &p
			}
		}
	}
	return nil
}

// copyKeys returns the type of each readable copy's key column.
func copyKeys(ctx context.Context, db *pgxpool.Pool, events map[copyTriggers]int, own string) (map[Parts]string, error) {
	var names []string
	for f := range events {
		names = append(names, f.copy)
	}
	rows, err := db.Query(ctx, copyKeysSQL, own, names)
	if err != nil {
		return nil, err
	}
	out := map[Parts]string{}
	var p Parts
	var typ string
	_, err = pgx.ForEachRow(rows, []any{&p.Table, &p.Key, &typ}, func() error {
		out[p] = typ
		return nil
	})
	return out, err
}

// partsTriggers reads the copy triggers on the relations of byRel, with
// the events each copy's triggers cover together.
func partsTriggers(ctx context.Context, db *pgxpool.Pool, byRel map[uint32][]*Layer, own string) (map[copyTriggers]int, error) {
	rows, err := db.Query(ctx, partsSQL, relOIDs(byRel), own)
	if err != nil {
		return nil, err
	}
	events := map[copyTriggers]int{}
	var rel uint32
	var fn string
	var typ int
	var args []byte
	_, err = pgx.ForEachRow(rows, []any{&rel, &fn, &typ, &args}, func() error {
		f := copyTriggers{rel: rel, copy: "geofence_parts", key: "id", g: "geom"}
		if fn == PartsSyncFunction {
			a := bytes.Split(bytes.TrimSuffix(args, []byte{0}), []byte{0})
			if len(a) != 3 {
				return nil
			}
			f.copy, f.key, f.g = string(a[0]), string(a[1]), string(a[2])
		}
		events[f] |= typ & (tgInsert | tgDelete | tgUpdate | tgTruncate)
		return nil
	})
	return events, err
}
