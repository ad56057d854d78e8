package events

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

// Position is one report of where a device was.
type Position struct {
	Device   string
	Time     time.Time
	Lng, Lat float64
	// Accuracy (metres), Speed (metres per second) and Heading (degrees
	// clockwise from north) are optional.
	Accuracy, Speed, Heading *float64
}

// Report is what became of a batch of positions.
type Report struct {
	Accepted int `json:"accepted"`
	// Late positions were older than their device's last and caused no
	// transition; Still ones moved less than their accuracy.
	Late   int `json:"late"`
	Still  int `json:"still"`
	Events int `json:"events"`
	kinds  map[Kind]int
}

// last is a device's last position, as the outbox knows it.
type last struct {
	known    bool
	at       time.Time
	lng, lat float64
	accuracy *float64
}

// Report records ps, positions of devices of owner, with the transitions
// they cause and the events those make, in one transaction: when it
// returns without error every event exists, and none exists otherwise.
func (s *Service) Report(ctx context.Context, owner string, ps []Position) (Report, error) {
	var r Report
	var err error
	for try := 0; try < 3; try++ {
		err = s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
			var err error
			if r, err = s.report(ctx, conn, owner, ps); err != nil {
				rollback(ctx, conn)
			}
			return err
		})
		if !again(err) {
			break
		}
	}
	if err != nil {
		// Lookups on a layer that runs as its caller run as the
		// reporter: a role taken away since is its 403, not a 500.
		return Report{}, pg.CallerRefused(err)
	}
	s.m.positions.WithLabelValues("evaluated").Add(float64(r.Accepted - r.Late - r.Still))
	s.m.positions.WithLabelValues("late").Add(float64(r.Late))
	s.m.positions.WithLabelValues("still").Add(float64(r.Still))
	for k, n := range r.kinds {
		s.m.transitions.WithLabelValues(string(k)).Add(float64(n))
	}
	return r, nil
}

// querier runs a report's statements: a connection on which the report
// begins its transaction (begin), which it also commits itself (commit),
// in the round trip that writes the events. A report takes four round
// trips: begin, the look-ups of fences and stays, the end of the stays
// it ends, and commit; one more for devices new to their owner, and one
// for subscriptions with a filter.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// rollback ends the transaction of a report that failed: a statement's
// error left it aborted. A report cut short by ctx has lost its
// connection already, and the pool drops it.
func rollback(ctx context.Context, conn pg.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	conn.Exec(ctx, "ROLLBACK") //nolint:errcheck // the pool drops a connection left in a transaction
}

// again reports a report rolled back by a deadlock, which goes through
// when run again: a report takes its stays' rows, then its subscriptions'
// outbox locks; a transaction that changes several fences one statement
// at a time can take them the other way round.
func again(err error) bool { return pg.Deadlocked(err) }

// smallJoinsSQL tells the planner that every join of a report is small: a
// batch's points, devices and stays, each found by an index. Left to its
// estimates, it would hash the whole fence layer (50,000 rows) to join the
// few dozen fences a batch's points fall in, and read the stays whole
// when their statistics were taken while they were few. It also lets
// PostgreSQL choose between custom and generic plans again (the serving
// pool forces generic ones, which suit tiles): under force_generic_plan a
// report cost the server about a fifth more CPU (95 against 78 µs per
// position, in paired runs of the bench's direct side).
const smallJoinsSQL = `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
  set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'auto', true)`

func (s *Service) report(ctx context.Context, tx querier, owner string, ps []Position) (Report, error) {
	ps = slices.Clone(ps)
	// Each device's positions in time order; a stable sort keeps a
	// batch's own order between positions of the same time.
	slices.SortStableFunc(ps, func(a, b Position) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), a.Time.Compare(b.Time))
	})
	lasts, ws, err := s.begin(ctx, tx, owner, ps)
	if err != nil {
		return Report{}, err
	}
	r := Report{Accepted: len(ps)}
	late := make([]bool, len(ps))
	var evaluated []int // indexes into ps
	var from []*last    // for each evaluated, where its device was before, if known
	for i, p := range ps {
		l := lasts[p.Device]
		switch {
		case l.known && !p.Time.After(l.at):
			late[i] = true
			r.Late++
			continue
		case s.s.IgnoreWithinAccuracy && l.known && p.Accuracy != nil && spatial.SphereMetres(l.lng, l.lat, p.Lng, p.Lat) < *p.Accuracy:
			r.Still++
			l.at = p.Time // a later position is still not late
		default:
			if l.known {
				from = append(from, l)
			} else {
				from = append(from, nil)
			}
			l = &last{known: true, at: p.Time, lng: p.Lng, lat: p.Lat, accuracy: p.Accuracy}
			evaluated = append(evaluated, i)
		}
		lasts[p.Device] = l
	}
	var w writes
	if len(evaluated) > 0 && len(ws) > 0 {
		if w, err = s.transitions(ctx, tx, ws, ps, evaluated, from); err != nil {
			return Report{}, err
		}
	}
	if r.Events, err = commit(ctx, tx, owner, ps, late, lasts, w); err != nil {
		return Report{}, err
	}
	r.kinds = map[Kind]int{}
	for _, e := range w.evs {
		r.kinds[e.kind]++
	}
	return r, nil
}

