package events_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/testenv"
)

// Points in and out of the demo's countries.
var (
	berlin = [2]float64{13.40, 52.52} // DEU
	warsaw = [2]float64{21.01, 52.23} // POL
	baltic = [2]float64{19.0, 55.5}   // sea
)

func pos(dev string, sec int, p [2]float64) events.Position {
	return events.Position{Device: dev, Time: at(sec), Lng: p[0], Lat: p[1]}
}

func fenceID(t *testing.T, pool *pgxpool.Pool, iso string) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(), `SELECT id::text FROM public.geofences WHERE name = $1`, iso).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// kinds writes events as "kind fence device" lines, with fences named by
// name for readability.
func kinds(evs []outbox.Event, names map[string]string) string {
	var out []string
	for _, e := range evs {
		f := e.Fence
		if n, ok := names[f]; ok {
			f = n
		}
		out = append(out, fmt.Sprintf("%s %s %s", e.Kind, f, e.Device))
	}
	return strings.Join(out, ", ")
}

func report(t *testing.T, svc *events.Service, owner string, ps ...events.Position) events.Report {
	t.Helper()
	r, err := svc.Report(context.Background(), owner, ps)
	if err != nil {
		t.Fatalf("Report() = %v", err)
	}
	return r
}

func subscribe(t *testing.T, svc *events.Service, owner string, sub events.Subscription) string {
	t.Helper()
	if sub.Layer == "" {
		sub.Layer = "geofences"
	}
	out, err := svc.CreateSubscription(context.Background(), owner, sub)
	if err != nil {
		t.Fatalf("CreateSubscription() = %v", err)
	}
	return out.ID
}

func TestStays(t *testing.T) {
	pool := testenv.DemoDB(t)
	names := map[string]string{fenceID(t, pool, "DEU"): "DEU", fenceID(t, pool, "POL"): "POL"}
	all := []events.Kind{events.Enter, events.Exit, events.Dwell}
	tests := []struct {
		name     string
		settings func(*events.Settings)
		sub      events.Subscription
		batches  [][]events.Position
		want     string
		report   string // the last batch's report
	}{
		{
			name:    "late position recorded, no transition",
			sub:     events.Subscription{Kinds: all[:2]},
			batches: [][]events.Position{{pos("a", 10, berlin)}, {pos("a", 5, warsaw)}, {pos("a", 10, warsaw)}},
			want:    "enter DEU a",
			report:  `{1 1 0 0}`,
		},
		{
			name:    "dwell once per stay",
			sub:     events.Subscription{Kinds: all, DwellSeconds: 60},
			batches: [][]events.Position{{pos("a", 0, berlin), pos("a", 30, berlin), pos("a", 60, berlin), pos("a", 600, berlin), pos("a", 601, warsaw)}},
			want:    "enter DEU a, dwell DEU a, exit DEU a, enter POL a",
		},
		{
			name:    "only the kinds asked for",
			sub:     events.Subscription{Kinds: []events.Kind{events.Exit}},
			batches: [][]events.Position{{pos("a", 0, berlin), pos("a", 1, warsaw), pos("a", 2, baltic)}},
			want:    "exit DEU a, exit POL a",
		},
		{
			name:    "only the devices asked for",
			sub:     events.Subscription{Kinds: all[:1], Devices: []string{"b"}},
			batches: [][]events.Position{{pos("a", 0, berlin), pos("b", 0, warsaw)}},
			want:    "enter POL b",
		},
		{
			name:    "a filter on the fences' properties",
			sub:     events.Subscription{Kinds: all[:1], Filter: "name = 'POL'"},
			batches: [][]events.Position{{pos("a", 0, berlin), pos("a", 1, warsaw)}},
			want:    "enter POL a",
		},
		{
			name:     "moves within the accuracy ignored when asked",
			settings: func(s *events.Settings) { s.IgnoreWithinAccuracy = true },
			sub:      events.Subscription{Kinds: all[:2]},
			batches: [][]events.Position{{
				pos("a", 0, berlin),
				// 700 km away, but the fix says it may be 1000 km off
				{Device: "a", Time: at(1), Lng: warsaw[0], Lat: warsaw[1], Accuracy: ptr(1e6)},
				{Device: "a", Time: at(2), Lng: warsaw[0], Lat: warsaw[1], Accuracy: ptr(10)},
			}},
			want:   "enter DEU a, exit DEU a, enter POL a",
			report: `{3 0 1 3}`,
		},
		{
			name:    "batches in any order of devices",
			sub:     events.Subscription{Kinds: all[:2]},
			batches: [][]events.Position{{pos("b", 1, warsaw), pos("a", 1, warsaw), pos("b", 0, berlin), pos("a", 0, berlin)}},
			want:    "enter DEU a, exit DEU a, enter POL a, enter DEU b, exit DEU b, enter POL b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSettings
			if tt.settings != nil {
				tt.settings(&s)
			}
			svc := newService(t, pool, s)
			owner := "key:" + testenv.Prefix(t)
			sub := subscribe(t, svc, owner, tt.sub)
			var r events.Report
			for _, b := range tt.batches {
				r = report(t, svc, owner, b...)
			}
			if got := kinds(pull(t, svc, owner, sub), names); got != tt.want {
				t.Errorf("events = %s\nwant %s", got, tt.want)
			}
			if tt.report != "" {
				if got := fmt.Sprintf("{%d %d %d %d}", r.Accepted, r.Late, r.Still, r.Events); got != tt.report {
					t.Errorf("last report {accepted late still events} = %s, want %s", got, tt.report)
				}
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }

// TestOwnersAreApart: a device id is its owner's; another owner's
// subscription hears nothing of it, and cannot read the first's events.
func TestOwnersAreApart(t *testing.T) {
	pool := testenv.DemoDB(t)
	svc := newService(t, pool, testSettings)
	mine := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter}})
	theirs := subscribe(t, svc, "key:two", events.Subscription{Kinds: []events.Kind{events.Enter}})
	report(t, svc, "key:one", pos("truck", 0, berlin))
	report(t, svc, "key:two", pos("truck", 0, baltic)) // not the same truck
	if got := len(pull(t, svc, "key:one", mine)); got != 1 {
		t.Errorf("key:one's events = %d, want 1", got)
	}
	if got := len(pull(t, svc, "key:two", theirs)); got != 0 {
		t.Errorf("key:two's events = %d, want 0", got)
	}
	if _, _, err := svc.Events(context.Background(), "key:two", mine, 0, 10); err == nil {
		t.Error("key:two read key:one's subscription's events, want not found")
	}
}

