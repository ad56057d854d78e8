// Package catalog finds the layers geogate publishes: every table, view
// and materialized view with a geometry or geography column, in the
// schemas it is told to publish, that its database role may read. It reads
// them from PostgreSQL's catalog, so that every identifier geogate later
// puts into SQL comes from there and never from a request.
package catalog

import (
	"fmt"
	"slices"
	"strings"
)

// Layer is one published geometry or geography column of a relation.
type Layer struct {
	// ID names the layer in URLs and to GIS clients; see LayerID.
	ID string
	// AsCaller says the layer's statements run as the caller's database
	// role, under the table's row-level security (the layer file's
	// as_caller): what is shown of it is only what a statement run as
	// the caller returns, never the table's statistics.
	AsCaller bool
	// Writable says the layer file opens the layer for writing (OGC API
	// Features Part 4) and it can be: a table with a key column.
	Writable bool
	Schema   string
	Table    string
	// Kind is "table", "view", "materialized view", "partitioned table"
	// or "foreign table".
	Kind string
	// Column is the geometry or geography column.
	Column    string
	Geography bool
	// GeometryType is PostGIS's name of the column's type: Point,
	// MultiPolygon, ..., or Geometry when the column does not say.
	GeometryType string
	// SRID is the column's spatial reference; 4326 for geography.
	SRID int
	// Key is the feature id; see Key.
	Key Key
	// Properties are the relation's other columns, in their order.
	Properties []Property
	// OtherGeometries are the relation's other geometry and geography
	// columns, which are not properties.
	OtherGeometries []string
	// Hidden are the columns the layer settings leave out of Properties.
	Hidden []string
	// Indexed says a spatial index (GiST, SP-GiST or BRIN) covers the
	// column itself.
	Indexed bool
	// Bounds is the estimated extent in longitude and latitude, from the
	// planner's statistics; nil when there are none (never analysed, or a
	// view).
	Bounds *Bounds
	// Rows is the planner's estimate of the relation's rows; -1 unknown.
	Rows int64
	// Invalidated says geogate's triggers report every change of the
	// relation (api publish --invalidate), so its cached tiles are retired
	// exactly; otherwise they live for TILES_CACHE_TTL.
	Invalidated bool
	// Parts, when not nil, is the subdivided copy of the layer's polygons
	// that point-in-polygon checks read (see ContainsPath).
	Parts *Parts

	oid      uint32 // the relation's
	children bool   // the relation has inheritance children or partitions
}

// Relation is the relation's oid: a table dropped and created again under
// the same name has another.
func (l *Layer) Relation() uint32 { return l.oid }

// Key is how features of a layer are named.
type Key struct {
	// Column is the primary key, or a unique, not-null single column of a
	// table without one; "" when the relation has neither (a view, or a
	// table without a key): features are then named by a hash of their row
	// (see FromRow).
	Column string
	// Type is the column's JSON type: "integer" or "string".
	Type string
	// PGType is the column's PostgreSQL type.
	PGType string
}

// FromRow says the layer's features are named by a hash of their whole row:
// stable while the row does not change, and the same for rows that cannot
// be told apart.
func (k Key) FromRow() bool { return k.Column == "" }

// Property is a column published as a feature property.
type Property struct {
	Name string
	// PGType is the column's type as PostgreSQL formats it.
	PGType string
	// Type is its JSON type: number, integer, boolean, string or array,
	// or json for a json or jsonb column, which may hold any JSON value.
	Type string
	// Format refines a string: date-time, date, time or uuid; "" for none.
	Format string
}

// Bounds is a box in longitude and latitude.
type Bounds struct {
	West, South, East, North float64
}

// Qualified is the relation's name as SQL writes it, quoted.
func (l *Layer) Qualified() string { return quoteIdent(l.Schema) + "." + quoteIdent(l.Table) }

// quoteIdent quotes a name from the catalog for SQL.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// QuoteIdent quotes a catalog name for SQL, as PostgreSQL's quote_ident
// does for any name: always, so that case, spaces and reserved words are
// kept.
func QuoteIdent(s string) string { return quoteIdent(s) }

// String describes the layer for logs.
func (l *Layer) String() string {
	return fmt.Sprintf("%s (%s.%s.%s, %s %s, SRID %d)", l.ID, l.Schema, l.Table, l.Column, l.Kind, l.GeometryType, l.SRID)
}

// jsonType is the JSON type and format of a PostgreSQL type: its name and
// category (pg_type.typcategory).
func jsonType(typname string, category byte) (typ, format string) {
	switch typname {
	case "int2", "int4", "int8", "oid":
		return "integer", ""
	case "float4", "float8", "numeric":
		return "number", ""
	case "bool":
		return "boolean", ""
	case "json", "jsonb":
		// Any JSON value: an object, an array, a string, a number, a
		// boolean or null (pg_featureserv's test_json holds an array).
		return "json", ""
	case "timestamptz", "timestamp":
		return "string", "date-time"
	case "date":
		return "string", "date"
	case "time", "timetz":
		return "string", "time"
	case "uuid":
		return "string", "uuid"
	}
	if category == 'A' {
		return "array", ""
	}
	return "string", ""
}

