// Package features serves OGC API – Features over every published layer:
// the landing page, conformance, collections, their items (GeoJSON, keyset
// paged, filtered by bbox, datetime and CQL2), queryables and schemas. It
// reads; it never writes. Every identifier in its SQL comes from the
// catalog, every value from a request is a bound parameter.
//
// Service answers with plain values and knows nothing of HTTP; Handler
// answers requests with it.
package features

import (
	"context"
	"sync"
	"time"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
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
	// MaxPageBytes ends an items page early, with a next link, once the
	// features written reach it (0: DefaultMaxPageBytes). A page is
	// written as its rows arrive, so it bounds the answer, not memory.
	MaxPageBytes int
	// CountMax bounds the count of an items query's matches on its first
	// page: numberMatched is given when at most CountMax match, and left
	// out past it (counting every match of a large layer costs several
	// pages' time). 0 counts none; less than 0, every one.
	CountMax int
	// PrefetchBytes bounds the memory of the items pages read ahead for
	// clients walking next links (0: none are); PrefetchKeep is how long
	// such a page waits to be asked for.
	PrefetchBytes int
	PrefetchKeep  time.Duration
	// CursorKey signs next links; empty means a random key per start.
	CursorKey string
	// PublicURL, when set, starts every link the Handler writes; else
	// the request's own.
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
	DefaultLimit        = 10
	MaxLimit            = 10000
	DefaultMaxPageBytes = 32 << 20
	// DefaultCountMax counts every match: GDAL's ogrinfo, given no
	// numberMatched, reads a whole layer to count it.
	DefaultCountMax = -1
	// DefaultPrefetchBytes and DefaultPrefetchKeep bound the pages read
	// ahead.
	DefaultPrefetchBytes = 64 << 20
	DefaultPrefetchKeep  = 2 * time.Second
)

// Service answers feature queries over the layers of a catalog, for the
// caller its Rights read from each context.
type Service struct {
	run     pg.Runner
	cat     *catalog.Catalog
	s       Settings
	cursors *cursors
	// sql caches each layer's statement parts; cleared when the catalog
	// changes, since its layers are then new values.
	sql sync.Map // *catalog.Layer -> *layerSQL
	// check and scope say what the caller of a request may see.
	check func(ctx context.Context, layer string) error
	scope func(ctx context.Context) *spatial.Scope
	// committed runs after each write (Rights.Committed).
	committed func(ctx context.Context)
	watch     Watch
}

// Rights say what the caller of a request may read, as its context
// tells. The Service applies them itself, on every route and to callers
// beyond HTTP (event filters): a collection list leaves out the layers
// refused, extents and features are cut to the scope.
type Rights struct {
	// Check returns the 403 for a layer the caller may not read, the
	// same whether it exists or not (gate.Gate.Check). Nil checks only
	// the layers the caller's own key or token is limited to, as a gate
	// without rules does.
	Check func(ctx context.Context, layer string) error
	// Committed, when set, runs after a write has committed and before
	// it is answered: it publishes the layer's new data version, so
	// that no cached tile or page older than the write is served, and
	// the writer's read floor.
	Committed func(ctx context.Context)
	// Watch, when set, is told of each feature changed or deleted on a
	// layer that devices may be watched in, within the write's
	// transaction, so that their exits commit with it.
	Watch Watch
}

// Watch is what a write asks of the geofence events (events.Service).
type Watch interface {
	// Watched says whether writes on layer may end devices' stays.
	Watched(layer string) bool
	// FenceWritten ends, in tx, the stays in feature fence of layer that
	// the write left (all of them when deleted) and writes their exits.
	FenceWritten(ctx context.Context, tx pg.Conn, layer, fence string, deleted bool) error
}

// New returns the Service over cat's layers.
func New(pool pg.Runner, cat *catalog.Catalog, s Settings, r Rights) *Service {
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
	if r.Check == nil {
		r.Check = access.Settings{}.Check
	}
	if pool.Stale == nil {
		pool.Stale = cat.RefreshSoon
	}
	svc := &Service{run: pool, cat: cat, s: s, cursors: newCursors(s.CursorKey), check: r.Check, committed: r.Committed, watch: r.Watch}
	if svc.committed == nil {
		svc.committed = func(context.Context) {}
	}
	cat.OnChange(func([]*catalog.Layer) { svc.sql.Clear() })
	return svc
}

// errUnknownCollection answers a collection id the catalog does not hold.
var errUnknownCollection = apperr.New(apperr.NotFound, "Unknown collection: GET /collections lists the published ones.")

// known returns nil when the caller may read collection id and the
// catalog holds it, from memory alone; else the answer layer would give.
func (s *Service) known(ctx context.Context, id string) error {
	if err := s.check(ctx, id); err != nil {
		return err
	}
	if s.cat.Layer(id) == nil {
		return errUnknownCollection
	}
	return nil
}

// layer returns the statement parts of collection id, once the caller may
// read it: a caller refused it is told so whether it exists or not.
func (s *Service) layer(ctx context.Context, id string) (*layerSQL, error) {
	if err := s.check(ctx, id); err != nil {
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

// maxPageBytes is the byte budget of an items page.
func (s *Service) maxPageBytes() int {
	if s.s.MaxPageBytes > 0 {
		return s.s.MaxPageBytes
	}
	return DefaultMaxPageBytes
}
