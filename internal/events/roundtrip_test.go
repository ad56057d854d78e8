package events_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/testenv"
)

// TestReportRoundTrips counts the round trips of a report on a warm
// connection that ends stays: four, one more for devices new to their
// owner (which end none: three and one), one more for a subscription
// with a filter. Each costs the service and the
// server a wake-up, and the batch its latency.
func TestReportRoundTrips(t *testing.T) {
	demo := testenv.DemoDB(t)
	ctx := context.Background()
	cfg := demo.Config().Copy()
	cfg.MaxConns, cfg.MinConns = 1, 0
	trips := &testenv.RoundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc := newService(t, pool, testSettings)
	// Ten devices in Paris, then in Berlin: each leaves France.
	places := [][2]float64{{2.35, 48.86}, {13.40, 52.52}}
	batch := func(devices string, n int) []events.Position {
		var ps []events.Position
		for i := range 10 {
			ps = append(ps, events.Position{Device: fmt.Sprintf("%s-%d", devices, i), Time: at(n), Lng: places[n][0], Lat: places[n][1]})
		}
		return ps
	}
	report := func(owner string, ps []events.Position) int64 {
		t.Helper()
		before := trips.N()
		if _, err := svc.Report(ctx, owner, ps); err != nil {
			t.Fatal(err)
		}
		return trips.N() - before
	}
	for _, owner := range []string{"key:plain", "key:filtered"} {
		s := events.Subscription{Layer: "geofences", Kinds: []events.Kind{events.Enter, events.Exit}}
		if owner == "key:filtered" {
			s.Filter = "name <> 'DEU'"
		}
		if _, err := svc.CreateSubscription(ctx, owner, s); err != nil {
			t.Fatal(err)
		}
		report(owner, batch("warm", 0)) // prepares the statements
	}
	for _, tt := range []struct {
		name, owner, devices string
		want                 int64
	}{
		{"known devices", "key:plain", "warm", 4},
		{"new devices", "key:plain", "new", 4},
		{"a filter", "key:filtered", "warm", 5},
	} {
		if got := report(tt.owner, batch(tt.devices, 1)); got != tt.want {
			t.Errorf("%s: a report took %d round trips, want %d", tt.name, got, tt.want)
		}
	}
}
