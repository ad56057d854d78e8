package tiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

// Service is the tile capability: it looks layers up, finds their tiles
// in the cache or renders them (once, however many ask at the same time)
// and keeps the layer versions that retire cached tiles. It knows nothing
// of HTTP; Handler answers requests with it.
type Service struct {
	r        *Renderer
	versions *Versions
	cache    tileCache
	s        Settings
	log      *slog.Logger
	flights  flights
	renders  atomic.Int64
	metrics  *metrics
}

// Options are what New builds the Service on besides the database; every
// field may be left zero.
type Options struct {
	// Redis holds the shared cache and layer versions; nil (or a
	// Settings.Cache of false) renders every tile.
	Redis redis.UniversalClient
	// Log defaults to slog.Default().
	Log *slog.Logger
	// Registerer, when set, receives the tile metrics.
	Registerer prometheus.Registerer
}

// New checks every layer of src against the database catalog, reads and
// publishes the layers' versions, starts the version listener (which stops
// when ctx ends) and returns the Service.
//
// run is where tiles render: the pool, the replicas that may take renders
// and the fair queue they enter, as every capability is handed them. Its
// Timeouts are not used: a render, its wait for a connection included,
// is bounded by s.RenderTimeout.
func New(ctx context.Context, run pg.Runner, src Source, s Settings, o Options) (*Service, error) {
	if s.RenderTimeout <= 0 {
		return nil, fmt.Errorf("tiles: render timeout %v: want a positive duration", s.RenderTimeout)
	}
	if src == nil {
		return nil, errors.New("tiles: no layer source")
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	r, err := NewRenderer(run, src, s, log)
	if err != nil {
		return nil, err
	}
	// Databases sharing one Redis (staging and production, test databases)
	// must not read each other's versions or tiles.
	dbID, err := databaseID(ctx, run.Pool)
	if err != nil {
		return nil, err
	}
	prefix := s.KeyPrefix + dbID + ":"
	rdb := o.Redis
	if !s.Cache {
		rdb = nil
	}
	versions := newVersions(run.Pool, rdb, prefix, s.RedisTimeout, s.VersionWindow, log, catalog.QuoteIdent(r.s.Own))
	var cache tileCache = noCache{versions}
	if rdb != nil {
		fresh := newFreshVersions(ctx, run.Pool, catalog.QuoteIdent(r.s.Own))
		cache = newRedisCache(rdb, versions, fresh, prefix, s.CacheTTL, s.RedisTimeout, s.MemoryCacheBytes)
	}
	if err := versions.Sync(ctx); err != nil {
		log.Warn("tile versions not published", "err", err.Error())
	}
	go versions.Run(ctx)
	return &Service{r: r, versions: versions, cache: cache, s: s, log: log, metrics: newMetrics(o.Registerer)}, nil
}

// databaseID is a short hash naming the database: its cluster's system
// identifier (when the role may read it), its oid and its name.
func databaseID(ctx context.Context, db *pgxpool.Pool) (string, error) {
	var oid uint32
	var name string
	err := db.QueryRow(ctx, "SELECT oid, datname FROM pg_database WHERE datname = current_database()").Scan(&oid, &name)
	if err != nil {
		return "", fmt.Errorf("tiles: identify database: %w", err)
	}
	var sysID int64
	_ = db.QueryRow(ctx, "SELECT system_identifier FROM pg_control_system()").Scan(&sysID)
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d/%s", sysID, oid, name))
	return hex.EncodeToString(sum[:5]), nil
}

// Commit publishes the layer versions a committed write has raised and
// waits the version window out, so that once the write answers no replica
// serves a tile rendered before it. Writers call it after their
// transaction commits and before they answer; its error (Redis
// unreachable) is for the log: the write itself stands.
func (s *Service) Commit(ctx context.Context) error { return s.versions.Commit(ctx) }

var (
	errTwice   = apperr.New(apperr.NotFound, "A composite tile names each layer once.")
	errTooMany = apperr.New(apperr.NotFound, fmt.Sprintf("A composite tile combines at most %d layers.", maxComposite))
)

// errNoLayer answers a layer id that is not published.
func errNoLayer(id string) error {
	return apperr.New(apperr.NotFound, fmt.Sprintf("Unknown tile layer %q: GET /tiles lists the layers.", id))
}

// maxComposite bounds the layers of one composite tile.
const maxComposite = 16

// Layers returns the published layers ids names, in order: one layer, or
// the layers of a composite tile, each named once. The caller checks
// first that the asker may read each, so that a refused layer gets the
// same answer whether it exists or not.
func (s *Service) Layers(ids []string) ([]*Layer, error) {
	if len(ids) > maxComposite {
		return nil, errTooMany
	}
	out := make([]*Layer, 0, len(ids))
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return nil, errTwice
		}
		l, err := s.r.Layer(id)
		if errors.Is(err, errUnknown) {
			return nil, errNoLayer(id)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// Published returns every layer whose tiles can be served, in the
// catalog's order.
func (s *Service) Published() []*Layer { return s.r.Layers() }

// Bounds is the layer's estimated extent within scope (nil: the world).
func (s *Service) Bounds(l *Layer, scope *spatial.Scope) [4]float64 { return scope.Clip(bounds(l)) }
