package tiles

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/httpx"
)

// shadowSimplify puts, ahead of PostGIS on db's search path, an
// ST_Simplify that fails the way bad data or a bad statement does
// (SQLSTATE 22023): every render of a polygon layer then fails, and
// fails again on every retry.
const shadowSimplify = `
CREATE SCHEMA shadow;
CREATE FUNCTION shadow.st_simplify(geometry, double precision, boolean) RETURNS geometry
  LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'cannot simplify' USING ERRCODE = '22023'; END $$;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = shadow, public', current_database()); END $$;`

func detailOf(t *testing.T, body []byte) string {
	t.Helper()
	var d httpx.Detail
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	s, _ := d.Detail.(string)
	return s
}

// TestRenderThatCannotSucceedIsNot503: a render failing for a reason of
// the data or the statement is a 500 that does not ask for a retry, and
// leaks no SQL.
func TestRenderThatCannotSucceedIsNot503(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	if _, err := db.Exec(context.Background(), shadowSimplify); err != nil {
		t.Fatal(err)
	}
	db.Reset() // new connections, on the new search path
	rp := newReplica(t, db, nil, "", replicaOptions{})
	w := rp.get(t, tilePath("geofences", tileOf(13.41, 52.52, 8)))
	detail := detailOf(t, w.Body.Bytes())
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("GET a tile whose render fails for good = %d %q, want 500", w.Code, detail)
	}
	for _, bad := range []string{"try again", "simplify", "SQLSTATE", "22023"} {
		if strings.Contains(strings.ToLower(detail), strings.ToLower(bad)) {
			t.Errorf("detail %q contains %q", detail, bad)
		}
	}
	if w.Header().Get("Retry-After") != "" {
		t.Errorf("Retry-After = %q, want none", w.Header().Get("Retry-After"))
	}
}

// TestRenderPastItsTimeoutIs504: a render the server cancels at the
// render timeout (SQLSTATE 57014) is a deadline, answered as every other
// deadline is: 504, without Retry-After.
func TestRenderPastItsTimeoutIs504(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, nil, "", replicaOptions{}, func(s *Settings) { s.RenderTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The render waits for this lock until its timeout cancels it.
	if _, err := tx.Exec(ctx, "LOCK TABLE places IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	w := rp.get(t, tilePath("places", tileOf(13.41, 52.52, 8)))
	detail := detailOf(t, w.Body.Bytes())
	if w.Code != http.StatusGatewayTimeout || !strings.Contains(detail, "took longer than 300ms") {
		t.Errorf("GET a tile past its render timeout = %d %q, want 504 naming 300ms", w.Code, detail)
	}
	if w.Header().Get("Retry-After") != "" {
		t.Errorf("Retry-After = %q, want none", w.Header().Get("Retry-After"))
	}
}

// TestRenderOnClosedPoolIs503: during a graceful shutdown the pool is
// closed while requests may still arrive; a tile that must be rendered
// then is a 503 that says to try again (another replica will answer), as
// every other route says, not a 500.
func TestRenderOnClosedPoolIs503(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, nil, "", replicaOptions{})
	db.Close()
	w := rp.get(t, tilePath("places", tileOf(13.41, 52.52, 8)))
	detail := detailOf(t, w.Body.Bytes())
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(detail, "try again") {
		t.Errorf("GET an uncached tile on a closed pool = %d %q, want 503 saying to try again", w.Code, detail)
	}
}
