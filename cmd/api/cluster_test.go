package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// TestServiceOnRedisCluster runs the whole service on a three-master Redis
// Cluster: concurrent requests for one API key admit exactly the limit,
// tiles are cached (MISS then HIT), and no request or log line shows a
// cross-slot error or a 5xx.
func TestServiceOnRedisCluster(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{
		"DATABASE_URL":       dbURL,
		"REDIS_URL":          testenv.RedisClusterURL(t),
		"RATELIMIT_GEOFENCE": "10/1m",
		// The geofence policy's count is under test, not the database
		// budget (see TestReplicas).
		"RATELIMIT_DATABASE": "1000000000ms/1s",
		// Exactness is under test, not latency (see TestReplicas).
		"REDIS_TIMEOUT":      "3s",
		"DB_ACQUIRE_TIMEOUT": "10s",
		"DB_QUERY_TIMEOUT":   "10s",
	}
	base, logs := startService(t, env)

	var statuses []int
	var mu sync.Mutex
	record := func(code int) {
		mu.Lock()
		statuses = append(statuses, code)
		mu.Unlock()
	}

	for trial := range 2 {
		id := "cl" + string(rune('a'+trial)) + "-" + testenv.Prefix(t)
		secret := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "proximity:read,tiles:read")
		const n = 30
		got := burstWithin(t, []string{base}, secret, n)
		for code, c := range got {
			for range c {
				record(code)
			}
		}
		if got[200] != 10 || got[429] != n-10 {
			t.Errorf("trial %d: %d concurrent /within with one key on a Cluster = %v, want exactly 10 200s and %d 429s", trial, n, got, n-10)
		}
	}

	// The Cluster lives as long as the test binary: forget tiles an
	// earlier run (-count) cached, so that the first request renders.
	rc := testenv.RedisCluster(t)
	err := rc.(*redis.ClusterClient).ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, "*t:places:*").Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		for _, k := range keys {
			if err := m.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("clear cached tiles: %v", err)
	}
	secret := runCLI(t, env, "keys", "create", "--name", "cltiles-"+testenv.Prefix(t), "--scopes", "tiles:read")
	for i, want := range []string{"MISS", "HIT"} {
		req, _ := http.NewRequest("GET", base+"/tiles/places/4/8/5.mvt", nil)
		req.Header.Set("x-api-key", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		record(resp.StatusCode)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Cache") != want {
			t.Errorf("tile request %d = %d X-Cache %q, want 200 %s", i+1, resp.StatusCode, resp.Header.Get("X-Cache"), want)
		}
	}

	for _, code := range statuses {
		if code >= 500 {
			t.Errorf("a request on the Cluster answered %d; statuses %v", code, statuses)
			break
		}
	}
	if l := logs.String(); strings.Contains(strings.ToUpper(l), "CROSSSLOT") {
		t.Errorf("service logs mention CROSSSLOT:\n%s", l)
	}
}
