// Package events turns devices' positions into geofence events: a device
// reports where it is, each subscription watching a polygon layer learns
// when the device enters a fence, leaves it or stays in it, and every
// event is written in the transaction that records its transition (an
// outbox), to be pulled or delivered to a webhook.
package events

import (
	"context"
	"time"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

// Settings tune how positions become events.
type Settings struct {
	// MaxBatch bounds the positions of one report.
	MaxBatch int
	// MaxSkew is how far ahead of the server's clock a position's time may
	// be: a later one would make every true position after it late.
	MaxSkew time.Duration
	// IgnoreWithinAccuracy skips transitions for a move shorter than the
	// position's reported accuracy (GPS jitter at a fence's edge).
	IgnoreWithinAccuracy bool
	// MaxPage bounds a page of GET /events.
	MaxPage int
}

// Fences is what the service asks of the polygon layers
// (geofence.Service): the statement that finds, for arrays of longitudes
// ($1) and latitudes ($2), each point's index (1-based) and the key, as
// text, of every feature of layer holding it; and the one that finds, for
// segments from ($1, $2) to ($3, $4), the features each meets.
type Fences interface {
	ContainsSQL(layer string) (sql string, ok bool)
	CrossesSQL(layer string) (sql string, ok bool)
}

// Filters is what the service asks of the CQL2 filters on a layer's
// properties (features.Service.Matching): a statement keeping, of the
// keys in $1 (text[]), those whose features pass filter, with the
// filter's own arguments after $1. A filter the layer cannot take is a
// client error.
type Filters interface {
	Matching(ctx context.Context, layer, filter string) (sql string, args []any, err error)
}

// Access says whether the caller of ctx may read layer (gate.Gate.Check).
type Access func(ctx context.Context, layer string) error

// Scope is the part of the world the caller of ctx may reach, nil for all
// of it.
type Scope func(ctx context.Context) *spatial.Scope

// Service records positions and subscriptions and keeps the outbox.
type Service struct {
	db      pg.Runner
	fences  Fences
	filters Filters
	access  Access
	s       Settings
	m       *metrics
}

// Rights are what the service asks about the caller of each report: the
// layers it may read. The part of the world it may reach is its
// identity's (auth.ScopeOf).
type Rights struct {
	Access Access
}

// New returns the service over db.
func New(db pg.Runner, fences Fences, filters Filters, r Rights, s Settings, m *metrics) *Service {
	if m == nil {
		m = newMetrics(nil)
	}
	if r.Access == nil {
		r.Access = func(context.Context, string) error { return nil }
	}
	return &Service{db: db, fences: fences, filters: filters, access: r.Access, s: s, m: m}
}
