package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/ratelimit"
)

func TestCompose(t *testing.T) {
	geo := ratelimit.NewPolicy("geofence", ratelimit.Window{Limit: 10, Period: time.Second})
	geo.Tiers = map[string][]ratelimit.Window{"gold": {{Limit: 20, Period: time.Second}}, "free": {{Limit: 2, Period: time.Second}}}
	base := map[string]ratelimit.Policy{"geofence": geo}
	for _, tc := range []struct {
		name      string
		overrides []Override
		tiers     map[string]string // tier: windows wanted
		ids       map[string]string
		skipped   []string // what each skipped override's error names
		applied   applied
	}{
		{"None", nil, map[string]string{"gold": "20/1s", "free": "2/1s"}, nil, nil, applied{}},
		{"TierReplacesTheFiles",
			[]Override{{Tier: "gold", Policy: "geofence", Windows: "50/1s,1000/1d@calendar"}},
			map[string]string{"gold": "50/1s,1000/1d@calendar", "free": "2/1s"}, nil, nil, applied{tiers: 1}},
		{"KeyAndTier",
			[]Override{{Tier: "new", Policy: "geofence", Windows: "5/1s"}, {Identity: "key:acme", Policy: "geofence", Windows: "7/1m"}},
			map[string]string{"gold": "20/1s", "free": "2/1s", "new": "5/1s"}, map[string]string{"key:acme": "7/1m"}, nil, applied{tiers: 1, keys: 1}},
		{"BadOnesLeftOut",
			[]Override{
				{Tier: "gold", Policy: "nope", Windows: "1/1s"},
				{Identity: "key:big", Policy: "geofence", Windows: "200000/1s"},
				{Identity: "key:odd", Policy: "geofence", Windows: "1/1x"},
				{Identity: "key:ok", Policy: "geofence", Windows: "3/1s"},
			},
			map[string]string{"gold": "20/1s", "free": "2/1s"}, map[string]string{"key:ok": "3/1s"},
			[]string{"unknown policy nope", "key:big", "key:odd"}, applied{keys: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n, skipped := compose(base, tc.overrides)
			if n != tc.applied {
				t.Errorf("applied = %+v, want %+v", n, tc.applied)
			}
			p := got["geofence"]
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			check := func(what string, got map[string][]ratelimit.Window, want map[string]string) {
				if len(got) != len(want) {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
				for k, w := range want {
					if s := windows(got[k]); s != w {
						t.Errorf("%s[%s] = %s, want %s", what, k, s, w)
					}
				}
			}
			check("tiers", p.Tiers, tc.tiers)
			check("identities", p.Identities, tc.ids)
			if len(skipped) != len(tc.skipped) {
				t.Fatalf("skipped %v, want %d", skipped, len(tc.skipped))
			}
			for i, s := range tc.skipped {
				if !strings.Contains(skipped[i].Error(), s) {
					t.Errorf("skipped[%d] = %v, want it to name %q", i, skipped[i], s)
				}
			}
			if len(geo.Tiers) != 2 || geo.Identities != nil {
				t.Errorf("compose changed the base policy: %+v", geo)
			}
		})
	}
}

func windows(ws []ratelimit.Window) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	return strings.Join(parts, ",")
}
