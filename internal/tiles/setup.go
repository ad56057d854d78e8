package tiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

// Deps are the clients New builds a Handler on.
type Deps struct {
	// DB is the pool tiles render on.
	DB *pgxpool.Pool
	// Redis holds the shared cache and layer versions; nil (or a
	// Settings.Cache of false) renders every tile.
	Redis redis.UniversalClient
	// Layers are the published layers.
	Layers Source
	// Replicas, when set, take the renders they may serve.
	Replicas *pg.Replicas
	// Queue, when set, is entered by every render before it takes a
	// connection (see pg.Queue).
	Queue pg.Queue
}

// Options are the hooks a Handler calls; every field may be left zero.
type Options struct {
	// Scope returns the caller's spatial scope; nil is the whole world.
	Scope func(context.Context) *spatial.Scope
	// Gate checks that the caller may read each layer and charges it:
	// rendered tiles spend the route's policy (or a layer's own), cached
	// ones CachedPolicy. Nil is gate.Open(): nothing is charged.
	Gate         Gate
	CachedPolicy string
	// Log defaults to slog.Default().
	Log *slog.Logger
	// Registerer, when set, receives the tile metrics.
	Registerer prometheus.Registerer
}

// Gate is what tiles ask of the service's gate (gate.Gate).
type Gate interface {
	Admit(c *gin.Context, a gate.Ask) (gate.Pass, bool)
	Check(ctx context.Context, layer string) error
}

// New checks every layer of s against the database catalog, reads and
// publishes the layers' versions, starts the version listener (which stops
// when ctx ends) and returns the Handler.
func New(ctx context.Context, s Settings, d Deps, o Options) (*Handler, error) {
	if s.RenderTimeout <= 0 {
		return nil, fmt.Errorf("tiles: render timeout %v: want a positive duration", s.RenderTimeout)
	}
	if d.Layers == nil {
		return nil, errors.New("tiles: no layer source")
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	if o.Gate == nil {
		o.Gate = gate.Open()
	}
	r, err := NewRenderer(d.DB, d.Layers, s, log)
	if err != nil {
		return nil, err
	}
	r.replicas = d.Replicas
	r.queue = d.Queue
	// Databases sharing one Redis (staging and production, test databases)
	// must not read each other's versions or tiles.
	dbID, err := databaseID(ctx, d.DB)
	if err != nil {
		return nil, err
	}
	prefix := s.KeyPrefix + dbID + ":"
	rdb := d.Redis
	if !s.Cache {
		rdb = nil
	}
	versions := newVersions(d.DB, rdb, prefix, s.RedisTimeout, s.VersionWindow, log, catalog.QuoteIdent(r.s.Own))
	var cache *Cache
	if rdb != nil {
		fresh := newFreshVersions(ctx, d.DB, catalog.QuoteIdent(r.s.Own))
		cache = newCache(rdb, versions, fresh, prefix, s.CacheTTL, s.RedisTimeout, s.MemoryCacheBytes)
	}
	if err := versions.Sync(ctx); err != nil {
		log.Warn("tile versions not published", "err", err.Error())
	}
	go versions.Run(ctx)
	return &Handler{
		r: r, versions: versions, cache: cache, s: s, o: o, log: log, metrics: newMetrics(o.Registerer),
	}, nil
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
func (h *Handler) Commit(ctx context.Context) error { return h.versions.Commit(ctx) }
