package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestReplicasShareOneLimit runs three service instances on one database
// and one Redis, as three replicas behind a balancer would be, and fires
// concurrent requests for one API key at all three at once: between them
// they admit exactly the limit, and the Redis log holds exactly that many.
func TestReplicasShareOneLimit(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL":       dbURL,
		"REDIS_URL":          testenv.Getenv(t, "TEST_REDIS_URL"),
		"RATELIMIT_GEOFENCE": "30/1m",
		// Exactness is under test, not latency: on a loaded machine a short
		// Redis deadline would switch replicas to their local fallback,
		// and a short pool wait would turn admitted requests into 503s.
		"REDIS_TIMEOUT":      "3s",
		"DB_ACQUIRE_TIMEOUT": "10s",
		"DB_QUERY_TIMEOUT":   "10s",
	}
	var bases []string
	for range 3 {
		base, _ := startService(t, env)
		bases = append(bases, base)
	}
	rc := testenv.Redis(t)
	for trial := range 3 {
		id := fmt.Sprintf("rep%d-%s", trial, testenv.Prefix(t))
		secret := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "proximity:read")

		const perReplica = 25
		got := burstWithin(t, bases, secret, perReplica)
		if got[200] != 30 || got[429] != 3*perReplica-30 {
			t.Errorf("trial %d: statuses %v from three replicas, want exactly 30 200s and %d 429s", trial, got, 3*perReplica-30)
		}
		key := "rl:geofence:key:" + id
		if n := rc.ZCard(context.Background(), key).Val(); n != 30 {
			t.Errorf("trial %d: ZCARD %s = %d, want 30", trial, key, n)
		}
		if !strings.HasPrefix(secret, "gg_") {
			t.Errorf("keys create printed %q, want a secret", secret)
		}
	}
}

// burstWithin fires perBase concurrent /within requests with one API key at
// each base URL at once and counts the answers by status.
func burstWithin(t *testing.T, bases []string, secret string, perBase int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for _, base := range bases {
		for range perBase {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", base+"/within?lng=13.4&lat=52.5&radius=500", nil)
				req.Header.Set("x-api-key", secret)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				got[resp.StatusCode]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return got
}
