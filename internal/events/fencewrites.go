package events

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/pg"
)

// A feature of a watched layer changed or deleted through the features
// API ends the stays it no longer holds, in the transaction that writes
// it, as the built-in fences' trigger does for theirs (migration 00019):
// a device inside a fence that is deleted, or moved or changed so that
// the device's last position is outside it or its subscription's filter
// no longer keeps it, is told its exit now rather than at its next
// position, which may never come. The order is the trigger's and a
// report's: stays first, then the outbox locks, then the events.

// staysInSQL reads the stays in fence $2 of subscriptions watching layer
// $1, with where each device last was and its subscription's filter.
const staysInSQL = `
SELECT m.subscription::text, m.device, d.lng, d.lat, coalesce(s.filter, '')
FROM event_memberships m
JOIN event_subscriptions s ON s.id = m.subscription AND s.layer = $1
JOIN event_devices d ON d.owner = s.owner AND d.device = m.device
WHERE m.fence = $2
ORDER BY 1, 2`

// held is a stay in the fence written, and what decides whether it goes on.
type held struct {
	key      stayKey
	lng, lat float64
	filter   string
}

// Watched says whether features written on layer end stays with the
// write: it holds polygons and its rows do not depend on who reads them.
// On a layer that runs as its caller, each subscription sees the fences
// its owner's role sees, which a writer's transaction cannot tell: there
// the exit comes with the device's next position.
func (s *Service) Watched(layer string) bool {
	return s.fences.Polygonal(layer) && !s.fences.AsCaller(layer)
}

// FenceWritten ends, in tx, the stays in fence of layer that the write
// just made there left: all of them when deleted, else those whose
// device it no longer holds or whose subscription's filter it no longer
// passes. Each ended stay is an exit, caused by "fence-deleted" or
// "fence-changed", for the subscriptions that ask for exits.
func (s *Service) FenceWritten(ctx context.Context, tx pg.Conn, layer, fence string, deleted bool) error {
	rows, err := tx.Query(ctx, staysInSQL, layer, fence)
	if err != nil {
		return err
	}
	var hs []held
	var h held
	h.key.fence = fence
	if _, err := pgx.ForEachRow(rows, []any{&h.key.sub, &h.key.device, &h.lng, &h.lat, &h.filter}, func() error {
		hs = append(hs, h)
		return nil
	}); err != nil || len(hs) == 0 {
		return err
	}
	cause := "fence-deleted"
	if !deleted {
		cause = "fence-changed"
		if hs, err = s.left(ctx, tx, layer, fence, hs); err != nil || len(hs) == 0 {
			return err
		}
	}
	return exits(ctx, tx, layer, cause, hs)
}

// left returns those of hs whose stay the fence, as written, no longer
// holds: in one round trip, the fences of layer holding each device and,
// for each filter among hs, whether the fence passes it.
func (s *Service) left(ctx context.Context, tx querier, layer, fence string, hs []held) ([]held, error) {
	lngs, lats := make([]float64, len(hs)), make([]float64, len(hs))
	for i, h := range hs {
		lngs[i], lats[i] = h.lng, h.lat
	}
	b := &pgx.Batch{}
	inside, ok := s.fences.QueueInside(b, layer, lngs, lats)
	if !ok {
		// The layer is no longer published as polygons: nothing holds.
		inside = &geofence.Found{Keys: make([][]string, len(hs))}
	}
	kept := map[string]*features.Kept{}
	for _, h := range hs {
		if _, done := kept[h.filter]; done || h.filter == "" {
			continue
		}
		// A filter the layer no longer takes (a column dropped since)
		// belongs to another caller's subscription and must not refuse
		// this write: for it, the fence's shape alone decides.
		k, err := s.filters.QueueMatching(ctx, b, layer, h.filter, []string{fence})
		if err != nil {
			k = nil
		}
		kept[h.filter] = k
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
	var out []held
	for i, h := range hs {
		_, holds := slices.BinarySearch(inside.Keys[i], fence)
		if k := kept[h.filter]; !holds || (k != nil && !k.Keys[fence]) {
			out = append(out, h)
		}
	}
	return out, nil
}

// exits deletes the stays hs and writes the exits of those it found, in
// two round trips: a report that ended one of them first has told it.
func exits(ctx context.Context, tx querier, layer, cause string, hs []held) error {
	ks := make([]stayKey, len(hs))
	for i, h := range hs {
		ks[i] = h.key
	}
	subs, devs, fences := columns(ks)
	rows, err := tx.Query(ctx, endStaysSQL, subs, devs, fences)
	if err != nil {
		return err
	}
	found := map[stayKey]bool{}
	var k stayKey
	if _, err := pgx.ForEachRow(rows, []any{&k.sub, &k.device, &k.fence}, func() error {
		found[k] = true
		return nil
	}); err != nil || len(found) == 0 {
		return err
	}
	now := time.Now().UTC()
	var es []outbox.Entry
	var locked []string
	for _, h := range hs {
		if found[h.key] {
			es = append(es, outbox.Entry{Subscription: h.key.sub, Device: h.key.device, Layer: layer, Fence: h.key.fence,
				Kind: string(Exit), Time: now, Lng: h.lng, Lat: h.lat, Cause: cause})
			locked = append(locked, h.key.sub)
		}
	}
	b := &pgx.Batch{}
	outbox.Lock(b, locked)
	var wrote int64
	outbox.Append(b, es, &wrote)
	return tx.SendBatch(ctx, b).Close()
}
