// Package outbox owns the events table: the one place that appends
// events, reads them for the pull stream, leases and settles them for
// webhook delivery, keeps and replays dead letters, and prunes them. The
// database writes it through functions of its own (migration 00023),
// which the triggers that write events call too.
package outbox

import (
	"encoding/json"
	"strconv"
	"time"
)

// Event is one transition as the outbox holds it.
type Event struct {
	Seq          int64
	ID           string
	Subscription string
	Device       string
	Layer, Fence string
	// Kind is enter, exit, dwell or cross.
	Kind     string
	Time     time.Time
	Lng, Lat float64
	Cause    string
	Created  time.Time
}

// TypePrefix begins every event's CloudEvents type: the kind follows.
const TypePrefix = "io.geogate.geofence."

// CloudEvent is e in the CloudEvents 1.0 JSON format. Its id is stable
// across deliveries, so that a receiver drops what it has seen; sequence
// (the CloudEvents extension) orders a subscription's events.
func (e Event) CloudEvent() CloudEvent {
	return CloudEvent{
		SpecVersion: "1.0", ID: e.ID, Source: "/subscriptions/" + e.Subscription,
		Type: TypePrefix + e.Kind, Subject: e.Device, Time: e.Time,
		DataContentType: "application/json", Sequence: strconv.FormatInt(e.Seq, 10),
		Data: EventData{
			Subscription: e.Subscription, Device: e.Device, Kind: e.Kind,
			Layer: e.Layer, Fence: e.Fence, Cause: e.Cause,
			Position: EventPosition{Lng: e.Lng, Lat: e.Lat, Time: e.Time},
		},
	}
}

// MarshalJSON writes e as its CloudEvent.
func (e Event) MarshalJSON() ([]byte, error) { return json.Marshal(e.CloudEvent()) }

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
	Kind         string `json:"kind"`
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

// eventColumns are the columns an Event is read from, in scanEvent's
// order, over the events table as e.
const eventColumns = `e.seq, e.id::text, e.subscription::text, e.device, e.layer, e.fence, e.kind, e.time, e.lng, e.lat, e.cause, e.created_at`

// scanEvent reads the eventColumns of a row, then more, the columns that
// follow them.
func scanEvent(scan func(dest ...any) error, more ...any) (Event, error) {
	var e Event
	err := scan(append([]any{&e.Seq, &e.ID, &e.Subscription, &e.Device, &e.Layer, &e.Fence, &e.Kind, &e.Time, &e.Lng, &e.Lat, &e.Cause, &e.Created}, more...)...)
	return e, err
}
