package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestPublishCommand lists a team's layers, installs exact invalidation on
// two of its tables (one named by layer id, one by schema.table), refuses
// a view and an unknown name with a clear message, and removes it again.
func TestPublishCommand(t *testing.T) {
	pool, dbURL := testenv.UserDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "PUBLISH_SCHEMAS": strings.Join(testenv.UserSchemas, ",")}
	triggers := func(table string) int {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass", table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := []struct {
		name    string
		args    []string
		wantOut []string
		wantErr string
	}{
		{"List", nil, []string{"LAYER", "roads ", "public.roads.geom", "table", "LineString", "3857", "ttl", "places ", "exact"}, ""},
		{"Install", []string{"--invalidate", "roads", "transit.Bus Stops"}, []string{
			"public.roads: invalidated exactly: triggers geogate_tiles_bump and geogate_tiles_bump_truncate installed",
			"transit.Bus Stops: invalidated exactly"}, ""},
		{"Again", []string{"--invalidate", "public.roads"}, []string{"public.roads: already invalidated exactly"}, ""},
		{"View", []string{"--invalidate", "french_cities"}, []string{"public.french_cities: not changed: not a table"}, "1 of 1 tables not changed"},
		{"Unknown", []string{"--invalidate", "nope"}, nil, `"nope" is neither a published layer nor a published schema.table`},
		{"Both", []string{"--invalidate", "--remove", "roads"}, nil, "exclude each other"},
		{"ListAfter", nil, []string{"exact"}, ""},
		{"Remove", []string{"--remove", "roads"}, []string{"public.roads: triggers geogate_tiles_bump and geogate_tiles_bump_truncate removed"}, ""},
		{"RemoveAgain", []string{"--remove", "roads"}, []string{"public.roads: not invalidated exactly; nothing to remove"}, ""},
		{"Contains", []string{"--contains", "countries", "parcels"}, []string{
			"public.countries.geom: subdivided: copy geogate.parts_countries_", "parts), triggers geogate_parts_",
			"public.parcels.geom: subdivided"}, ""},
		{"ContainsAgain", []string{"--contains", "public.countries"}, []string{"public.countries.geom: already subdivided"}, ""},
		{"ListContains", nil, []string{"CONTAINS", "subdivided", "index"}, ""},
		{"ContainsGeography", []string{"--contains", "zones"}, []string{"public.zones.geog: not changed: no subdivided copy: a geography column"},
			"1 of 1 layers not changed"},
		{"ContainsView", []string{"--contains", "city_buffers"}, []string{"public.city_buffers.geom: not changed: no subdivided copy: not a plain table"},
			"1 of 1 layers not changed"},
		{"ContainsLines", []string{"--contains", "roads"}, nil, "public.roads has no polygon layer"},
		{"ContainsEvery", []string{"--contains"}, []string{
			"public.zones.geog: skipped, no subdivided copy: a geography column",
			"public.landmarks.geom: subdivided: copy", "public.countries.geom: already subdivided",
			"public.geofences.geom: already subdivided (the fences' own copy, geogate.geofence_parts)"}, ""},
		{"RemoveContains", []string{"--remove", "--contains", "countries"}, []string{"public.countries.geom: copy geogate.parts_countries_", "removed"}, ""},
		{"RemoveContainsAgain", []string{"--remove", "--contains", "countries"}, []string{"public.countries.geom: not subdivided; nothing to remove"}, ""},
	}
	for _, s := range steps {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"publish"}, s.args...), envMap(env), &stdout, &stderr)
		switch {
		case s.wantErr == "" && err != nil:
			t.Fatalf("%s: api publish %v: %v\n%s", s.name, s.args, err, stderr.String())
		case s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)):
			t.Fatalf("%s: api publish %v = %v, want an error with %q", s.name, s.args, err, s.wantErr)
		}
		for _, w := range s.wantOut {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", s.name, w, stdout.String())
			}
		}
		switch s.name {
		case "Install":
			if n := triggers("public.roads"); n != 2 {
				t.Errorf("triggers on roads after install: %d, want 2", n)
			}
		case "Contains":
			if n := triggers("public.countries"); n != 4 {
				t.Errorf("triggers on countries after --contains: %d, want 4", n)
			}
		case "RemoveContains":
			if n := triggers("public.countries"); n != 0 {
				t.Errorf("triggers on countries after --remove --contains: %d, want 0", n)
			}
			if n := triggers("public.parcels"); n != 4 {
				t.Errorf("triggers on parcels after removing countries' copy: %d, want 4", n)
			}
		case "Remove":
			if n := triggers("public.roads"); n != 0 {
				t.Errorf("triggers on roads after removal: %d, want 0", n)
			}
			if n := triggers(`transit."Bus Stops"`); n != 2 {
				t.Errorf("triggers on Bus Stops after removing roads': %d, want 2", n)
			}
		}
	}
}
