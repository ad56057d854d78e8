package outbox

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/testenv"
)

// TestClaimPlanWithStaleStatistics: the outbox changes faster than its
// statistics. With statistics taken while it was empty, 200,000 events
// of a pull-only subscription and a backlog of 3,000 due events over 40
// devices, a claim computes the heads once (a CTE of its own) and stays
// fast: inlined, the planner computed the heads again for every due
// event, seconds per claim. Under the workers' settings it reads no
// table whole either (after a TRUNCATE, a planner that believed the
// outbox empty read all of it for each claim).
func TestClaimPlanWithStaleStatistics(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	sub := subscribe(t, pool, "key:"+testenv.Prefix(t), "https://receiver.example/hook", "enter", "exit")
	if _, err := pool.Exec(ctx, `ANALYZE geogate.events`); err != nil {
		t.Fatal(err)
	}
	pull := subscribe(t, pool, "key:"+testenv.Prefix(t)+"-pull", "", "enter", "exit")
	if _, err := pool.Exec(ctx, `
INSERT INTO geogate.events (subscription, device, layer, fence, kind, time, lng, lat, state)
SELECT $1::uuid, 'd' || (i % 400), 'geofences', '1', 'enter', now(), 0, 0, 'pull'
FROM generate_series(1, 200000) i`, pull); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO geogate.events (subscription, device, layer, fence, kind, time, lng, lat, state)
SELECT $1::uuid, 'd' || (i % 40), 'geofences', '1', 'enter', now(), 0, 0, 'pending'
FROM generate_series(1, 3000) i`, sub); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	b := &pgx.Batch{}
	WorkerSettings(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+claimSQL, 16, 16, 60_000, ClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "CTE heads") {
		t.Errorf("the claim's plan has no CTE of the heads:\n%s", text)
	}
	if strings.Contains(text, "Seq Scan on events") {
		t.Errorf("the claim reads the outbox whole:\n%s", text)
	}
	m := regexp.MustCompile(`Execution Time: ([0-9.]+) ms`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no execution time in the plan:\n%s", text)
	}
	if ms, _ := strconv.ParseFloat(m[1], 64); ms > 1000 {
		t.Errorf("a claim took %.0f ms over 3,000 due events, want well under a second:\n%s", ms, text)
	}
	var leased int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM geogate.events WHERE subscription = $1::uuid AND lease_until > now()`, sub).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != 16 {
		t.Errorf("the claim leased %d events, want 16: one head per device, up to the subscription's cap", leased)
	}
}
