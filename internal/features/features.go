// Package features serves OGC API – Features over every published layer:
// the landing page, conformance, collections, their items (GeoJSON, keyset
// paged, filtered by bbox, datetime and CQL2), queryables and schemas. It
// reads; it never writes. Every identifier in its SQL comes from the
// catalog, every value from a request is a bound parameter.
package features

import (
	"context"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

// Settings configure the Service; internal/config fills them.
type Settings struct {
	pg.Timeouts
	// Own is geogate's own schema, which holds the box functions.
	Own string
	// DefaultLimit and MaxLimit bound an items page.
	DefaultLimit, MaxLimit int
	// CursorKey signs next links; empty means a random key per start.
	CursorKey string
	// PublicURL, when set, starts every link; else the request's own.
	PublicURL string
	// Tiles says the collections have OGC API vector tiles to link to.
	Tiles bool
	// Conformance lists the classes other packages add to /conformance,
	// and LandingLinks the links they add to the landing page.
	Conformance  []string
	LandingLinks func(base string) []Link
	// Title and Description head the landing page.
	Title, Description string
}

// Defaults for Settings left zero.
const (
	DefaultLimit = 10
	MaxLimit     = 10000
)

// Service answers feature queries over the layers of a catalog.
type Service struct {
	run     pg.Runner
	cat     *catalog.Catalog
	s       Settings
	cursors *cursors
	// sql caches each layer's statement parts; cleared when the catalog
	// changes, since its layers are then new values.
	sql sync.Map // *catalog.Layer -> *layerSQL
	// access and scope say what the caller of a request may see.
	gate  Gate
	scope func(ctx context.Context) *spatial.Scope
}

// Access is what the Service asks of the caller of each request: the
// gate that checks and charges it (nil: gate.Open()), and the part of the
// world it may see (nil: all of it).
type Access struct {
	Gate  Gate
	Scope func(ctx context.Context) *spatial.Scope
}

// Gate is what the Service asks of the service's gate (gate.Gate).
type Gate interface {
	Admit(c *gin.Context, a gate.Ask) (gate.Pass, bool)
	Check(ctx context.Context, layer string) error
}

// New returns the Service over cat's layers.
func New(pool pg.Runner, cat *catalog.Catalog, s Settings, a Access) *Service {
	if s.Own == "" {
		s.Own = pg.DefaultSchema
	}
	if s.DefaultLimit <= 0 {
		s.DefaultLimit = DefaultLimit
	}
	if s.MaxLimit <= 0 {
		s.MaxLimit = MaxLimit
	}
	if s.DefaultLimit > s.MaxLimit {
		s.DefaultLimit = s.MaxLimit
	}
	if s.Title == "" {
		s.Title = "geogate"
	}
	if a.Gate == nil {
		a.Gate = gate.Open()
	}
	if a.Scope == nil {
		a.Scope = func(context.Context) *spatial.Scope { return nil }
	}
	if pool.Stale == nil {
		pool.Stale = cat.RefreshSoon
	}
	svc := &Service{run: pool, cat: cat, s: s, cursors: newCursors(s.CursorKey), gate: a.Gate, scope: a.Scope}
	cat.OnChange(func([]*catalog.Layer) { svc.sql.Clear() })
	return svc
}

// errUnknownCollection answers a collection id the catalog does not hold.
var errUnknownCollection = apperr.New(apperr.NotFound, "Unknown collection: GET /collections lists the published ones.")

// layer returns the statement parts of collection id, once the caller may
// read it: a caller refused it is told so whether it exists or not.
func (s *Service) layer(ctx context.Context, id string) (*layerSQL, error) {
	if err := s.gate.Check(ctx, id); err != nil {
		return nil, err
	}
	l := s.cat.Layer(id)
	if l == nil {
		return nil, errUnknownCollection
	}
	if v, ok := s.sql.Load(l); ok {
		return v.(*layerSQL), nil
	}
	ls := newLayerSQL(l, s.s.Own)
	if ls.own {
		if err := s.sample(ctx, ls); err != nil {
			return nil, err
		}
	}
	v, _ := s.sql.LoadOrStore(l, ls)
	return v.(*layerSQL), nil
}

// Limits are the page sizes an items request may ask for.
func (s *Service) Limits() (def, max int) { return s.s.DefaultLimit, s.s.MaxLimit }
