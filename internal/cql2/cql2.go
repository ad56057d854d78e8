// Package cql2 reads OGC CQL2 filters, in their text (cql2-text) and JSON
// (cql2-json) encodings, and writes them as PostgreSQL/PostGIS boolean
// expressions whose values are bound parameters. Property names resolve
// only through the caller's Queryables, so the only SQL a filter can reach
// is the SQL the caller put there; everything else the client wrote
// travels as a parameter.
//
// Parsing needs nothing but the filter and its limits; SQL needs the
// queryables of the collection and the filter's CRS. Every error a client
// can cause is an *Error that says where in the filter it is.
package cql2

import (
	"fmt"
	"strings"
)

// Limits bound what a filter may cost before any SQL is written. A zero
// field takes its value from DefaultLimits.
type Limits struct {
	// MaxBytes is the longest filter accepted, in bytes.
	MaxBytes int
	// MaxDepth is the deepest nesting of AND, OR, NOT and predicates: a
	// lone comparison is 1, "a = 1 AND NOT b = 2" is 3. For cql2-text it
	// also bounds the parentheses and NOTs open at once.
	MaxDepth int
	// MaxNodes is the most predicates, logical operators, operands and
	// list items a filter may hold. The positions of a geometry literal
	// do not count: MaxBytes bounds them.
	MaxNodes int
}

// DefaultLimits are limits for filters a person or a map client writes: a
// few hundred predicates, polygons of a few thousand vertices.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 64 << 10, MaxDepth: 20, MaxNodes: 500}
}

func (l Limits) orDefault() Limits {
	d := DefaultLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = d.MaxNodes
	}
	return l
}

// Queryables resolves the property names a filter may use. Names come only
// from here: a name Lookup does not know is an *Error, never SQL.
type Queryables interface {
	Lookup(name string) (Column, bool)
}

// Column is what a queryable property is in SQL.
type Column struct {
	// SQL is an expression the caller vouches for, already quoted, such
	// as t."Name" or (t.properties->>'pop')::float8. It is written into
	// the statement as it is.
	SQL string
	// Type is one of "string", "number", "integer", "boolean",
	// "timestamp" (a timestamptz), "date" or "geometry".
	Type string
	// SRID is the SRID of a geometry column. A geography column
	// (Geography set) is always in 4326.
	SRID      int
	Geography bool
}

// Columns is Queryables from a map of property names.
type Columns map[string]Column

// Lookup returns the column of name.
func (c Columns) Lookup(name string) (Column, bool) {
	col, ok := c[name]
	return col, ok
}

// CRS is the coordinate reference system of a filter's geometry literals
// (the filter-crs parameter). The zero value is OGC CRS84: SRID 4326 with
// longitude first.
type CRS struct {
	// SRID is the PostGIS SRID of the coordinates; 0 means 4326.
	SRID int
	// LatLon says the coordinates are written latitude first, as
	// EPSG:4326 defines its axes (CRS84 is the same datum, longitude
	// first). Literals are swapped to longitude, latitude before use.
	LatLon bool
}

func (c CRS) srid() int {
	if c.SRID == 0 {
		return 4326
	}
	return c.SRID
}

// The CRS URIs ParseCRS knows.
const (
	CRS84URI    = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
	EPSG4326URI = "http://www.opengis.net/def/crs/EPSG/0/4326"
	EPSG3857URI = "http://www.opengis.net/def/crs/EPSG/0/3857"
)

// ParseCRS returns the CRS named by a filter-crs value: CRS84 (also when
// uri is empty), EPSG:4326 (latitude first) or EPSG:3857. Any other value
// is an *Error; a server that offers more CRSs builds their CRS itself,
// since only it knows their axis order.
func ParseCRS(uri string) (CRS, error) {
	switch withoutScheme(strings.TrimSpace(uri)) {
	case "", withoutScheme(CRS84URI), "[OGC:CRS84]", "OGC:CRS84":
		return CRS{SRID: 4326}, nil
	case withoutScheme(EPSG4326URI), "[EPSG:4326]", "EPSG:4326":
		return CRS{SRID: 4326, LatLon: true}, nil
	case withoutScheme(EPSG3857URI), "[EPSG:3857]", "EPSG:3857":
		return CRS{SRID: 3857}, nil
	}
	return CRS{}, &Error{Msg: fmt.Sprintf("filter-crs %q is not supported; use %s, %s or %s", uri, CRS84URI, EPSG4326URI, EPSG3857URI)}
}

// withoutScheme lets the URIs be written with https, as clients do.
func withoutScheme(uri string) string {
	if s, ok := strings.CutPrefix(uri, "https://"); ok {
		return s
	}
	return strings.TrimPrefix(uri, "http://")
}

// The conformance classes of CQL2 1.0 this package implements, for a
// server's /conformance.
const (
	ConfCQL2Text                    = "http://www.opengis.net/spec/cql2/1.0/conf/cql2-text"
	ConfCQL2JSON                    = "http://www.opengis.net/spec/cql2/1.0/conf/cql2-json"
	ConfBasicCQL2                   = "http://www.opengis.net/spec/cql2/1.0/conf/basic-cql2"
	ConfAdvancedComparisonOperators = "http://www.opengis.net/spec/cql2/1.0/conf/advanced-comparison-operators"
	ConfBasicSpatialFunctions       = "http://www.opengis.net/spec/cql2/1.0/conf/basic-spatial-functions"
	ConfBasicSpatialFunctionsPlus   = "http://www.opengis.net/spec/cql2/1.0/conf/basic-spatial-functions-plus"
	ConfSpatialFunctions            = "http://www.opengis.net/spec/cql2/1.0/conf/spatial-functions"
)

// Conformance returns the URIs of the CQL2 conformance classes this
// package implements, in a new slice.
func Conformance() []string {
	return []string{
		ConfCQL2Text,
		ConfCQL2JSON,
		ConfBasicCQL2,
		ConfAdvancedComparisonOperators,
		ConfBasicSpatialFunctions,
		ConfBasicSpatialFunctionsPlus,
		ConfSpatialFunctions,
	}
}

// checkLimits holds a parsed filter to lim's depth and node count; the
// error points at the first node past the limit.
func checkLimits(e Expr, lim Limits) error {
	nodes := 0
	count := func(at loc) error {
		nodes++
		if nodes > lim.MaxNodes {
			return errAt(at, "the filter has more than %d parts (predicates, operators and values)", lim.MaxNodes)
		}
		return nil
	}
	var walk func(e Expr, depth int) error
	walk = func(e Expr, depth int) error {
		if depth > lim.MaxDepth {
			return errAt(e.where(), "the filter nests more than %d levels deep", lim.MaxDepth)
		}
		if err := count(e.where()); err != nil {
			return err
		}
		var ops []operand
		switch e := e.(type) {
		case *logical:
			for _, a := range e.args {
				if err := walk(a, depth+1); err != nil {
					return err
				}
			}
		case *not:
			return walk(e.arg, depth+1)
		case *comparison:
			ops = []operand{e.a, e.b}
		case *like:
			ops = []operand{e.v, e.pattern}
		case *between:
			ops = []operand{e.v, e.lo, e.hi}
		case *inList:
			ops = append([]operand{e.v}, e.list...)
		case *isNull:
			ops = []operand{e.v}
		case *spatial:
			ops = []operand{e.a, e.b}
		}
		for _, o := range ops {
			if err := count(o.where()); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(e, 1)
}
