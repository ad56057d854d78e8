package events

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Event is one transition as the outbox holds it.
type Event struct {
	Seq          int64
	ID           string
	Subscription string
	Device       string
	Layer, Fence string
	Kind         Kind
	Time         time.Time
	Lng, Lat     float64
	Cause        string
	Created      time.Time
}

// TypePrefix begins every event's CloudEvents type: the kind follows.
const TypePrefix = "io.geogate.geofence."

// CloudEvent is e in the CloudEvents 1.0 JSON format. Its id is stable
// across deliveries, so that a receiver drops what it has seen; sequence
// (the CloudEvents extension) orders a subscription's events.
func (e Event) CloudEvent() CloudEvent {
	return CloudEvent{
		SpecVersion: "1.0", ID: e.ID, Source: "/subscriptions/" + e.Subscription,
		Type: TypePrefix + string(e.Kind), Subject: e.Device, Time: e.Time,
		DataContentType: "application/json", Sequence: strconv.FormatInt(e.Seq, 10),
		Data: EventData{
			Subscription: e.Subscription, Device: e.Device, Kind: e.Kind,
			Layer: e.Layer, Fence: e.Fence, Cause: e.Cause,
			Position: EventPosition{Lng: e.Lng, Lat: e.Lat, Time: e.Time},
		},
	}
}

// CloudEvent is an event as it is delivered and pulled.
type CloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Sequence        string    `json:"sequence"`
	Data            EventData `json:"data"`
}

// EventData is what an event tells.
type EventData struct {
	Subscription string `json:"subscription"`
	Device       string `json:"device"`
	Kind         Kind   `json:"kind"`
	Layer        string `json:"layer"`
	// Fence is the feature's id in its layer, as text.
	Fence string `json:"fence"`
	// Cause is "position" (the device moved) or "fence-deleted" or
	// "fence-changed" (the fence moved away from the device).
	Cause    string        `json:"cause"`
	Position EventPosition `json:"position"`
}

// EventPosition is where the device was: the position that made the
// transition, or its last known one when the fence changed.
type EventPosition struct {
	Lng  float64   `json:"lng"`
	Lat  float64   `json:"lat"`
	Time time.Time `json:"time"`
}

// MarshalJSON writes e as its CloudEvent.
func (e Event) MarshalJSON() ([]byte, error) { return json.Marshal(e.CloudEvent()) }

// EventColumns are the outbox columns an Event is read from, in scan
// order, over the events table as e.
const EventColumns = `e.seq, e.id::text, e.subscription::text, e.device, e.layer, e.fence, e.kind, e.time, e.lng, e.lat, e.cause, e.created_at`

// ScanEvent reads the EventColumns of a row.
func ScanEvent(scan func(dest ...any) error) (Event, error) {
	var e Event
	var kind string
	err := scan(&e.Seq, &e.ID, &e.Subscription, &e.Device, &e.Layer, &e.Fence, &kind, &e.Time, &e.Lng, &e.Lat, &e.Cause, &e.Created)
	e.Kind = Kind(kind)
	return e, err
}

// Events returns up to limit events of owner's subscription sub numbered
// after after, in order. A subscription's events are numbered in the
// order they commit (see lockOutboxes), so a reader that goes on from the
// last number it saw misses none.
func (s *Service) Events(ctx context.Context, owner, sub string, after int64, limit int) ([]Event, error) {
	if _, err := s.Subscription(ctx, owner, sub); err != nil {
		return nil, err
	}
	out := []Event{}
	err := s.db.Do(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, `SELECT `+EventColumns+` FROM events e
WHERE e.subscription = $1::uuid AND e.seq > $2 ORDER BY e.seq LIMIT $3`, sub, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := ScanEvent(rows.Scan)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
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