// GeogateShape reports whether l has geogate's own columns: an integer id,
// a text name and a jsonb properties (the tables of api import, and views
// over them). It returns l's key, which for that shape is the id column
// even where the relation declares none (a view).
func (l *Layer) GeogateShape() (Key, bool) {
	find := func(name string, types ...string) (Property, bool) {
		i := slices.IndexFunc(l.Properties, func(p Property) bool { return p.Name == name && slices.Contains(types, p.PGType) })
		if i < 0 {
			return Property{}, false
		}
		return l.Properties[i], true
	}
	id, hasID := find("id", "bigint", "integer", "smallint")
	_, hasName := find("name", "text")
	_, hasProps := find("properties", "jsonb")
	if !hasID || !hasName || !hasProps || (!l.Key.FromRow() && l.Key.Column != "id") {
		return l.Key, false
	}
	return Key{Column: "id", Type: "integer", PGType: id.PGType}, true
}

// LonLatOfGeography is the SQL of geography column col as a geometry in
// longitude/latitude that draws as it lies on the sphere. A cast alone
// reads an edge from 170° to -170° as running the long way round, so a
// shape that crosses the antimeridian is shifted into 0..360° and cut back
// at 180° instead; points need neither.
func LonLatOfGeography(col, geometryType string) string {
	if strings.HasSuffix(strings.ToUpper(strings.TrimSuffix(geometryType, "M")), "POINT") {
		return col + "::geometry"
	}
	return fmt.Sprintf("CASE WHEN ST_Intersects(%[1]s, 'SRID=4326;LINESTRING(180 -89.9, 180 0, 180 89.9)'::geography) "+
		"THEN ST_WrapX(ST_ShiftLongitude(%[1]s::geometry), 180, -360) ELSE %[1]s::geometry END", col)
}

// Located says the layer's coordinates have a known place on the Earth:
// a geography column, or geometry in an SRID other than 0. A layer in
// SRID 0 (a CAD drawing, a local grid) is served with its coordinates as
// they are stored; nothing that needs longitude and latitude (tiles,
// /within, a bbox, a spatial scope) can be asked of it.
func (l *Layer) Located() bool { return l.Geography || l.SRID > 0 }

// MayCurve says the column's type can hold curves (CircularString,
// CompoundCurve, CurvePolygon, MultiCurve, MultiSurface), alone or in a
// collection. Geography cannot.
func (l *Layer) MayCurve() bool {
	if l.Geography {
		return false
	}
	switch t := strings.ToUpper(strings.TrimSuffix(l.GeometryType, "M")); t {
	case "GEOMETRY", "GEOMETRYCOLLECTION", "CIRCULARSTRING", "COMPOUNDCURVE", "CURVEPOLYGON",
		"MULTICURVE", "MULTISURFACE", "CURVE", "SURFACE":
		return true
	}
	return false
}

// Linear is the SQL of the layer's column col (an expression over a row)
// without curves. GeoJSON, geography, ST_Simplify, MVT and
// ST_CollectionExtract know only straight edges and the plain types, so a
// curve is cut into straight segments (ST_CurveToLine, 32 per quarter
// circle) wherever the type may hold one. What decides is the row's type,
// not whether it has an arc (ST_HasArc): a CurvePolygon whose rings are
// all straight is still no Polygon to them. Rows of a plain type are left
// untouched, at the cost of one look at their header; a collection is
// always passed through ST_CurveToLine, which leaves plain members as
// they are.
func (l *Layer) Linear(col string) string {
	if !l.MayCurve() {
		return col
	}
	return "CASE WHEN ST_GeometryType(" + col + ") IN ('ST_CircularString', 'ST_CompoundCurve', 'ST_CurvePolygon', " +
		"'ST_MultiCurve', 'ST_MultiSurface', 'ST_GeometryCollection') THEN ST_CurveToLine(" + col + ") ELSE " + col + " END"
}

// PropertiesJSON is the SQL of the layer's properties of row (an alias or
// a record expression) as one jsonb object, built from the property
// columns alone: to_jsonb of the whole row would also write each
// geometry as GeoJSON, which costs, and fails on a curve.
func (l *Layer) PropertiesJSON(row string) string {
	cols := make([]string, len(l.Properties))
	for i, p := range l.Properties {
		cols[i] = row + "." + quoteIdent(p.Name)
	}
	return "to_jsonb((SELECT p FROM (SELECT " + strings.Join(cols, ", ") + ") p))"
}
