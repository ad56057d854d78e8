package events

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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
		err = s.db.Do(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
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
		return Report{}, err
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
// began its transaction, which it also commits itself (writeEvents), in
// the round trip that writes the events.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// rollback ends the transaction of a report that failed: a statement's
// error left it aborted. A report cut short by ctx has lost its
// connection already, and the pool drops it.
func rollback(ctx context.Context, conn *pgxpool.Conn) {
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
// when their statistics were taken while they were few.
const smallJoinsSQL = `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
  set_config('enable_seqscan', 'off', true)`

func (s *Service) report(ctx context.Context, tx querier, owner string, ps []Position) (Report, error) {
	ps = slices.Clone(ps)
	// Each device's positions in time order; a stable sort keeps a
	// batch's own order between positions of the same time.
	slices.SortStableFunc(ps, func(a, b Position) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), a.Time.Compare(b.Time))
	})
	lasts, err := lockDevices(ctx, tx, owner, ps)
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
	if err := insertPositions(ctx, tx, owner, ps, late); err != nil {
		return Report{}, err
	}
	var evs []event
	var began []string
	if len(evaluated) > 0 {
		if evs, began, err = s.transitions(ctx, tx, owner, ps, evaluated, from); err != nil {
			return Report{}, err
		}
	}
	if err := updateDevices(ctx, tx, owner, lasts); err != nil {
		return Report{}, err
	}
	// Last, and with the commit, so that the outbox locks are held for as
	// short a time as can be: from here to the commit, reports to one
	// subscription take turns.
	if r.Events, err = writeEvents(ctx, tx, evs, began); err != nil {
		return Report{}, err
	}
	r.kinds = map[Kind]int{}
	for _, e := range evs {
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

// lockDevices begins the report's transaction, locks the devices of ps,
// creating those that owner has not reported before, and returns their
// last positions. The planner is told first that every join of the
// report is small (smallJoinsSQL).
func lockDevices(ctx context.Context, tx querier, owner string, ps []Position) (map[string]*last, error) {
	ids := deviceIDs(ps)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(smallJoinsSQL)
	b.Queue(lockDevicesSQL, repeat(owner, len(ids)), ids)
	br := tx.SendBatch(ctx, b)
	out := map[string]*last{}
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = scanLasts(br, out)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || len(out) == len(ids) {
		return out, err
	}
	// Devices new to owner: created in order, then locked as the others.
	var fresh []string
	for _, id := range ids {
		if out[id] == nil {
			fresh = append(fresh, id)
		}
	}
	if _, err := tx.Exec(ctx, `
INSERT INTO event_devices (owner, device)
SELECT $1, d FROM unnest($2::text[]) d ORDER BY d
ON CONFLICT DO NOTHING`, owner, fresh); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, lockDevicesSQL, repeat(owner, len(fresh)), fresh)
	if err != nil {
		return nil, err
	}
	return out, scanLastRows(rows, out)
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

func insertPositions(ctx context.Context, tx querier, owner string, ps []Position, late []bool) error {
	n := len(ps)
	dev, at := make([]string, n), make([]time.Time, n)
	lng, lat := make([]float64, n), make([]float64, n)
	acc, speed, heading := make([]*float64, n), make([]*float64, n), make([]*float64, n)
	for i, p := range ps {
		dev[i], at[i], lng[i], lat[i] = p.Device, p.Time, p.Lng, p.Lat
		acc[i], speed[i], heading[i] = p.Accuracy, p.Speed, p.Heading
	}
	_, err := tx.Exec(ctx, `
INSERT INTO event_positions (owner, device, time, lng, lat, accuracy, speed, heading, late)
SELECT $1, u.d, u.t, u.x, u.y, u.a, u.s, u.h, u.l
FROM unnest($2::text[], $3::timestamptz[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], $8::float8[], $9::bool[])
  AS u(d, t, x, y, a, s, h, l)`, owner, dev, at, lng, lat, acc, speed, heading, late)
	return err
}

func updateDevices(ctx context.Context, tx querier, owner string, lasts map[string]*last) error {
	var dev []string
	var at []time.Time
	var lng, lat []float64
	var acc []*float64
	for id, l := range lasts {
		if !l.known {
			continue
		}
		dev, at, lng, lat, acc = append(dev, id), append(at, l.at), append(lng, l.lng), append(lat, l.lat), append(acc, l.accuracy)
	}
	_, err := tx.Exec(ctx, updateDevicesSQL, repeat(owner, len(dev)), dev, at, lng, lat, acc)
	return err
}

// updateDevicesSQL moves the devices $2 of the owners $1 (the same owner
// for each, as in lockDevicesSQL) on to their last positions.
const updateDevicesSQL = `
UPDATE event_devices d SET time = u.t, lng = u.x, lat = u.y, accuracy = u.a, updated_at = now()
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::float8[], $5::float8[], $6::float8[]) AS u(o, d, t, x, y, a)
WHERE d.owner = u.o AND d.device = u.d`
