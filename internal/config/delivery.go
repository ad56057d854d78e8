package config

import (
	"time"

	"github.com/geogate/geogate/internal/delivery"
	"github.com/geogate/geogate/internal/webhook"
)

// loadDelivery reads the settings of webhook delivery; hooks are where
// webhooks may point, as loadEvents was given them.
func loadDelivery(r *reader, hooks webhook.Rules) delivery.Settings {
	s := delivery.Settings{
		Workers:         r.integer("EVENTS_DELIVERY_WORKERS", 16, 0, 10_000),
		PerSubscription: r.integer("EVENTS_DELIVERY_PER_SUBSCRIPTION", 4, 1, 10_000),
		Timeout:         r.duration("EVENTS_WEBHOOK_TIMEOUT", 10*time.Second),
		Lease:           r.duration("EVENTS_LEASE", 30*time.Second),
		RetryFor:        r.duration("EVENTS_RETRY_FOR", 24*time.Hour),
		RetryMin:        r.duration("EVENTS_RETRY_MIN", time.Second),
		RetryMax:        r.duration("EVENTS_RETRY_MAX", 10*time.Minute),
		Poll:            r.duration("EVENTS_DELIVERY_POLL", time.Second),
		Policy:          PolicyDeliveries,
		Webhooks:        hooks,
	}
	// A lease shorter than a request would let a second worker send the
	// event while the first still waits for its answer.
	if s.Lease <= s.Timeout {
		r.fail("EVENTS_LEASE", s.Lease.String(), "must be longer than EVENTS_WEBHOOK_TIMEOUT ("+s.Timeout.String()+")")
	}
	if s.RetryMin > s.RetryMax {
		r.fail("EVENTS_RETRY_MIN", s.RetryMin.String(), "must not exceed EVENTS_RETRY_MAX ("+s.RetryMax.String()+")")
	}
	return s
}