// lockDevicesSQL locks the devices $2 of the owners $1 (the same owner
// for each), in device order so that two reports never wait for each
// other in a cycle, and returns their last positions. The owner is
// repeated so that both halves of the key come from the list, as in
// loadStays: given the owner as a constant, the planner read all of the
// owner's devices once and tested each against the list when its
// statistics were taken while the devices were few.
const lockDevicesSQL = `
SELECT d.device, d.time, d.lng, d.lat, d.accuracy
FROM unnest($1::text[], $2::text[]) k(o, d) JOIN event_devices d ON d.owner = k.o AND d.device = k.d
ORDER BY d.device FOR UPDATE OF d`

// freshDevicesSQL makes the devices $2 that owner $1 has not reported
// before, in order.
const freshDevicesSQL = `
INSERT INTO event_devices (owner, device)
SELECT $1, d FROM unnest($2::text[]) d ORDER BY d
ON CONFLICT DO NOTHING`

// begin begins the report's transaction, locks the devices of ps,
// creating those that owner has not reported before, and returns their
// last positions and the subscriptions of owner that owner may still
// read: one round trip, and one more for new devices. The planner is told
// first that every join of the report is small (smallJoinsSQL).
func (s *Service) begin(ctx context.Context, tx querier, owner string, ps []Position) (map[string]*last, []watch, error) {
	ids := deviceIDs(ps)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(smallJoinsSQL)
	b.Queue(lockDevicesSQL, repeat(owner, len(ids)), ids)
	b.Queue(watchesSQL, owner)
	lasts := map[string]*last{}
	var ws []watch
	err := sendBatch(ctx, tx, b, func(br pgx.BatchResults) error {
		if err := execs(br, 2); err != nil {
			return err
		}
		if err := scanLasts(br, lasts); err != nil {
			return err
		}
		var err error
		ws, err = scanWatches(br)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(lasts) < len(ids) {
		var fresh []string
		for _, id := range ids {
			if lasts[id] == nil {
				fresh = append(fresh, id)
			}
		}
		b := &pgx.Batch{}
		b.Queue(freshDevicesSQL, owner, fresh)
		b.Queue(lockDevicesSQL, repeat(owner, len(fresh)), fresh)
		err := sendBatch(ctx, tx, b, func(br pgx.BatchResults) error {
			if err := execs(br, 1); err != nil {
				return err
			}
			return scanLasts(br, lasts)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return lasts, s.evaluable(ctx, ws), nil
}

// evaluable keeps those of ws the report's caller may have evaluated:
// on layers it may read and, on a layer that runs as its caller, only
// with a database role it is accepted with, as which that layer's
// fences are then looked up.
func (s *Service) evaluable(ctx context.Context, ws []watch) []watch {
	out := ws[:0]
	for _, w := range ws {
		if s.access(ctx, w.layer) != nil {
			continue
		}
		if s.fences.AsCaller(w.layer) {
			c, err := s.caller(ctx, w.layer)
			if err != nil || c == nil {
				continue
			}
			w.caller, w.callerKey = c, c.Role+"\x00"+c.Claims+"\x00"+c.Key+"\x00"+c.Identity
		}
		out = append(out, w)
	}
	return out
}

// sendBatch sends b and reads its results with read, in order.
func sendBatch(ctx context.Context, tx querier, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := tx.SendBatch(ctx, b)
	err := read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// execs reads the results of the next n statements of br, which return
// no rows.
func execs(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

func scanLasts(br pgx.BatchResults, out map[string]*last) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	return scanLastRows(rows, out)
}

func scanLastRows(rows pgx.Rows, out map[string]*last) error {
	defer rows.Close()
	for rows.Next() {
		var id string
		var at *time.Time
		var lng, lat, acc *float64
		if err := rows.Scan(&id, &at, &lng, &lat, &acc); err != nil {
			return err
		}
		l := &last{accuracy: acc}
		if at != nil && lng != nil && lat != nil {
			l.known, l.at, l.lng, l.lat = true, *at, *lng, *lat
		}
		out[id] = l
	}
	return rows.Err()
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// deviceIDs lists the devices of ps, which are sorted by device, once
// each.
func deviceIDs(ps []Position) []string {
	var ids []string
	for i, p := range ps {
		if i == 0 || ps[i-1].Device != p.Device {
			ids = append(ids, p.Device)
		}
	}
	return ids
}
