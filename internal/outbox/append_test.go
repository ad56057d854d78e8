package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// appendAll appends es in one transaction and returns how many were
// written.
func appendAll(t *testing.T, pool *pgxpool.Pool, es ...Entry) int64 {
	t.Helper()
	var n int64
	b := &pgx.Batch{}
	Append(b, es, &n)
	if err := pool.SendBatch(context.Background(), b).Close(); err != nil {
		t.Fatalf("Append: %v", err)
	}
	return n
}

// states lists the kind and state of sub's events, in order.
func states(t *testing.T, pool *pgxpool.Pool, sub string) []string {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `SELECT kind || ':' || state || ':' || cause FROM geogate.events WHERE subscription = $1::uuid ORDER BY seq`, sub)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestAppendKeepsWhatItsSubscriptionAsksFor: the outbox writes an event
// only for a subscription that exists and asks for its kind; it is
// pending where the subscription has a webhook and pulled where it has
// none; and its cause is the position unless the writer says otherwise.
func TestAppendKeepsWhatItsSubscriptionAsksFor(t *testing.T) {
	pool := testenv.DemoDB(t)
	owner := "key:" + testenv.Prefix(t)
	hooked := subscribe(t, pool, owner, "https://receiver.example/hook", "enter", "exit")
	pulled := subscribe(t, pool, owner, "", "exit")
	gone := "00000000-0000-0000-0000-00000000dead"
	at := time.Now()
	e := func(sub, kind string) Entry {
		return Entry{Subscription: sub, Device: "d", Layer: "geofences", Fence: "1", Kind: kind, Time: at}
	}
	changed := e(pulled, "exit")
	changed.Cause = "fence-changed"
	n := appendAll(t, pool, e(hooked, "enter"), e(pulled, "enter"), e(gone, "enter"), e(hooked, "exit"), changed, e(hooked, "dwell"))
	if n != 3 {
		t.Errorf("Append wrote %d events, want 3", n)
	}
	for _, tc := range []struct {
		sub  string
		want []string
	}{
		{hooked, []string{"enter:pending:position", "exit:pending:position"}},
		{pulled, []string{"exit:pull:fence-changed"}},
		{gone, nil},
	} {
		if got := states(t, pool, tc.sub); !slices.Equal(got, tc.want) {
			t.Errorf("events of %s: got %v, want %v", tc.sub, got, tc.want)
		}
	}
}

// TestUnhookTurnsPendingToPulled: removing a webhook turns what waited
// for it into pulled events, and leaves those delivered alone.
func TestUnhookTurnsPendingToPulled(t *testing.T) {
	pool := testenv.DemoDB(t)
	sub := subscribe(t, pool, "key:"+testenv.Prefix(t), "https://receiver.example/hook", "enter", "exit")
	at := time.Now()
	appendAll(t, pool, Entry{Subscription: sub, Device: "d", Layer: "geofences", Fence: "1", Kind: "enter", Time: at},
		Entry{Subscription: sub, Device: "d", Layer: "geofences", Fence: "1", Kind: "exit", Time: at})
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE geogate.events SET state = 'delivered' WHERE subscription = $1::uuid AND kind = 'enter'`, sub); err != nil {
		t.Fatal(err)
	}
	if err := Unhook(ctx, pool, sub); err != nil {
		t.Fatalf("Unhook() = %v", err)
	}
	if got, want := states(t, pool, sub), []string{"enter:delivered:position", "exit:pull:position"}; !slices.Equal(got, want) {
		t.Errorf("events after Unhook: got %v, want %v", got, want)
	}
}
