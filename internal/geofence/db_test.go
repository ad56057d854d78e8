package geofence

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// slowDB returns a fresh database with a layer slow_places whose every
// query sleeps for sleep, and a one-connection pool on it.
func slowDB(t *testing.T, sleep time.Duration) (admin *pgxpool.Pool, one *pgxpool.Pool) {
	t.Helper()
	admin, url := testenv.DBWithURL(t)
	mustExec(t, admin, "INSERT INTO places (name, geom) VALUES ('p', ST_SetSRID(ST_MakePoint(1, 1), 4326))")
	mustExec(t, admin, fmt.Sprintf(`CREATE VIEW public.slow_places AS
		SELECT p.* FROM places p, LATERAL (SELECT pg_sleep(%g)) s`, sleep.Seconds()))
	// Opened as the service opens its pools: the cancellation of a
	// statement whose context ends is set up there.
	one, err := pg.Open(context.Background(), url, pg.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	return admin, one
}

// backendPID returns the server process of the pool's one connection.
func backendPID(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var pid int
	if err := pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// sleepers counts statements still sleeping in the database of pool.
func sleepers(t *testing.T, admin *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'active' AND query LIKE '%slow_places%'
		AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitNoSleepers(t *testing.T, admin *pgxpool.Pool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for sleepers(t, admin) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the statement still runs in PostgreSQL %v after the request ended", within)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

func TestQueryDeadlineCancelsInServer(t *testing.T) {
	t.Parallel()
	admin, one := slowDB(t, 5*time.Second)
	_, h := newTestService(t, one, Timeouts{QueryTimeout: 300 * time.Millisecond, AcquireTimeout: time.Second})
	pid := backendPID(t, one)

	start := time.Now()
	code, body := do(t, h, "GET", "/within?lng=1&lat=1&radius=10&layer=slow_places", "")
	took := time.Since(start)
	if code != http.StatusGatewayTimeout || !strings.Contains(string(body), "took longer than 300ms") {
		t.Errorf("slow query = %d %s, want 504 naming the deadline", code, body)
	}
	if took > 2*time.Second {
		t.Errorf("answered after %v, want about 300ms", took)
	}
	waitNoSleepers(t, admin, time.Second)
	if got := backendPID(t, one); got != pid {
		t.Errorf("connection after the timeout: backend %d, want the same backend %d back in the pool", got, pid)
	}
	if code, _ := do(t, h, "GET", "/within?lng=1&lat=1&radius=10", ""); code != 200 {
		t.Errorf("next query = %d, want 200", code)
	}
}

func TestPoolExhaustedIs503(t *testing.T) {
	t.Parallel()
	_, one := slowDB(t, 0)
	_, h := newTestService(t, one, Timeouts{QueryTimeout: 5 * time.Second, AcquireTimeout: 200 * time.Millisecond})
	held, err := one.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, body := do(t, h, "GET", "/within?lng=1&lat=1&radius=10", "")
	took := time.Since(start)
	held.Release()
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "busy") ||
		!strings.Contains(string(body), "temporary-reduced-capacity") || !strings.Contains(string(body), "database-connections") {
		t.Errorf("with the pool exhausted = %d %s, want 503 busy, of type temporary-reduced-capacity", code, body)
	}
	if took < 150*time.Millisecond || took > 2*time.Second {
		t.Errorf("answered after %v, want about the 200ms acquire timeout", took)
	}
	if code, _ := do(t, h, "GET", "/within?lng=1&lat=1&radius=10", ""); code != 200 {
		t.Errorf("after release = %d, want 200", code)
	}
}

func TestClientDisconnectCancelsQuery(t *testing.T) {
	t.Parallel()
	admin, one := slowDB(t, 10*time.Second)
	_, h := newTestService(t, one, Timeouts{QueryTimeout: 30 * time.Second, AcquireTimeout: time.Second})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/within?lng=1&lat=1&radius=10&layer=slow_places", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("request finished with %d, want the client to give up", resp.StatusCode)
	}
	// The statement sleeps 10s: gone within 5s means it was cancelled,
	// with room for a loaded machine to notice the closed connection.
	waitNoSleepers(t, admin, 5*time.Second)
}

func TestDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	// A socket in a folder of the test's own: certainly nothing listens there.
	pool, err := pgxpool.New(context.Background(), "postgres://geogate@/geogate?host="+t.TempDir()+"&sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The layers come from a working copy of the database.
	svc := newService(t, pool, testenv.DB(t), testTimeouts)
	h := contract.Wrap(t, testRouter(svc, testRules, nil), testRules.Limits)
	for _, target := range []string{"/within?lng=1&lat=1&radius=10", "/geofences/1", "/geofences/contains?lng=1&lat=1"} {
		code, body := do(t, h, "GET", target, "")
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "unavailable") {
			t.Errorf("GET %s with the database down = %d %s, want 503", target, code, body)
		}
	}
}

func TestRecoversFromLostConnections(t *testing.T) {
	t.Parallel()
	admin, one := slowDB(t, 0)
	_, h := newTestService(t, one, testTimeouts)
	backendPID(t, one) // open the connection
	// Terminate every connection of the service, as a server restart would.
	mustExec(t, admin, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	ok := false
	for i := 0; i < 5 && !ok; i++ {
		code, body := do(t, h, "GET", "/within?lng=1&lat=1&radius=10", "")
		switch code {
		case 200:
			ok = true
		case http.StatusServiceUnavailable:
		default:
			t.Fatalf("after losing the connection = %d %s, want 503 or 200", code, body)
		}
	}
	if !ok {
		t.Error("no 200 within 5 requests after the connections were terminated")
	}
}
