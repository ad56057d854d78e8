package outbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/testenv"
)

// TestPruneWalksTheKey: over 200,000 events, with statistics taken
// while the outbox was empty, a prune batch reads the events it walks by
// the primary key, never the whole table, both as a generic and as a
// custom plan.
func TestPruneWalksTheKey(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	sub := subscribe(t, pool, "key:"+testenv.Prefix(t), "", "enter")
	if _, err := pool.Exec(ctx, `ANALYZE geogate.events`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO geogate.events (subscription, device, layer, fence, kind, time, lng, lat, state, created_at)
SELECT $1::uuid, 'd', 'geofences', '1', 'enter', now(), 0, 0, 'pull', now() - make_interval(secs => 200000 - g)
FROM generate_series(1, 200000) g`, sub); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		rows, _ := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+pruneSQL, time.Now().Add(-time.Hour), 5000, int64(0))
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "Seq Scan on events") {
			t.Errorf("%s: the prune reads the outbox whole:\n%s", mode, text)
		}
	}
}
