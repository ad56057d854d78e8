package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/apperr"
)

func TestMayRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layers []string
		layer  string
		want   bool
	}{
		{"NilIsEveryLayer", nil, "roads", true},
		{"Exact", []string{"places", "roads"}, "roads", true},
		{"ExactOnly", []string{"roads"}, "roads__centre", false},
		{"CaseKept", []string{"roads"}, "Roads", false},
		{"SchemaPattern", []string{"transit__*"}, "transit__Bus_Stops-1a2b3c", true},
		{"SchemaPatternOtherSchema", []string{"transit__*"}, "transitive__stops", false},
		{"Question", []string{"zone?"}, "zone7", true},
		{"Class", []string{"zone[0-3]"}, "zone4", false},
		{"NegatedClass", []string{"zone[^0-3]"}, "zone4", true},
		{"Star", []string{"*"}, "anything", true},
		{"MalformedMatchesNothing", []string{"zone[", "roads"}, "zone[", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Identity{Layers: tc.layers}).MayRead(tc.layer); got != tc.want {
				t.Errorf("Identity{Layers: %q}.MayRead(%q) = %v, want %v", tc.layers, tc.layer, got, tc.want)
			}
		})
	}
}

func TestCheckLayer(t *testing.T) {
	key := Identity{Kind: KindKey, ID: "k", Layers: []string{"places", "transit__*"}}
	tok := Identity{Kind: KindSub, ID: "alice", Layers: []string{"places"}}
	for _, tc := range []struct {
		name  string
		id    *Identity // nil: no identity in the context
		layer string
		write bool
		want  string // "" for nil
	}{
		{"OK/Key", &key, "places", false, ""},
		{"OK/KeyWrite", &key, "places", true, ""},
		{"OK/Pattern", &key, "transit__stops", false, ""},
		{"OK/Unlimited", &Identity{Kind: KindKey, ID: "all"}, "roads", false, ""},
		{"OK/Anonymous", &Identity{Kind: KindIP, ID: "203.0.113.9", Anonymous: true}, "roads", false, ""},
		{"OK/NoIdentity", nil, "roads", false, ""},
		{"Forbidden/Key", &key, "roads", false, `These credentials may not read layer "roads".`},
		{"Forbidden/KeyWrite", &key, "roads", true, `These credentials may not write layer "roads".`},
		{"Forbidden/Token", &tok, "roads", false, `These credentials may not read layer "roads".`},
		{"Forbidden/TokenWrite", &tok, "roads", true, `These credentials may not write layer "roads".`},
		{"Forbidden/OddName", &key, "a\"b\x00c", false, `These credentials may not read that layer.`},
		{"Forbidden/LongName", &key, strings.Repeat("r", MaxLayerPattern+1), false, `These credentials may not read that layer.`},
		{"Forbidden/Empty", &key, "", false, `These credentials may not read that layer.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.id != nil {
				ctx = WithIdentity(ctx, *tc.id)
			}
			check := CheckLayer
			if tc.write {
				check = CheckLayerWrite
			}
			err := check(ctx, tc.layer)
			if tc.want == "" {
				if err != nil {
					t.Errorf("CheckLayer(%q) = %v, want nil", tc.layer, err)
				}
				return
			}
			if got := apperr.MessageOf(err); got != tc.want || apperr.KindOf(err) != apperr.Forbidden || !errors.Is(err, ErrLayerForbidden) {
				t.Errorf("CheckLayer(%q) = %q (kind %v, is ErrLayerForbidden %v), want Forbidden %q wrapping ErrLayerForbidden",
					tc.layer, got, apperr.KindOf(err), errors.Is(err, ErrLayerForbidden), tc.want)
			}
			if got := apperr.MessageOf(err); strings.Contains(got, "places") || strings.Contains(got, "transit") {
				t.Errorf("CheckLayer(%q) detail %q names a layer the caller may read", tc.layer, got)
			}
		})
	}
}

func TestValidateLayers(t *testing.T) {
	many := make([]string, MaxLayers+1)
	for i := range many {
		many[i] = "l" + strings.Repeat("x", i)
	}
	for _, tc := range []struct {
		name   string
		layers []string
		want   string // "" for nil, else part of the message
	}{
		{"OK/Nil", nil, ""},
		{"OK/Ids", []string{"places", "transit__Bus_Stops-1a2b3c", "select__centroid"}, ""},
		{"OK/Patterns", []string{"transit__*", "zone?", "zone[0-9]", "zone[^a-c]"}, ""},
		{"OK/Most", many[:MaxLayers], ""},
		{"OK/Longest", []string{strings.Repeat("a", MaxLayerPattern)}, ""},
		{"Empty", []string{}, "the list is empty; leave it out to allow every layer"},
		{"TooMany", many, "more than 64 entries"},
		{"EmptyEntry", []string{"places", ""}, `entry 2 ("") is empty`},
		{"TooLong", []string{strings.Repeat("a", MaxLayerPattern+1)}, "is longer than 256 characters"},
		{"Space", []string{"a b"}, `entry 1 ("a b") is not a layer id or pattern`},
		{"Dot", []string{"transit.stops"}, "is not a layer id or pattern"},
		{"Slash", []string{"transit/*"}, "is not a layer id or pattern"},
		{"Escape", []string{`zone\*`}, "is not a layer id or pattern"},
		{"NonASCII", []string{"straßen"}, "is not a layer id or pattern"},
		{"BadPattern", []string{"zone[0-"}, "is not a layer id or pattern"},
		{"Duplicate", []string{"roads", "places", "roads"}, `entry 3 ("roads") appears twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateLayers(tc.layers)
			if tc.want == "" {
				if err != nil {
					t.Errorf("ValidateLayers(%q) = %v, want nil", tc.layers, err)
				}
				return
			}
			if got := apperr.MessageOf(err); !strings.Contains(got, tc.want) || apperr.KindOf(err) != apperr.Invalid {
				t.Errorf("ValidateLayers(%q) = %q (kind %v), want Invalid containing %q", tc.layers, got, apperr.KindOf(err), tc.want)
			}
		})
	}
}
