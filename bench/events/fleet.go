package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/bench/internal/load"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/pg"
)

// batchSize is the positions of one report: one for each of a client's
// devices.
const batchSize = 100

// The bench fences: squares of side 0.018 degrees every 0.02 degrees over
// western Europe, 250 across; a device dropped at random lands in one
// four times in five.
const (
	gridWest, gridSouth = 0.0, 45.0
	gridStep, gridSide  = 0.02, 0.018
	gridCols            = 250
)

// fleet holds the bench database and the direct side.
type fleet struct {
	pool                  *pgxpool.Pool
	svc                   *events.Service
	containsSQL           string // the fences layer's point-in-polygon statement
	fenceCount, countries int
	rows                  int
	mu                    sync.Mutex
	last                  map[string]time.Time // device -> its last position's time
}

func openFleet(ctx context.Context, dbURL string, n int) (*fleet, error) {
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 32, AppName: "geogate-bench-events", Schema: pg.DefaultSchema, Warm: pg.WarmPostGIS})
	if err != nil {
		return nil, err
	}
	f := &fleet{pool: pool, last: map[string]time.Time{}, rows: (n + gridCols - 1) / gridCols}
	if err := f.forget(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := f.ensureFences(ctx, n); err != nil {
		pool.Close()
		return nil, err
	}
	cat, err := catalog.Open(ctx, pool, catalog.Settings{Schemas: []string{"public"}, Own: pg.DefaultSchema}, nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: 30 * time.Second, AcquireTimeout: 10 * time.Second}}
	geo := geofence.New(run, cat, geofence.Settings{Own: pg.DefaultSchema}, nil)
	var ok bool
	if f.containsSQL, ok = geo.ContainsSQL("geofences"); !ok {
		pool.Close()
		return nil, fmt.Errorf("no point-in-polygon statement for the fences layer")
	}
	fs := features.New(run, cat, features.Settings{}, features.Rights{})
	allow := func(context.Context, string) error { return nil }
	f.svc = events.New(run, geo, fs, events.Rights{Access: allow}, events.Settings{MaxBatch: 1000, MaxSkew: time.Minute, MaxPage: 1000}, nil)
	return f, nil
}

func (f *fleet) close() { f.pool.Close() }

