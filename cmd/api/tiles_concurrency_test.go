package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestTileRenderConcurrencyCap: a concurrency cap on the "tiles" policy
// holds for tile renders, which charge through OnMiss rather than through
// the route middleware. With concurrency 1 and one render held back by a
// lock on places, a second render from the same client is refused at once
// with 429 naming "tiles-concurrency"; once the first is answered, its slot
// is free again and the second render succeeds.
func TestTileRenderConcurrencyCap(t *testing.T) {
	pool, dbURL := placesDB(t)
	policies := filepath.Join(t.TempDir(), "ratelimit.yaml")
	if err := os.WriteFile(policies, []byte("policies:\n  tiles:\n    windows: 1000/1s\n    concurrency: 1\n    lease: 30s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs := startService(t, map[string]string{
		"DATABASE_URL":          dbURL,
		"RATELIMIT_CONFIG":      policies,
		"TILES_CACHE":           "false", // every request renders
		"TILES_MEMORY_CACHE_MB": "0",
	})
	client := &http.Client{Timeout: 10 * time.Second}
	const (
		heldPath  = "/tiles/places/4/8/5.mvt"   // holds Paris
		otherPath = "/tiles/places/5/16/11.mvt" // Paris one zoom deeper
	)

	unlock := testenv.LockPlaces(t, pool)
	held := make(chan outcome, 1)
	go func() { held <- fetch(client, http.MethodGet, base+heldPath, "", nil) }()
	// Tiles render on a pool of their own (planning each statement once).
	if app := waitTileRenderBlocked(t, pool); app != "geogate-tiles" {
		t.Errorf("the tile render runs on a connection of %q, want geogate-tiles", app)
	}

	o := fetch(client, http.MethodGet, base+otherPath, "", nil)
	var problem struct {
		Detail           string   `json:"detail"`
		ViolatedPolicies []string `json:"violated-policies"`
	}
	_ = json.Unmarshal(o.body, &problem)
	if o.err != nil || o.status != http.StatusTooManyRequests || !slices.Equal(problem.ViolatedPolicies, []string{"tiles-concurrency"}) {
		t.Fatalf("second render with one in flight = %s, want 429 naming tiles-concurrency\nlogs:\n%s", o, tail(logs.String(), 3000))
	}
	if ra := o.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1", ra)
	}

	unlock()
	if o := <-held; o.err != nil || o.status != http.StatusOK {
		t.Fatalf("held render after the lock = %s, want 200", o)
	}
	for _, path := range []string{otherPath, heldPath} {
		if o := fetch(client, http.MethodGet, base+path, "", nil); o.err != nil || o.status != http.StatusOK {
			t.Errorf("GET %s after the first render ended = %s, want 200 (the slot released)", path, o)
		}
	}
}

// waitTileRenderBlocked waits until a tile query in pool's database waits
// for a lock, and returns the application name of its connection.
func waitTileRenderBlocked(t *testing.T, pool pgPool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var apps []string
		err := pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(application_name), '{}') FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%ST_AsMVT%'`).Scan(&apps)
		if err != nil {
			t.Fatal(err)
		}
		if len(apps) > 0 {
			return apps[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no tile render waiting for the lock on places after 10s")
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}
