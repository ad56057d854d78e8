package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// TestShutdownOnSIGTERM runs the service as its own process, holds six
// requests in flight inside it (four /within at 20 km and two tile
// renders, all waiting on a lock on places), and sends it SIGTERM: the
// listener closes at once while they are still waiting, every one of them
// then completes with a whole 200 body, and the process exits with status
// 0, which it does only when shutdown finished within SHUTDOWN_TIMEOUT.
func TestShutdownOnSIGTERM(t *testing.T) {
	const (
		shutdownTimeout = 3 * time.Second
		lockHeld        = time.Second // after SIGTERM
	)
	pool, dbURL := placesDB(t)
	p := startProcess(t, map[string]string{
		"DATABASE_URL": dbURL,
		// A private Redis: the anonymous loopback identity must not spend
		// the shared Redis's budget that other tests count on.
		"REDIS_URL":          testenv.StartRedis(t).URL(),
		"RATELIMIT_GEOFENCE": "100000/1s",
		"RATELIMIT_TILES":    "100000/1s",
		"SHUTDOWN_TIMEOUT":   shutdownTimeout.String(),
		"DB_QUERY_TIMEOUT":   "10s",
		"DB_ACQUIRE_TIMEOUT": "10s",
	})
	paths := []string{
		"/within?lng=2.35&lat=48.85&radius=20000",
		"/within?lng=2.36&lat=48.85&radius=20000",
		"/within?lng=2.35&lat=48.86&radius=20000",
		"/within?lng=2.34&lat=48.84&radius=20000",
		"/tiles/places/4/8/5.mvt",
		"/tiles/places/5/16/11.mvt",
	}
	for _, path := range paths[:1] {
		if o := fetch(faultClient, "GET", p.base+path, "", nil); o.status != http.StatusOK {
			t.Fatalf("before the lock: GET %s = %s, want 200", path, o)
		}
	}

	unlock := testenv.LockPlaces(t, pool)
	type answer struct {
		path string
		outcome
	}
	outs := make(chan answer, len(paths))
	for _, path := range paths {
		go func() {
			// A client of its own each: one connection per request.
			client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			o := fetch(client, "GET", p.base+path, "", nil)
			if cl := o.header.Get("Content-Length"); o.err == nil && cl != "" && cl != strconv.Itoa(len(o.body)) {
				o.err = fmt.Errorf("Content-Length %s, body of %d bytes", cl, len(o.body))
			}
			outs <- answer{path, o}
		}()
	}
	waitLockWaiters(t, pool, len(paths))

	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sigterm := time.Now()
	refused := false
	for !refused && time.Since(sigterm) < lockHeld-200*time.Millisecond {
		c, err := net.DialTimeout("tcp", p.addr, 100*time.Millisecond)
		if err != nil {
			refused = true
			break
		}
		c.Close()
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if !refused {
		t.Errorf("new connections were still accepted %v after SIGTERM", time.Since(sigterm).Round(time.Millisecond))
	}
	if n := len(outs); n != 0 {
		t.Errorf("%d requests answered while the lock was still held, want none", n)
	}
	// pacing: the six requests stay held for lockHeld after SIGTERM, so
	// that shutdown has in-flight requests to wait for; what they answer
	// is checked below.
	time.Sleep(time.Until(sigterm.Add(lockHeld)))
	if n := len(outs); n != 0 {
		t.Errorf("%d requests answered before the lock was released, want none", n)
	}
	unlock()

	for range paths {
		a := <-outs
		switch {
		case a.err != nil || a.status != http.StatusOK:
			t.Errorf("GET %s in flight at SIGTERM: %s, want 200 with its whole body", a.path, a.outcome)
		case strings.HasPrefix(a.path, "/within") && !json.Valid(a.body):
			t.Errorf("GET %s in flight at SIGTERM: cut JSON body %s", a.path, a.outcome)
		case len(a.body) == 0:
			t.Errorf("GET %s in flight at SIGTERM: 200 with an empty body", a.path)
		}
	}
	// Status 0 is the proof that shutdown finished within SHUTDOWN_TIMEOUT:
	// a Shutdown that times out makes run return an error, and main exit
	// with status 1. The wait itself allows 2s more, for the process to
	// exit and be reaped on a loaded machine.
	code, err := p.wait(time.Until(sigterm.Add(shutdownTimeout + 2*time.Second)))
	took := time.Since(sigterm)
	if err != nil || code != 0 {
		t.Errorf("after SIGTERM: exit status %d, %v; want 0 (shutdown within SHUTDOWN_TIMEOUT %v)", code, err, shutdownTimeout)
	}
	t.Logf("exited %v after SIGTERM (the lock held %v of it)", took.Round(time.Millisecond), lockHeld)
	if t.Failed() {
		t.Logf("logs (tail):\n%s", tail(p.logs.String(), 4000))
	}
}

// waitLockWaiters waits until n sessions of the test's database wait on a
// lock: the requests that make them are then surely in flight.
func waitLockWaiters(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	const q = `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got int
		if err := pool.QueryRow(context.Background(), q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait on the lock after 15s, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}
