package events

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	geom "github.com/twpayne/go-geom"

	"github.com/geogate/geogate/internal/spatial"
)

// watch is a subscription as evaluation needs it.
type watch struct {
	id, layer string
	filter    string
	devices   []string
	kinds     []Kind
	dwell     time.Duration
	webhook   bool
}

func (w watch) wants(k Kind) bool { return slices.Contains(w.kinds, k) }

func (w watch) watches(device string) bool {
	return len(w.devices) == 0 || slices.Contains(w.devices, device)
}

// stayKey names one device's stay in one fence of one subscription.
type stayKey struct{ sub, device, fence string }

// event is a row of the outbox about to be written.
type event struct {
	stayKey
	layer    string
	kind     Kind
	at       time.Time
	lng, lat float64
	webhook  bool
}

// transitions evaluates the positions ps[i] for i in evaluated against
// every subscription of owner that owner may still read, moves the stays
// on and returns the events they make and the subscriptions it began
// stays of, for writeEvents.
func (s *Service) transitions(ctx context.Context, tx querier, owner string, ps []Position, evaluated []int, from []*last) ([]event, []string, error) {
	ws, err := s.watches(ctx, tx, owner)
	if err != nil || len(ws) == 0 {
		return nil, nil, err
	}
	inside, err := s.inside(ctx, tx, ws, ps, evaluated)
	if err != nil {
		return nil, nil, err
	}
	met, err := s.met(ctx, tx, ws, ps, evaluated, from)
	if err != nil {
		return nil, nil, err
	}
	before, err := loadStays(ctx, tx, ws, ps)
	if err != nil {
		return nil, nil, err
	}
	after := make(map[stayKey]stay, len(before))
	var evs []event
	for _, w := range ws {
		by := groupOf(w)
		stays := map[string]map[string]*stay{} // device -> fence -> stay
		for k, st := range before {
			if k.sub == w.id {
				if stays[k.device] == nil {
					stays[k.device] = map[string]*stay{}
				}
				stays[k.device][k.fence] = &stay{since: st.since, dwelled: st.dwelled}
			}
		}
		for n, i := range evaluated {
			p := ps[i]
			if !w.watches(p.Device) {
				continue
			}
			if stays[p.Device] == nil {
				stays[p.Device] = map[string]*stay{}
			}
			smp := sample{at: p.Time, inside: inside[by][n]}
			if w.wants(Cross) {
				smp.met = met[by][n]
			}
			for _, c := range step(stays[p.Device], smp, w.dwell) {
				if w.wants(c.kind) {
					evs = append(evs, event{stayKey{w.id, p.Device, c.fence}, w.layer, c.kind, p.Time, p.Lng, p.Lat, w.webhook})
				}
			}
		}
		for d, fs := range stays {
			for f, st := range fs {
				after[stayKey{w.id, d, f}] = *st
			}
		}
	}
	lost, began, err := saveStays(ctx, tx, before, after)
	if err != nil {
		return nil, nil, err
	}
	// A stay lost to a fence's change was ended, and its exit told, by the
	// change, which so comes first: the batch tells nothing more of that
	// device and fence. Its own exit would be a second one; an enter after
	// it would begin a stay in a fence that may be gone, so the batch does
	// not keep one (saveStays), and the device's next position inside the
	// fence, if it still is one, tells the enter.
	evs = slices.DeleteFunc(evs, func(e event) bool { return lost[e.stayKey] && e.kind != Cross })
	return evs, began, nil
}

