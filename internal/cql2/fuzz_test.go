package cql2

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fuzzLimits are small enough that the fuzzer reaches them.
var fuzzLimits = Limits{MaxBytes: 4 << 10, MaxDepth: 8, MaxNodes: 64}

func FuzzParseText(f *testing.F) {
	for _, c := range filterCases {
		f.Add(c.text)
	}
	for _, s := range []string{
		`a = 1 OR b = 2 AND NOT c = 3`, `"and" = 'it''s' AND x LIKE 'a\%_'`, `a NOT BETWEEN 1 AND 2`,
		`a IS NOT NULL`, `TRUE`, `S_WITHIN(POINT Z (1 2 3), g)`, `S_INTERSECTS(g, BBOX(170, -10, -170, 10))`,
		`S_INTERSECTS(g, GEOMETRYCOLLECTION(POINT(1 2), MULTIPOINT(1 2, 3 4)))`, `d = DATE('2024-02-29')`,
		`t < TIMESTAMP('2024-03-01T06:00:00.123Z')`, `((((a = 1))))`, `a IN (1, 2.5, -3e2)`, "名前 = '\u00a0'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseText(src, fuzzLimits)
		if err != nil {
			checkClientError(t, "ParseText", err)
			return
		}
		checkRoundTrip(t, e)
		checkSQL(t, e)
	})
}

func FuzzParseJSON(f *testing.F) {
	for _, c := range filterCases {
		f.Add([]byte(c.json))
	}
	for _, s := range []string{
		`true`, `{"op": "isNull", "args": [{"property": "a"}]}`, `{"op": "in", "args": [{"property": "a"}, [1, "x"]]}`,
		`{"op": "s_intersects", "args": [{"property": "g"}, {"type": "GeometryCollection", "geometries": [{"type": "Point", "coordinates": [1, 2]}]}]}`,
		`{"op": "like", "args": [{"property": "a"}, "x\\"]}`, `{"op": "=", "args": [{"property": "a"}, "\\'"]}`,
		`{"op": "between", "args": [{"date": "2024-01-01"}, {"property": "d"}, {"date": "2024-12-31"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		e, err := ParseJSON(src, fuzzLimits)
		if err != nil {
			checkClientError(t, "ParseJSON", err)
			return
		}
		checkRoundTrip(t, e)
		checkSQL(t, e)
	})
}

func checkClientError(t *testing.T, fn string, err error) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) || ce.Msg == "" {
		t.Fatalf("%s error = %#v, want an *Error with a message", fn, err)
	}
}

// checkRoundTrip reads e's canonical text back, which must give the same
// text; limits on depth and parts hold for it as for e.
func checkRoundTrip(t *testing.T, e Expr) {
	t.Helper()
	s := e.String()
	if strings.Contains(s, `\'`) {
		return // a backslash before a quote, which cql2-text cannot write
	}
	lim := fuzzLimits
	lim.MaxBytes = 1 << 20
	again, err := ParseText(s, lim)
	if err != nil {
		t.Fatalf("ParseText(%s), the canonical text of a parsed filter: %v", s, err)
	}
	if again.String() != s {
		t.Fatalf("ParseText(%s).String() = %s", s, again)
	}
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// checkSQL writes e over queryables that know every name but those
// starting with x, in each CRS: the SQL must come with an *Error or with
// exactly the placeholders of its arguments, numbered after the ones
// already there.
func checkSQL(t *testing.T, e Expr) {
	t.Helper()
	for _, crs := range []CRS{{}, {SRID: 4326, LatLon: true}, {SRID: 3857}} {
		args := []any{"before"}
		sql, err := SQL(e, fuzzColumns{}, crs, &args)
		if err != nil {
			checkClientError(t, "SQL", err)
			if len(args) != 1 {
				t.Fatalf("SQL(%s) failed and left args %v", e, args)
			}
			continue
		}
		seen := map[int]bool{}
		for _, m := range placeholder.FindAllStringSubmatch(sql, -1) {
			n, _ := strconv.Atoi(m[1])
			seen[n] = true
		}
		for n := 2; n <= len(args); n++ {
			if !seen[n] {
				t.Fatalf("SQL(%s) = %s with %d args: no $%d", e, sql, len(args), n)
			}
		}
		if seen[1] || len(seen) != len(args)-1 {
			t.Fatalf("SQL(%s) = %s: placeholders %v for %d new args", e, sql, seen, len(args)-1)
		}
	}
}

// fuzzColumns gives any name but those starting with x a column whose
// type depends on the name's length, so that the fuzzer meets every type.
type fuzzColumns struct{}

func (fuzzColumns) Lookup(name string) (Column, bool) {
	if strings.HasPrefix(name, "x") {
		return Column{}, false
	}
	cols := []Column{
		{SQL: "t.s", Type: "string"},
		{SQL: "t.n", Type: "number"},
		{SQL: "t.i", Type: "integer"},
		{SQL: "t.b", Type: "boolean"},
		{SQL: "t.ts", Type: "timestamp"},
		{SQL: "t.d", Type: "date"},
		{SQL: "t.g", Type: "geometry", SRID: 4326},
		{SQL: "t.m", Type: "geometry", SRID: 3857},
		{SQL: "t.geog", Type: "geometry", Geography: true},
	}
	if name == "g" || name == "geom" || name == "geometry" {
		return cols[6], true
	}
	return cols[len(name)%len(cols)], true
}
