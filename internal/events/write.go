package events

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

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

// commit writes what a report decided and commits its transaction, all
// in one round trip: the positions ps (late ones marked), the stays w
// began, the devices' last positions, and then, under the outbox lock of
// each subscription that w's events go to or that w began stays of, the
// events and the deletion of the stays of any of those subscriptions
// deleted since the report read them. The locks are so held from the
// events' numbering to the commit and no longer, not even for a round
// trip back to this process: reports to one subscription take turns only
// there. The events of one subscription are numbered in the order their
// transactions commit, and a reader that has seen event n of a
// subscription never later finds one below n. It returns how many events
// it wrote.
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
		b.Queue(lockOutboxesSQL, append(subs, began...))
	}
	insert := -1
	if len(w.evs) > 0 {
		insert = b.Len()
		b.Queue(insertEventsSQL, eventArgs(w.evs)...)
	}
	if len(began) > 0 {
		b.Queue(dropStaysOfGoneSQL, began)
	}
	b.Queue("COMMIT")
	tags := make([]pgconn.CommandTag, b.Len())
	err := sendBatch(ctx, tx, b, func(br pgx.BatchResults) error {
		for i := range tags {
			var err error
			if tags[i], err = br.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && tags[len(tags)-1].String() != "COMMIT" {
		err = errors.New("events: the report's transaction was rolled back at its commit")
	}
	if err != nil || insert < 0 {
		return 0, err
	}
	return int(tags[insert].RowsAffected()), nil
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

func eventArgs(evs []event) []any {
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
	return []any{subs, devs, layers, fences, kinds, at, lng, lat, states}
}
