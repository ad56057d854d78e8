package cql2

import (
	"errors"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/apperr"
)

func TestParseText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"Comparison", `name = 'Berlin'`, `"name" = 'Berlin'`},
		{"Operators", `a<>1 AND b<2 AND c>3 AND d<=4 AND e>=5`, `("a" <> 1 AND "b" < 2 AND "c" > 3 AND "d" <= 4 AND "e" >= 5)`},
		{"AndBindsTighterThanOr", `a = 1 OR b = 2 AND c = 3`, `("a" = 1 OR ("b" = 2 AND "c" = 3))`},
		{"NotBindsTighterThanAnd", `NOT a = 1 AND b = 2`, `(NOT "a" = 1 AND "b" = 2)`},
		{"Parentheses", `(a = 1 OR b = 2) AND c = 3`, `(("a" = 1 OR "b" = 2) AND "c" = 3)`},
		{"NestedParenthesesKeepTheirGroups", `(a = 1 AND b = 2) AND c = 3`, `(("a" = 1 AND "b" = 2) AND "c" = 3)`},
		{"RedundantParentheses", `((a = 1))`, `"a" = 1`},
		{"NotNot", `NOT NOT a = 1`, `NOT NOT "a" = 1`},
		{"NotOfGroup", `NOT (a = 1 OR b = 2)`, `NOT ("a" = 1 OR "b" = 2)`},
		{"KeywordsInAnyCase", `a = 1 and not b is null Or c like 'x%'`, `(("a" = 1 AND NOT "b" IS NULL) OR "c" LIKE 'x%')`},
		{"QuotedKeywordProperty", `"and" = 1 AND "Where Clause" = 'x'`, `("and" = 1 AND "Where Clause" = 'x')`},
		{"QuotedNameWithQuote", `"a""b" = 1`, `"a""b" = 1`},
		{"NamesWithColonAndDot", `eo:cloud_cover < 0.1 AND a.b = 2`, `("eo:cloud_cover" < 0.1 AND "a.b" = 2)`},
		{"UnicodeName", `straße = 'x' AND 名前 = 'y'`, `("straße" = 'x' AND "名前" = 'y')`},
		{"QuoteEscapes", `a = 'it''s' OR a = 'it\'s'`, `("a" = 'it''s' OR "a" = 'it''s')`},
		{"BackslashKept", `a LIKE '100\%'`, `"a" LIKE '100\%'`},
		{"EmptyString", `a = ''`, `"a" = ''`},
		{"Numbers", `a IN (1, -2, +3, .5, 5., 1e3, -1.5E-2)`, `"a" IN (1, -2, +3, .5, 5., 1e3, -1.5E-2)`},
		{"NegativeAfterOperator", `a<-5`, `"a" < -5`},
		{"Booleans", `a = true AND b <> FALSE`, `("a" = TRUE AND "b" <> FALSE)`},
		{"BooleanPredicate", `TRUE AND NOT false`, `(TRUE AND NOT FALSE)`},
		{"LiteralOnTheLeft", `5 < a`, `5 < "a"`},
		{"NotLike", `a NOT LIKE 'x_'`, `NOT "a" LIKE 'x_'`},
		{"Between", `a BETWEEN 1 AND 5 AND b = 1`, `("a" BETWEEN 1 AND 5 AND "b" = 1)`},
		{"NotBetween", `a NOT BETWEEN 1 AND 5`, `NOT "a" BETWEEN 1 AND 5`},
		{"NotIn", `a NOT IN ('x','y')`, `NOT "a" IN ('x', 'y')`},
		{"IsNotNull", `a IS NOT NULL`, `NOT "a" IS NULL`},
		{"Timestamp", `t > TIMESTAMP('2024-03-01T06:00:00Z')`, `"t" > TIMESTAMP('2024-03-01T06:00:00Z')`},
		{"TimestampFraction", `t > timestamp('2012-08-10T05:30:00.000000Z')`, `"t" > TIMESTAMP('2012-08-10T05:30:00.000000Z')`},
		{"Date", `d >= date('1970-01-01')`, `"d" >= DATE('1970-01-01')`},
		{"PropertyNamedDate", `date = DATE('2020-01-01')`, `"date" = DATE('2020-01-01')`},
		{"Whitespace", "a\t=\n1\u00a0AND\u3000b = 2", `("a" = 1 AND "b" = 2)`},
		{"Point", `S_INTERSECTS(geom, POINT(1 2))`, `S_INTERSECTS("geom", POINT(1 2))`},
		{"PointZ", `S_INTERSECTS(geom, POINT Z (1 2 3))`, `S_INTERSECTS("geom", POINT(1 2))`},
		{"PointWithHeightWithoutZ", `s_intersects(geom, point(1 2 3))`, `S_INTERSECTS("geom", POINT(1 2))`},
		{"LineString", `S_CROSSES(geom, LINESTRING(0 0, 1 1, 2 0))`, `S_CROSSES("geom", LINESTRING(0 0, 1 1, 2 0))`},
		{"PolygonWithHole", `S_WITHIN(geom, POLYGON((0 0, 9 0, 9 9, 0 0), (1 1, 2 1, 2 2, 1 1)))`, `S_WITHIN("geom", POLYGON((0 0, 9 0, 9 9, 0 0), (1 1, 2 1, 2 2, 1 1)))`},
		{"MultiPointBothForms", `S_EQUALS(MULTIPOINT((1 2), (3 4)), geom) OR S_EQUALS(MULTIPOINT(1 2, 3 4), geom)`, `(S_EQUALS(MULTIPOINT((1 2), (3 4)), "geom") OR S_EQUALS(MULTIPOINT((1 2), (3 4)), "geom"))`},
		{"MultiLineString", `S_TOUCHES(geom, MULTILINESTRING((0 0, 1 1), (2 2, 3 3)))`, `S_TOUCHES("geom", MULTILINESTRING((0 0, 1 1), (2 2, 3 3)))`},
		{"MultiPolygon", `S_OVERLAPS(geom, MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5))))`, `S_OVERLAPS("geom", MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5))))`},
		{"Collection", `S_DISJOINT(geom, GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1)))`, `S_DISJOINT("geom", GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1)))`},
		{"BBox", `S_INTERSECTS(geom, BBOX(-10, 40.5, 10, 50))`, `S_INTERSECTS("geom", BBOX(-10, 40.5, 10, 50))`},
		{"BBoxWithHeights", `S_INTERSECTS(geom, BBOX(-10, 40, -100, 10, 50, 100))`, `S_INTERSECTS("geom", BBOX(-10, 40, 10, 50))`},
		{"Envelope", `S_CONTAINS(geom, ENVELOPE(1, 2, 3, 4))`, `S_CONTAINS("geom", BBOX(1, 2, 3, 4))`},
		{"SpatialPredicateInLogic", `a = 1 AND NOT S_INTERSECTS(geom, POINT(0 0))`, `("a" = 1 AND NOT S_INTERSECTS("geom", POINT(0 0)))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseText(tt.in, Limits{})
			if err != nil {
				t.Fatalf("ParseText(%q): %v", tt.in, err)
			}
			if got := e.String(); got != tt.want {
				t.Errorf("ParseText(%q) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := ParseText(e.String(), Limits{})
			if err != nil || again.String() != e.String() {
				t.Errorf("ParseText(%q) = %v, %v; want it back", e.String(), again, err)
			}
		})
	}
}

func TestParseTextErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"Empty", `  `, `the filter is empty`},
		{"MissingValue", `name = `, `at character 8: the filter ends where a property name or a value should be`},
		{"MissingOperator", `name 'x'`, `at character 6: expected a comparison operator (=, <>, <, >, <=, >=), LIKE, BETWEEN, IN or IS NULL, found the character literal 'x'`},
		{"BarePropertyIsNoPredicate", `a = 1 AND b`, `at character 12: expected a comparison operator (=, <>, <, >, <=, >=), LIKE, BETWEEN, IN or IS NULL, found the end of the filter`},
		{"UnclosedParenthesis", `(a = 1 OR b = 2`, `at character 16: expected ')' or AND or OR, found the end of the filter`},
		{"ExtraParenthesis", `a = 1)`, `at character 6: unexpected ')' after a complete expression`},
		{"TrailingWord", `a = 1 b = 2`, `at character 7: unexpected 'b' after a complete expression`},
		{"KeywordAsValue", `a = AND`, `at character 5: expected a property name or a value, found AND (a keyword; quote a property of that name: "AND")`},
		{"UnclosedString", `a = 'abc`, `at character 5: the character literal that starts here has no closing '`},
		{"UnclosedQuotedName", `"abc = 1`, `at character 1: the quoted property name that starts here has no closing "`},
		{"EmptyName", `"" = 1`, `at character 1: a property name cannot be empty`},
		{"BangEquals", `a != 1`, `at character 3: unexpected '!=': not equal is written <>`},
		{"StrayCharacter", `a = 1 & b = 2`, `at character 7: unexpected character '&'`},
		{"CharacterNotByte", `名前 = 1 &`, `at character 8: unexpected character '&'`},
		{"InvalidUTF8", "a = '\xff'", `at character 6: the filter is not valid UTF-8`},
		{"NUL", "a = 'x\x00y'", `at character 5: a character literal cannot hold the NUL character`},
		{"HugeNumber", `a = 1e999`, `at character 5: the number 1e999 is out of range`},
		{"ExponentWithoutDigits", `a = 1e`, `at character 5: a number's exponent needs digits`},
		{"NotWithoutLike", `a NOT = 1`, `at character 7: expected LIKE, BETWEEN or IN after NOT, found '='`},
		{"LikeWithoutPattern", `a LIKE b`, `at character 8: LIKE needs a pattern in single quotes, found 'b'`},
		{"LikeTrailingEscape", `a LIKE 'x\'`, `at character 8: the character literal that starts here has no closing '`},
		{"BetweenWithoutAnd", `a BETWEEN 1 OR 2`, `at character 13: expected AND between the bounds of BETWEEN, found 'OR'`},
		{"InWithoutParenthesis", `a IN 1`, `at character 6: expected '(' and a list of values, found the number 1`},
		{"InUnclosed", `a IN (1, 2`, `at character 11: expected ',' or ')' in the IN list, found the end of the filter`},
		{"IsWithoutNull", `a IS 5`, `at character 6: expected NULL, found the number 5`},
		{"BadDate", `d = DATE('2024-13-01')`, `at character 10: '2024-13-01' is not a date such as '2024-03-01'`},
		{"TimestampWithoutZ", `t = TIMESTAMP('2024-03-01T06:00:00+01:00')`, `at character 15: '2024-03-01T06:00:00+01:00' is not a UTC timestamp such as '2024-03-01T06:00:00Z'`},
		{"DateWithoutString", `d = DATE(2024)`, `at character 10: expected the date in single quotes, found the number 2024`},
		{"UnknownFunction", `avg(windSpeed) < 4`, `at character 1: unknown function avg: this server supports no functions besides the S_ predicates`},
		{"Casei", `CASEI(name) = 'x'`, `at character 1: CASEI (case- and accent-insensitive comparison) is not supported`},
		{"Temporal", `T_AFTER(t, DATE('2020-01-01'))`, `at character 1: T_AFTER: temporal functions are not supported; compare timestamps with <, >, BETWEEN`},
		{"Array", `A_CONTAINS(x, ('a'))`, `at character 1: A_CONTAINS: array functions are not supported`},
		{"Arithmetic", `a = b + 1`, `at character 7: unexpected character '+'`},
		{"SpatialAsValue", `a = S_INTERSECTS(g, POINT(1 2))`, `at character 5: S_INTERSECTS is a predicate, not a value`},
		{"SpatialMissingComma", `S_INTERSECTS(g POINT(1 2))`, `at character 16: expected ',', found 'POINT'`},
		{"PointOneCoordinate", `S_INTERSECTS(g, POINT(1))`, `at character 23: a position needs two or three coordinates, found 1`},
		{"PointZTwoCoordinates", `S_INTERSECTS(g, POINT Z(1 2))`, `at character 25: a position needs three coordinates (it is Z), found 2`},
		{"PointCommas", `S_INTERSECTS(g, POINT(1, 2))`, `at character 23: a position needs two or three coordinates, found 1`},
		{"ShortLine", `S_INTERSECTS(g, LINESTRING(1 2))`, `at character 17: a line needs at least two positions`},
		{"OpenRing", `S_INTERSECTS(g, POLYGON((0 0, 1 0, 1 1, 0 1)))`, `at character 17: a polygon ring must end where it starts`},
		{"ShortRing", `S_INTERSECTS(g, POLYGON((0 0, 1 0, 0 0)))`, `at character 17: a polygon ring needs at least four positions`},
		{"NestedCollection", `S_INTERSECTS(g, GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POINT(1 2))))`, `at character 36: expected a POINT, LINESTRING, POLYGON or MULTI geometry in the collection, found 'GEOMETRYCOLLECTION'`},
		{"BBoxThreeNumbers", `S_INTERSECTS(g, BBOX(1, 2, 3))`, `at character 17: a BBOX has four numbers, or six with heights; found 3`},
		{"BBoxWithoutCommas", `S_INTERSECTS(g, BBOX(1 2 3 4))`, `at character 24: expected ',' or ')', found the number 2`},
		{"EmptyGeometry", `S_INTERSECTS(g, POINT EMPTY)`, `at character 17: empty geometries are not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseText(tt.in, Limits{})
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("ParseText(%q) error = %v, want an *Error", tt.in, err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("ParseText(%q) error =\n%s\nwant\n%s", tt.in, got, tt.want)
			}
			if apperr.KindOf(err) != apperr.Invalid {
				t.Errorf("ParseText(%q) error kind = %v, want apperr.Invalid", tt.in, apperr.KindOf(err))
			}
		})
	}
}

func TestLimits(t *testing.T) {
	lim := Limits{MaxBytes: 200, MaxDepth: 4, MaxNodes: 20}
	tests := []struct {
		name, in, want string
	}{
		{"TooLong", `a = '` + strings.Repeat("x", 200) + `'`, `the filter is longer than 200 bytes`},
		{"TooManyParentheses", `((((( a = 1 )))))`, `at character 5: the filter nests more than 4 levels deep`},
		{"TooManyNots", `NOT NOT NOT NOT NOT a = 1`, `at character 17: the filter nests more than 4 levels deep`},
		{"TooDeep", `a = 1 AND (b = 1 OR (c = 1 AND (d = 1 OR e = 1)))`, `at character 35: the filter nests more than 4 levels deep`},
		{"TooManyNodes", `a IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)`, `at character 70: the filter has more than 20 parts (predicates, operators and values)`},
		{"TooManyNodesJSON", `{"op":"in","args":[{"property":"a"},[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]]}`, `at $.args[1][18]: the filter has more than 20 parts (predicates, operators and values)`},
		{"TooDeepJSON", `{"op":"not","args":[{"op":"not","args":[{"op":"not","args":[{"op":"not","args":[{"op":"isNull","args":[{"property":"a"}]}]}]}]}]}`, `at $.args[0].args[0].args[0].args[0]: the filter nests more than 4 levels deep`},
		{"TooLongJSON", `{"op":"=","args":[{"property":"a"},"` + strings.Repeat("x", 200) + `"]}`, `the filter is longer than 200 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if strings.HasPrefix(tt.in, "{") {
				_, err = ParseJSON([]byte(tt.in), lim)
			} else {
				_, err = ParseText(tt.in, lim)
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("parse(%q) error = %v, want %s", tt.in, err, tt.want)
			}
		})
	}
	t.Run("AtTheLimit", func(t *testing.T) {
		for _, in := range []string{`a = 1 AND (b = 1 OR (c = 1 AND d = 1))`, `a IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)`, `(((( a = 1 ))))`} {
			if _, err := ParseText(in, lim); err != nil {
				t.Errorf("ParseText(%q): %v", in, err)
			}
		}
	})
	t.Run("Defaults", func(t *testing.T) {
		deep := strings.Repeat("NOT ", 25) + "a = 1"
		if _, err := ParseText(deep, Limits{}); err == nil {
			t.Errorf("ParseText(25 NOTs) with default limits succeeded, want the depth refused")
		}
		long := "a IN (" + strings.Repeat("1, ", 1000) + "1)"
		if _, err := ParseText(long, Limits{}); err == nil {
			t.Errorf("ParseText(IN of 1001 values) with default limits succeeded, want the nodes refused")
		}
	})
}

