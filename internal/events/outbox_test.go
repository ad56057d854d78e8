package events_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/testenv"
)

// left counts what subscription sub still has in the outbox and the stays.
func left(t *testing.T, pool *pgxpool.Pool, sub string) (evs, stays int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT
  (SELECT count(*) FROM geogate.events WHERE subscription = $1::uuid),
  (SELECT count(*) FROM geogate.event_memberships WHERE subscription = $1::uuid)`, sub).Scan(&evs, &stays); err != nil {
		t.Fatal(err)
	}
	return evs, stays
}

// waitForLock waits until a statement of another session waits for a lock
// of the given type (advisory, or a row's transactionid), and fails after
// 10 s.
func waitForLock(t *testing.T, pool *pgxpool.Pool, locktype string) {
	t.Helper()
	waitForLocks(t, pool, locktype, 1)
}

// waitForLocks waits until n statements wait for locks of the given type.
func waitForLocks(t *testing.T, pool *pgxpool.Pool, locktype string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = $1`, locktype).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions waited for a %s lock within 10 s, want %d", waiting, locktype, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holding begins a transaction on pool that has run sql, left open for
// the test to commit (it is rolled back at the end otherwise).
func holding(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) }) //nolint:errcheck
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

// reportBeside reports ps for key:one while tx holds what the report
// needs: once the report waits for a lock of the given type, meanwhile
// runs in tx, then tx commits. It returns the report's error.
func reportBeside(t *testing.T, pool *pgxpool.Pool, svc *events.Service, tx pgx.Tx, locktype string, ps []events.Position, meanwhile func()) error {
	t.Helper()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := svc.Report(ctx, "key:one", ps)
		done <- err
	}()
	waitForLock(t, pool, locktype)
	if meanwhile != nil {
		meanwhile()
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// TestDeletedSubscriptionLeavesNothing: deleting a subscription deletes
// its events and its stays with it.
func TestDeletedSubscriptionLeavesNothing(t *testing.T) {
	pool := testenv.DemoDB(t)
	svc := newService(t, pool, testSettings)
	sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
	report(t, svc, "key:one", pos("a", 0, berlin), pos("b", 0, warsaw))
	if evs, stays := left(t, pool, sub); evs != 2 || stays != 2 {
		t.Fatalf("before the deletion: %d events, %d stays; want 2, 2", evs, stays)
	}
	if err := svc.DeleteSubscription(context.Background(), "key:one", sub); err != nil {
		t.Fatal(err)
	}
	if evs, stays := left(t, pool, sub); evs != 0 || stays != 0 {
		t.Errorf("after the deletion: %d events, %d stays left; want none", evs, stays)
	}
}

// TestReportBesideADeletion: a report that read a subscription just
// before it was deleted neither fails nor leaves an event or a stay of
// it behind, whether it ends a stay or begins one.
func TestReportBesideADeletion(t *testing.T) {
	pool := testenv.DemoDB(t)
	svc := newService(t, pool, testSettings)
	sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
	report(t, svc, "key:one", pos("a", 0, berlin))

	// The deletion holds the subscription's row and its stays until it
	// commits; the report, which moves a from DEU to POL, waits for them.
	tx := holding(t, pool, `DELETE FROM geogate.event_subscriptions WHERE id = $1::uuid`, sub)
	if err := reportBeside(t, pool, svc, tx, "transactionid", []events.Position{pos("a", 1, warsaw)}, nil); err != nil {
		t.Fatalf("Report() beside the deletion = %v, want it to go through", err)
	}
	if evs, stays := left(t, pool, sub); evs != 0 || stays != 0 {
		t.Errorf("after the report: %d events, %d stays of the deleted subscription; want none", evs, stays)
	}
}

// TestDeletionBesideAReportThatBeganStays: a report begins a stay, then
// waits for its subscription's outbox lock; the subscription's deletion
// ends the stays it sees, which the report's new one is not yet among,
// then waits for the lock behind the report. Once the report commits, the
// deletion finds the new stay and ends it too: nothing of the
// subscription is left.
func TestDeletionBesideAReportThatBeganStays(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	svc := newService(t, pool, testSettings)
	sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
	lock := holding(t, pool, `SELECT pg_advisory_xact_lock(1734829430, hashtext($1))`, sub)
	reported := make(chan error, 1)
	go func() {
		_, err := svc.Report(ctx, "key:one", []events.Position{pos("c", 0, berlin)})
		reported <- err
	}()
	waitForLock(t, pool, "advisory")
	deleted := make(chan error, 1)
	go func() { deleted <- svc.DeleteSubscription(ctx, "key:one", sub) }()
	waitForLocks(t, pool, "advisory", 2)
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-reported; err != nil {
		t.Fatalf("Report() = %v, want it through before the deletion", err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("DeleteSubscription() = %v", err)
	}
	if evs, stays := left(t, pool, sub); evs != 0 || stays != 0 {
		t.Errorf("after the deletion: %d events, %d stays of the subscription; want none", evs, stays)
	}
}

// TestReportBesideFenceChanges: a transaction that deletes two fences one
// statement at a time, beside a report whose device leaves the second,
// takes the outbox lock and the stay the other way round from the report.
// PostgreSQL breaks the deadlock by rolling the report back; the report
// runs again and goes through, and the stay's exit is told once, by the
// fence's deletion.
func TestReportBesideFenceChanges(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	svc := newService(t, pool, testSettings)
	deu, pol := fenceID(t, pool, "DEU"), fenceID(t, pool, "POL")
	names := map[string]string{deu: "DEU", pol: "POL"}
	sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
	report(t, svc, "key:one", pos("a", 0, berlin), pos("b", 0, warsaw))

	// Its exit trigger ends b's stay, then takes the outbox lock.
	tx := holding(t, pool, `DELETE FROM public.geofences WHERE id = $1`, pol)
	// a leaves DEU: the report ends a's stay, then waits for the lock;
	// ending a's stay, the second deletion waits for the report.
	err := reportBeside(t, pool, svc, tx, "advisory", []events.Position{pos("a", 1, baltic)}, func() {
		if _, err := tx.Exec(ctx, `DELETE FROM public.geofences WHERE id = $1`, deu); err != nil {
			t.Fatalf("the second deletion = %v, want the report rolled back instead", err)
		}
	})
	if err != nil {
		t.Fatalf("Report() beside the fence changes = %v, want it run again and through", err)
	}
	evs := pull(t, svc, "key:one", sub)
	if got, want := kinds(evs, names), "enter DEU a, enter POL b, exit POL b, exit DEU a"; got != want {
		t.Errorf("events = %s\nwant %s", got, want)
	}
	if _, stays := left(t, pool, sub); stays != 0 {
		t.Errorf("%d stays left, want none", stays)
	}
}

// TestExitToldOnceBesideAFenceDeletion: a report that read a device's
// stay in a fence whose deletion then commits finds the stay ended
// already. The deletion told the exit: the report does not tell it again,
// nor, when its batch comes back into the fence, the enter after it, and
// it keeps no stay in the fence that is gone.
func TestExitToldOnceBesideAFenceDeletion(t *testing.T) {
	tests := []struct {
		name  string
		batch []events.Position
	}{
		{"leaving", []events.Position{pos("a", 1, baltic)}},
		{"leaving and coming back", []events.Position{pos("a", 1, baltic), pos("a", 2, berlin)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testenv.DemoDB(t)
			svc := newService(t, pool, testSettings)
			deu := fenceID(t, pool, "DEU")
			sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
			report(t, svc, "key:one", pos("a", 0, berlin))

			tx := holding(t, pool, `DELETE FROM public.geofences WHERE id = $1`, deu)
			// The report waits to end the stay the deletion holds.
			if err := reportBeside(t, pool, svc, tx, "transactionid", tt.batch, nil); err != nil {
				t.Fatalf("Report() = %v", err)
			}
			evs := pull(t, svc, "key:one", sub)
			if got, want := kinds(evs, map[string]string{deu: "DEU"}), "enter DEU a, exit DEU a"; got != want {
				t.Errorf("events = %s\nwant %s", got, want)
			}
			if len(evs) == 2 && evs[1].Cause != "fence-deleted" {
				t.Errorf("the exit's cause = %s, want fence-deleted", evs[1].Cause)
			}
			if _, stays := left(t, pool, sub); stays != 0 {
				t.Errorf("%d stays left in the deleted fence, want none", stays)
			}
		})
	}
}

// TestDeliveriesHearOnlyOfWebhookEvents: every insert into the outbox is
// announced to the streams, but only one that writes a webhook's event
// wakes the delivery workers. Notifications arrive in commit order, so the
// first for the workers must come after the webhook report's own.
func TestDeliveriesHearOnlyOfWebhookEvents(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	svc := newService(t, pool, testSettings)
	pulled := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter}})
	hooked := subscribe(t, svc, "key:two", events.Subscription{Kinds: []events.Kind{events.Enter}, Webhook: "https://receiver.example/hook"})
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+outbox.EventsChannel+"; LISTEN "+outbox.DeliveriesChannel); err != nil {
		t.Fatal(err)
	}
	report(t, svc, "key:one", pos("a", 0, berlin))
	report(t, svc, "key:two", pos("a", 0, berlin))
	var heard []string
	for len(heard) == 0 || heard[len(heard)-1] != outbox.DeliveriesChannel {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("after %v: %v", heard, err)
		}
		switch {
		case n.Channel == outbox.DeliveriesChannel:
			heard = append(heard, n.Channel)
		case n.Payload == pulled:
			heard = append(heard, "pulled")
		case n.Payload == hooked:
			heard = append(heard, "hooked")
		}
	}
	if got, want := strings.Join(heard, " "), "pulled hooked "+outbox.DeliveriesChannel; got != want {
		t.Errorf("notifications = %s, want %s", got, want)
	}
}
