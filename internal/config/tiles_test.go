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
			if len(c.Layers) != 0 || !c.Cache || c.Extent != 4096 || c.Own != "geogate" {
				return "want no layer settings, cache on, extent 4096, own schema geogate"
			}
			if c.VersionWindow != 5*time.Millisecond {
				return "want a version window of 5ms"
			}
			if cfg.DB.TileMaxConns != 10 {
				return "want a tile pool of 10 connections"
			}
			return ""
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
		{"BuiltinLayers", map[string]string{
			"TILES_PLACES_FIELDS":        "name,properties.kind",
			"TILES_PLACES_MAXZOOM":       "16",
			"TILES_PLACES_RANK":          "importance",
			"TILES_GEOFENCES_SIMPLIFY":   "2.5",
			"TILES_GEOFENCES_THIN_CELLS": "0",
			"TILES_CACHE_TTL":            "10m",
			"TILES_PUBLIC_URL":           "https://maps.example.com/",
		}, func(cfg Config) string {
			c := cfg.Tiles
			p, g := c.Layers["places"], c.Layers["geofences"]
			if diff := cmp.Diff([]string{"name", "properties.kind"}, p.Fields); diff != "" {
				return diff
			}
			if p.MaxZoom == nil || *p.MaxZoom != 16 || p.Rank != "importance" || g.Simplify == nil || *g.Simplify != 2.5 || g.ThinCells == nil || *g.ThinCells != 0 {
				return "places or geofences not as configured"
			}
			if c.PublicURL != "https://maps.example.com" || c.CacheTTL.Minutes() != 10 {
				return "public URL or TTL not as configured"
			}
			return ""
		}, nil},
		{"GoneSettings", map[string]string{
			"TILES_LAYERS":         "places,roads",
			"TILES_PLACES_TABLE":   "cities",
			"TILES_GEOFENCES_GEOM": "outline",
			"TILES_PLACES_MINZOOM": "9",
			"TILES_PLACES_MAXZOOM": "3",
			"TILES_PUBLIC_URL":     "ftp://x",
		}, nil, []string{"TILES_LAYERS=\"places,roads\": gone", "LAYERS_CONFIG", "TILES_PLACES_TABLE", "TILES_GEOFENCES_GEOM", "TILES_PLACES_MINZOOM", "TILES_PUBLIC_URL"}},
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
