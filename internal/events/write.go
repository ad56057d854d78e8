package events

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/geogate/geogate/internal/outbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// writes is what a report's transitions leave to write: the events, and
// the stays begun or changed (come, as after has them).
type writes struct {
	evs   []event
	come  []stayKey
	after map[stayKey]stay
}

// began lists the subscriptions of the stays w writes, once each, sorted.
func (w writes) began() []string {
	subs := make([]string, len(w.come))
	for i, k := range w.come {
		subs[i] = k.sub
	}
	slices.Sort(subs)
	return slices.Compact(subs)
}

const insertPositionsSQL = `
INSERT INTO event_positions (owner, device, time, lng, lat, accuracy, speed, heading, late)
SELECT $1, u.d, u.t, u.x, u.y, u.a, u.s, u.h, u.l
FROM unnest($2::text[], $3::timestamptz[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], $8::float8[], $9::bool[])
  AS u(d, t, x, y, a, s, h, l)`

// beginStaysSQL writes stays begun or changed; endStays deleted the old
// ones first.
const beginStaysSQL = `
INSERT INTO event_memberships (subscription, device, fence, entered_at, dwelled)
SELECT * FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::bool[])`

// updateDevicesSQL moves the devices $2 of the owners $1 (the same owner
// for each, as in lockDevicesSQL) on to their last positions.
const updateDevicesSQL = `
UPDATE event_devices d SET time = u.t, lng = u.x, lat = u.y, accuracy = u.a, updated_at = now()
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::float8[], $5::float8[], $6::float8[]) AS u(o, d, t, x, y, a)
WHERE d.owner = u.o AND d.device = u.d`

// dropStaysOfGoneSQL deletes the stays of those subscriptions in $1 that
// no longer exist. It runs under their outbox locks: a subscription
// deleted meanwhile has committed, and its trigger may have missed stays
// this report held (migration 00021).
const dropStaysOfGoneSQL = `
DELETE FROM event_memberships m
USING unnest($1::text[]::uuid[]) g(s)
WHERE m.subscription = g.s AND NOT EXISTS (SELECT FROM event_subscriptions e WHERE e.id = g.s)`

// commit writes what a report decided and commits its transaction, all
// in one round trip: the positions ps (late ones marked), the stays w
// began, the devices' last positions, and then, under the outbox lock of
// each subscription that w's events go to or that w began stays of
// (outbox.Lock), the events and the deletion of the stays of any of those
// subscriptions deleted since the report read them. The locks are so
// held from the events' numbering to the commit and no longer, not even
// for a round trip back to this process: reports to one subscription
// take turns only there. It returns how many events it wrote.
func commit(ctx context.Context, tx querier, owner string, ps []Position, late []bool, lasts map[string]*last, w writes) (int, error) {
	b := &pgx.Batch{}
	b.Queue(insertPositionsSQL, positionArgs(owner, ps, late)...)
	if len(w.come) > 0 {
		b.Queue(beginStaysSQL, stayArgs(w.come, w.after)...)
	}
	b.Queue(updateDevicesSQL, deviceArgs(owner, lasts)...)
	began := w.began()
	if len(w.evs) > 0 || len(began) > 0 {
		subs := make([]string, 0, len(w.evs)+len(began))
		for _, e := range w.evs {
			subs = append(subs, e.sub)
		}
		outbox.Lock(b, append(subs, began...))
	}
	var wrote int64
	if len(w.evs) > 0 {
		outbox.Append(b, entries(w.evs), &wrote)
	}
	if len(began) > 0 {
		b.Queue(dropStaysOfGoneSQL, began)
	}
	committed := false
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		committed = tag.String() == "COMMIT"
		return nil
	})
	err := tx.SendBatch(ctx, b).Close()
	if err == nil && !committed {
		err = errors.New("events: the report's transaction was rolled back at its commit")
	}
	return int(wrote), err
}

func positionArgs(owner string, ps []Position, late []bool) []any {
	n := len(ps)
	dev, at := make([]string, n), make([]time.Time, n)
	lng, lat := make([]float64, n), make([]float64, n)
	acc, speed, heading := make([]*float64, n), make([]*float64, n), make([]*float64, n)
	for i, p := range ps {
		dev[i], at[i], lng[i], lat[i] = p.Device, p.Time, p.Lng, p.Lat
		acc[i], speed[i], heading[i] = p.Accuracy, p.Speed, p.Heading
	}
	return []any{owner, dev, at, lng, lat, acc, speed, heading, late}
}

func stayArgs(come []stayKey, after map[stayKey]stay) []any {
	subs, devs, fences := columns(come)
	since, dwelled := make([]time.Time, len(come)), make([]bool, len(come))
	for i, k := range come {
		since[i], dwelled[i] = after[k].since, after[k].dwelled
	}
	return []any{subs, devs, fences, since, dwelled}
}

// deviceArgs are the last positions of the devices of lasts that have
// one, in device order.
func deviceArgs(owner string, lasts map[string]*last) []any {
	var dev []string
	var at []time.Time
	var lng, lat []float64
	var acc []*float64
	for _, id := range slices.Sorted(maps.Keys(lasts)) {
		l := lasts[id]
		if !l.known {
			continue
		}
		dev, at, lng, lat, acc = append(dev, id), append(at, l.at), append(lng, l.lng), append(lat, l.lat), append(acc, l.accuracy)
	}
	return []any{repeat(owner, len(dev)), dev, at, lng, lat, acc}
}

// entries are evs as the outbox appends them.
func entries(evs []event) []outbox.Entry {
	out := make([]outbox.Entry, len(evs))
	for i, e := range evs {
		out[i] = outbox.Entry{Subscription: e.sub, Device: e.device, Layer: e.layer, Fence: e.fence,
			Kind: string(e.kind), Time: e.at, Lng: e.lng, Lat: e.lat}
	}
	return out
}
