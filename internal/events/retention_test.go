package events_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/testenv"
)

// retentionRows fills the outbox and positions: positions p1-p5 that
// arrived 5 down to 1 hours ago, and for each state an event made 3 hours
// ago (old-STATE) and one made just now (new-STATE), their devices named
// so, the old first.
func retentionRows(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO geogate.event_positions (owner, device, time, lng, lat, received_at)
SELECT 'key:r', 'p' || h, now(), 0, 0, now() - make_interval(hours => 6 - h) FROM generate_series(1, 5) h;
INSERT INTO geogate.event_subscriptions (id, owner, layer, kinds, secret)
VALUES ('00000000-0000-0000-0000-0000000000aa', 'key:r', 'geofences', '{enter}', 's');
INSERT INTO geogate.events (subscription, device, layer, fence, kind, time, lng, lat, state, created_at)
SELECT '00000000-0000-0000-0000-0000000000aa', age || '-' || state, 'geofences', '1', 'enter', now(), 0, 0, state,
       CASE age WHEN 'old' THEN now() - interval '3 hours' ELSE now() END
FROM unnest('{old,new}'::text[]) age, unnest('{pending,delivered,dead,pull}'::text[]) state`)
	if err != nil {
		t.Fatal(err)
	}
}

// devicesLeft lists the devices of table's rows, sorted.
func devicesLeft(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `SELECT device FROM geogate.`+table+` ORDER BY device`)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRetentionPrunesOldPositionsOnly(t *testing.T) {
	for _, batch := range []int{0, 1, 2} { // one statement; a statement a row; a batch ending part way
		pool := testenv.DB(t)
		retentionRows(t, pool)
		r := events.NewRetention(pool, events.Keep{}, batch, nil, nil)
		got, err := r.Prune(context.Background(), time.Now().Add(-150*time.Minute))
		if err != nil {
			t.Fatalf("batch %d: Prune() = %v", batch, err)
		}
		if want := int64(3); got != want {
			t.Errorf("batch %d: Prune() = %d positions, want %d", batch, got, want)
		}
		if got, want := devicesLeft(t, pool, "event_positions"), []string{"p4", "p5"}; !slices.Equal(got, want) {
			t.Errorf("batch %d: positions left %v, want %v", batch, got, want)
		}
		// Events stay, whatever their age and state.
		if got := devicesLeft(t, pool, "events"); len(got) != 8 {
			t.Errorf("batch %d: events left %v, want all 8", batch, got)
		}
	}
}

// TestRetentionPrunesOldEventsDeliveredOrPulled: of the events made
// before the cutoff, those delivered or pulled go; pending ones still
// wait for delivery and dead letters for an operator, and the walk goes
// on past them, however the batches fall.
func TestRetentionPrunesOldEventsDeliveredOrPulled(t *testing.T) {
	for _, batch := range []int{0, 1, 2, 3} {
		pool := testenv.DB(t)
		retentionRows(t, pool)
		r := events.NewRetention(pool, events.Keep{}, batch, nil, nil)
		got, err := r.PruneEvents(context.Background(), time.Now().Add(-150*time.Minute))
		if err != nil {
			t.Fatalf("batch %d: PruneEvents() = %v", batch, err)
		}
		if want := int64(2); got != want {
			t.Errorf("batch %d: PruneEvents() = %d events, want %d", batch, got, want)
		}
		want := []string{"new-dead", "new-delivered", "new-pending", "new-pull", "old-dead", "old-pending"}
		if got := devicesLeft(t, pool, "events"); !slices.Equal(got, want) {
			t.Errorf("batch %d: events left %v, want %v", batch, got, want)
		}
		if got := devicesLeft(t, pool, "event_positions"); len(got) != 5 {
			t.Errorf("batch %d: positions left %v, want all 5", batch, got)
		}
	}
}

// TestPrunedCursorIsGone: a reader whose cursor is older than what
// retention kept is told so, with the oldest cursor still valid, rather
// than silently missing what was pruned; from that cursor, or from the
// beginning, it reads on.
func TestPrunedCursorIsGone(t *testing.T) {
	pool := testenv.DemoDB(t)
	retentionRows(t, pool)
	ctx := context.Background()
	var oldest int64
	if err := pool.QueryRow(ctx, `SELECT min(seq) FROM geogate.events`).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	svc := newService(t, pool, events.Settings{MaxPage: 100})
	const sub = "00000000-0000-0000-0000-0000000000aa"
	if _, _, err := svc.Events(ctx, "key:r", sub, oldest, 100); err != nil {
		t.Fatalf("Events() before any prune = %v", err)
	}
	if _, err := events.NewRetention(pool, events.Keep{}, 0, nil, nil).PruneEvents(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	var through int64
	if err := pool.QueryRow(ctx, `SELECT max(seq) FROM geogate.events WHERE device LIKE 'old-%' AND state IN ('pending', 'dead')`).Scan(&through); err != nil {
		t.Fatal(err)
	}
	through++ // old-pull follows old-dead: the last one pruned
	_, _, err := svc.Events(ctx, "key:r", sub, oldest, 100)
	if apperr.KindOf(err) != apperr.Gone || !strings.Contains(apperr.MessageOf(err), fmt.Sprintf("after=%d", through)) {
		t.Fatalf("Events(after %d) once pruned = %v, want Gone naming after=%d", oldest, err, through)
	}
	for _, after := range []int64{through, -1} {
		evs, _, err := svc.Events(ctx, "key:r", sub, after, 100)
		if err != nil {
			t.Fatalf("Events(after %d) = %v", after, err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Device)
		}
		want := []string{"new-pending", "new-delivered", "new-dead", "new-pull"}
		if after == -1 {
			want = append([]string{"old-pending", "old-dead"}, want...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Events(after %d) = %v, want %v", after, got, want)
		}
	}
}

func TestRetentionLeavesTheTurnToAnotherReplica(t *testing.T) {
	pool := testenv.DB(t)
	retentionRows(t, pool)
	other := holding(t, pool, `SELECT pg_advisory_xact_lock(hashtext('geogate positions retention'))`)
	r := events.NewRetention(pool, events.Keep{}, 0, nil, nil)
	if got, err := r.Prune(context.Background(), time.Now()); err != nil || got != 0 {
		t.Fatalf("Prune() beside another replica's = %d, %v; want nothing pruned, no error", got, err)
	}
	if err := other.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Prune(context.Background(), time.Now()); err != nil || got != 5 {
		t.Errorf("Prune() after it = %d, %v; want 5 positions", got, err)
	}
}

func TestRetentionFailsWhenTheDatabaseDoes(t *testing.T) {
	pool := testenv.DB(t)
	retentionRows(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := events.NewRetention(pool, events.Keep{}, 0, nil, nil)
	if _, err := r.Prune(ctx, time.Now()); err == nil {
		t.Fatal("Prune() with its context gone = nil, want an error")
	}
	if got, want := len(devicesLeft(t, pool, "event_positions")), 5; got != want {
		t.Errorf("%d positions left after a failed prune, want %d", got, want)
	}
}

func TestRetentionRunPrunesAtOnceAndStopsWithItsContext(t *testing.T) {
	pool := testenv.DB(t)
	retentionRows(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	keep := events.Keep{Positions: 150 * time.Minute, Events: 150 * time.Minute}
	go func() { events.NewRetention(pool, keep, 0, nil, nil).Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(devicesLeft(t, pool, "event_positions")) != 2 || len(devicesLeft(t, pool, "events")) != 6 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after Run began, positions left: %v, want p4 and p5; events left: %v, want 6",
				devicesLeft(t, pool, "event_positions"), devicesLeft(t, pool, "events"))
		}
		time.Sleep(10 * time.Millisecond) // polling the table
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run went on 10 s after its context ended")
	}
}

// TestPruneReadsOnlyWhatItDeletes checks the prune's plan on 200,000
// positions, generic and custom: both steps walk the primary key, never
// the whole table.
func TestPruneReadsOnlyWhatItDeletes(t *testing.T) {
	pool := testenv.DB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO geogate.event_positions (owner, device, time, lng, lat, received_at)
SELECT 'key:r', 'd', now(), 0, 0, now() - make_interval(secs => 200000 - g) FROM generate_series(1, 200000) g;
ANALYZE geogate.event_positions`); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		// A serving connection's search_path, and no report's settings.
		setup := []string{"SET LOCAL search_path = geogate", "SET LOCAL plan_cache_mode = " + mode}
		plan := explainAfter(t, pool, setup, events.PruneSQL, "timestamptz, int", []string{"now() - interval '100000 seconds'", "5000"})
		if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Hash") || strings.Count(plan, "Index Scan using event_positions_pkey") != 2 {
			t.Errorf("%s: the prune does not find its rows by the primary key:\n%s", mode, plan)
		}
	}
}
