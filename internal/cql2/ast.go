package cql2

import (
	"strconv"
	"strings"
	"time"
)

// Expr is a parsed filter: a boolean expression, as ParseText and
// ParseJSON return it and SQL takes it.
type Expr interface {
	// String returns the expression as canonical cql2-text: every AND
	// and OR in parentheses, property names in double quotes, keywords
	// in capitals. ParseText reads it back to an equal Expr, and the text
	// and JSON forms of one filter give the same string. (The one thing
	// cql2-text cannot write is a character literal with a backslash
	// before a quote or at its end, which a cql2-json filter may hold:
	// the grammar reads \' as an escaped quote.)
	String() string
	where() loc
	write(b *strings.Builder)
}

// operand is a value of a predicate: a property or a literal.
type operand interface {
	where() loc
	write(b *strings.Builder)
}

// The boolean expressions. As in cql2-json, a negated predicate (NOT
// LIKE, NOT BETWEEN, NOT IN, IS NOT NULL) is a not around the predicate.
type (
	// logical is AND (and set) or OR over two or more expressions.
	logical struct {
		and  bool
		args []Expr
		at   loc
	}
	not struct {
		arg Expr
		at  loc
	}
	// comparison is =, <>, <, >, <= or >=.
	comparison struct {
		op   string
		a, b operand
		at   loc
	}
	like struct {
		v, pattern operand
		at         loc
	}
	between struct {
		v, lo, hi operand
		at        loc
	}
	inList struct {
		v    operand
		list []operand
		at   loc
	}
	isNull struct {
		v  operand
		at loc
	}
	// spatial is one of the S_ functions, fn in capitals.
	spatial struct {
		fn   string
		a, b operand
		at   loc
	}
)

// The operands. boolLit is also a boolean expression of its own (TRUE).
type (
	property struct {
		name string
		at   loc
	}
	stringLit struct {
		v  string
		at loc
	}
	// numberLit keeps the number as written, for String, and as a
	// float64 and, when it is a whole number within int64, an int64.
	numberLit struct {
		raw   string
		f     float64
		i     int64
		isInt bool
		at    loc
	}
	boolLit struct {
		v  bool
		at loc
	}
	// timeLit is TIMESTAMP('...') or, with date set, DATE('...').
	timeLit struct {
		date bool
		t    time.Time
		raw  string
		at   loc
	}
	geomLit struct {
		g  geometry
		at loc
	}
)

func (e *logical) where() loc    { return e.at }
func (e *not) where() loc        { return e.at }
func (e *comparison) where() loc { return e.at }
func (e *like) where() loc       { return e.at }
func (e *between) where() loc    { return e.at }
func (e *inList) where() loc     { return e.at }
func (e *isNull) where() loc     { return e.at }
func (e *spatial) where() loc    { return e.at }
func (e *property) where() loc   { return e.at }
func (e *stringLit) where() loc  { return e.at }
func (e *numberLit) where() loc  { return e.at }
func (e *boolLit) where() loc    { return e.at }
func (e *timeLit) where() loc    { return e.at }
func (e *geomLit) where() loc    { return e.at }

func (e *logical) String() string    { return toString(e) }
func (e *not) String() string        { return toString(e) }
func (e *comparison) String() string { return toString(e) }
func (e *like) String() string       { return toString(e) }
func (e *between) String() string    { return toString(e) }
func (e *inList) String() string     { return toString(e) }
func (e *isNull) String() string     { return toString(e) }
func (e *spatial) String() string    { return toString(e) }
func (e *boolLit) String() string    { return toString(e) }

func toString(e Expr) string {
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func (e *logical) write(b *strings.Builder) {
	op := " OR "
	if e.and {
		op = " AND "
	}
	b.WriteByte('(')
	for i, a := range e.args {
		if i > 0 {
			b.WriteString(op)
		}
		a.write(b)
	}
	b.WriteByte(')')
}

// NOT needs no parentheses of its own: its argument is a predicate, a
// parenthesised AND or OR, or another NOT.
func (e *not) write(b *strings.Builder) {
	b.WriteString("NOT ")
	e.arg.write(b)
}

func (e *comparison) write(b *strings.Builder) {
	e.a.write(b)
	b.WriteString(" " + e.op + " ")
	e.b.write(b)
}

func (e *like) write(b *strings.Builder) {
	e.v.write(b)
	b.WriteString(" LIKE ")
	e.pattern.write(b)
}

func (e *between) write(b *strings.Builder) {
	e.v.write(b)
	b.WriteString(" BETWEEN ")
	e.lo.write(b)
	b.WriteString(" AND ")
	e.hi.write(b)
}

func (e *inList) write(b *strings.Builder) {
	e.v.write(b)
	b.WriteString(" IN (")
	for i, o := range e.list {
		if i > 0 {
			b.WriteString(", ")
		}
		o.write(b)
	}
	b.WriteByte(')')
}

func (e *isNull) write(b *strings.Builder) {
	e.v.write(b)
	b.WriteString(" IS NULL")
}

func (e *spatial) write(b *strings.Builder) {
	b.WriteString(e.fn + "(")
	e.a.write(b)
	b.WriteString(", ")
	e.b.write(b)
	b.WriteByte(')')
}

// A property name is always quoted, so that names that are keywords or
// hold characters an identifier may not survive; a double quote inside is
// doubled, as in SQL.
func (e *property) write(b *strings.Builder) {
	b.WriteString(`"` + strings.ReplaceAll(e.name, `"`, `""`) + `"`)
}

func (e *stringLit) write(b *strings.Builder) { b.WriteString(quoteString(e.v)) }
func (e *numberLit) write(b *strings.Builder) { b.WriteString(e.raw) }

func (e *boolLit) write(b *strings.Builder) {
	b.WriteString(strings.ToUpper(strconv.FormatBool(e.v)))
}

func (e *timeLit) write(b *strings.Builder) {
	if e.date {
		b.WriteString("DATE(" + quoteString(e.raw) + ")")
		return
	}
	b.WriteString("TIMESTAMP(" + quoteString(e.raw) + ")")
}

func (e *geomLit) write(b *strings.Builder) { e.g.writeText(b) }

func quoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
