package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/pg"
)

var testSettings = events.Settings{MaxBatch: 1000, MaxSkew: 5 * time.Minute, MaxPage: 1000}

// newService is an events Service over pool, its fences and filters
// answered by the real geofence and features services over the layers of
// schema public. A caller's spatial scope is its identity's, in the
// context of each call (auth.ScopeOf).
func newService(t testing.TB, pool *pgxpool.Pool, s events.Settings) *events.Service {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, pool, catalog.Settings{Schemas: []string{"public"}, Own: pg.DefaultSchema}, nil)
	if err != nil {
		t.Fatalf("catalog.Open() = %v", err)
	}
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: 30 * time.Second, AcquireTimeout: 10 * time.Second}}
	geo := geofence.New(run, cat, geofence.Settings{Own: pg.DefaultSchema}, nil)
	fs := features.New(run, cat, features.Settings{}, features.Rights{})
	allow := func(context.Context, string) error { return nil }
	return events.New(run, geo, fs, events.Rights{Access: allow}, s, nil)
}

// at is a time n seconds after a fixed start.
func at(n int) time.Time {
	return time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
}

// pull reads every event of sub after cursor 0.
func pull(t testing.TB, svc *events.Service, owner, sub string) []outbox.Event {
	t.Helper()
	var out []outbox.Event
	var after int64
	for {
		evs, next, err := svc.Events(context.Background(), owner, sub, after, 100)
		if err != nil {
			t.Fatalf("Events() = %v", err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		after = next
	}
}
