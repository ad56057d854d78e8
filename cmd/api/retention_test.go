package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestServicePrunesOldPositions starts the service with
// EVENTS_POSITIONS_RETENTION: the positions older than it go in the
// first round, the newer one stays, and the metric counts them.
func TestServicePrunesOldPositions(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO geogate.event_positions (owner, device, time, lng, lat, received_at)
SELECT 'key:r', 'd' || h, now(), 0, 0, now() - make_interval(hours => h) FROM generate_series(0, 3) h`); err != nil {
		t.Fatal(err)
	}
	base, _, _ := startServiceWithStop(t, map[string]string{"DATABASE_URL": dbURL, "EVENTS_POSITIONS_RETENTION": "90m"})
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) { // polling the table
		var left []string
		if err := pool.QueryRow(ctx, `SELECT array_agg(device ORDER BY device) FROM geogate.event_positions`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if len(left) == 2 && left[0] == "d0" && left[1] == "d1" {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("positions left 20 s after the start: %v, want d0 and d1", left)
		}
	}
	// The count goes up just after the deletion commits.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) { // polling the metric
		o := get(t, base+"/metrics")
		if strings.Contains(string(o.body), "\ngeogate_events_positions_pruned_total 2\n") {
			return
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("/metrics lacks geogate_events_positions_pruned_total 2 after 20 s")
		}
	}
}
