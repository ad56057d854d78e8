package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestPolicyOfDatabaseTime: a policy written in milliseconds charges
// each request what its statements took in PostgreSQL, measured, not a
// request count and not a guess: pages of a view that sleeps 40 ms a row
// use the budget up in a few requests, and /rate_limit shows what was
// spent in the policy's unit.
func TestPolicyOfDatabaseTime(t *testing.T) {
	db, dbURL := testenv.DBWithURL(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `
		INSERT INTO places (name, geom) SELECT 'p' || i, ST_SetSRID(ST_Point(13 + i / 100.0, 52), 4326) FROM generate_series(1, 5) i;
		DO $$ DECLARE s text := (SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = 'places'::regclass);
		BEGIN
			EXECUTE format('CREATE FUNCTION %I.slow(x bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $f$ SELECT pg_sleep(0.04); SELECT x $f$', s);
			EXECUTE format('CREATE VIEW %I.slow_places AS SELECT %I.slow(id) AS id, name, geom FROM %I.places', s, s, s);
		END $$`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none", "RATELIMIT_FEATURES": "1500ms/1m"}
	key := runCLI(t, env, "keys", "create", "--name", "dbtime-"+testenv.Prefix(t), "--scopes", "all")
	base, _ := startService(t, env)

	used := func() (int, string) {
		t.Helper()
		code, _, body := call(t, "GET", base+"/rate_limit", key, "")
		var doc struct {
			Policies []struct {
				Policy, Unit string
				Windows      []struct{ Used int }
			}
		}
		if err := json.Unmarshal(body, &doc); code != 200 || err != nil {
			t.Fatalf("GET /rate_limit = %d %s", code, body)
		}
		for _, p := range doc.Policies {
			if p.Policy == "features" {
				return p.Windows[0].Used, p.Unit
			}
		}
		t.Fatal("no features policy in /rate_limit")
		return 0, ""
	}
	page := "/collections/slow_places/items?limit=2"
	if code, _, body := call(t, "GET", base+page, key, ""); code != 200 {
		t.Fatalf("GET %s = %d %s", page, code, body)
	}
	// Two rows and the look-ahead one, 40 ms each, at the least.
	first, unit := used()
	if unit != "db-ms" || first < 120 || first > 1500 {
		t.Fatalf("after one page: %d %s used, want at least 120 ms of database time", first, unit)
	}
	admitted := 1
	for range 20 {
		code, _, body := call(t, "GET", base+page, key, "")
		if code == 429 {
			break
		}
		if code != 200 {
			t.Fatalf("GET %s = %d %s", page, code, body)
		}
		admitted++
	}
	total, _ := used()
	if admitted > 1500/first+1 || admitted < 2 {
		t.Errorf("%d pages of about %d ms each admitted under 1500ms/1m", admitted, first)
	}
	// The bound: what was admitted exceeds the limit by at most what the
	// last page cost beyond its estimate, which had learned the others.
	if total > 1500+first {
		t.Errorf("%d ms used of a 1500 ms window after %d pages of about %d ms", total, admitted, first)
	}
}
