package events

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	geom "github.com/twpayne/go-geom"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/spatial"
)

// lookup is one layer's statement of a report and, once read, the keys
// of the fences it found for each evaluated position, sorted: those
// holding the position, or those the step to it meets.
type lookup struct {
	sql  string
	args []any
	keys [][]string
}

// lookups are the statements a report runs on the fences of its
// subscriptions' layers: one per layer for the points, and one per layer
// for the steps when a subscription on it asks for crossings.
type lookups struct {
	inside, met map[string]*lookup // by layer
	queued      []*lookup
}

// lookups builds the statements finding, for each evaluated position
// ps[i], the fences of each layer of ws holding it and, for the layers of
// subscriptions that ask for crossings, those the line from its device's
// previous position (from) meets.
func (s *Service) lookups(ctx context.Context, ws []watch, ps []Position, evaluated []int, from []*last) *lookups {
	n := len(evaluated)
	l := &lookups{inside: map[string]*lookup{}, met: map[string]*lookup{}}
	lngs, lats := make([]float64, n), make([]float64, n)
	for k, i := range evaluated {
		lngs[k], lats[k] = ps[i].Lng, ps[i].Lat
	}
	var x1, y1 []float64
	for _, w := range ws {
		if _, ok := l.inside[w.layer]; !ok {
			l.inside[w.layer] = l.add(n, s.fences.ContainsSQL, w.layer, lngs, lats)
		}
		if _, ok := l.met[w.layer]; ok || !w.wants(Cross) {
			continue
		}
		if x1 == nil {
			x1, y1 = steps(auth.ScopeOf(ctx), ps, evaluated, from)
		}
		l.met[w.layer] = l.add(n, s.fences.CrossesSQL, w.layer, x1, y1, lngs, lats)
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

// add makes the lookup of layer's statement that statement gives, over
// args, for n positions. A layer that is gone (no statement) finds
// nothing, and is not queued.
func (l *lookups) add(n int, statement func(string) (string, bool), layer string, args ...any) *lookup {
	k := &lookup{keys: make([][]string, n)}
	if sql, ok := statement(layer); ok {
		k.sql, k.args = sql, args
		l.queued = append(l.queued, k)
	}
	return k
}

func (l *lookups) queue(b *pgx.Batch) {
	for _, k := range l.queued {
		b.Queue(k.sql, k.args...)
	}
}

// read reads the results of the queued statements, in order: rows of a
// position's number (from 1) and a fence's key.
func (l *lookups) read(br pgx.BatchResults) error {
	for _, k := range l.queued {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var i int
		var key string
		if _, err := pgx.ForEachRow(rows, []any{&i, &key}, func() error {
			k.keys[i-1] = append(k.keys[i-1], key)
			return nil
		}); err != nil {
			return err
		}
		for _, ks := range k.keys {
			slices.Sort(ks)
		}
	}
	return nil
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

// group names the subscriptions that see the same fences: one layer and
// one filter.
type group struct{ layer, filter string }

func groupOf(w watch) group { return group{w.layer, w.filter} }

// narrowing is one group's keys (of one lookup) waiting for its filter.
type narrowing struct {
	g    group
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
	see := func(into map[group][][]string, g group, k *lookup) {
		if _, done := into[g]; done {
			return
		}
		into[g] = k.keys
		if g.filter != "" {
			todo = append(todo, narrowing{g, k.keys, into})
		}
	}
	for _, w := range ws {
		see(inside, groupOf(w), look.inside[w.layer])
		if w.wants(Cross) {
			see(met, groupOf(w), look.met[w.layer])
		}
	}
	return inside, met, s.narrow(ctx, tx, todo)
}

// narrow keeps, of each narrowing's keys, those whose fences pass its
// group's filter.
func (s *Service) narrow(ctx context.Context, tx querier, todo []narrowing) error {
	b := &pgx.Batch{}
	var queued []narrowing
	for _, t := range todo {
		var all []string
		for _, ks := range t.keys {
			all = append(all, ks...)
		}
		if len(all) == 0 {
			continue
		}
		slices.Sort(all)
		sql, args, err := s.filters.Matching(ctx, t.g.layer, t.g.filter)
		if err != nil {
			return err
		}
		b.Queue(sql, append([]any{slices.Compact(all)}, args...)...)
		queued = append(queued, t)
	}
	if len(queued) == 0 {
		return nil
	}
	return sendBatch(ctx, tx, b, func(br pgx.BatchResults) error {
		for _, t := range queued {
			pass, err := passing(br)
			if err != nil {
				return err
			}
			out := make([][]string, len(t.keys))
			for i, ks := range t.keys {
				for _, k := range ks {
					if pass[k] {
						out[i] = append(out[i], k)
					}
				}
			}
			t.into[t.g] = out
		}
		return nil
	})
}

// passing reads the keys a filter statement kept.
func passing(br pgx.BatchResults) (map[string]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	pass := map[string]bool{}
	var k string
	_, err = pgx.ForEachRow(rows, []any{&k}, func() error { pass[k] = true; return nil })
	return pass, err
}
