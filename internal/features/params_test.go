package features

import (
	"slices"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/apperr"
)

func TestParseProperties(t *testing.T) {
	known := []string{"name", ".namE ", " padded", "colCamelCase"}
	tests := []struct {
		name, in string
		want     []string
		err      string
	}{
		{"OK", "name", []string{"name"}, ""},
		{"SpacesKept", ".namE , padded", []string{".namE ", " padded"}, ""},
		{"CaseKept", "colCamelCase", []string{"colCamelCase"}, ""},
		{"EmptyIsNone", "", []string{}, ""},
		{"EmptyNamesSkipped", "name,,", []string{"name"}, ""},
		{"ErrUnknown", "nam", nil, `no property "nam"`},
		{"ErrTrimmedIsAnotherName", "name ", nil, `no property "name "`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProperties(tt.in, known, "c")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || apperr.KindOf(err) != apperr.BadRequest {
					t.Fatalf("parseProperties(%q) = %v, %v; want a 400 saying %s", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("parseProperties(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// FuzzParseProperties holds parseProperties to its rule: the names are
// the comma-separated parts, exactly, without the empty ones; a part that
// is not a known name is a 400 naming it.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{"", "name", " name ", ".namE ", "a,,b", ",", "nam", "name,\x00", "\xff"} {
		f.Add(s)
	}
	known := []string{"name", ".namE ", " name "}
	f.Fuzz(func(t *testing.T, in string) {
		var want []string
		unknown := ""
		for _, p := range strings.Split(in, ",") {
			if p == "" {
				continue
			}
			if !slices.Contains(known, p) && unknown == "" {
				unknown = p
			}
			want = append(want, p)
		}
		got, err := parseProperties(in, known, "c")
		if unknown != "" {
			if err == nil || apperr.KindOf(err) != apperr.BadRequest {
				t.Fatalf("parseProperties(%q) = %q, %v; want a 400 naming %q", in, got, err, unknown)
			}
			return
		}
		if err != nil || len(got) != len(want) || !slices.Equal(got, want) {
			t.Fatalf("parseProperties(%q) = %q, %v; want %q", in, got, err, want)
		}
		free, err := parseProperties(in, nil, "c")
		if err != nil || len(free) != len(want) {
			t.Fatalf("parseProperties(%q, free-form) = %q, %v; want %q", in, free, err, want)
		}
	})
}
