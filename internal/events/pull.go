package events

import (
	"context"
	"time"

	"github.com/geogate/geogate/internal/outbox"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Events returns up to limit events of owner's subscription sub numbered
// after after, in order (outbox.After).
func (s *Service) Events(ctx context.Context, owner, sub string, after int64, limit int) ([]outbox.Event, error) {
	if _, err := s.Subscription(ctx, owner, sub); err != nil {
		return nil, err
	}
	var out []outbox.Event
	err := s.db.Do(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		var err error
		out, err = outbox.After(ctx, conn, sub, after, limit)
		return err
	})
	return out, err
}

// Device is a device's last position.
type Device struct {
	ID       string    `json:"id"`
	Lng      float64   `json:"lng"`
	Lat      float64   `json:"lat"`
	Time     time.Time `json:"time"`
	Accuracy *float64  `json:"accuracy,omitempty"`
}

// Devices lists owner's devices with a position, by id.
func (s *Service) Devices(ctx context.Context, owner string) ([]Device, error) {
	out := []Device{}
	err := s.db.Do(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, `SELECT device, lng, lat, time, accuracy FROM event_devices
WHERE owner = $1 AND time IS NOT NULL ORDER BY device LIMIT 10000`, owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d Device
			if err := rows.Scan(&d.ID, &d.Lng, &d.Lat, &d.Time, &d.Accuracy); err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	return out, err
}
