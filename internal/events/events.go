// Package events turns devices' positions into geofence events: a device
// reports where it is, each subscription watching a polygon layer learns
// when the device enters a fence, leaves it or stays in it, and every
// event is written in the transaction that records its transition (an
// outbox), to be pulled or delivered to a webhook.
package events

import (
	"context"
	"time"

	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/jackc/pgx/v5"
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
// (geofence.Service): whether a layer holds polygons, and the lookups of
// the features holding points and met by segments, queued in a report's
// batch so that they run in its transaction.
type Fences interface {
	Polygonal(layer string) bool
	// AsCaller says the layer's rows depend on who reads them (its
	// statements run as the caller): events are not drawn from it.
	AsCaller(layer string) bool
	QueueInside(b *pgx.Batch, layer string, lngs, lats []float64) (*geofence.Found, bool)
	QueueCrossing(b *pgx.Batch, layer string, x1, y1, x2, y2 []float64) (*geofence.Found, bool)
}

// Filters is what the service asks of the CQL2 filters on a layer's
// properties (features.Service): whether a filter fits a layer (one that
// does not is a client error), and keeping the keys whose features pass
// it, queued in a report's batch.
type Filters interface {
	CheckFilter(ctx context.Context, layer, filter string) error
	QueueMatching(ctx context.Context, b *pgx.Batch, layer, filter string, keys []string) (*features.Kept, error)
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
	caller  func(ctx context.Context, layer string) (*pg.Caller, error)
	s       Settings
	m       *metrics
}

// Rights are what the service asks about the caller of each report: the
// layers it may read. The part of the world it may reach is its
// identity's (auth.ScopeOf).
type Rights struct {
	Access Access
	// Caller is the database caller of ctx on layer when layer runs as
	// its caller (gate.Gate.Caller): nil for a layer everyone sees alike,
	// an error for a caller with no role accepted. Nil refuses every
	// layer that runs as its caller.
	Caller func(ctx context.Context, layer string) (*pg.Caller, error)
}

// New returns the service over db.
func New(db pg.Runner, fences Fences, filters Filters, r Rights, s Settings, m *metrics) *Service {
	if m == nil {
		m = newMetrics(nil)
	}
	if r.Access == nil {
		r.Access = func(context.Context, string) error { return nil }
	}
	if r.Caller == nil {
		r.Caller = func(context.Context, string) (*pg.Caller, error) { return nil, errNoCaller }
	}
	return &Service{db: db, fences: fences, filters: filters, access: r.Access, caller: r.Caller, s: s, m: m}
}