// TestFenceDeletedOrMovedExits: deleting a fence, or moving it away from
// a device inside, writes the exit in the fence's own transaction.
func TestFenceDeletedOrMovedExits(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	svc := newService(t, pool, testSettings)
	deu, pol := fenceID(t, pool, "DEU"), fenceID(t, pool, "POL")
	names := map[string]string{deu: "DEU", pol: "POL"}
	sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
	report(t, svc, "key:one", pos("a", 0, berlin), pos("b", 0, warsaw))
	if _, err := pool.Exec(ctx, `UPDATE public.geofences SET name = 'Germany' WHERE id = $1`, deu); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE public.geofences SET geom = ST_Multi(ST_Translate(geom, 50, 0)) WHERE id = $1`, deu); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM public.geofences WHERE id = $1`, pol); err != nil {
		t.Fatal(err)
	}
	evs := pull(t, svc, "key:one", sub)
	if got, want := kinds(evs, names), "enter DEU a, enter POL b, exit DEU a, exit POL b"; got != want {
		t.Fatalf("events = %s\nwant %s", got, want)
	}
	if evs[2].Cause != "fence-changed" || evs[3].Cause != "fence-deleted" {
		t.Errorf("causes = %s, %s; want fence-changed, fence-deleted", evs[2].Cause, evs[3].Cause)
	}
	// The stays ended with the exits: back at Berlin (now fenceless) and
	// Warsaw, nothing more happens.
	report(t, svc, "key:one", pos("a", 1, berlin), pos("b", 1, warsaw))
	if got := len(pull(t, svc, "key:one", sub)); got != 4 {
		t.Errorf("events after the devices reported again = %d, want still 4", got)
	}
}

// TestReadersMissNothing: while many reports of different devices commit
// at once, a reader paging by cursor sees every event exactly once, and
// each device's events in the order of its positions.
func TestReadersMissNothing(t *testing.T) {
	pool := testenv.DemoDB(t)
	svc := newService(t, pool, testSettings)
	sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
	const devices, steps = 8, 20
	var wg sync.WaitGroup
	done := make(chan struct{})
	for d := range devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range steps {
				p := berlin
				if i%2 == 1 {
					p = warsaw
				}
				if _, err := svc.Report(context.Background(), "key:one", []events.Position{pos(fmt.Sprint("d", d), i, p)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	var seen []outbox.Event
	var after int64
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		evs, next, err := svc.Events(context.Background(), "key:one", sub, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, evs...)
		after = next
		if len(evs) == 0 && finished {
			break
		}
	}
	// d0..d7 each: enter DEU, then (exit DEU, enter POL, exit POL, enter DEU) ...
	if want := devices * (1 + 2*(steps-1)); len(seen) != want {
		t.Fatalf("the reader saw %d events, want %d", len(seen), want)
	}
	ids := map[string]bool{}
	last := map[string]time.Time{}
	for _, e := range seen {
		if ids[e.ID] {
			t.Fatalf("event %s seen twice", e.ID)
		}
		ids[e.ID] = true
		if e.Time.Before(last[e.Device]) {
			t.Fatalf("device %s: an event at %v after one at %v", e.Device, e.Time, last[e.Device])
		}
		last[e.Device] = e.Time
	}
}