// watches are owner's subscriptions whose layer owner may still read: a
// key whose layers were narrowed hears no more of the others.
func (s *Service) watches(ctx context.Context, tx querier, owner string) ([]watch, error) {
	rows, err := tx.Query(ctx, `
SELECT id::text, layer, coalesce(filter, ''), coalesce(devices, '{}'), kinds, coalesce(dwell_ms, 0), webhook IS NOT NULL
FROM event_subscriptions WHERE owner = $1 ORDER BY id`, owner)
	if err != nil {
		return nil, err
	}
	var ws []watch
	for rows.Next() {
		var w watch
		var kinds []string
		var dwell int64
		if err := rows.Scan(&w.id, &w.layer, &w.filter, &w.devices, &kinds, &dwell, &w.webhook); err != nil {
			rows.Close()
			return nil, err
		}
		for _, k := range kinds {
			w.kinds = append(w.kinds, Kind(k))
		}
		w.dwell = time.Duration(dwell) * time.Millisecond
		ws = append(ws, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ws, func(w watch) bool { return s.access(ctx, w.layer) != nil }), nil
}

// met finds, for each group of the subscriptions of ws that ask for
// crossings and each evaluated position, the fences the line from its
// device's previous position meets; nil when none asks.
func (s *Service) met(ctx context.Context, tx querier, ws []watch, ps []Position, evaluated []int, from []*last) (map[group][][]string, error) {
	var crossing []watch
	for _, w := range ws {
		if w.wants(Cross) {
			crossing = append(crossing, w)
		}
	}
	if len(crossing) == 0 {
		return nil, nil
	}
	n := len(evaluated)
	x1, y1, x2, y2 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	scope := s.scope(ctx)
	for k, i := range evaluated {
		// No previous position: a segment of no length meets what holds
		// the point, which step leaves out.
		x1[k], y1[k], x2[k], y2[k] = ps[i].Lng, ps[i].Lat, ps[i].Lng, ps[i].Lat
		if f := from[k]; f != nil && within(scope, f.lng, f.lat, ps[i].Lng, ps[i].Lat) {
			x1[k], y1[k] = f.lng, f.lat
		}
	}
	return s.groups(ctx, tx, crossing, func(layer string) ([][]string, error) {
		return s.keysOf(ctx, tx, n, s.fences.CrossesSQL, layer, x1, y1, x2, y2)
	})
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

// inside finds, for each group of ws and each evaluated position (in the
// order of evaluated), the keys of the fences holding it, sorted: one
// statement per layer, and one more per filter.
func (s *Service) inside(ctx context.Context, tx querier, ws []watch, ps []Position, evaluated []int) (map[group][][]string, error) {
	lngs, lats := make([]float64, len(evaluated)), make([]float64, len(evaluated))
	for n, i := range evaluated {
		lngs[n], lats[n] = ps[i].Lng, ps[i].Lat
	}
	return s.groups(ctx, tx, ws, func(layer string) ([][]string, error) {
		return s.keysOf(ctx, tx, len(evaluated), s.fences.ContainsSQL, layer, lngs, lats)
	})
}

// groups runs find once per layer of ws and narrows its answer by each
// group's filter.
func (s *Service) groups(ctx context.Context, tx querier, ws []watch, find func(layer string) ([][]string, error)) (map[group][][]string, error) {
	byLayer := map[string][][]string{}
	out := map[group][][]string{}
	for _, w := range ws {
		g := groupOf(w)
		if _, done := out[g]; done {
			continue
		}
		keys, ok := byLayer[w.layer]
		if !ok {
			var err error
			if keys, err = find(w.layer); err != nil {
				return nil, err
			}
			byLayer[w.layer] = keys
		}
		if g.filter != "" {
			var err error
			if keys, err = s.filtered(ctx, tx, g, keys); err != nil {
				return nil, err
			}
		}
		out[g] = keys
	}
	return out, nil
}

// keysOf runs the layer's statement that statement gives over args and
// returns, for each of the n items it numbers from 1, the keys it finds,
// sorted. A layer that is gone finds nothing.
func (s *Service) keysOf(ctx context.Context, tx querier, n int, statement func(string) (string, bool), layer string, args ...any) ([][]string, error) {
	out := make([][]string, n)
	sql, ok := statement(layer)
	if !ok {
		return out, nil
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var k string
		if err := rows.Scan(&i, &k); err != nil {
			return nil, err
		}
		out[i-1] = append(out[i-1], k)
	}
	for _, ks := range out {
		slices.Sort(ks)
	}
	return out, rows.Err()
}

// filtered keeps, of keys, those whose fences pass g's filter.
func (s *Service) filtered(ctx context.Context, tx querier, g group, keys [][]string) ([][]string, error) {
	var all []string
	for _, ks := range keys {
		all = append(all, ks...)
	}
	out := make([][]string, len(keys))
	if len(all) == 0 {
		return out, nil
	}
	slices.Sort(all)
	sql, args, err := s.filters.Matching(ctx, g.layer, g.filter)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, sql, append([]any{slices.Compact(all)}, args...)...)
	if err != nil {
		return nil, err
	}
	pass := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, err
		}
		pass[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, ks := range keys {
		for _, k := range ks {
			if pass[k] {
				out[i] = append(out[i], k)
			}
		}
	}
	return out, nil
}

// Subscription ids go to PostgreSQL as text[] and are cast there: pgx
// has no binary plan from a Go string to a uuid, and its fallback to text
// builds an error for every element first.

// loadStaysSQL reads the stays of the (subscription, device) pairs $1, $2.
const loadStaysSQL = `
SELECT m.subscription::text, m.device, m.fence, m.entered_at, m.dwelled
FROM unnest($1::text[]::uuid[], $2::text[]) k(s, d)
JOIN event_memberships m ON m.subscription = k.s AND m.device = k.d`

// loadStays reads the stays of the devices of ps in the subscriptions ws.
// It joins a list of (subscription, device) pairs rather than testing
// "= ANY" on each column: the planner prices a look-up for each element
// of an ANY list, and with statistics taken while the stays were few it
// chose to read all of a subscription's stays and test each against
// every device of the batch; given two lists, it looked up each device
// in every subscription.
func loadStays(ctx context.Context, tx querier, ws []watch, ps []Position) (map[stayKey]stay, error) {
	devs := deviceIDs(ps)
	var subs, pairDevs []string
	for _, w := range ws {
		for _, d := range devs {
			if w.watches(d) {
				subs, pairDevs = append(subs, w.id), append(pairDevs, d)
			}
		}
	}
	rows, err := tx.Query(ctx, loadStaysSQL, subs, pairDevs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[stayKey]stay{}
	for rows.Next() {
		var k stayKey
		var st stay
		if err := rows.Scan(&k.sub, &k.device, &k.fence, &st.since, &st.dwelled); err != nil {
			return nil, err
		}
		out[k] = st
	}
	return out, rows.Err()
}

// endStaysSQL deletes the stays ($1, $2, $3) and returns those it found.
// It finds them by subscription and device, then tests the fence: "IS
// NOT DISTINCT FROM" is "=" here (no column is null) but no index can
// answer it, so the planner cannot look the stays up by their fence
// instead, which with stale statistics it did, reading every device
// inside that fence for each stay ended.
const endStaysSQL = `
DELETE FROM event_memberships m
USING unnest($1::text[]::uuid[], $2::text[], $3::text[]) AS g(s, d, f)
WHERE m.subscription = g.s AND m.device = g.d AND m.fence IS NOT DISTINCT FROM g.f
RETURNING m.subscription::text, m.device, m.fence`

// saveStays writes what changed between before and after: stays ended or
// changed go, stays begun or changed come. It returns the stays of before
// it found gone already: a fence's exit trigger ended them after the
// report read them (and wrote their exits), so they are not written again
// and the report tells nothing more of them. It also returns the
// subscriptions whose stays it wrote, once each.
func saveStays(ctx context.Context, tx querier, before, after map[stayKey]stay) (map[stayKey]bool, []string, error) {
	var gone, come []stayKey
	for k, b := range before {
		if a, ok := after[k]; !ok || a != b {
			gone = append(gone, k)
		}
	}
	lost := map[stayKey]bool{}
	if len(gone) > 0 {
		subs, devs, fences := columns(gone)
		rows, err := tx.Query(ctx, endStaysSQL, subs, devs, fences)
		if err != nil {
			return nil, nil, err
		}
		found := map[stayKey]bool{}
		for rows.Next() {
			var k stayKey
			if err := rows.Scan(&k.sub, &k.device, &k.fence); err != nil {
				rows.Close()
				return nil, nil, err
			}
			found[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
		for _, k := range gone {
			if !found[k] {
				lost[k] = true
			}
		}
	}
	for k, a := range after {
		if b, ok := before[k]; (!ok || a != b) && !lost[k] {
			come = append(come, k)
		}
	}
	if len(come) == 0 {
		return lost, nil, nil
	}
	subs, devs, fences := columns(come)
	since, dwelled := make([]time.Time, len(come)), make([]bool, len(come))
	for i, k := range come {
		since[i], dwelled[i] = after[k].since, after[k].dwelled
	}
	_, err := tx.Exec(ctx, `
INSERT INTO event_memberships (subscription, device, fence, entered_at, dwelled)
SELECT * FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::bool[])`, subs, devs, fences, since, dwelled)
	return lost, slices.Compact(slices.Sorted(slices.Values(subs))), err
}

func columns(ks []stayKey) (subs, devs, fences []string) {
	for _, k := range ks {
		subs, devs, fences = append(subs, k.sub), append(devs, k.device), append(fences, k.fence)
	}
	return subs, devs, fences
}

// lockOutboxesSQL takes the outbox lock of each subscription in $1, in
// one order for every writer, so that no two wait for each other in a
// cycle. The fences' exit trigger and the deletion of a subscription take
// the same locks, each after its changes to the stays.
const lockOutboxesSQL = `
SELECT count(pg_advisory_xact_lock(1734829430, hashtext(s)))
FROM (SELECT DISTINCT s FROM unnest($1::text[]) s ORDER BY s) l`

// insertEventsSQL writes events in the order given, which is each
// (subscription, device)'s order in time, leaving out those of
// subscriptions deleted since the report read them: a deletion holds the
// outbox lock until it commits, so after the lock this statement sees it.
const insertEventsSQL = `
INSERT INTO events (subscription, device, layer, fence, kind, time, lng, lat, state)
SELECT u.s, u.d, u.l, u.f, u.k, u.t, u.x, u.y, u.st
FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::float8[], $8::float8[], $9::text[])
  WITH ORDINALITY AS u(s, d, l, f, k, t, x, y, st, n)
WHERE u.s IN (SELECT id FROM event_subscriptions WHERE id = ANY($1::text[]::uuid[]))
ORDER BY u.n`

// dropStaysOfGoneSQL deletes the stays of those subscriptions in $1 that
// no longer exist. It runs under their outbox locks: a subscription
// deleted meanwhile has committed, and its trigger may have missed stays
// this report held (migration 00021).
const dropStaysOfGoneSQL = `
DELETE FROM event_memberships m
USING unnest($1::text[]::uuid[]) g(s)
WHERE m.subscription = g.s AND NOT EXISTS (SELECT FROM event_subscriptions e WHERE e.id = g.s)`

// writeEvents takes the outbox lock of each subscription that evs go to
// or that the report began stays of (began), writes evs, deletes the
// stays of any of began deleted since the report read them, and commits
// the report's transaction, all in one round trip: the locks are held
// from the events' numbering to the commit and no longer, not even for a
// round trip back to this process. The events of one subscription are so
// numbered in the order their transactions commit, and a reader that has
// seen event n of a subscription never later finds one below n. It
// returns how many events it wrote.
func writeEvents(ctx context.Context, tx querier, evs []event, began []string) (int, error) {
	n := len(evs)
	subs, devs, layers, fences, kinds := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	at, lng, lat, states := make([]time.Time, n), make([]float64, n), make([]float64, n), make([]string, n)
	for i, e := range evs {
		subs[i], devs[i], layers[i], fences[i], kinds[i] = e.sub, e.device, e.layer, e.fence, string(e.kind)
		at[i], lng[i], lat[i], states[i] = e.at, e.lng, e.lat, "pull"
		if e.webhook {
			states[i] = "pending"
		}
	}
	b := &pgx.Batch{}
	insert := -1
	if n > 0 || len(began) > 0 {
		b.Queue(lockOutboxesSQL, append(slices.Clone(subs), began...))
	}
	if n > 0 {
		insert = b.Len()
		b.Queue(insertEventsSQL, subs, devs, layers, fences, kinds, at, lng, lat, states)
	}
	if len(began) > 0 {
		b.Queue(dropStaysOfGoneSQL, began)
	}
	b.Queue("COMMIT")
	br := tx.SendBatch(ctx, b)
	tags := make([]pgconn.CommandTag, b.Len())
	var err error
	for i := range tags {
		if tags[i], err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tags[len(tags)-1].String() != "COMMIT" {
		err = errors.New("events: the report's transaction was rolled back at its commit")
	}
	if err != nil || insert < 0 {
		return 0, err
	}
	return int(tags[insert].RowsAffected()), nil
}
