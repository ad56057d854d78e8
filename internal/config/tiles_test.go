package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoadTiles(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0"}
	tests := []struct {
		name    string
		env     map[string]string
		want    func(Config) string // "" when the settings are right
		wantErr []string
	}{
		{"Defaults", nil, func(cfg Config) string {
			c := cfg.Tiles
			if len(c.Layers) != 2 || c.Layers[0].Name != "places" || c.Layers[1].Name != "geofences" || !c.Cache || c.Extent != 4096 {
				return "want places and geofences, cache on, extent 4096"
			}
			if c.VersionWindow != 5*time.Millisecond {
				return "want a version window of 5ms"
			}
			if cfg.DB.TileMaxConns != 10 {
				return "want a tile pool of 10 connections"
			}
			return cmp.Diff([]string{"name", "properties.country"}, c.Layers[0].Fields)
		}, nil},
		{"VersionWindowOff", map[string]string{"TILES_VERSION_WINDOW": "0"}, func(cfg Config) string {
			c := cfg.Tiles
			if c.VersionWindow != 0 {
				return "want the version window off"
			}
			return ""
		}, nil},
		{"TilePool", map[string]string{"TILES_DB_MAX_CONNS": "3"}, func(cfg Config) string {
			if cfg.DB.TileMaxConns != 3 {
				return "want a tile pool of 3 connections"
			}
			return ""
		}, nil},
		{"TilePoolEmpty", map[string]string{"TILES_DB_MAX_CONNS": "0"}, nil, []string{"TILES_DB_MAX_CONNS"}},
		{"VersionWindowBad", map[string]string{"TILES_VERSION_WINDOW": "2s"}, nil, []string{"TILES_VERSION_WINDOW", "at most 1s"}},
		{"VersionWindowNegative", map[string]string{"TILES_VERSION_WINDOW": "-1ms"}, nil, []string{"TILES_VERSION_WINDOW"}},
		{"CustomLayer", map[string]string{
			"TILES_LAYERS":         "places,roads",
			"TILES_ROADS_FIELDS":   "name,properties.kind",
			"TILES_ROADS_MAXZOOM":  "16",
			"TILES_ROADS_SIMPLIFY": "2.5",
			"TILES_PLACES_RANK":    "importance",
			"TILES_CACHE_TTL":      "10m",
			"TILES_PUBLIC_URL":     "https://maps.example.com/",
		}, func(cfg Config) string {
			c := cfg.Tiles
			r := c.Layers[1]
			if r.Table != "roads" || r.MaxZoom != 16 || r.Simplify != 2.5 || r.ThinCells != 0 || c.Layers[0].Rank != "importance" {
				return "roads layer or places rank not as configured"
			}
			if c.PublicURL != "https://maps.example.com" || c.CacheTTL.Minutes() != 10 {
				return "public URL or TTL not as configured"
			}
			return ""
		}, nil},
		{"BadIdentifiers", map[string]string{
			"TILES_LAYERS":         "places,Bad-Name,places",
			"TILES_PLACES_TABLE":   "places; drop table x",
			"TILES_PLACES_FIELDS":  "name,properties.a'b,\"quoted\"",
			"TILES_PLACES_MINZOOM": "9",
			"TILES_PLACES_MAXZOOM": "3",
			"TILES_PUBLIC_URL":     "ftp://x",
		}, nil, []string{"TILES_LAYERS=\"Bad-Name\"", "layer listed twice", "TILES_PLACES_TABLE", "properties.a'b", `\"quoted\"`, "TILES_PLACES_MINZOOM", "TILES_PUBLIC_URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
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
						t.Errorf("Load() error lacks %s:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if msg := tt.want(c); msg != "" {
				t.Errorf("Load().Tiles = %+v: %s", c.Tiles, msg)
			}
		})
	}
}
