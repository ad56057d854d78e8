package cql2

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTextAndJSONAgree parses both forms of every filter of the PostGIS
// table: they must be the same expression and write the same SQL with
// the same arguments.
func TestTextAndJSONAgree(t *testing.T) {
	for _, c := range filterCases {
		t.Run(c.name, func(t *testing.T) {
			te, err := ParseText(c.text, Limits{})
			if err != nil {
				t.Fatalf("ParseText(%s): %v", c.text, err)
			}
			je, err := ParseJSON([]byte(c.json), Limits{})
			if err != nil {
				t.Fatalf("ParseJSON(%s): %v", c.json, err)
			}
			if te.String() != je.String() {
				t.Fatalf("text and JSON differ:\n%s\n%s", te, je)
			}
			q := testTables[c.table].q
			var targs, jargs []any
			tsql, err := SQL(te, q, c.crs, &targs)
			if err != nil {
				t.Fatalf("SQL(%s): %v", te, err)
			}
			jsql, err := SQL(je, q, c.crs, &jargs)
			if err != nil {
				t.Fatalf("SQL(%s): %v", je, err)
			}
			if tsql != jsql || !cmp.Equal(targs, jargs) {
				t.Errorf("text and JSON write different SQL:\n%s %v\n%s %v", tsql, targs, jsql, jargs)
			}
		})
	}
}

var unitColumns = Columns{
	"name":  {SQL: `t."Name"`, Type: "string"},
	"pop":   {SQL: "(t.props->>'pop')::float8", Type: "number"},
	"n":     {SQL: "t.n", Type: "integer"},
	"ok":    {SQL: "t.ok", Type: "boolean"},
	"at":    {SQL: "t.at", Type: "timestamp"},
	"day":   {SQL: "t.day", Type: "date"},
	"geom":  {SQL: "t.geom", Type: "geometry", SRID: 4326},
	"merc":  {SQL: "t.merc", Type: "geometry", SRID: 3857},
	"geog":  {SQL: "t.geog", Type: "geometry", Geography: true},
	"other": {SQL: "t.other", Type: "geometry", SRID: 32633},
}

