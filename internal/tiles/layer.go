package tiles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/geogate/geogate/internal/catalog"
)

// Kind is the geometry family of a layer, which decides its tile SQL.
type Kind string

// The geometry families. Mixed is a column that does not say (Geometry,
// GeometryCollection): its features are clipped and simplified like
// shapes, points among them kept as they are.
const (
	Points   Kind = "point"
	Lines    Kind = "line"
	Polygons Kind = "polygon"
	Mixed    Kind = "geometry"
)

// kindOf is the family of a PostGIS geometry type name.
func kindOf(geometryType string) Kind {
	t := strings.TrimSuffix(strings.ToUpper(geometryType), "M")
	switch strings.TrimPrefix(t, "MULTI") {
	case "POINT":
		return Points
	case "LINESTRING", "CURVE", "COMPOUNDCURVE", "CIRCULARSTRING":
		return Lines
	case "POLYGON", "SURFACE", "CURVEPOLYGON", "POLYHEDRALSURFACE", "TIN", "TRIANGLE":
		return Polygons
	}
	return Mixed
}

// Field is one feature property of a layer: its name in the tile, its
// TileJSON type (String, Number or Boolean) and the SQL that reads it.
type Field struct {
	Name string
	Type string
	expr string
}

// Layer is a published layer as tiles see it: the catalog's layer, its
// settings and the statements built from both. Every identifier in the
// statements comes from the catalog.
type Layer struct {
	ID  string
	src *catalog.Layer
	resolved
	Kind   Kind
	Fields []Field
	// versionKey names the layer's table in tile_versions; "" when its
	// tiles are not retired by writes (no invalidation triggers): they
	// then live for the cache TTL.
	versionKey string
	// fresh says the layer's table is written behind geogate's back (a
	// team's own table, with plain SQL): its cached tiles are served at a
	// version read from PostgreSQL (see freshVersions).
	fresh bool
	// cacheName names the layer's tiles in cache keys: its id and a hash of
	// everything that shapes them, so that a table altered, or dropped and
	// created again, never meets the tiles of its former self.
	cacheName string
	sql       sqlSet
}

// Source is the catalog's layer the tiles are made of.
func (l *Layer) Source() *catalog.Layer { return l.src }

// The reserved names of a tile row's id and geometry; no property may take
// them.
const (
	idCol   = "@id"
	geomCol = "@geom"
)

// newLayer makes the tile layer of src with settings s; own is geogate's
// schema. The error says which setting does not fit the table.
func newLayer(src *catalog.Layer, s LayerSettings, extent, buffer int, own string) (*Layer, error) {
	kind := kindOf(src.GeometryType)
	builtin := ""
	if _, ok := src.GeogateShape(); ok {
		builtin = src.ID
	}
	l := &Layer{ID: src.ID, src: src, Kind: kind, resolved: defaultsFor(kind, builtin).apply(s)}
	if l.MinZoom > l.MaxZoom {
		return nil, fmt.Errorf("layer %s: minzoom %d is above maxzoom %d", l.ID, l.MinZoom, l.MaxZoom)
	}
	fields, err := tileFields(src, l.resolved.Fields)
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", l.ID, err)
	}
	l.Fields = fields
	if l.Rank != "" && !hasColumn(src, l.Rank) {
		return nil, fmt.Errorf("layer %s: rank column %q is not a column of %s.%s", l.ID, l.Rank, src.Schema, src.Table)
	}
	if src.Invalidated {
		l.versionKey = src.Schema + "." + src.Table
		l.fresh = builtin == ""
	}
	l.cacheName = src.ID + "~" + definitionHash(l, extent, buffer)
	l.sql = buildSQL(l, extent, buffer, catalog.QuoteIdent(own))
	return l, nil
}

// definitionHash is a short hash of what shapes l's tiles.
func definitionHash(l *Layer, extent, buffer int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d|%s|%s|%s|%d|%s|%d|%v|%+v|%+v|%d|%d|%s",
		l.src.Relation(), l.src.Schema, l.src.Table, l.src.Column, l.src.SRID, l.src.GeometryType,
		btoi(l.src.Geography), l.src.Key, l.resolved, l.Fields, extent, buffer, l.versionKey))
	return hex.EncodeToString(sum[:6])
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func hasColumn(src *catalog.Layer, name string) bool {
	return slices.ContainsFunc(src.Properties, func(p catalog.Property) bool { return p.Name == name })
}

// tileFields are the properties named by names, or every property when
// names is nil.
func tileFields(src *catalog.Layer, names []string) ([]Field, error) {
	if names == nil {
		var out []Field
		for _, p := range src.Properties {
			if p.Name != idCol && p.Name != geomCol {
				out = append(out, field(p))
			}
		}
		return out, nil
	}
	seen := map[string]bool{}
	out := make([]Field, 0, len(names))
	for _, name := range names {
		f, err := namedField(src, name)
		if err != nil {
			return nil, err
		}
		if seen[f.Name] || f.Name == idCol || f.Name == geomCol {
			return nil, fmt.Errorf("field name %q used twice (or reserved)", f.Name)
		}
		seen[f.Name] = true
		out = append(out, f)
	}
	return out, nil
}

// namedField is the field a setting names: a column, or column.key for a
// key of a jsonb column.
func namedField(src *catalog.Layer, name string) (Field, error) {
	for _, p := range src.Properties {
		if p.Name == name {
			return field(p), nil
		}
	}
	col, key, ok := strings.Cut(name, ".")
	if ok {
		for _, p := range src.Properties {
			if p.Name == col && p.PGType == "jsonb" {
				return Field{Name: key, Type: "String", expr: "l." + catalog.QuoteIdent(col) + "->>" + quoteLiteral(key)}, nil
			}
		}
		return Field{}, fmt.Errorf("field %q: %q is not a jsonb column of %s.%s", name, col, src.Schema, src.Table)
	}
	return Field{}, fmt.Errorf("field %q is not a column of %s.%s", name, src.Schema, src.Table)
}

// field reads column p as an MVT value: numbers as numbers, booleans as
// booleans, timestamps as RFC 3339 strings, JSON and arrays as their JSON
// text, anything else as its text.
func field(p catalog.Property) Field {
	col := "l." + catalog.QuoteIdent(p.Name)
	f := Field{Name: p.Name, Type: "String", expr: col + "::text"}
	switch {
	case p.Type == "integer":
		f.Type, f.expr = "Number", col
	case p.Type == "number" && strings.HasPrefix(p.PGType, "numeric"):
		f.Type, f.expr = "Number", col+"::float8"
	case p.Type == "number":
		f.Type, f.expr = "Number", col
	case p.Type == "boolean":
		f.Type, f.expr = "Boolean", col
	case p.Type == "json", p.Type == "array":
		f.expr = "to_jsonb(" + col + ")::text"
	case p.Format == "date-time":
		f.expr = "to_jsonb(" + col + ")#>>'{}'"
	}
	return f
}

// quoteLiteral writes s as a SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
