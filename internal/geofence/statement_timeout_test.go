package geofence

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// TestServerStatementTimeoutIs504: a statement ended by the server's
// statement_timeout (SQLSTATE 57014) before the client's own deadline, as
// when a cancel request is lost, is a 504 like any query past its deadline,
// and the connection goes back to the pool.
func TestServerStatementTimeoutIs504(t *testing.T) {
	t.Parallel()
	admin, url := testenv.DBWithURL(t)
	mustExec(t, admin, "INSERT INTO places (name, geom) VALUES ('p', ST_SetSRID(ST_MakePoint(1, 1), 4326))")
	mustExec(t, admin, `CREATE VIEW public.slow_places AS SELECT p.* FROM places p, LATERAL (SELECT pg_sleep(5)) s`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	one, err := pg.Open(ctx, url, pg.Options{MaxConns: 1, StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	_, h := newTestService(t, one, Timeouts{QueryTimeout: 30 * time.Second, AcquireTimeout: time.Second})
	pid := backendPID(t, one)

	start := time.Now()
	code, body := do(t, h, "GET", "/within?lng=1&lat=1&radius=10&layer=slow_places", "")
	took := time.Since(start)
	var detail struct {
		Detail string `json:"detail"`
	}
	if code != http.StatusGatewayTimeout || json.Unmarshal(body, &detail) != nil || detail.Detail == "" {
		t.Errorf("statement ended by statement_timeout = %d %s, want 504 with a detail", code, body)
	}
	if took > 3*time.Second {
		t.Errorf("answered after %v, want about the 300ms statement_timeout", took)
	}
	waitNoSleepers(t, admin, time.Second)
	if got := backendPID(t, one); got != pid {
		t.Errorf("connection after the timeout: backend %d, want the same backend %d back in the pool", got, pid)
	}
	if code, _ := do(t, h, "GET", "/within?lng=1&lat=1&radius=10", ""); code != 200 {
		t.Errorf("next query = %d, want 200", code)
	}
}
