package cql2

import (
	"errors"
	"testing"
)

func TestParseJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"Comparison", `{"op": "=", "args": [{"property": "name"}, "Berlin"]}`, `"name" = 'Berlin'`},
		{"OperatorCase", `{"op": "AND", "args": [{"op": "isnull", "args": [{"property": "a"}]}, {"op": "S_Intersects", "args": [{"property": "g"}, {"bbox": [1, 2, 3, 4]}]}]}`,
			`("a" IS NULL AND S_INTERSECTS("g", BBOX(1, 2, 3, 4)))`},
		{"NumbersAsWritten", `{"op": "in", "args": [{"property": "a"}, [1, -2.50, 1e3, 1E+3]]}`, `"a" IN (1, -2.50, 1e3, 1E+3)`},
		{"Literals", `{"op": "or", "args": [true, {"op": "=", "args": [false, {"property": "b"}]}, {"op": "<", "args": [{"property": "t"}, {"timestamp": "2024-03-01T06:00:00Z"}]}, {"op": ">", "args": [{"property": "d"}, {"date": "2024-03-01"}]}]}`,
			`(TRUE OR FALSE = "b" OR "t" < TIMESTAMP('2024-03-01T06:00:00Z') OR "d" > DATE('2024-03-01'))`},
		{"AnyPropertyName", `{"op": "=", "args": [{"property": "a \"b\" c"}, "it's"]}`, `"a ""b"" c" = 'it''s'`},
		{"GeoJSON", `{"op": "s_within", "args": [{"property": "g"}, {"type": "MultiPolygon", "bbox": [0, 0, 1, 1], "coordinates": [[[[0, 0], [1, 0], [1, 1], [0, 0]]]]}]}`,
			`S_WITHIN("g", MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0))))`},
		{"Collection", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "GeometryCollection", "geometries": [{"type": "Point", "coordinates": [1, 2, 3]}, {"type": "MultiLineString", "coordinates": [[[0, 0], [1, 1]]]}]}]}`,
			`S_INTERSECTS("g", GEOMETRYCOLLECTION(POINT(1 2), MULTILINESTRING((0 0, 1 1))))`},
		{"Whitespace", " \n{\"op\":\"not\",\"args\":[{\"op\":\"like\",\"args\":[{\"property\":\"a\"},\"x%\"]}]}\n ", `NOT "a" LIKE 'x%'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseJSON([]byte(tt.in), Limits{})
			if err != nil {
				t.Fatalf("ParseJSON(%s): %v", tt.in, err)
			}
			if got := e.String(); got != tt.want {
				t.Errorf("ParseJSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"Empty", ``, `the filter is empty`},
		{"NotJSON", `{"op": "=", "args": [1, 2],}`, `at character 28: the filter is not JSON: invalid character '}' looking for beginning of object key string`},
		{"Truncated", `{"op": "=", "args": [`, `at character 22: the JSON ends before it is complete`},
		{"Trailing", `true false`, `at character 6: unexpected data after the JSON value`},
		{"NotBoolean", `{"property": "a"}`, `at $: a property is not a boolean expression: compare it, e.g. {"op": "=", "args": [{"property": ...}, ...]}`},
		{"NotBooleanString", `"a = 1"`, `at $: expected a boolean expression: {"op": ..., "args": [...]}, true or false; found the string "a = 1"`},
		{"OpNotString", `{"op": 5, "args": []}`, `at $.op: op must be a string`},
		{"ExtraMember", `{"op": "=", "args": [{"property": "a"}, 1], "arg": 2}`, `at $.arg: unexpected member "arg"`},
		{"ArgsNotArray", `{"op": "=", "args": {}}`, `at $.args: args must be an array`},
		{"UnknownOperator", `{"op": "and", "args": [true, {"op": "lik", "args": []}]}`, `at $.args[1].op: unknown operator "lik"`},
		{"WrongArity", `{"op": "between", "args": [{"property": "a"}, 1]}`, `at $.args: between takes 3 arguments, found 2`},
		{"AndOfOne", `{"op": "and", "args": [true]}`, `at $.args: and takes two or more arguments, found 1`},
		{"AndOfValues", `{"op": "and", "args": [true, 5]}`, `at $.args[1]: expected a boolean expression: {"op": ..., "args": [...]}, true or false; found the number 5`},
		{"LikePattern", `{"op": "like", "args": [{"property": "a"}, {"property": "b"}]}`, `at $.args[1]: the pattern of like must be a string`},
		{"LikeTrailingEscape", `{"op": "like", "args": [{"property": "a"}, "x\\"]}`, `at $.args[1]: the LIKE pattern 'x\' ends in its escape character \`},
		{"InNotArray", `{"op": "in", "args": [{"property": "a"}, "x"]}`, `at $.args[1]: the second argument of in must be an array of one or more values`},
		{"InEmpty", `{"op": "in", "args": [{"property": "a"}, []]}`, `at $.args[1]: the second argument of in must be an array of one or more values`},
		{"Null", `{"op": "=", "args": [{"property": "a"}, null]}`, `at $.args[1]: null is not a CQL2 value: test for a missing value with isNull`},
		{"Array", `{"op": "=", "args": [{"property": "a"}, [1]]}`, `at $.args[1]: arrays are not supported here (array functions are not supported)`},
		{"PropertyNotString", `{"op": "=", "args": [{"property": 1}, 1]}`, `at $.args[0].property: property must be a string`},
		{"PropertyEmpty", `{"op": "=", "args": [{"property": ""}, 1]}`, `at $.args[0].property: a property name cannot be empty`},
		{"PropertyExtra", `{"op": "=", "args": [{"property": "a", "type": "x"}, 1]}`, `at $.args[0].type: unexpected member "type"`},
		{"UnknownObject", `{"op": "=", "args": [{"prop": "a"}, 1]}`, `at $.args[0]: expected a value: a string, a number, a boolean, {"property": ...}, {"timestamp": ...}, {"date": ...}, a GeoJSON geometry or {"bbox": [...]}`},
		{"BadTimestamp", `{"op": "=", "args": [{"property": "a"}, {"timestamp": "2024-03-01"}]}`, `at $.args[1].timestamp: '2024-03-01' is not a UTC timestamp such as '2024-03-01T06:00:00Z'`},
		{"BadDate", `{"op": "=", "args": [{"property": "a"}, {"date": "2024-02-30"}]}`, `at $.args[1].date: '2024-02-30' is not a date such as '2024-03-01'`},
		{"NUL", `{"op": "=", "args": [{"property": "a"}, "x\u0000"]}`, `at $.args[1]: a character literal cannot hold the NUL character`},
		{"HugeNumber", `{"op": "=", "args": [{"property": "a"}, 1e400]}`, `at $.args[1]: the number 1e400 is out of range`},
		{"Interval", `{"op": "t_intersects", "args": [{"property": "a"}, {"interval": ["..", ".."]}]}`, `at $.op: T_INTERSECTS: temporal functions are not supported; compare timestamps with <, >, BETWEEN`},
		{"Casei", `{"op": "=", "args": [{"op": "casei", "args": [{"property": "a"}]}, "x"]}`, `at $.args[0].op: CASEI (case- and accent-insensitive comparison) is not supported`},
		{"Arithmetic", `{"op": "=", "args": [{"op": "+", "args": [{"property": "a"}, 1]}, 2]}`, `at $.args[0].op: arithmetic is not supported`},
		{"Function", `{"op": "avg", "args": [{"property": "a"}]}`, `at $.op: unknown operator "avg"`},
		{"BBoxShort", `{"op": "s_intersects", "args": [{"property": "g"}, {"bbox": [1, 2, 3]}]}`, `at $.args[1].bbox: a BBOX has four numbers, or six with heights; found 3`},
		{"BBoxNotNumbers", `{"op": "s_intersects", "args": [{"property": "g"}, {"bbox": [1, 2, 3, "4"]}]}`, `at $.args[1].bbox[3]: expected a number, found the string "4"`},
		{"GeoJSONType", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "Feature", "geometry": null}]}`, `at $.args[1].type: expected a GeoJSON geometry type (Point, LineString, Polygon, MultiPoint, MultiLineString, MultiPolygon or GeometryCollection), found the string "Feature"`},
		{"GeoJSONNoCoordinates", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "Point"}]}`, `at $.args[1]: a Point needs coordinates`},
		{"GeoJSONShortPosition", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "LineString", "coordinates": [[1, 2], [3]]}]}`, `at $.args[1].coordinates[1]: expected a position, an array of two or three numbers, found an array`},
		{"GeoJSONOpenRing", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}]}`, `at $.args[1]: a polygon ring must end where it starts`},
		{"GeoJSONNoRings", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "Polygon", "coordinates": []}]}`, `at $.args[1]: a polygon needs at least one ring`},
		{"GeoJSONNoMembers", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "MultiPoint", "coordinates": []}]}`, `at $.args[1]: a MULTI geometry needs at least one member`},
		{"GeoJSONNestedCollection", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "GeometryCollection", "geometries": [{"type": "GeometryCollection", "geometries": []}]}]}`, `at $.args[1].geometries[0].type: expected a GeoJSON geometry type (Point, LineString, Polygon, MultiPoint, MultiLineString or MultiPolygon), found the string "GeometryCollection"`},
		{"GeoJSONEmptyCollection", `{"op": "s_intersects", "args": [{"property": "g"}, {"type": "GeometryCollection", "geometries": []}]}`, `at $.args[1]: a GEOMETRYCOLLECTION needs at least one geometry`},
		{"CharactersNotBytes", `{"op": "=", "args": [{"property": "名前"}, 1],}`, `at character 45: the filter is not JSON: invalid character '}' looking for beginning of object key string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tt.in), Limits{})
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("ParseJSON(%s) error = %v, want an *Error", tt.in, err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("ParseJSON(%s) error =\n%s\nwant\n%s", tt.in, got, tt.want)
			}
		})
	}
}