func TestParseCRS(t *testing.T) {
	tests := []struct {
		in   string
		want CRS
	}{
		{"", CRS{SRID: 4326}},
		{"http://www.opengis.net/def/crs/OGC/1.3/CRS84", CRS{SRID: 4326}},
		{"https://www.opengis.net/def/crs/OGC/1.3/CRS84", CRS{SRID: 4326}},
		{"[OGC:CRS84]", CRS{SRID: 4326}},
		{"http://www.opengis.net/def/crs/EPSG/0/4326", CRS{SRID: 4326, LatLon: true}},
		{"EPSG:4326", CRS{SRID: 4326, LatLon: true}},
		{"http://www.opengis.net/def/crs/EPSG/0/3857", CRS{SRID: 3857}},
	}
	for _, tt := range tests {
		got, err := ParseCRS(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseCRS(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	_, err := ParseCRS("http://www.opengis.net/def/crs/EPSG/0/2263")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("ParseCRS(EPSG 2263) error = %v, want an *Error", err)
	}
}

func TestConformance(t *testing.T) {
	got := Conformance()
	if len(got) != 7 || got[0] != ConfCQL2Text {
		t.Errorf("Conformance() = %v", got)
	}
	got[0] = "changed"
	if Conformance()[0] != ConfCQL2Text {
		t.Error("Conformance() shares its slice with callers")
	}
}
