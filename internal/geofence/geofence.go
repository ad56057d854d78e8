// Package geofence answers proximity queries (/within) over point and
// polygon layers and stores geofences with point-in-fence checks, all in
// PostGIS. Distances are on the WGS84 spheroid; every query runs under a
// deadline and a bounded wait for a pool connection.
package geofence

import (
	"context"
	"fmt"
	"sync"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/pg"
)

// Settings configure a Service and its Handler; internal/config fills
// them.
type Settings struct {
	Timeouts
	Rules
	// Own is geogate's own schema, which holds the functions /within
	// searches with.
	Own string
	// CursorKey signs paging cursors. Empty means a random key per start:
	// cursors then stop working across restarts and between replicas.
	CursorKey string
}

// Service is the proximity and geofence capability.
type Service struct {
	db  db
	cat *catalog.Catalog
	own string
	// sql caches each layer's statements; cleared when the catalog
	// changes, since its layers are then new values.
	sql sync.Map // *catalog.Layer -> *layerSQL
	// committed runs after every write that changed a fence.
	committed func(context.Context)
}

// New returns the Service over the layers of cat. committed, when not nil,
// runs after every write that changed a fence, once its transaction has
// committed and before the write returns: the tile cache retires the
// layer's tiles there.
//
// run is where its statements run: the primary pool, the replicas that may
// take its reads and the fair queue they enter, as every capability is
// handed them; a zero Timeouts in run takes s.Timeouts.
func New(run pg.Runner, cat *catalog.Catalog, s Settings, committed func(context.Context)) *Service {
	if committed == nil {
		committed = func(context.Context) {}
	}
	own := s.Own
	if own == "" {
		own = "geogate"
	}
	if run.Timeouts == (pg.Timeouts{}) {
		run.Timeouts = s.Timeouts
	}
	if run.Stale == nil {
		run.Stale = cat.RefreshSoon
	}
	svc := &Service{db: db{run: run}, cat: cat, own: own, committed: committed}
	cat.OnChange(func([]*catalog.Layer) { svc.sql.Clear() })
	return svc
}

// errUnknownLayer answers a layer id the catalog does not hold.
var errUnknownLayer = apperr.New(apperr.NotFound, "Unknown layer: GET /layers lists the published ones.")

// layer returns the statements of the published layer id.
// errNoCRS refuses a proximity or containment question on layer id, stored
// in SRID 0: its coordinates have no place on the Earth to measure from.
func errNoCRS(id string) error {
	return apperr.InvalidField(fmt.Sprintf("Layer %s is stored in SRID 0, with no coordinate reference system: its coordinates have no place on the Earth, so no longitude, latitude or distance in metres can be compared with them.", id),
		"value_error", "query", "layer")
}

func (s *Service) layer(id string) (*layerSQL, error) {
	l := s.cat.Layer(id)
	if l == nil {
		return nil, errUnknownLayer
	}
	if !l.Located() {
		return nil, errNoCRS(l.ID)
	}
	if v, ok := s.sql.Load(l); ok {
		return v.(*layerSQL), nil
	}
	v, _ := s.sql.LoadOrStore(l, newLayerSQL(l, s.own))
	return v.(*layerSQL), nil
}
