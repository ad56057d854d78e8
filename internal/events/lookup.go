package events

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	geom "github.com/twpayne/go-geom"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

// lookups are what a report finds of the fences of its subscriptions'
// layers, by layer: for each evaluated position, the fences holding it
// (inside) and, for layers with a subscription that asks for crossings,
// those the step to it meets (met).
type lookups struct {
	inside, met map[lookKey]*geofence.Found
}

// lookKey names one lookup: a layer, seen by one caller ("" for
// everyone).
type lookKey struct{ layer, caller string }

func lookKeyOf(w watch) lookKey { return lookKey{w.layer, w.callerKey} }

// queueAs queues, in b, what queue queues, as w's caller when it has one.
func queueAs(b *pgx.Batch, w watch, queue func()) {
	if w.caller == nil {
		queue()
		return
	}
	pg.QueueAs(b, w.caller)
	queue()
	pg.QueueAsLogin(b)
}

// lookups queues, in b, finding for each evaluated position ps[i] the
// fences of each layer of ws holding it and, for the layers of
// subscriptions that ask for crossings, those the line from its device's
// previous position (from) meets. A layer that is gone finds nothing.
func (s *Service) lookups(ctx context.Context, b *pgx.Batch, ws []watch, ps []Position, evaluated []int, from []*last) *lookups {
	n := len(evaluated)
	l := &lookups{inside: map[lookKey]*geofence.Found{}, met: map[lookKey]*geofence.Found{}}
	lngs, lats := make([]float64, n), make([]float64, n)
	for k, i := range evaluated {
		lngs[k], lats[k] = ps[i].Lng, ps[i].Lat
	}
	nothing := func(f *geofence.Found, ok bool) *geofence.Found {
		if !ok {
			return &geofence.Found{Keys: make([][]string, n)}
		}
		return f
	}
	var x1, y1 []float64
	for _, w := range ws {
		k := lookKeyOf(w)
		if _, ok := l.inside[k]; !ok {
			queueAs(b, w, func() { l.inside[k] = nothing(s.fences.QueueInside(b, w.layer, lngs, lats)) })
		}
		if _, ok := l.met[k]; ok || !w.wants(Cross) {
			continue
		}
		if x1 == nil {
			x1, y1 = steps(auth.ScopeOf(ctx), ps, evaluated, from)
		}
		queueAs(b, w, func() { l.met[k] = nothing(s.fences.QueueCrossing(b, w.layer, x1, y1, lngs, lats)) })
	}
	return l
}

// steps are the starts of the lines from each evaluated position's
// device's previous position to it. With no previous position, or one
// whose line leaves scope, the line starts where it ends: a segment of no
// length meets what holds the point, which step leaves out.
func steps(scope *spatial.Scope, ps []Position, evaluated []int, from []*last) (x1, y1 []float64) {
	x1, y1 = make([]float64, len(evaluated)), make([]float64, len(evaluated))
	for k, i := range evaluated {
		x1[k], y1[k] = ps[i].Lng, ps[i].Lat
		if f := from[k]; f != nil && within(scope, f.lng, f.lat, ps[i].Lng, ps[i].Lat) {
			x1[k], y1[k] = f.lng, f.lat
		}
	}
	return x1, y1
}

// within says whether the segment between two positions lies in scope: a
// caller hears only of fences it may read, and a line that leaves its
// part of the world could pass through fences wholly outside it, so such
// a step crosses nothing.
func within(scope *spatial.Scope, x1, y1, x2, y2 float64) bool {
	if scope == nil {
		return true
	}
	return scope.ContainsGeometry(geom.NewLineStringFlat(geom.XY, []float64{x1, y1, x2, y2}))
}

// group names the subscriptions that see the same fences: one layer, one
// filter and one caller.
type group struct{ layer, filter, caller string }

func groupOf(w watch) group { return group{w.layer, w.filter, w.callerKey} }

// narrowing is one group's keys (of one lookup) waiting for its filter.
type narrowing struct {
	g    group
	w    watch // one of the group's, for its caller
	keys [][]string
	into map[group][][]string
}

// seen returns, for each group of ws, what its subscriptions see of the
// lookups' fences: those holding each position (inside) and, for groups
// that ask for crossings, those each step meets (met), narrowed by the
// group's filter. The filters run in one round trip, only when a
// subscription has one.
func (s *Service) seen(ctx context.Context, tx querier, ws []watch, look *lookups) (inside, met map[group][][]string, err error) {
	inside, met = map[group][][]string{}, map[group][][]string{}
	var todo []narrowing
	see := func(into map[group][][]string, w watch, f *geofence.Found) {
		g := groupOf(w)
		if _, done := into[g]; done {
			return
		}
		into[g] = f.Keys
		if g.filter != "" {
			todo = append(todo, narrowing{g, w, f.Keys, into})
		}
	}
	for _, w := range ws {
		see(inside, w, look.inside[lookKeyOf(w)])
		if w.wants(Cross) {
			see(met, w, look.met[lookKeyOf(w)])
		}
	}
	return inside, met, s.narrow(ctx, tx, todo)
}

// narrow keeps, of each narrowing's keys, those whose fences pass its
// group's filter.
func (s *Service) narrow(ctx context.Context, tx querier, todo []narrowing) error {
	b := &pgx.Batch{}
	kept := make([]*features.Kept, len(todo))
	for i, t := range todo {
		var all []string
		for _, ks := range t.keys {
			all = append(all, ks...)
		}
		if len(all) == 0 {
			continue
		}
		slices.Sort(all)
		var err error
		queueAs(b, t.w, func() { kept[i], err = s.filters.QueueMatching(ctx, b, t.g.layer, t.g.filter, slices.Compact(all)) })
		if err != nil {
			return err
		}
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	for i, t := range todo {
		out := make([][]string, len(t.keys))
		for j, ks := range t.keys {
			for _, k := range ks {
				if kept[i] != nil && kept[i].Keys[k] {
					out[j] = append(out[j], k)
				}
			}
		}
		t.into[t.g] = out
	}
	return nil
}
