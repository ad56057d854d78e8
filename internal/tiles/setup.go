package tiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/config"
)

// DefaultKeyPrefix starts every Redis key of the tile cache.
const DefaultKeyPrefix = "geogate:tiles:"

// Deps are what New builds a Handler from.
type Deps struct {
	DB    *pgxpool.Pool
	Redis redis.UniversalClient
	// RedisTimeout bounds each cache call; keep it short, a slow Redis
	// must not hold tiles up.
	RedisTimeout time.Duration
	// KeyPrefix defaults to DefaultKeyPrefix.
	KeyPrefix string
}

// New checks the configured layers, starts the version listener (which
// stops when ctx ends) and returns the Handler. o's cache, cache-control,
// timeout and public URL fields are taken from cfg.
func New(ctx context.Context, cfg config.Tiles, d Deps, o Options) (*Handler, error) {
	r, err := NewRenderer(ctx, d.DB, cfg)
	if err != nil {
		return nil, err
	}
	if d.KeyPrefix == "" {
		d.KeyPrefix = DefaultKeyPrefix
	}
	// Databases sharing one Redis (staging and production, test databases)
	// must not read each other's versions or tiles.
	dbID, err := databaseID(ctx, d.DB)
	if err != nil {
		return nil, err
	}
	d.KeyPrefix += dbID + ":"
	if d.RedisTimeout <= 0 {
		d.RedisTimeout = 100 * time.Millisecond
	}
	rdb := d.Redis
	if !cfg.Cache {
		rdb = nil
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	versions := NewVersions(d.DB, rdb, d.KeyPrefix, o.Log)
	versions.timeout = d.RedisTimeout
	versions.window = cfg.VersionWindow
	h := NewHandler(r, versions, o)
	if err := h.versions.Sync(ctx); err != nil {
		h.o.Log.Warn("tile versions not published", "err", err.Error())
	}
	go h.versions.Run(ctx)
	if rdb != nil {
		h.o.Cache = NewCache(rdb, h.versions, d.KeyPrefix, cfg.CacheTTL, d.RedisTimeout, cfg.MemoryCacheBytes)
	}
	h.o.CacheControl = cfg.CacheControl
	h.o.RenderTimeout = cfg.RenderTimeout
	h.o.PublicURL = cfg.PublicURL
	return h, nil
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

// Versions returns the layer versions, whose Sync a write path calls after
// committing so that no replica serves a tile rendered before the write.
func (h *Handler) Versions() *Versions { return h.versions }