func TestSQL(t *testing.T) {
	day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, in string
		crs      CRS
		want     string
		args     []any
	}{
		{"String", `name = 'x'`, CRS{}, `(t."Name" = $2::text)`, []any{"x"}},
		{"WholeNumbers", `n >= 3 AND n < 2.5`, CRS{}, `((t.n >= $2::int8) AND (t.n < $3::float8))`, []any{int64(3), 2.5}},
		{"NumberColumn", `pop > 3`, CRS{}, `((t.props->>'pop')::float8 > $2::float8)`, []any{3.0}},
		{"LiteralsOnly", `1 = 1`, CRS{}, `($2::int8 = $3::int8)`, []any{int64(1), int64(1)}},
		{"Boolean", `ok = TRUE`, CRS{}, `(t.ok = $2::boolean)`, []any{true}},
		{"Timestamp", `at > TIMESTAMP('2024-03-01T06:30:00.5Z')`, CRS{}, `(t.at > $2::timestamptz)`, []any{time.Date(2024, 3, 1, 6, 30, 0, 5e8, time.UTC)}},
		{"Date", `day <= DATE('2024-03-01')`, CRS{}, `(t.day <= $2::date)`, []any{day}},
		{"LogicAndNot", `NOT (ok = TRUE OR n = 1) AND TRUE`, CRS{}, `((NOT ((t.ok = $2::boolean) OR (t.n = $3::int8))) AND TRUE)`, []any{true, int64(1)}},
		{"Like", `name NOT LIKE 'a\_%'`, CRS{}, `(NOT (t."Name" LIKE $2::text))`, []any{`a\_%`}},
		{"Between", `n BETWEEN 1 AND 3`, CRS{}, `(t.n BETWEEN $2::int8 AND $3::int8)`, []any{int64(1), int64(3)}},
		{"BetweenDates", `day BETWEEN DATE('2024-03-01') AND DATE('2024-03-01')`, CRS{}, `(t.day BETWEEN $2::date AND $3::date)`, []any{day, day}},
		{"InStrings", `name IN ('a', 'b')`, CRS{}, `(t."Name" = ANY($2::text[]))`, []any{[]string{"a", "b"}}},
		{"InMixedNumbers", `n IN (1, 2.5)`, CRS{}, `(t.n = ANY($2::float8[]))`, []any{[]float64{1, 2.5}}},
		{"NotInIntegers", `n NOT IN (1, 2)`, CRS{}, `(NOT (t.n = ANY($2::int8[])))`, []any{[]int64{1, 2}}},
		{"InBooleans", `ok IN (TRUE)`, CRS{}, `(t.ok = ANY($2::boolean[]))`, []any{[]bool{true}}},
		{"InTimestamps", `at IN (TIMESTAMP('2024-03-01T00:00:00Z'))`, CRS{}, `(t.at = ANY($2::timestamptz[]))`, []any{[]time.Time{day}}},
		{"IsNull", `name IS NULL AND geom IS NOT NULL`, CRS{}, `((t."Name" IS NULL) AND (NOT (t.geom IS NULL)))`, nil},
		{"LiteralIsNull", `'a' IS NULL`, CRS{}, `FALSE`, nil},
		{"Intersects", `S_INTERSECTS(geom, POINT(1 2))`, CRS{},
			`ST_Intersects(t.geom, (SELECT ST_GeomFromText($2::text, 4326)))`, []any{"POINT(1 2)"}},
		{"Box", `S_WITHIN(geom, BBOX(1, 2, 3, 4))`, CRS{},
			`ST_Within(t.geom, (SELECT ST_GeomFromText($2::text, 4326)))`, []any{"POLYGON((1 2, 3 2, 3 4, 1 4, 1 2))"}},
		{"PolygonIsMadeValid", `S_WITHIN(geom, MULTIPOLYGON(((1 2, 3 2, 3 4, 1 2))))`, CRS{},
			`ST_Within(t.geom, (SELECT ST_MakeValid(ST_GeomFromText($2::text, 4326))))`, []any{"MULTIPOLYGON(((1 2, 3 2, 3 4, 1 2)))"}},
		{"BoxAcrossTheAntimeridian", `S_INTERSECTS(geom, BBOX(170, -10, -170, 10))`, CRS{},
			`ST_Intersects(t.geom, (SELECT ST_GeomFromText($2::text, 4326)))`,
			[]any{"MULTIPOLYGON(((170 -10, 180 -10, 180 10, 170 10, 170 -10)), ((-180 -10, -170 -10, -170 10, -180 10, -180 -10)))"}},
		{"CollectionIsMerged", `S_CONTAINS(geom, GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1)))`, CRS{},
			`ST_Contains(t.geom, (SELECT ST_UnaryUnion(ST_MakeValid(ST_GeomFromText($2::text, 4326)))))`, []any{"GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1))"}},
		{"ProjectedColumn", `S_CROSSES(merc, LINESTRING(0 0, 1 1))`, CRS{},
			`ST_Crosses(t.merc, (SELECT ST_Transform(ST_GeomFromText($2::text, 4326), 3857)))`, []any{"LINESTRING(0 0, 1 1)"}},
		{"LiteralFirst", `S_WITHIN(POINT(1 2), other)`, CRS{},
			`ST_Within((SELECT ST_Transform(ST_GeomFromText($2::text, 4326), 32633)), t.other)`, []any{"POINT(1 2)"}},
		{"LatitudeFirst", `S_INTERSECTS(geom, POINT(52 13)) OR S_INTERSECTS(geom, BBOX(52, 13, 53, 14))`, CRS{SRID: 4326, LatLon: true},
			`(ST_Intersects(t.geom, (SELECT ST_GeomFromText($2::text, 4326))) OR ST_Intersects(t.geom, (SELECT ST_GeomFromText($3::text, 4326))))`,
			[]any{"POINT(13 52)", "POLYGON((13 52, 14 52, 14 53, 13 53, 13 52))"}},
		{"MercatorLiteral", `S_INTERSECTS(geom, POINT(1000 2000)) AND S_EQUALS(merc, POINT(1000 2000))`, CRS{SRID: 3857},
			`(ST_Intersects(t.geom, (SELECT ST_Transform(ST_GeomFromText($2::text, 3857), 4326))) AND ST_Equals(t.merc, (SELECT ST_GeomFromText($3::text, 3857))))`,
			[]any{"POINT(1000 2000)", "POINT(1000 2000)"}},
		{"GeographyIntersects", `S_INTERSECTS(geog, POINT(1 2))`, CRS{},
			`ST_Intersects(t.geog, (SELECT ST_GeomFromText($2::text, 4326)::geography))`, []any{"POINT(1 2)"}},
		{"GeographyBox", `S_INTERSECTS(geog, BBOX(-170, -80, 170, 80))`, CRS{},
			`ST_Intersects(t.geog, (SELECT ST_Segmentize(ST_GeomFromText($2::text, 4326), 0.5)::geography))`,
			[]any{"MULTIPOLYGON(((-170 -80, -85 -80, -85 80, -170 80, -170 -80)), ((-85 -80, 0 -80, 0 80, -85 80, -85 -80)), ((0 -80, 85 -80, 85 80, 0 80, 0 -80)), ((85 -80, 170 -80, 170 80, 85 80, 85 -80)))"}},
		{"GeographyBoxInMetres", `S_WITHIN(geog, BBOX(0, 0, 1000, 1000))`, CRS{SRID: 3857},
			`ST_Within(t.geog::geometry, (SELECT ST_Transform(ST_GeomFromText($2::text, 3857), 4326)))`, []any{"POLYGON((0 0, 1000 0, 1000 1000, 0 1000, 0 0))"}},
		{"GeographyDisjoint", `S_DISJOINT(geog, POINT(1 2))`, CRS{SRID: 3857},
			`(NOT ST_Intersects(t.geog, (SELECT ST_Transform(ST_GeomFromText($2::text, 3857), 4326)::geography)))`, []any{"POINT(1 2)"}},
		{"GeographyWithin", `S_WITHIN(geog, POINT(1 2))`, CRS{},
			`ST_Within(t.geog::geometry, (SELECT ST_GeomFromText($2::text, 4326)))`, []any{"POINT(1 2)"}},
		{"TwoColumns", `S_INTERSECTS(merc, other) AND S_TOUCHES(geom, geog)`, CRS{},
			`(ST_Intersects(t.merc, ST_Transform(t.other, 3857)) AND ST_Touches(t.geom, t.geog::geometry))`, nil},
		{"GeographyAndGeometryColumns", `S_INTERSECTS(geog, merc)`, CRS{},
			`ST_Intersects(t.geog, ST_Transform(t.merc, 4326)::geography)`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseText(tt.in, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			args := []any{"earlier"}
			got, err := SQL(e, unitColumns, tt.crs, &args)
			if err != nil {
				t.Fatalf("SQL(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("SQL(%s) =\n%s\nwant\n%s", tt.in, got, tt.want)
			}
			if diff := cmp.Diff(append([]any{"earlier"}, tt.args...), args); diff != "" {
				t.Errorf("SQL(%s) args (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestSQLErrors(t *testing.T) {
	tests := []struct {
		name, in string
		crs      CRS
		want     string
	}{
		{"UnknownProperty", `name = 'x' AND nam = 'y'`, CRS{}, `at character 16: unknown property "nam"`},
		{"StringAndNumber", `name = 5`, CRS{}, `at character 6: cannot compare the property "name" (a string) with 5 (a number)`},
		{"NumberAndString", `n < '5'`, CRS{}, `at character 3: cannot compare the property "n" (a number) with '5' (a string)`},
		{"DateAndTimestamp", `day = TIMESTAMP('2024-03-01T00:00:00Z')`, CRS{}, `at character 5: cannot compare the property "day" (a date) with TIMESTAMP('2024-03-01T00:00:00Z') (a timestamp)`},
		{"BooleanOrder", `ok < TRUE`, CRS{}, `at character 4: the property "ok" (a boolean) has no order: compare it with = or <>`},
		{"GeometryEquals", `geom = POINT(1 2)`, CRS{}, `at character 6: geometries are compared with the S_ functions, such as S_EQUALS, not with =`},
		{"LikeNumber", `n LIKE '1%'`, CRS{}, `at character 3: LIKE matches strings, not the property "n" (a number)`},
		{"BetweenMixed", `n BETWEEN 1 AND 'z'`, CRS{}, `at character 3: cannot compare the property "n" (a number) with 'z' (a string)`},
		{"BetweenBooleans", `ok BETWEEN FALSE AND TRUE`, CRS{}, `at character 4: BETWEEN needs values with an order, not the property "ok" (a boolean)`},
		{"InMixed", `name IN ('a', 1)`, CRS{}, `at character 6: cannot compare the property "name" (a string) with 1 (a number)`},
		{"InProperty", `name IN ('a', name)`, CRS{}, `at character 15: an IN list holds values, not properties`},
		{"SpatialOnString", `S_INTERSECTS(name, POINT(1 2))`, CRS{}, `at character 14: S_INTERSECTS compares geometries, not the property "name" (a string)`},
		{"SpatialUnknown", `S_INTERSECTS(geometry, POINT(1 2))`, CRS{}, `at character 14: unknown property "geometry"`},
		{"BeyondThePole", `S_INTERSECTS(geom, LINESTRING(0 0, 1 91))`, CRS{}, `at character 20: latitude 91 is beyond a pole`},
		{"BeyondThePoleLatitudeFirst", `S_INTERSECTS(geom, POINT(-95 10))`, CRS{SRID: 4326, LatLon: true}, `at character 20: latitude -95 is beyond a pole`},
		{"BoxBeyondThePole", `S_INTERSECTS(geom, BBOX(0, 0, 10, 100))`, CRS{}, `at character 20: the box reaches beyond a pole`},
		{"BoxUpsideDown", `S_INTERSECTS(geom, BBOX(0, 10, 10, 0))`, CRS{}, `at character 20: the box's south edge is north of its north edge`},
		{"BoxBackwardsInMetres", `S_INTERSECTS(merc, BBOX(10, 0, 0, 10))`, CRS{SRID: 3857}, `at character 20: the box's west edge is east of its east edge`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseText(tt.in, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			args := []any{"earlier"}
			_, err = SQL(e, unitColumns, tt.crs, &args)
			var ce *Error
			if !errors.As(err, &ce) || err.Error() != tt.want {
				t.Fatalf("SQL(%s) error = %v, want *Error %s", tt.in, err, tt.want)
			}
			if len(args) != 1 {
				t.Errorf("SQL(%s) left args = %v, want them as they were", tt.in, args)
			}
		})
	}
	t.Run("UnknownPropertyNamed", func(t *testing.T) {
		e, _ := ParseText(`nam = 1`, Limits{})
		_, err := SQL(e, unitColumns, CRS{}, new([]any))
		var ce *Error
		if !errors.As(err, &ce) || ce.Property != "nam" {
			t.Errorf("SQL(nam = 1) error = %#v, want Property nam", err)
		}
	})
	t.Run("BadColumnIsNotTheClients", func(t *testing.T) {
		e, _ := ParseText(`x = 1`, Limits{})
		_, err := SQL(e, Columns{"x": {SQL: "t.x", Type: "int"}}, CRS{}, new([]any))
		var ce *Error
		if err == nil || errors.As(err, &ce) {
			t.Errorf("SQL with a column of type int: error = %v, want a plain error", err)
		}
	})
}
