package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	geom "github.com/twpayne/go-geom"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/health"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/rdb"
	"github.com/geogate/geogate/internal/tiles"
	"github.com/geogate/geogate/internal/web"
)

type (
	pgPool      = *pgxpool.Pool
	redisClient = redis.UniversalClient
)

// newHandler builds every route of the service on one screen. ctx ends
// when the service shuts down; background work started here stops with it.
func newHandler(ctx context.Context, cfg config.Config, log *slog.Logger, d deps) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		pg.NewCollector(d.db),
		rdb.NewCollector(d.redis),
	)
	tileDB := d.db
	if d.tileDB != nil {
		tileDB = d.tileDB
		reg.MustRegister(pg.NewNamedCollector(tileDB, "tiles"))
	}
	r := httpx.NewRouter(log, httpx.NewMetrics(reg))
	r.Use(httpx.CORS(cfg.Server.CORSOrigins, []string{"RateLimit", "RateLimit-Policy", "RateLimit-Limit",
		"RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "X-Request-ID", "X-Cache", "ETag", "Link"}))

	health.Register(r, cfg.Redis.Timeout*4, map[string]health.Check{
		"postgis": func(ctx context.Context) error { return d.db.Ping(ctx) },
		"redis":   func(ctx context.Context) error { return d.redis.Ping(ctx).Err() },
	}, d.draining.Load)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))

	// -- identity (internal/auth) --
	// Every route below is authenticated: the identity (API key, bearer
	// token, or the client address) is in the request for Require, the
	// limiter and the spatial scope checks.
	authn, err := auth.New(ctx, cfg.Auth, auth.Deps{DB: d.db, LookupTimeout: cfg.DB.QueryTimeout, Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	r.Use(authn.Middleware())

	// -- rate limiting (internal/ratelimit) --
	// limiter holds every named policy (cfg.RateLimit). limit(policy, cost)
	// is the per-route middleware: it counts by the auth identity and its
	// tier; cost nil charges 1, ratelimit.RadiusCostFrom("radius") prices
	// /within by radius.
	limiter, err := ratelimit.New(d.redis, cfg.RateLimit.Policies, ratelimit.Options{
		Timeout: cfg.Redis.Timeout, Registerer: reg, Logger: log,
		Pipeline: cfg.Redis.Pipeline,
	})
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, limiter.Close) // stops the pipeline senders
	limitTier := ratelimit.WithTier(func(c *gin.Context) string { return auth.FromGin(c).Tier })
	limit := func(policy string, cost func(*gin.Context) int) gin.HandlerFunc {
		return limiter.Middleware(policy, auth.LimitKey, cost, limitTier)
	}

	// -- tiles (internal/tiles) --
	// Only renders (cache misses) spend the "tiles" budget; cached tiles
	// pass the generous "tiles-cached" policy. A policy's concurrency cap
	// holds its in-flight slot from the charge until the tile is answered
	// (the handler runs the release Admit returns).
	charge := func(policy string) tiles.Hook {
		return func(c *gin.Context) (func(), bool) {
			return limiter.Admit(c, ratelimit.Request{
				Policy: policy, Identity: auth.LimitKey(c), Cost: 1, Tier: auth.FromGin(c).Tier,
			})
		}
	}
	proxies, err := auth.ParseTrustedProxies(cfg.Auth.TrustedProxies)
	if err != nil {
		return nil, err
	}
	tileHandler, err := tiles.New(ctx, cfg.Tiles, tiles.Deps{DB: tileDB, Redis: d.redis, RedisTimeout: cfg.Redis.Timeout}, tiles.Options{
		TrustedProxy: proxies.Trusts,
		Scope: func(c *gin.Context) tiles.Scope {
			if s := auth.FromGin(c).Spatial; s != nil {
				return s
			}
			return nil
		},
		OnMiss:     charge("tiles"),
		OnHit:      charge("tiles-cached"),
		Log:        log,
		Registerer: reg,
	})
	if err != nil {
		return nil, err
	}
	tileHandler.Register(r, auth.Require(auth.ScopeTilesRead))
	// The map page on / shows every layer (internal/web).
	web.Register(r)

	// -- proximity and geofences (internal/geofence) --
	// Every route spends the "geofence" budget; /within by radius (an
	// invalid radius costs 1 and is then refused with a 422).
	geo, err := geofence.New(ctx, d.db, geofence.Settings{
		Limits: geofence.Limits{QueryTimeout: cfg.DB.QueryTimeout, AcquireTimeout: cfg.DB.AcquireTimeout},
		Layers: cfg.Geofence.Layers,
	})
	if err != nil {
		return nil, err
	}
	maxRadius := float64(cfg.Geofence.MaxRadius)
	radiusCost := func(c *gin.Context) int {
		if m, ok := geofence.ParseRadius(c, maxRadius); ok {
			return ratelimit.RadiusCost(m)
		}
		return 1
	}
	geofence.Register(r, geo, geofence.Options{
		Rules: geofence.Rules{
			MaxRadius: maxRadius, DefaultLimit: cfg.Geofence.DefaultLimit, MaxLimit: cfg.Geofence.MaxLimit,
			MaxVertices: cfg.Geofence.MaxVertices, MaxBodyBytes: cfg.Geofence.MaxBodyBytes,
			MaxBatchPoints: cfg.Geofence.MaxBatchPoints,
		},
		Cursors: geofence.NewCursors(cfg.Geofence.CursorKey),
		Within:  []gin.HandlerFunc{auth.Require(auth.ScopeProximityRead), limit("geofence", radiusCost)},
		Read:    []gin.HandlerFunc{auth.Require(auth.ScopeGeofencesRead), limit("geofence", nil)},
		// A write publishes the new layer versions before it answers, so
		// no replica serves a tile drawn before it.
		Write: []gin.HandlerFunc{auth.Require(auth.ScopeGeofencesWrite), limit("geofence", nil), tileHandler.SyncVersions()},
		CheckCircle: func(c *gin.Context, lng, lat, radiusM float64) error {
			if !auth.FromGin(c).Spatial.ContainsCircle(lng, lat, radiusM) {
				return auth.ErrCircleOutsideScope
			}
			return nil
		},
		CheckGeometry: func(c *gin.Context, g geom.T) error {
			if !auth.FromGin(c).Spatial.ContainsGeometry(g) {
				return auth.ErrGeometryOutsideScope
			}
			return nil
		},
		Scope: func(c *gin.Context) []byte { return auth.FromGin(c).Spatial.WKB() },
	})

	// -- API description (internal/openapi) --
	if err := openapi.Register(r, openapi.Limits{
		MaxRadius: float64(cfg.Geofence.MaxRadius), DefaultLimit: cfg.Geofence.DefaultLimit,
		MaxLimit: cfg.Geofence.MaxLimit, MaxBatchPoints: cfg.Geofence.MaxBatchPoints,
	}); err != nil {
		return nil, err
	}

	return r, nil
}
