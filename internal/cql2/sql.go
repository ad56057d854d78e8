package cql2

import (
	"fmt"
	"strings"
	"time"
)

// SQL writes e as a boolean SQL expression over the columns q gives its
// property names. Every value of the filter is appended to *args and
// written as a placeholder $N (N its index in *args plus one), cast to
// the type it is compared as, so the expression can join the other clauses
// of a statement that already has parameters. Geometry literals are read
// in crs and projected into each column's SRID, so that a spatial
// predicate leaves its column bare and the column's spatial index serves
// it.
//
// A filter the queryables cannot take (an unknown property, a string
// compared with a number, a latitude beyond a pole) is an *Error; on any
// error *args is left as it was. A Column with an unknown Type is a plain
// error: the caller's, not the client's.
func SQL(e Expr, q Queryables, crs CRS, args *[]any) (string, error) {
	n := len(*args)
	w := &sqlWriter{q: q, crs: crs, args: args}
	s, err := w.expr(e)
	if err != nil {
		*args = (*args)[:n]
		return "", err
	}
	return s, nil
}

type sqlWriter struct {
	q    Queryables
	crs  CRS
	args *[]any
}

// bind appends v to the arguments and returns its placeholder, cast to
// typ so that PostgreSQL knows the type before it sees the value.
func (w *sqlWriter) bind(v any, typ string) string {
	*w.args = append(*w.args, v)
	return fmt.Sprintf("$%d::%s", len(*w.args), typ)
}

