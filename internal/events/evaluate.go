package events

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/pg"
)

// watch is a subscription as evaluation needs it.
type watch struct {
	id, layer string
	filter    string
	devices   []string
	kinds     []Kind
	dwell     time.Duration
	// caller is the report's caller on a layer that runs as its caller
	// (the subscription's owner, who sends its devices' positions): the
	// fences are looked up as that caller. callerKey tells callers
	// apart, "" for none.
	caller    *pg.Caller
	callerKey string
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
}

// transitions evaluates the positions ps[i] for i in evaluated against
// the subscriptions ws, moves the stays on and returns what is left to
// write: the events, the stays begun and their subscriptions. The fences
// and the stays are read in one round trip (one more when a subscription
// has a filter), and the stays ended are deleted in another.
func (s *Service) transitions(ctx context.Context, tx querier, ws []watch, ps []Position, evaluated []int, from []*last) (writes, error) {
	b := &pgx.Batch{}
	look := s.lookups(ctx, b, ws, ps, evaluated, from)
	subs, devs := stayPairs(ws, ps)
	before := map[stayKey]stay{}
	b.Queue(loadStaysSQL, subs, devs).Query(func(rows pgx.Rows) error { return readStays(rows, before) })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return writes{}, err
	}
	inside, met, err := s.seen(ctx, tx, ws, look)
	if err != nil {
		return writes{}, err
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
					evs = append(evs, event{stayKey{w.id, p.Device, c.fence}, w.layer, c.kind, p.Time, p.Lng, p.Lat})
				}
			}
		}
		for d, fs := range stays {
			for f, st := range fs {
				after[stayKey{w.id, d, f}] = *st
			}
		}
	}
	lost, err := endStays(ctx, tx, before, after)
	if err != nil {
		return writes{}, err
	}
	// A stay lost to a fence's change was ended, and its exit told, by the
	// change, which so comes first: the batch tells nothing more of that
	// device and fence. Its own exit would be a second one; an enter after
	// it would begin a stay in a fence that may be gone, so the batch does
	// not keep one, and the device's next position inside the fence, if
	// it still is one, tells the enter.
	evs = slices.DeleteFunc(evs, func(e event) bool { return lost[e.stayKey] && e.kind != Cross })
	w := writes{evs: evs, after: after}
	for k, a := range after {
		if b, ok := before[k]; (!ok || a != b) && !lost[k] {
			w.come = append(w.come, k)
		}
	}
	return w, nil
}

// watchesSQL reads the subscriptions of owner $1.
const watchesSQL = `
SELECT id::text, layer, coalesce(filter, ''), coalesce(devices, '{}'), kinds, coalesce(dwell_ms, 0)
FROM event_subscriptions WHERE owner = $1 ORDER BY id`

// scanWatches reads the rows of watchesSQL. Those whose layer the owner
// may no longer read are left out by the caller (begin): a key whose
// layers were narrowed hears no more of the others.
func scanWatches(br pgx.BatchResults) ([]watch, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ws []watch
	for rows.Next() {
		var w watch
		var kinds []string
		var dwell int64
		if err := rows.Scan(&w.id, &w.layer, &w.filter, &w.devices, &kinds, &dwell); err != nil {
			return nil, err
		}
		for _, k := range kinds {
			w.kinds = append(w.kinds, Kind(k))
		}
		w.dwell = time.Duration(dwell) * time.Millisecond
		ws = append(ws, w)
	}
	return ws, rows.Err()
}
