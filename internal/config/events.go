package config

import (
	"time"

	"github.com/geogate/geogate/internal/events"
)

// Events are the settings of positions, subscriptions and their events.
type Events struct {
	events.Settings
	Rules events.Rules
	// PositionsRetention is how long positions are kept (0: for ever).
	PositionsRetention time.Duration
}

// loadEvents reads the settings of positions and geofence events.
func loadEvents(r *reader) Events {
	return Events{
		PositionsRetention: r.durationOrZero("EVENTS_POSITIONS_RETENTION", 0),
		Settings: events.Settings{
			MaxBatch:             r.integer("EVENTS_MAX_BATCH", 1000, 1, 100_000),
			MaxSkew:              r.duration("EVENTS_MAX_CLOCK_SKEW", 5*time.Minute),
			IgnoreWithinAccuracy: r.boolean("EVENTS_IGNORE_WITHIN_ACCURACY", false),
			MaxPage:              r.integer("EVENTS_MAX_PAGE", 1000, 1, 10_000),
		},
		Rules: events.Rules{
			MaxBodyBytes: int64(r.integer("EVENTS_MAX_BODY_BYTES", 1<<20, 1<<10, 1<<30)),
			SecretGrace:  r.duration("EVENTS_SECRET_GRACE", 24*time.Hour),
			AllowHTTP:    r.boolean("EVENTS_ALLOW_HTTP_WEBHOOKS", false),
			AllowPrivate: r.boolean("EVENTS_ALLOW_PRIVATE_WEBHOOKS", false),
			Stream: events.StreamTiming{
				Heartbeat: r.duration("EVENTS_STREAM_HEARTBEAT", 15*time.Second),
				Poll:      r.duration("EVENTS_STREAM_POLL", 5*time.Second),
			},
			MaxStreams: r.integer("EVENTS_MAX_STREAMS", 8, 1, 10_000),
		},
	}
}