func (w *sqlWriter) expr(e Expr) (string, error) {
	switch e := e.(type) {
	case *logical:
		parts := make([]string, len(e.args))
		for i, a := range e.args {
			s, err := w.expr(a)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		op := " OR "
		if e.and {
			op = " AND "
		}
		return "(" + strings.Join(parts, op) + ")", nil
	case *not:
		s, err := w.expr(e.arg)
		if err != nil {
			return "", err
		}
		return "(NOT " + s + ")", nil
	case *boolLit:
		return strings.ToUpper(fmt.Sprint(e.v)), nil
	case *comparison:
		return w.comparison(e)
	case *like:
		return w.like(e)
	case *between:
		return w.between(e)
	case *inList:
		return w.in(e)
	case *isNull:
		return w.isNull(e)
	case *spatial:
		return w.spatial(e)
	}
	return "", fmt.Errorf("cql2: no SQL for %T", e)
}

// valueType is the CQL2 type of an operand.
type valueType int

const (
	vString valueType = iota + 1
	vNumber
	vBoolean
	vTimestamp
	vDate
	vGeometry
)

var typeNames = map[valueType]string{
	vString: "a string", vNumber: "a number", vBoolean: "a boolean",
	vTimestamp: "a timestamp", vDate: "a date", vGeometry: "a geometry",
}

var columnTypes = map[string]valueType{
	"string": vString, "number": vNumber, "integer": vNumber, "boolean": vBoolean,
	"timestamp": vTimestamp, "date": vDate, "geometry": vGeometry,
}

// value is an operand resolved: a column, or a literal.
type value struct {
	typ     valueType
	integer bool // an integer column or a whole number: compared as int8
	col     *Column
	lit     operand
}

func (v value) orderable() bool { return v.typ != vBoolean && v.typ != vGeometry }

func (w *sqlWriter) resolve(o operand) (value, error) {
	switch o := o.(type) {
	case *property:
		col, ok := w.q.Lookup(o.name)
		if !ok {
			err := errAt(o.at, "unknown property %q", o.name)
			err.Property = o.name
			return value{}, err
		}
		typ, ok := columnTypes[col.Type]
		if !ok {
			return value{}, fmt.Errorf("cql2: queryable %q has type %q, not one of string, number, integer, boolean, timestamp, date, geometry", o.name, col.Type)
		}
		if typ == vGeometry && !col.Geography && col.SRID <= 0 {
			// A column in SRID 0 (a CAD drawing, a local grid) has no place
			// on the Earth to project a literal into: the filter asks what
			// cannot be answered, which is the client's to change.
			return value{}, errAt(o.at, "%q is stored in SRID 0, with no coordinate reference system: no geometry can be compared with it", o.name)
		}
		return value{typ: typ, integer: col.Type == "integer", col: &col}, nil
	case *stringLit:
		return value{typ: vString, lit: o}, nil
	case *numberLit:
		return value{typ: vNumber, integer: o.isInt, lit: o}, nil
	case *boolLit:
		return value{typ: vBoolean, lit: o}, nil
	case *timeLit:
		if o.date {
			return value{typ: vDate, lit: o}, nil
		}
		return value{typ: vTimestamp, lit: o}, nil
	case *geomLit:
		return value{typ: vGeometry, lit: o}, nil
	}
	return value{}, fmt.Errorf("cql2: no value for %T", o)
}

func (w *sqlWriter) resolveAll(ops ...operand) ([]value, error) {
	vs := make([]value, len(ops))
	for i, o := range ops {
		var err error
		if vs[i], err = w.resolve(o); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// describeValue names an operand and its type for an error message.
func describeValue(o operand, v value) string {
	var b strings.Builder
	o.write(&b)
	what := shorten(b.String())
	if v.col != nil {
		what = "the property " + what
	}
	return what + " (" + typeNames[v.typ] + ")"
}

// sameType requires the values of ops to share one type.
func sameType(at loc, ops []operand, vs []value) error {
	for i := 1; i < len(vs); i++ {
		if vs[i].typ != vs[0].typ {
			return errAt(at, "cannot compare %s with %s", describeValue(ops[0], vs[0]), describeValue(ops[i], vs[i]))
		}
	}
	return nil
}

// scalar writes a value: a column as it is, a literal bound as a
// parameter; numbers as int8 when whole says every value compared is a
// whole number, else as float8.
func (w *sqlWriter) scalar(v value, whole bool) string {
	if v.col != nil {
		return v.col.SQL
	}
	switch l := v.lit.(type) {
	case *stringLit:
		return w.bind(l.v, "text")
	case *numberLit:
		if whole {
			return w.bind(l.i, "int8")
		}
		return w.bind(l.f, "float8")
	case *boolLit:
		return w.bind(l.v, "boolean")
	case *timeLit:
		if l.date {
			return w.bind(l.t, "date")
		}
		return w.bind(l.t, "timestamptz")
	}
	return "NULL" // unreachable: geometries never get here
}

func allWhole(vs []value) bool {
	for _, v := range vs {
		if !v.integer {
			return false
		}
	}
	return true
}

func (w *sqlWriter) comparison(e *comparison) (string, error) {
	ops := []operand{e.a, e.b}
	vs, err := w.resolveAll(ops...)
	if err != nil {
		return "", err
	}
	if err := sameType(e.at, ops, vs); err != nil {
		return "", err
	}
	switch {
	case vs[0].typ == vGeometry:
		return "", errAt(e.at, "geometries are compared with the S_ functions, such as S_EQUALS, not with %s", e.op)
	case e.op != "=" && e.op != "<>" && !vs[0].orderable():
		return "", errAt(e.at, "%s has no order: compare it with = or <>", describeValue(ops[0], vs[0]))
	}
	whole := allWhole(vs)
	return "(" + w.scalar(vs[0], whole) + " " + e.op + " " + w.scalar(vs[1], whole) + ")", nil
}

func (w *sqlWriter) like(e *like) (string, error) {
	vs, err := w.resolveAll(e.v, e.pattern)
	if err != nil {
		return "", err
	}
	if vs[0].typ != vString {
		return "", errAt(e.at, "LIKE matches strings, not %s", describeValue(e.v, vs[0]))
	}
	// PostgreSQL's LIKE has CQL2's wildcards and, by default, CQL2's
	// escape character, the backslash; checkPattern has made sure that
	// the pattern does not end in one.
	return "(" + w.scalar(vs[0], false) + " LIKE " + w.scalar(vs[1], false) + ")", nil
}

func (w *sqlWriter) between(e *between) (string, error) {
	ops := []operand{e.v, e.lo, e.hi}
	vs, err := w.resolveAll(ops...)
	if err != nil {
		return "", err
	}
	if err := sameType(e.at, ops, vs); err != nil {
		return "", err
	}
	if !vs[0].orderable() {
		return "", errAt(e.at, "BETWEEN needs values with an order, not %s", describeValue(ops[0], vs[0]))
	}
	whole := allWhole(vs)
	return "(" + w.scalar(vs[0], whole) + " BETWEEN " + w.scalar(vs[1], whole) + " AND " + w.scalar(vs[2], whole) + ")", nil
}

// in binds the list as one array, so that a long list is one parameter.
func (w *sqlWriter) in(e *inList) (string, error) {
	ops := append([]operand{e.v}, e.list...)
	vs, err := w.resolveAll(ops...)
	if err != nil {
		return "", err
	}
	for i, v := range vs[1:] {
		if v.col != nil {
			return "", errAt(e.list[i].where(), "an IN list holds values, not properties")
		}
	}
	if err := sameType(e.at, ops, vs); err != nil {
		return "", err
	}
	if vs[0].typ == vGeometry {
		return "", errAt(e.at, "IN does not compare geometries")
	}
	whole := allWhole(vs)
	arr, typ := listArray(vs[1:], whole)
	return "(" + w.scalar(vs[0], whole) + " = ANY(" + w.bind(arr, typ+"[]") + "))", nil
}

// listArray collects the literals of an IN list into a slice pgx encodes
// as an array of the PostgreSQL type it returns.
func listArray(vs []value, whole bool) (any, string) {
	switch vs[0].lit.(type) {
	case *stringLit:
		return collect(vs, func(l *stringLit) string { return l.v }), "text"
	case *numberLit:
		if whole {
			return collect(vs, func(l *numberLit) int64 { return l.i }), "int8"
		}
		return collect(vs, func(l *numberLit) float64 { return l.f }), "float8"
	case *boolLit:
		return collect(vs, func(l *boolLit) bool { return l.v }), "boolean"
	}
	typ := "timestamptz"
	if vs[0].typ == vDate {
		typ = "date"
	}
	return collect(vs, func(l *timeLit) time.Time { return l.t }), typ
}

func collect[L operand, T any](vs []value, f func(L) T) []T {
	out := make([]T, len(vs))
	for i, v := range vs {
		out[i] = f(v.lit.(L))
	}
	return out
}

func (w *sqlWriter) isNull(e *isNull) (string, error) {
	v, err := w.resolve(e.v)
	if err != nil {
		return "", err
	}
	if v.col == nil {
		return "FALSE", nil // a literal is never null
	}
	return "(" + v.col.SQL + " IS NULL)", nil
}