// forget drops what earlier runs left: the bench owns its database, so
// the outbox, the stays, the devices and the positions are emptied and
// the bench's subscriptions deleted, and a checkpoint starts the run
// with nothing of earlier runs' writes left to flush. Every run so
// starts from the same empty outbox, not from one bloated by the last.
func (f *fleet) forget(ctx context.Context) error {
	for _, sql := range []string{
		`TRUNCATE geogate.events, geogate.event_memberships, geogate.event_devices, geogate.event_positions`,
		`DELETE FROM geogate.event_subscriptions WHERE owner LIKE 'key:events-bench%' OR owner = 'bench:direct'`,
		`VACUUM ANALYZE geogate.event_subscriptions, geogate.events, geogate.event_memberships, geogate.event_devices`,
		`CHECKPOINT`,
	} {
		if _, err := f.pool.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// ensureFences makes the bench fences number n, in the built-in fences
// beside the countries, whose subdivided copy the triggers keep.
func (f *fleet) ensureFences(ctx context.Context, n int) error {
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE name LIKE 'bench-%' AND ST_Area(geom) > 0), count(*) FILTER (WHERE name NOT LIKE 'bench-%') FROM public.geofences`).
		Scan(&f.fenceCount, &f.countries); err != nil {
		return err
	}
	if f.fenceCount == n {
		return nil
	}
	fmt.Printf("creating %d bench fences...\n", n)
	if _, err := f.pool.Exec(ctx, `DELETE FROM public.geofences WHERE name LIKE 'bench-%'`); err != nil {
		return err
	}
	_, err := f.pool.Exec(ctx, `
INSERT INTO public.geofences (name, geom)
SELECT 'bench-' || i, ST_Multi(ST_MakeEnvelope(x, y, x + $4::float8, y + $4::float8, 4326))
FROM (SELECT i, $1::float8 + (i % $5::int) * $3::float8 AS x, $2::float8 + (i / $5::int) * $3::float8 AS y FROM generate_series(0, $6::int - 1) i) g`,
		gridWest, gridSouth, gridStep, gridSide, gridCols, n)
	if err != nil {
		return err
	}
	_, err = f.pool.Exec(ctx, `ANALYZE public.geofences; ANALYZE geogate.geofence_parts`)
	f.fenceCount = n
	return err
}

// batch is a report of 100 positions, one for each device of worker w
// (its prefix), each dropped at random on the grid, timed now.
func (f *fleet) batch(prefix string, w int, rng *rand.Rand) []events.Position {
	now := time.Now().UTC()
	ps := make([]events.Position, batchSize)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range ps {
		dev := fmt.Sprintf("%s-w%d-d%d", prefix, w, i)
		t := now
		if l := f.last[dev]; !t.After(l) {
			t = l.Add(time.Microsecond)
		}
		f.last[dev] = t
		ps[i] = events.Position{Device: dev, Time: t,
			Lng: gridWest + rng.Float64()*gridCols*gridStep, Lat: gridSouth + rng.Float64()*float64(f.rows)*gridStep}
	}
	return ps
}

const directOwner = "bench:direct"

// subscribeDirect gives the direct side's owner a pull subscription like
// the API side's.
func (f *fleet) subscribeDirect(ctx context.Context) error {
	subs, err := f.svc.Subscriptions(ctx, directOwner)
	if err != nil || len(subs) > 0 {
		return err
	}
	_, err = f.svc.CreateSubscription(ctx, directOwner, events.Subscription{Layer: "geofences", Kinds: []events.Kind{events.Enter, events.Exit}})
	return err
}

// directOp reports a batch straight through events.Service.Report.
func (f *fleet) directOp() load.Op {
	rngs := make([]*rand.Rand, 64)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 2))
	}
	return func(w, _ int) error {
		_, err := f.svc.Report(context.Background(), directOwner, f.batch("direct", w, rngs[w%len(rngs)]))
		return err
	}
}

// pipOp runs the fences layer's point-in-polygon statement, the one a
// report runs, over batches like the others', outside any transaction:
// the floor under a report's cost, and a reading of the machine's speed
// taken in the same run.
func (f *fleet) pipOp() load.Op {
	rngs := make([]*rand.Rand, 64)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 3))
	}
	return func(w, _ int) error {
		rng := rngs[w%len(rngs)]
		lngs, lats := make([]float64, batchSize), make([]float64, batchSize)
		for i := range lngs {
			lngs[i], lats[i] = gridWest+rng.Float64()*gridCols*gridStep, gridSouth+rng.Float64()*float64(f.rows)*gridStep
		}
		rows, err := f.pool.Query(context.Background(), f.containsSQL, lngs, lats)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
}

// eventsPerPosition is what the API side's reports have committed.
func (f *fleet) eventsPerPosition(ctx context.Context) (float64, error) {
	var evs, ps float64
	err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM geogate.events e JOIN geogate.event_subscriptions s ON s.id = e.subscription WHERE s.owner = 'key:events-bench'),
  (SELECT count(*) FROM geogate.event_positions WHERE owner = 'key:events-bench')`).Scan(&evs, &ps)
	if ps == 0 {
		return 0, err
	}
	return evs / ps, err
}

// hookEventsSince counts the events the hooked key's reports have made
// since start; -1 when it cannot.
func (f *fleet) hookEventsSince(ctx context.Context, start time.Time) int {
	var n int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM geogate.events e JOIN geogate.event_subscriptions s ON s.id = e.subscription
WHERE s.owner = 'key:events-bench-hook' AND e.created_at >= $1`, start).Scan(&n); err != nil {
		return -1
	}
	return n
}
