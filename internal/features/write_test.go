package features

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
)

func TestParseIfMatch(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"*", nil},
		{`"abc"`, []string{"abc"}},
		{`"abc-12ef"`, []string{"abc"}},
		{`"a", "b-1"`, []string{"a", "b"}},
		{`W/"abc"`, []string{}}, // weak: never matches
		{`abc`, []string{}},     // unquoted: never matches
		{`"a", W/"b"`, []string{"a"}},
	}
	for _, tt := range tests {
		got := parseIfMatch(tt.in)
		if (got == nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
			t.Errorf("parseIfMatch(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseFeature(t *testing.T) {
	tests := []struct {
		name, body string
		patch      bool
		wantLoc    string // "" is no error
	}{
		{"Full", `{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"a":1}}`, false, ""},
		{"NotAnObject", `[1]`, false, "body"},
		{"WrongType", `{"type":"FeatureCollection","geometry":{"type":"Point","coordinates":[1,2]}}`, false, "type"},
		{"NoType", `{"geometry":{"type":"Point","coordinates":[1,2]}}`, false, "type"},
		{"NoGeometry", `{"type":"Feature","properties":{}}`, false, "geometry"},
		{"NullGeometry", `{"type":"Feature","geometry":null}`, false, "geometry"},
		{"NoCoordinates", `{"type":"Feature","geometry":{"type":"Point"}}`, false, "geometry"},
		{"PropertiesNotAnObject", `{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":[1]}`, false, "properties"},
		{"PatchOfProperties", `{"properties":{"a":null}}`, true, ""},
		{"PatchWithNullGeometry", `{"geometry":null}`, true, "geometry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFeature([]byte(tt.body), tt.patch)
			if tt.wantLoc == "" {
				if err != nil {
					t.Fatalf("parseFeature = %v, want nil", err)
				}
				return
			}
			var v *apperr.ValidationError
			if !errors.As(err, &v) || len(v.Fields) == 0 || v.Fields[0].Loc[len(v.Fields[0].Loc)-1] != tt.wantLoc {
				t.Fatalf("parseFeature = %v, want a 422 at %s", err, tt.wantLoc)
			}
		})
	}
}

// FuzzWriteColumns holds writeColumns to its rule: every name it returns
// is a column of the layer, so no name a client sends reaches SQL; a
// name that is not one is a 422.
func FuzzWriteColumns(f *testing.F) {
	for _, s := range []string{`{"name":"x"}`, `{"name; DROP TABLE t":1}`, `{"id":1,"name":null}`, `{"":1}`, `{"\"name\"":1}`} {
		f.Add(s, false)
	}
	l := &layerSQL{l: &catalog.Layer{ID: "t", Key: catalog.Key{Column: "id"}, Properties: []catalog.Property{{Name: "id"}, {Name: "name"}, {Name: "Mixed Case"}}}}
	columns := []string{"id", "name", "Mixed Case"}
	f.Fuzz(func(t *testing.T, props string, all bool) {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(props), &m) != nil {
			return
		}
		cols, err := l.writeColumns(featureBody{Properties: m}, all, false)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(columns, name) {
				var v *apperr.ValidationError
				if !errors.As(err, &v) || !slices.Contains(v.Fields[0].Loc, any(name)) {
					t.Fatalf("writeColumns(%s) = %q, %v; want a 422 naming %q", props, cols, err, name)
				}
				return
			}
		}
		if err != nil {
			t.Fatalf("writeColumns(%s) = %v", props, err)
		}
		for _, c := range cols {
			if !slices.Contains(columns, c) || c == "id" {
				t.Fatalf("writeColumns(%s) = %q: %q is not a column to write", props, cols, c)
			}
		}
	})
}
