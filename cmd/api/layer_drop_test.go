package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestLayerDroppedUnderLoad drops a table while clients query it through
// /within and tiles: requests in flight end with a 2xx or a clear 4xx or
// 5xx in the {"detail": ...} shape (never a 500, never a hang), and once
// the service has seen the drop every request is a 404.
func TestLayerDroppedUnderLoad(t *testing.T) {
	pool, dbURL := testenv.UserDBWithURL(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		CREATE TABLE public.doomed (id serial PRIMARY KEY, name text, geom geometry(Point, 4326) NOT NULL);
		INSERT INTO public.doomed (name, geom)
		SELECT 'p' || i, ST_SetSRID(ST_MakePoint(13.0 + random() * 0.8, 52.3 + random() * 0.4), 4326) FROM generate_series(1, 5000) i;
		CREATE INDEX doomed_geom_idx ON public.doomed USING gist (geom);
		ANALYZE public.doomed`); err != nil {
		t.Fatal(err)
	}
	base, _ := startService(t, map[string]string{
		"DATABASE_URL":              dbURL,
		"PUBLISH_REFRESH":           "200ms",
		"RATELIMIT_GEOFENCE":        "100000/1s",
		"RATELIMIT_TILES":           "100000/1s",
		"RATELIMIT_TILES_CACHED":    "100000/1s",
		"TILES_MEMORY_CACHE_MB":     "0",
		"TILES_CACHE":               "false",
		"GEOFENCE_DEFAULT_LIMIT":    "50",
		"HTTP_WRITE_TIMEOUT":        "20s",
		"DB_QUERY_TIMEOUT":          "5s",
		"TILES_RENDER_TIMEOUT":      "5s",
		"AUTH_ANONYMOUS_SCOPES":     "proximity:read,tiles:read",
		"GEOFENCE_MAX_BATCH_POINTS": "10",
	})
	listed := func() bool {
		resp, err := http.Get(base + "/layers")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"id":"doomed"`)
	}
	testenv.WaitFor(t, 10*time.Second, "doomed published", listed)

	client := &http.Client{Timeout: 15 * time.Second}
	var dropped, seen atomic.Bool
	var mu sync.Mutex
	statuses := map[string]int{}
	var problems []string
	var afterSeen, afterSeen404 atomic.Int64
	worker := func(w int, stop <-chan struct{}) {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			path := fmt.Sprintf("/within?layer=doomed&lng=13.4&lat=52.5&radius=%d", 1000+(i%20)*500)
			if (w+i)%2 == 0 {
				path = fmt.Sprintf("/tiles/doomed/14/%d/%d.mvt", 8800+i%8, 5373+w%4)
			}
			wasSeen := seen.Load()
			resp, err := client.Get(base + path)
			if err != nil {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("GET %s: %v", path, err))
				mu.Unlock()
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var body struct {
				Detail any `json:"detail"`
			}
			mu.Lock()
			statuses[fmt.Sprintf("%d dropped=%v", resp.StatusCode, dropped.Load())]++
			switch {
			case resp.StatusCode == 500 || resp.StatusCode >= 600:
				problems = append(problems, fmt.Sprintf("GET %s = %d %s", path, resp.StatusCode, b))
			case resp.StatusCode >= 400 && (json.Unmarshal(b, &body) != nil || body.Detail == nil):
				problems = append(problems, fmt.Sprintf("GET %s = %d without a detail: %s", path, resp.StatusCode, b))
			case resp.StatusCode < 400 && dropped.Load() && wasSeen:
				problems = append(problems, fmt.Sprintf("GET %s = %d after the drop was seen", path, resp.StatusCode))
			}
			mu.Unlock()
			if wasSeen {
				afterSeen.Add(1)
				if resp.StatusCode == 404 {
					afterSeen404.Add(1)
				}
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); worker(w, stop) }()
	}
	testenv.WaitFor(t, 20*time.Second, "requests served before the drop", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return statuses["200 dropped=false"]+statuses["204 dropped=false"] >= 60
	})
	if _, err := pool.Exec(ctx, "DROP TABLE public.doomed"); err != nil {
		t.Fatal(err)
	}
	dropped.Store(true)
	testenv.WaitFor(t, 10*time.Second, "the service seeing the drop", func() bool { return !listed() })
	seen.Store(true)
	testenv.WaitFor(t, 20*time.Second, "requests after the drop was seen", func() bool { return afterSeen.Load() >= 60 })
	close(stop)
	wg.Wait()
	t.Logf("answers: %v", statuses)
	for _, p := range problems {
		t.Error(p)
	}
	if afterSeen404.Load() != afterSeen.Load() {
		t.Errorf("%d of %d requests after the drop was seen were 404", afterSeen404.Load(), afterSeen.Load())
	}
}
