package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/pg"
)

// Events returns up to limit events of owner's subscription sub numbered
// after after (-1: the oldest kept), in order (outbox.After), and where
// to go on from: the last one's number, or with none the cursor, or the
// oldest valid one when it was the beginning. A cursor older than what
// retention keeps is a 410 that names the oldest valid one.
func (s *Service) Events(ctx context.Context, owner, sub string, after int64, limit int) ([]outbox.Event, int64, error) {
	if _, err := s.Subscription(ctx, owner, sub); err != nil {
		return nil, 0, err
	}
	var evs []outbox.Event
	var through int64
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		var err error
		evs, through, err = outbox.After(ctx, conn, sub, after, limit)
		return err
	})
	var pruned *outbox.Pruned
	if errors.As(err, &pruned) {
		return nil, 0, apperr.Wrap(apperr.Gone, fmt.Sprintf(
			"Events up to %d of this subscription were deleted by retention (EVENTS_RETENTION): go on from after=%d, the oldest cursor still valid.",
			pruned.Through, pruned.Through), err)
	}
	next := max(after, through)
	if len(evs) > 0 {
		next = evs[len(evs)-1].Seq
	}
	return evs, next, err
}

// Device is a device's last position.
type Device struct {
	ID       string    `json:"id"`
	Lng      float64   `json:"lng"`
	Lat      float64   `json:"lat"`
	Time     time.Time `json:"time"`
	Accuracy *float64  `json:"accuracy,omitempty"`
}

// Devices lists up to limit of owner's devices with a position, by id,
// those after the id after; next is the last one's id when the page is
// full (more may follow), else "". It reads the (owner, device) key from
// after on, so a page costs the same wherever it begins.
func (s *Service) Devices(ctx context.Context, owner, after string, limit int) (ds []Device, next string, err error) {
	ds = []Device{}
	err = s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		rows, err := conn.Query(ctx, `SELECT device, lng, lat, time, accuracy FROM event_devices
WHERE owner = $1 AND device > $2 AND time IS NOT NULL ORDER BY device LIMIT $3`, owner, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d Device
			if err := rows.Scan(&d.ID, &d.Lng, &d.Lat, &d.Time, &d.Accuracy); err != nil {
				return err
			}
			ds = append(ds, d)
		}
		return rows.Err()
	})
	if err == nil && len(ds) == limit {
		next = ds[len(ds)-1].ID
	}
	return ds, next, err
}
