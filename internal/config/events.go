package config

import (
	"time"

	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/webhook"
)

// Events are the settings of positions, subscriptions and their events.
type Events struct {
	events.Settings
	Rules events.Rules
	// Keep is how long positions, and events delivered or pulled, are
	// kept (0: for ever).
	Keep events.Keep
}

// loadEvents reads the settings of positions and geofence events.
func loadEvents(r *reader, hooks webhook.Rules) Events {
	return Events{
		Keep: events.Keep{
			Positions: r.durationOrZero("EVENTS_POSITIONS_RETENTION", 0),
			// Off only when asked: an outbox kept for ever grows with
			// every event, read or not.
			Events: r.durationOrZero("EVENTS_RETENTION", 30*24*time.Hour),
		},
		Settings: events.Settings{
			MaxBatch:             r.integer("EVENTS_MAX_BATCH", 1000, 1, 100_000),
			MaxSkew:              r.duration("EVENTS_MAX_CLOCK_SKEW", 5*time.Minute),
			IgnoreWithinAccuracy: r.boolean("EVENTS_IGNORE_WITHIN_ACCURACY", false),
			MaxPage:              r.integer("EVENTS_MAX_PAGE", 1000, 1, 10_000),
		},
		Rules: events.Rules{
			MaxBodyBytes: int64(r.integer("EVENTS_MAX_BODY_BYTES", 1<<20, 1<<10, 1<<30)),
			SecretGrace:  r.duration("EVENTS_SECRET_GRACE", 24*time.Hour),
			Webhooks:     hooks,
			Stream: events.StreamTiming{
				Heartbeat: r.duration("EVENTS_STREAM_HEARTBEAT", 15*time.Second),
				Poll:      r.duration("EVENTS_STREAM_POLL", 5*time.Second),
			},
			MaxStreams: r.integer("EVENTS_MAX_STREAMS", 8, 1, 10_000),
		},
	}
}
