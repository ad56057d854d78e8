package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/catalog"
)

func TestLayerFile(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0"}
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		want    func(Config) string
		wantErr []string
	}{
		{"Full", `
layers:
  places:
    properties: [name, properties]
    scopes: [maps:internal]
    limit: {policy: tiles, cost: 3}
    tiles:
      fields: [name, properties.country]
      minzoom: 2
      maxzoom: 16
      thin: {cells: 32, below_zoom: 10, rank: id}
      simplify: 1.5
  transit__Bus_Stops-1a2b3c:
    exclude: true
`, nil, func(c Config) string {
			if d := cmp.Diff(map[string]catalog.LayerSettings{
				"places":                    {Properties: []string{"name", "properties"}},
				"transit__Bus_Stops-1a2b3c": {Exclude: true},
			}, c.Catalog.Layers); d != "" {
				return d
			}
			if d := cmp.Diff(access.Rule{Scopes: []string{"maps:internal"}, Policy: "tiles", Cost: 3}, c.Access.Layers["places"]); d != "" {
				return d
			}
			p := c.Tiles.Layers["places"]
			if *p.MinZoom != 2 || *p.MaxZoom != 16 || *p.ThinCells != 32 || *p.ThinMaxZoom != 10 || p.Rank != "id" || *p.Simplify != 1.5 || len(p.Fields) != 2 {
				return "tile settings of places not as in the file"
			}
			return ""
		}, nil},
		{"EnvWinsForBuiltins", "layers:\n  places:\n    tiles: {maxzoom: 16}\n", map[string]string{"TILES_PLACES_MAXZOOM": "12"}, func(c Config) string {
			if z := c.Tiles.Layers["places"].MaxZoom; z == nil || *z != 12 {
				return "want TILES_PLACES_MAXZOOM over the file"
			}
			return ""
		}, nil},
		{"UnknownKey", "layers:\n  places:\n    colour: red\n", nil, nil, []string{"layer file", "colour"}},
		{"BadValues", `
layers:
  "bad id!":
    exclude: true
  places:
    scopes: ["has space"]
    limit: {policy: nope, cost: 0}
    tiles: {minzoom: 9, maxzoom: 3, simplify: -1, thin: {cells: 5000}}
`, nil, nil, []string{"layer bad id!", "a layer id is", `scope "has space"`, `limit policy "nope"`, "limit cost 0", "minzoom is above maxzoom", "simplify", "thin cells"}},
		{"Missing", "", map[string]string{"LAYERS_CONFIG": "/nonexistent/layers.yaml"}, nil, []string{"LAYERS_CONFIG", "cannot read"}},
		{"AsCaller", "layers:\n  sites:\n    as_caller: true\n    cache_by: claim:tenant\n  zones:\n    as_caller: true\n",
			map[string]string{"DB_CALLER_ROLES": "tenant_reader,tenant_admin"}, func(c Config) string {
				if d := cmp.Diff(access.Rule{AsCaller: true, CacheBy: "claim:tenant"}, c.Access.Layers["sites"]); d != "" {
					return d
				}
				if !c.Catalog.Layers["zones"].AsCaller || c.Access.Layers["zones"].CacheBy != "" {
					return "zones: want as_caller, no cache_by"
				}
				if d := cmp.Diff([]string{"tenant_reader", "tenant_admin"}, c.Access.CallerRoles); d != "" {
					return d
				}
				return ""
			}, nil},
		{"AsCallerWithoutRoles", "layers:\n  sites:\n    as_caller: true\n", nil, nil, []string{"DB_CALLER_ROLES", "layer sites runs as its caller"}},
		{"BadCallerSettings", "layers:\n  a:\n    cache_by: role\n  b:\n    as_caller: true\n    cache_by: tenant\n  c:\n    as_caller: true\n    cache_by: \"claim:\"\n",
			map[string]string{"DB_CALLER_ROLES": "ok_role,Bad-Role"}, nil,
			[]string{"layer a: cache_by applies to a layer with as_caller", `layer b: cache_by "tenant"`, `layer c: cache_by "claim:"`, `DB_CALLER_ROLES="Bad-Role"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			if tt.file != "" {
				path := filepath.Join(t.TempDir(), "layers.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
				m["LAYERS_CONFIG"] = path
			}
			for k, v := range tt.env {
				m[k] = v
			}
			c, err := Load(env(m))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("Load() = nil error, want one")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Load() error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if msg := tt.want(c); msg != "" {
				t.Errorf("Load(): %s", msg)
			}
		})
	}
}

// TestShippedLayerFile loads configs/layers.yaml, which must stay valid.
func TestShippedLayerFile(t *testing.T) {
	_, err := Load(env(map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "LAYERS_CONFIG": "../../configs/layers.yaml"}))
	if err != nil {
		t.Fatalf("configs/layers.yaml: %v", err)
	}
}
