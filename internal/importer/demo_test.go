package importer_test

import (
	"context"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestDemoData checks the real demo files as loaded by testenv.DemoDB:
// every row is there and a well-known city sits where it should.
func TestDemoData(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	tests := []struct {
		name, sql string
		want      int64
	}{
		{"places", "SELECT count(*) FROM places", 171075},
		{"geofences", "SELECT count(*) FROM geofences", 220},
		{"Berlin", `SELECT count(*) FROM places WHERE name = 'Berlin' AND properties->>'country' = 'DE'
			AND ST_DWithin(geom::geography, ST_MakePoint(13.41, 52.52)::geography, 2000)`, 1},
		{"Germany", `SELECT count(*) FROM geofences WHERE name = 'DEU'
			AND ST_Contains(geom, ST_SetSRID(ST_MakePoint(13.41, 52.52), 4326))`, 1},
		{"indexes rebuilt", `SELECT count(*) FROM pg_indexes WHERE indexname IN
			('places_pkey', 'places_geom_idx', 'geofences_pkey', 'geofences_geom_idx')`, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got int64
			if err := pool.QueryRow(ctx, tt.sql).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("%s = %d, want %d", tt.sql, got, tt.want)
			}
		})
	}
}
