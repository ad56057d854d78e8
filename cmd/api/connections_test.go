package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// connections counts the client sessions of database db by application
// name. PostgreSQL's parallel workers carry their leader's name but are
// no connection: they count against max_worker_processes, not
// max_connections.
func connections(t *testing.T, pool *pgxpool.Pool, db string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT application_name, count(*) FROM pg_stat_activity
WHERE datname = $1 AND backend_type = 'client backend'
  AND application_name LIKE 'geogate%' AND application_name NOT LIKE 'geogate-test%'
GROUP BY 1`, db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	return out
}

// TestReplicasStayWithinTheirConnections: three replicas share one
// database. Under load on every route family, each kind of connection
// stays within its pools' sizes times three, the documented bound; and
// every listener is a background connection, none the fair queue's
// slots count on.
func TestReplicasStayWithinTheirConnections(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	var db string
	if err := pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL": dbURL, "DB_MAX_CONNS": "3", "DB_MIN_CONNS": "1", "TILES_DB_MAX_CONNS": "2",
		"DB_BACKGROUND_CONNS": "6", "AUTH_ANONYMOUS_SCOPES": "proximity:read,geofences:read,tiles:read,features:read",
		"RATELIMIT_GEOFENCE": "100000/1s", "RATELIMIT_TILES": "100000/1s", "RATELIMIT_FEATURES": "100000/1s",
		"RATELIMIT_DATABASE": "100000000ms/1s",
	}
	bound := map[string]int{"geogate": 3 * 3, "geogate-tiles": 3 * 2, "geogate-background": 3 * 6}
	var bases []string
	for range 3 {
		base, _, _ := startServiceWithStop(t, env)
		bases = append(bases, base)
	}
	paths := []string{
		"/within?lng=13.4&lat=52.5&radius=50000",
		"/collections/places/items?limit=200",
		"/geofences/contains?lng=13.4&lat=52.5",
	}
	for z := 3; z <= 8; z++ {
		paths = append(paths, fmt.Sprintf("/tiles/places/%d/%d/%d", z, 1<<(z-1), 1<<(z-2)))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, base := range bases {
		for w := range 6 {
			wg.Go(func() {
				for i := w; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					resp, err := http.Get(base + paths[i%len(paths)])
					if err == nil {
						resp.Body.Close()
					}
				}
			})
		}
	}
	peak := map[string]int{}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for name, n := range connections(t, pool, db) {
			peak[name] = max(peak[name], n)
		}
		time.Sleep(20 * time.Millisecond) // a sample's period
	}
	close(stop)
	wg.Wait()
	total := 0
	for name, n := range peak {
		if b, ok := bound[name]; !ok || n > b {
			t.Errorf("%d connections named %s at the peak, want at most %d (three replicas)", n, name, b)
		}
		total += n
	}
	if total > 3*(3+2+6) {
		t.Errorf("%d connections in all at the peak, want at most 3 × (3 + 2 + 6)", total)
	}
	t.Logf("peak connections: %v", peak)
	rows, err := pool.Query(context.Background(), `SELECT application_name FROM pg_stat_activity
WHERE datname = $1 AND query LIKE 'LISTEN %' AND application_name = 'geogate'`, db)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if n > 0 {
		t.Errorf("%d listeners hold serving connections, want none: they are background work", n)
	}
}

// TestOneCallerAloneIsQueued: one key sends 32 items requests at once to
// a service with the default 20 connections. Alone and within its
// limits, it is queued, not refused: every request is answered 200. The
// wait allowed is longer than the default second, so that a machine
// busy with other tests does not turn a waiting call away; the refusals
// this catches came from the pool, not the wait.
func TestOneCallerAloneIsQueued(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s", "RATELIMIT_DATABASE": "100000000ms/1s",
		"DB_QUERY_TIMEOUT": "20s", "DB_FAIR_MAX_WAIT": "10s"}
	key := "alone-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _, _ := startServiceWithStop(t, env)
	codes := make([]int, 32)
	bodies := make([]string, 32)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", base+fmt.Sprintf("/collections/places/items?limit=100&bbox=%d,-60,%d,70", -180+i*10, -170+i*10), nil)
			req.Header.Set("x-api-key", key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[i], bodies[i] = resp.StatusCode, string(b)
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("request %d of 32 = %d %.300s, want 200: a caller alone is queued", i, c, bodies[i])
		}
	}
}
